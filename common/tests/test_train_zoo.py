"""The zoo's training loop on stage2: checkpoints are written atomically, --resume continues
bit-exactly (every loss equal to an uninterrupted run's), gradient accumulation means what it
says, and stage1 loads a stage2 checkpoint and computes the same logits (forward only)."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from common.models.gpt import GPTConfig
from common.models.mlp import MLPConfig
from common.train import checkpoint as ckpt_mod
from common.train.batching import ArrayBatches, TextBatches
from common.train.checkpoint import load_checkpoint, load_model_weights
from common.train.loop import CHECKPOINT, train
from common.train.tasks import Task, TrainConfig, task_from_meta

CHARS = "\nabcdefghij"


def tiny_gpt_task(dropout: float = 0.1) -> Task:
    """A 1-layer GPT on a synthetic stream (no data files needed); dropout exercises the stage RNG."""
    ids = np.random.default_rng(0).integers(0, len(CHARS), 2000)
    cfg = GPTConfig(block_size=8, vocab_size=len(CHARS), n_layer=1, n_head=2, n_embd=16, dropout=dropout, bias=True)
    train_cfg = TrainConfig(steps=6, batch_size=4, lr=3e-3, min_lr=3e-4, warmup=2, weight_decay=0.1,
                            eval_every=0, eval_batches=2, grad_accum=2)
    return Task("nanogpt", cfg, train_cfg, CHARS, TextBatches(ids[:1500], 8), TextBatches(ids[1500:], 8))


def tiny_mlp_task() -> Task:
    rng = np.random.default_rng(1)
    x = rng.integers(0, 27, (300, 3))
    y = (x[:, -1] + 1) % 27
    train_cfg = TrainConfig(steps=6, batch_size=8, lr=1e-2, eval_every=0, eval_batches=2, optimizer="adam")
    return Task("mlp", MLPConfig(block_size=3, n_embd=4, n_hidden=16), train_cfg, "." + "abcdefghijklmnopqrstuvwxyz",
                ArrayBatches(x[:250], y[:250]), ArrayBatches(x[250:], y[250:]))


@pytest.mark.parametrize("make_task", [tiny_gpt_task, tiny_mlp_task], ids=["nanogpt", "mlp"])
def test_resume_is_bit_exact(stage2, tmp_path, make_task):
    task = make_task()
    n = task.train_config.steps
    full_cfg = dataclasses.replace(task.train_config, steps=2 * n)
    full = train(task, stage2, full_cfg, tmp_path / "full", progress=False, log=lambda *_: None)
    half_cfg = dataclasses.replace(full_cfg, steps=n, lr_decay_steps=2 * n)  # interrupted after n steps
    first = train(task, stage2, half_cfg, tmp_path / "resumed", progress=False, log=lambda *_: None)
    assert load_checkpoint(first.checkpoint).step == n
    second = train(task, stage2, full_cfg, tmp_path / "resumed", resume=True, progress=False, log=lambda *_: None)
    assert len(second.train_losses) == 2 * n
    assert second.train_losses == full.train_losses  # exact equality, every step
    assert first.train_losses == full.train_losses[:n]
    a, b = load_checkpoint(full.checkpoint), load_checkpoint(second.checkpoint)
    assert a.model.keys() == b.model.keys()
    assert all(np.array_equal(a.model[k], b.model[k]) for k in a.model)
    assert all(np.array_equal(a.optim[k], b.optim[k]) for k in a.optim)


def test_resume_without_the_rngs_differs(stage2, tmp_path, monkeypatch):
    """The exactness above is not vacuous: skip restoring the RNGs and the resumed losses change
    (other batches, other dropout masks)."""
    from common.train import loop

    task = tiny_gpt_task()
    n = task.train_config.steps
    full_cfg = dataclasses.replace(task.train_config, steps=2 * n)
    full = train(task, stage2, full_cfg, tmp_path / "full", progress=False, log=lambda *_: None)
    half_cfg = dataclasses.replace(full_cfg, steps=n, lr_decay_steps=2 * n)
    train(task, stage2, half_cfg, tmp_path / "resumed", progress=False, log=lambda *_: None)
    monkeypatch.setattr(loop, "restore_rngs", lambda *args: None)
    second = train(task, stage2, full_cfg, tmp_path / "resumed", resume=True, progress=False, log=lambda *_: None)
    assert second.train_losses[:n] == full.train_losses[:n]
    assert all(a != b for a, b in zip(second.train_losses[n:], full.train_losses[n:], strict=True))


def test_resume_refuses_another_model(stage2, tmp_path):
    task = tiny_gpt_task()
    train(task, stage2, dataclasses.replace(task.train_config, steps=1), tmp_path, progress=False,
          log=lambda *_: None)
    other = tiny_gpt_task(dropout=0.0)
    with pytest.raises(ValueError, match="--resume"):
        train(other, stage2, other.train_config, tmp_path, resume=True, progress=False, log=lambda *_: None)
    with pytest.raises(RuntimeError, match="no checkpoint"):
        train(other, stage2, other.train_config, tmp_path / "empty", resume=True, progress=False)


def test_checkpoint_write_is_atomic(stage2, tmp_path, monkeypatch):
    task = tiny_mlp_task()
    result = train(task, stage2, dataclasses.replace(task.train_config, steps=2), tmp_path, progress=False,
                   log=lambda *_: None)
    path = result.checkpoint
    good = path.read_bytes()
    replaced = []
    real_replace = os.replace
    monkeypatch.setattr(ckpt_mod.os, "replace", lambda src, dst: (replaced.append((src, dst)), real_replace(src, dst)))

    def crash(tensors, filename, metadata=None):
        with open(filename, "wb") as f:
            f.write(b"half a checkpoint")
        raise KeyboardInterrupt  # killed mid-write

    monkeypatch.setattr(ckpt_mod, "save_file", crash)
    with pytest.raises(KeyboardInterrupt):
        ckpt_mod.save_checkpoint(path, stage2, result.model, None, 3, np.random.default_rng(0), task.meta(), [1.0])
    assert path.read_bytes() == good  # the last good checkpoint survives
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []  # no temp file left
    assert replaced == []
    monkeypatch.undo()
    monkeypatch.setattr(ckpt_mod.os, "replace", lambda src, dst: (replaced.append((src, dst)), real_replace(src, dst)))
    ckpt_mod.save_checkpoint(path, stage2, result.model, None, 3, np.random.default_rng(0), task.meta(), [1.0])
    (src, dst), = replaced
    assert dst == path and os.path.dirname(src) == str(tmp_path) and src != str(path)
    assert load_checkpoint(path).step == 3


def test_checkpoint_holds_everything(stage2, tmp_path):
    task = tiny_gpt_task()
    result = train(task, stage2, task.train_config, tmp_path, progress=False, log=lambda *_: None)
    state = load_checkpoint(tmp_path / CHECKPOINT)
    assert state.step == task.train_config.steps
    assert state.train_losses == result.train_losses
    assert "transformer.h.0.attn.c_attn.weight" in state.model and "lm_head.weight" in state.model
    assert np.array_equal(state.model["lm_head.weight"], state.model["transformer.wte.weight"])  # tied
    assert any(k.endswith("step") for k in state.optim) and any(".m." in k for k in state.optim)
    assert set(state.meta["stage_rng"]) == {"seed", "counter"} and state.meta["stage_rng"]["counter"] > 0
    assert state.meta["batch_rng"]["bit_generator"] == "PCG64"
    assert state.meta["task"] == "nanogpt" and state.meta["chars"] == CHARS
    assert (tmp_path / "nanogpt-loss.png").stat().st_size > 1000


def test_gradient_accumulation_matches_a_big_batch(stage2):
    """Two micro-batches of 4 give the gradient of their 8 rows' mean loss (same rows, one step)."""
    T = stage2.Tensor
    task = tiny_mlp_task()
    x, y = task.train.x[:8], task.train.y[:8]
    grads = []
    for parts in (1, 2):
        T.manual_seed(0)
        model = task.build(stage2)
        for xs, ys in zip(np.split(x, parts), np.split(y, parts), strict=True):
            (model.loss(T(xs), T(ys)) / parts).backward()
        grads.append(model.hidden.weight.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-7)


def test_stage1_loads_a_stage2_checkpoint(stage1, stage2, tmp_path):
    task = tiny_gpt_task(dropout=0.0)
    train(task, stage2, task.train_config, tmp_path, progress=False, log=lambda *_: None)
    state = load_checkpoint(tmp_path / CHECKPOINT)
    idx = np.random.default_rng(3).integers(0, len(CHARS), (2, 8))
    logits = []
    for stage in (stage1, stage2):
        rebuilt = task_from_meta(state.meta)
        model = rebuilt.build(stage)
        load_model_weights(stage, model, state.model)
        assert model.lm_head.weight is model.transformer.wte.weight  # the tie survives loading
        logits.append(model(stage.Tensor(idx)).numpy())
    np.testing.assert_allclose(logits[0], logits[1], rtol=1e-6, atol=1e-6)


def test_load_rejects_wrong_shapes(stage1, stage2, tmp_path):
    task = tiny_gpt_task(dropout=0.0)
    train(task, stage2, dataclasses.replace(task.train_config, steps=1), tmp_path, progress=False,
          log=lambda *_: None)
    state = load_checkpoint(tmp_path / CHECKPOINT)
    bigger = task_from_meta({**state.meta, "config": {**state.meta["config"], "n_embd": 32}})
    for stage in (stage1, stage2):
        with pytest.raises(ValueError, match="transformer.wte.weight"):
            load_model_weights(stage, bigger.build(stage), state.model)
    with pytest.raises(RuntimeError, match="no autograd"):
        train(task, stage1, task.train_config, progress=False)
