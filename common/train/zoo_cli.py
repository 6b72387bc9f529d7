"""The zoo's part of the ``sitp`` command: ``sitp train mlp|rnn|lstm|cnn|nanogpt`` and ``sitp sample``.

Kept beside the training loop so common/cli.py stays a thin parser. Flags that exist for the
GLMs too (``--steps``, ``--lr``, ``--seed``, ``--out``, ``--quiet``) keep their names; the rest
are added here.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from ..data.files import cache_dir
from ..stages import STAGES, load_stage
from .checkpoint import load_checkpoint, load_model_weights
from .distributed import BUCKET_MB, World, bucket_mb
from .loop import train
from .precision import Precision
from .sample import sample_task
from .tasks import MODELS, make_task, task_from_meta

TASKS = tuple(MODELS)


def _parse_settings(pairs: list[str]) -> dict[str, Any]:
    """``--set n_layer=2 --set bias=true`` -> {"n_layer": 2, "bias": True} (values parsed as JSON)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"sitp train: --set expects KEY=VALUE, got {pair!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    zoo = parser.add_argument_group("zoo models (mlp, rnn, lstm, cnn, nanogpt)")
    zoo.add_argument("--device", default="cpu", help="device for the stage's tensors (cpu)")
    zoo.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    zoo.add_argument("--batch-size", type=int, default=None, help="examples per micro-batch")
    zoo.add_argument("--grad-accum", type=int, default=None, help="micro-batches per optimizer step")
    zoo.add_argument("--eval-every", type=int, default=None, help="steps between val-loss estimates (0: at the end)")
    zoo.add_argument("--eval-batches", type=int, default=None, help="val batches per estimate")
    zoo.add_argument("--ckpt-every", type=int, default=None, help="steps between checkpoints (0: at the end)")
    zoo.add_argument("--optimizer", default=None, choices=["sgd", "adam", "adamw"], help="optimizer")
    zoo.add_argument("--precision", default=None, choices=[p.value for p in Precision],
                     help="fp32, or mixed precision: matmuls and attention in bf16 or fp16 (fp16 with loss scaling), "
                          "weights and optimizer in float32")
    zoo.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="change a model setting, e.g. --set n_layer=2 (repeatable)")
    zoo.add_argument("--samples", type=int, default=10, help="names to print after training (nanogpt: 0 = none)")
    zoo.add_argument("--tokens", type=int, default=500, help="characters nanogpt prints after training")
    zoo.add_argument("--ddp", action="store_true",
                     help="data-parallel over the ranks mpiexec starts (mpiexec -n 2 sitp train ... --ddp); "
                          "--batch-size is then a rank's")
    zoo.add_argument("--zero", action="store_true",
                     help="with --ddp: shard the optimizer over the ranks (ZeRO-1: reduce-scatter, update a shard, "
                          "all-gather)")
    zoo.add_argument("--ddp-timeout", type=float, default=60.0,
                     help="seconds a rank waits for the others before it gives up with an error")
    zoo.add_argument("--bucket-mb", type=bucket_mb, default=BUCKET_MB,
                     help="with --ddp: MiB of gradients (or parameters) a collective carries at once")


def cmd_train(args: argparse.Namespace) -> int:
    stage_number = 2 if args.stage is None else args.stage
    stage = load_stage(stage_number)
    if args.device.lower() != "cpu":
        if getattr(stage, "Device", None) is None:
            raise SystemExit(f"sitp train {args.task}: stage {stage_number} has only the cpu device")
        stage.Device.DEFAULT = args.device  # every tensor of the run, the parameters included, goes there
    if getattr(stage, "optim", None) is None:
        raise SystemExit(f"sitp train {args.task}: stage {stage_number} ({STAGES[stage_number]}) has no autograd; "
                         "use --stage 2")
    try:
        task = make_task(args.task, _parse_settings(args.set))
    except (ValueError, TypeError) as e:  # a bad --set: say which, without a traceback
        raise SystemExit(f"sitp train {args.task}: {e}") from None
    cfg = task.train_config
    flags = {"steps": args.steps, "lr": args.lr, "batch_size": args.batch_size, "grad_accum": args.grad_accum,
             "eval_every": args.eval_every, "eval_batches": args.eval_batches, "ckpt_every": args.ckpt_every,
             "optimizer": args.optimizer, "seed": args.seed, "precision": args.precision}
    cfg = dataclasses.replace(cfg, **{k: v for k, v in flags.items() if v is not None})
    out = Path(args.out) if args.out else cache_dir() / "runs" / f"{args.task}-stage{stage_number}"
    world = World.start(stage, args.ddp, args.zero, args.ddp_timeout, args.bucket_mb)
    if not world.is_main:
        train(task, stage, cfg, out, resume=args.resume, progress=False, world=world)
        return 0
    print(f"sitp train {args.task} --stage {stage_number} ({STAGES[stage_number]}): {task.config}")
    print(f"  {cfg}")
    if world.size > 1:
        print(f"  data-parallel on {world.net.name}: {world.size} ranks x batch {cfg.batch_size}, "
              f"{stage.Tensor.get_num_threads()} threads a rank{', optimizer sharded (ZeRO-1)' if world.zero else ''}")
    result = train(task, stage, cfg, out, resume=args.resume, progress=not args.quiet, world=world)
    print(f"final train loss {result.train_losses[-1]:.4f}, val loss {result.val_history[-1][1]:.4f} "
          f"({result.seconds:.1f}s)")
    if result.scaler is not None:
        print(f"float16 loss scale {result.scaler.scale:g}; {result.scaler.skipped} steps skipped on an overflow")
    if world.size > 1:
        steps = max(1, result.steps_run)
        tokens = cfg.batch_size * world.size * cfg.grad_accum * getattr(task.config, "block_size", 1) * steps
        print(f"data-parallel: {tokens / result.seconds:.0f} tokens/s over {world.size} ranks; rank 0 spent "
              f"{world.comm_seconds:.2f} s in collectives ({1000 * world.comm_seconds / steps:.1f} ms a step)")
        if world.zero:
            print(f"ZeRO-1: rank 0 holds {world.state_bytes(result.optimizer) / 2**20:.2f} MiB of optimizer state "
                  f"of {world.state_bytes(result.optimizer, whole=True) / 2**20:.2f} MiB")
    print(f"checkpoint: {result.checkpoint}")
    print(f"loss curve: {out / f'{args.task}-loss.png'}")
    if task.tokenizer is not None and (args.samples if args.task != "nanogpt" else args.tokens) > 0:
        rng = np.random.default_rng(cfg.seed)
        print("samples:")
        print(sample_task(task, result.model, stage.Tensor, rng, args.samples, args.tokens))
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    state = load_checkpoint(args.ckpt)
    stage = load_stage(args.stage)
    task = task_from_meta(state.meta)
    if task.tokenizer is None:
        raise RuntimeError(f"sample: {task.name} is a classifier; only the language models can be sampled")
    model = task.build(stage)
    load_model_weights(stage, model, state.model)
    rng = np.random.default_rng(args.seed)
    top_k = args.top_k if args.top_k and args.top_k > 0 else None
    print(sample_task(task, model, stage.Tensor, rng, args.num, args.tokens, args.temperature, top_k, args.prompt))
    return 0


def add_sample_parser(commands: Any) -> None:
    sample = commands.add_parser("sample", help="sample text from a zoo checkpoint on any stage")
    sample.add_argument("--ckpt", required=True, help="a ckpt.safetensors written by `sitp train`")
    sample.add_argument("--stage", type=int, default=2, choices=sorted(STAGES), help="stage to run the model on")
    sample.add_argument("--tokens", type=int, default=500, help="characters to generate (nanogpt)")
    sample.add_argument("--num", type=int, default=10, help="names to generate (mlp, rnn, lstm)")
    sample.add_argument("--temperature", type=float, default=1.0, help="divide the logits by this (> 0)")
    sample.add_argument("--top-k", type=int, default=None, help="sample only among the k most likely tokens")
    sample.add_argument("--prompt", default="\n", help="text nanogpt continues")
    sample.add_argument("--seed", type=int, default=0, help="seed of the sampling RNG")
    sample.set_defaults(func=cmd_sample)
