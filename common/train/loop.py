"""The training loop of the zoo: schedules, gradient accumulation, clipping, eval, checkpoints, resume.

One optimizer step: set the learning rate for this step, run ``grad_accum`` micro-batches
(each loss divided by grad_accum before backward, so the gradients add up to the mean), clip the
global gradient norm, step, zero the gradients. The loss recorded for the step is the mean of
its micro-batch losses. Val loss is estimated every ``eval_every`` steps on ``eval_batches``
batches drawn by a fixed-seed RNG (the same val batches every time, and the train stream is
not touched). Checkpoints (see checkpoint.py) hold everything the next step depends on, so
``resume`` continues with exactly the losses the uninterrupted run has.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from tqdm import tqdm

from .checkpoint import (
    CheckpointError,
    load_checkpoint,
    load_model_weights,
    load_optimizer_state,
    load_scaler_state,
    restore_rngs,
    save_checkpoint,
    stage_random,
)
from .curves import save_loss_curve
from .distributed import World, own_buffers
from .optimizers import build_optimizer
from .precision import grad_scaler, mixed
from .tasks import Task, TrainConfig

CHECKPOINT = "ckpt.safetensors"


@dataclass
class RunResult:
    train_losses: list[float]
    val_history: list[tuple[int, float]]  # (step, val loss)
    seconds: float
    checkpoint: Path | None
    model: Any = field(repr=False, default=None)
    steps_run: int = 0  # the steps this call ran (fewer than the run's after a resume)
    optimizer: Any = field(repr=False, default=None)
    scaler: Any = field(repr=False, default=None)  # float16's loss scaler (precision.py); None otherwise


def learning_rate(cfg: TrainConfig, step: int, optim: ModuleType) -> float:
    if cfg.schedule == "constant":
        return cfg.lr
    if cfg.schedule == "cosine":
        total = cfg.lr_decay_steps or cfg.steps
        return optim.cosine_lr(step, lr=cfg.lr, warmup=cfg.warmup, total=total, min_lr=cfg.min_lr)
    if cfg.schedule == "warmdown":  # nanochat: constant, then linearly down to 0 over the last steps
        last = max(1, round(cfg.warmdown * cfg.steps))
        return cfg.lr * min(1.0, (cfg.steps - step) / last)
    raise ValueError(f"train: schedule must be 'cosine', 'constant' or 'warmdown', got {cfg.schedule!r}")


def evaluate(task: Task, stage: ModuleType, model: Any, cfg: TrainConfig, loss: Any = None, ranks: int = 1) -> float:
    """Mean loss over ``cfg.eval_batches`` val batches (of the global batch size: ``ranks`` x
    batch_size rows), without gradients; ``loss`` is model.loss or a jitted one (jitted())."""
    T = stage.Tensor
    loss = loss or model.loss
    rng = np.random.default_rng([cfg.seed, 1])
    total = 0.0
    with T.no_grad(), mixed(stage, cfg.precision):
        for _ in range(cfg.eval_batches):
            x, y = task.tensors(T, *task.val.sample(rng, cfg.batch_size * ranks))
            total += loss(x, y).item()
    return total / cfg.eval_batches


def jitted(stage: ModuleType, fn: Any) -> Any:
    """fn under the stage's JIT (stage3's TinyJit), or fn itself on a stage without one or when
    the environment sets JIT=0."""
    jit = getattr(stage, "TinyJit", None)
    return jit(fn) if jit is not None and os.environ.get("JIT", "1") != "0" else fn


def step_function(stage: ModuleType, model: Any, opt: Any, cfg: TrainConfig, world: World | None = None,
                  scaler: Any = None) -> Any:
    """What one optimizer step computes, from its micro-batches [(x, y)] to their losses (a tensor,
    one per micro-batch): each loss divided by grad_accum before backward, the gradients averaged
    over the ranks (data-parallel), clipped, the optimizer stepped and the gradients zeroed.

    On a stage with a JIT (stage3's TinyJit) a single process's step is jitted: from the third step
    on, its kernels replay without building or scheduling the graph (set JIT=0 to run it eagerly).
    A data-parallel step jits everything but the collectives, which run eagerly between the jitted
    parts (a replay would skip them): the backward, returning the gradients packed for the exchange;
    the update from the exchanged ones; with ZeRO also the clip's norm before the update and the
    other ranks' new parameters taken from the all-gather after it.

    With a loss scaler (float16: precision.py) the backward and the update are two jitted parts: between
    them the step reads back whether a gradient overflowed, and skips the update if one did."""
    T = stage.Tensor
    world = world or World()
    count = [0]

    def backward(batches, weights=None, scale=None):
        losses = []
        with T.train():
            for k, (x, y) in enumerate(batches):
                with mixed(stage, cfg.precision):  # (the forward only: the backward follows the forward's types)
                    loss = model.loss(x, y).realize()  # (stage3: the forward's kernels once, for the loss and backward)
                # (data-parallel: weighted by this rank's share of the targets)
                part = loss / cfg.grad_accum if weights is None else loss * (weights[k] / cfg.grad_accum)
                (part if scale is None else part * scale).backward()
                losses.append(loss.detach().reshape(1))
        return losses[0].cat(*losses[1:]) if len(losses) > 1 else losses[0]

    def update():
        if cfg.grad_clip:
            stage.optim.clip_grad_norm_(opt.params, cfg.grad_clip)
        opt.step()
        opt.zero_grad()

    has_grad: list[bool] = []  # which parameters the backward gave a gradient (the same every step)
    if scaler is not None:
        if world.size > 1:
            raise ValueError("train: --precision fp16 (loss scaling) runs in one process; use bf16 with --ddp")
        return scaled_step_function(stage, opt, backward, update, has_grad, scaler)
    if world.size == 1:
        def step(batches):
            losses = backward(batches)
            update()
            return losses

        return jitted(stage, step)

    def local(batches, weights):  # this rank's losses and its gradients, packed for the exchange
        losses = backward(batches, weights)
        grads = [p.grad for p in opt.params]
        has_grad[:] = [g is not None for g in grads]
        opt.zero_grad()
        return losses, world.pack(stage, opt.params, grads)

    def apply(received, scale):  # the exchanged gradients in place, the update; ZeRO: this rank's new values
        world.unpack(opt.params, received, tuple(has_grad), scale)
        if not world.zero:
            update()
            return None
        opt.step()  # (its own parameters only; already clipped by scale)
        opt.zero_grad()
        return world.pack_own(stage, opt.params)

    def square(received):
        return world.square_norm(stage, received)

    def take(gathered):
        world.take_gathered(opt.params, gathered)

    local, apply, square, take = (jitted(stage, f) for f in (local, apply, square, take))

    def step(batches, weights):
        count[0] += 1
        losses, packed = local(batches, T(np.array(weights, np.float32)))
        received = world.exchange(packed, count[0])
        if not world.zero:
            apply(received, None)
            return losses
        scale = world.clip_scale(stage, square(received).item() if cfg.grad_clip else 0.0, cfg.grad_clip, count[0])
        take(world.gather(apply(received, scale), count[0]))
        return losses

    return step


def scaled_step_function(stage: ModuleType, opt: Any, backward: Any, update: Any, has_grad: list[bool],
                         scaler: Any) -> Any:
    """One float16 step: the backward of the scaled loss and the test for an overflow (one jitted part),
    then, unless a gradient is inf or NaN, the gradients divided by the scale and the update (another);
    the scaler learns which happened. The scale is a power of 2: scaling and unscaling are exact."""
    T = stage.Tensor

    def scaled_backward(batches, scale):
        losses = backward(batches, scale=scale)
        grads = [p.grad for p in opt.params]
        has_grad[:] = [g is not None for g in grads]
        present = [g for g in grads if g is not None]
        found = scaler.found_nonfinite(present)
        opt.zero_grad()
        return losses, found, present

    def unscaled_update(present, inverse):
        given = iter(present)
        for p, has in zip(opt.params, has_grad, strict=True):
            p.grad = next(given) * inverse if has else None
        update()

    scaled_backward, unscaled_update = jitted(stage, scaled_backward), jitted(stage, unscaled_update)
    # (stage3: every weight a buffer of its own before the first capture: while the steps overflow no update
    # writes them, and the backward's capture would read their initial values' graphs or shared constants)
    own_buffers(opt.params)

    def step(batches):
        losses, found, present = scaled_backward(batches, T(scaler.scale))
        overflow = bool(found.item())
        if not overflow:
            unscaled_update(present, T(1 / scaler.scale))
        scaler.update(overflow)
        return losses

    return step


def train_step(task: Task, stage: ModuleType, step: Any, cfg: TrainConfig, rng: np.random.Generator,
               world: World | None = None) -> float:
    """One optimizer step (``step``, from step_function) on ``cfg.grad_accum`` fresh train batches;
    returns their mean loss (the micro-batches' float32 losses summed as Python floats). With several
    ranks each draws the global batch and keeps its slice, and the loss is the mean over the ranks."""
    world = world or World()
    raw = [world.shard(*task.train.sample(rng, cfg.batch_size * world.size)) for _ in range(cfg.grad_accum)]
    batches = [task.tensors(stage.Tensor, x, y) for x, y in raw]
    if world.size == 1:
        return sum(step(batches).tolist()) / cfg.grad_accum
    weights = world.target_weights([y for _, y in raw])
    losses = step(batches, weights).tolist()
    return world.mean(sum(w * v for w, v in zip(weights, losses, strict=True)) / cfg.grad_accum, "the step's loss")


def train(task: Task, stage: ModuleType, cfg: TrainConfig, out: str | Path | None = None, resume: bool = False,
          progress: bool = True, log: Any = print, world: World | None = None) -> RunResult:
    """Train ``task`` on ``stage`` for ``cfg.steps`` steps; checkpoints go to ``out/ckpt.safetensors``.
    With a ``world`` of several ranks (distributed.py) it trains data-parallel: cfg.batch_size rows
    a rank, and rank 0 alone logs, evaluates and writes."""
    if not hasattr(stage.Tensor, "backward") or getattr(stage, "optim", None) is None:
        raise RuntimeError(f"train: {stage.__name__} has no autograd; training needs --stage 2 or later")
    if cfg.steps < 1 or cfg.grad_accum < 1 or cfg.batch_size < 1:
        raise ValueError(f"train: steps, grad_accum and batch_size must be >= 1, got {cfg.steps}, "
                         f"{cfg.grad_accum}, {cfg.batch_size}")
    T = stage.Tensor
    world = world or World()
    log = log if world.is_main else (lambda *a, **k: None)
    T.manual_seed(cfg.seed)
    model = task.build(stage)
    if hasattr(task, "build_optimizer"):  # a task with its own optimizer mix (nanochat: Muon + AdamW)
        opt = task.build_optimizer(stage, model)
    else:
        opt = build_optimizer(stage, model, cfg.optimizer, cfg.lr, cfg.weight_decay, cfg.betas)
    scaler = grad_scaler(stage, cfg.precision)  # (float16 only; also checks the name)
    rng = np.random.default_rng(cfg.seed)
    ckpt = Path(out) / CHECKPOINT if out is not None else None
    meta = {**task.meta(), "train_config": asdict(cfg)}
    start, losses, val_history = 0, [], []
    if resume:
        if ckpt is None or not ckpt.is_file():
            raise RuntimeError(f"train --resume: no checkpoint at {ckpt}")
        state = load_checkpoint(ckpt)
        if state.meta["task"] != task.name or state.meta["config"] != json.loads(json.dumps(meta["config"])):
            raise CheckpointError(ckpt, f"holds {state.meta['task']} {state.meta['config']}, "
                                        f"not {task.name} {meta['config']}; --resume needs the same model")
        load_model_weights(stage, model, state.model)
        load_optimizer_state(stage, opt, state.optim)
        if scaler is not None:
            load_scaler_state(stage, scaler, state.scaler)
        restore_rngs(stage, state, rng)
        start, losses = state.step, list(state.train_losses)
        val_history = [tuple(v) for v in state.meta.get("val_history", [])]
        log(f"resumed from {ckpt} at step {start}")
    world.check_same_parameters(opt.params)
    world.seed_rank(stage_random(stage))  # (each rank its own dropout; rank 0's stream is one rank's)
    world.own_buffers(opt.params)  # (ZeRO: the all-gather writes every parameter in place)
    world.drop_foreign_state(stage, opt)  # (ZeRO: each rank keeps the optimizer state of its own parameters)
    began = time.perf_counter()
    bar = tqdm(range(start, cfg.steps), desc=f"{task.name} {stage.__name__}", disable=not progress or not world.is_main,
               mininterval=1.0, initial=start, total=cfg.steps)
    run, val_loss = step_function(stage, model, opt, cfg, world, scaler), jitted(stage, model.loss)
    for step in bar:
        opt.lr = learning_rate(cfg, step, stage.optim)
        losses.append(train_step(task, stage, run, cfg, rng, world))
        if not np.isfinite(losses[-1]):
            raise RuntimeError(f"train {task.name}: loss is {losses[-1]} at step {step}; lower the learning rate")
        done = step + 1
        if world.is_main and ((cfg.eval_every and done % cfg.eval_every == 0) or done == cfg.steps):
            val_history.append((done, evaluate(task, stage, model, cfg, val_loss, world.size)))
            log(f"step {done}: train loss {losses[-1]:.4f}, val loss {val_history[-1][1]:.4f}, "
                f"lr {opt.lr:.2e}, {time.perf_counter() - began:.1f}s")
        if step % 10 == 0 or done == cfg.steps:
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
        due = (cfg.ckpt_every and done % cfg.ckpt_every == 0) or done == cfg.steps
        if ckpt is not None and due:
            world.gather_optimizer_state(stage, opt)  # (ZeRO: every rank takes part, rank 0 writes)
        if ckpt is not None and due and world.is_main:
            save_checkpoint(ckpt, stage, model, opt, done, rng, {**meta, "val_history": val_history}, losses, scaler)
            world.drop_foreign_state(stage, opt)
    seconds = time.perf_counter() - began
    world.barrier("the end of training")  # no rank leaves while rank 0 still writes the last checkpoint
    if out is not None and world.is_main:
        save_loss_curve(losses, Path(out) / f"{task.name}-loss.png", f"{task.name} on {stage.__name__}")
        metrics = {"task": task.name, "stage": stage.__name__, "steps": cfg.steps, "seconds": seconds,
                   "final_train_loss": losses[-1], "val_history": val_history, "train_config": asdict(cfg),
                   "skipped_steps": scaler.skipped if scaler is not None else 0,
                   "model_config": meta["config"]}
        (Path(out) / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return RunResult(losses, val_history, seconds, ckpt, model, cfg.steps - start, opt, scaler)
