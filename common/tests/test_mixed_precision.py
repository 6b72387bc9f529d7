"""Mixed-precision training (common/train/precision.py): float16's loss scaling skips a step whose
gradients overflowed and leaves the weights and the optimizer alone, the scale backs off and grows as
torch's GradScaler's does, a float16 run resumes bit-exactly (the scale is in the checkpoint) on stage2
and on stage3 (whose step is then two jitted parts), and checkpoints keep every dtype.
The losses against torch's autocast: conformance/test_models.py."""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest

from common.tests.test_train_zoo import tiny_gpt_task
from common.train import loop
from common.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from common.train.loop import train
from common.train.precision import Precision, parse_precision

QUIET = {"progress": False, "log": lambda *_: None}


def _stage(name: str):
    return importlib.import_module(name)


def _scaler(monkeypatch, **settings) -> None:
    """Every run's float16 scaler made with these settings instead of torch's defaults."""
    monkeypatch.setattr(loop, "grad_scaler", lambda stage, precision: stage.optim.GradScaler(**settings)
                        if parse_precision(precision) is Precision.FP16 else None)


def test_scaler_backs_off_and_grows():
    stage = _stage("stage2_autograd")
    scaler = stage.optim.GradScaler(init_scale=8.0, growth_interval=2)
    steps = [False, True, False, False, False, True]
    scales = []
    for overflow in steps:
        scaler.update(overflow)
        scales.append(scaler.scale)
    assert scales == [8.0, 4.0, 4.0, 8.0, 8.0, 4.0]
    assert scaler.skipped == 2
    T = stage.Tensor
    finite, bad = T([1.0, 2.0]), T([1.0, float("inf")])
    assert not scaler.found_nonfinite([finite, finite]).item()
    assert scaler.found_nonfinite([finite, bad]).item()
    assert scaler.found_nonfinite([T([float("nan")]).half()]).item()
    with pytest.raises(ValueError, match="backoff_factor"):
        stage.optim.GradScaler(backoff_factor=2.0)


@pytest.mark.parametrize("stage_name", ["stage2_autograd", "stage3_compiler"])
def test_overflowing_steps_are_skipped(stage_name, tmp_path, monkeypatch):
    """A scale of 2^100 overflows every float16 gradient: no step changes a weight, each halves the scale."""
    stage = _stage(stage_name)
    _scaler(monkeypatch, init_scale=2.0**100)
    task = tiny_gpt_task(dropout=0.0)
    cfg = dataclasses.replace(task.train_config, steps=3, grad_accum=1, precision="fp16")
    stage.Tensor.manual_seed(cfg.seed)
    initial = {k: v.numpy() for k, v in stage.nn.state.get_state_dict(task.build(stage)).items()}
    result = train(task, stage, cfg, tmp_path, **QUIET)
    assert result.scaler.skipped == 3 and result.scaler.scale == 2.0**97
    after = load_checkpoint(result.checkpoint)
    assert all(np.array_equal(after.model[k], initial[k]) for k in initial)
    assert float(after.scaler["scale"]) == 2.0**97


@pytest.mark.parametrize("stage_name", ["stage2_autograd", "stage3_compiler"])
def test_float16_resume_is_bit_exact(stage_name, tmp_path, monkeypatch):
    """A scale that starts too large and grows every other step: steps are skipped and taken across the
    interruption, and the resumed run's losses and weights equal the uninterrupted run's."""
    stage = _stage(stage_name)
    _scaler(monkeypatch, init_scale=2.0**20, growth_interval=2)
    task = tiny_gpt_task()
    n = task.train_config.steps
    full_cfg = dataclasses.replace(task.train_config, steps=2 * n, precision="fp16")
    full = train(task, stage, full_cfg, tmp_path / "full", **QUIET)
    assert 0 < full.scaler.skipped < 2 * n  # (some steps skipped, some taken: the test would be vacuous else)
    first = train(task, stage, dataclasses.replace(full_cfg, steps=n, lr_decay_steps=2 * n), tmp_path / "resumed",
                  **QUIET)
    second = train(task, stage, full_cfg, tmp_path / "resumed", resume=True, **QUIET)
    assert first.train_losses + second.train_losses[n:] == full.train_losses
    assert (second.scaler.scale, second.scaler.skipped) == (full.scaler.scale, full.scaler.skipped)
    a, b = load_checkpoint(full.checkpoint), load_checkpoint(second.checkpoint)
    assert all(np.array_equal(a.model[k], b.model[k]) for k in a.model)
    assert all(np.array_equal(a.optim[k], b.optim[k]) for k in a.optim)


def test_bfloat16_training_learns(tmp_path):
    stage = _stage("stage2_autograd")
    task = tiny_gpt_task(dropout=0.0)
    losses = {}
    for precision in ("fp32", "bf16"):
        cfg = dataclasses.replace(task.train_config, steps=12, precision=precision)
        losses[precision] = train(task, stage, cfg, tmp_path / precision, **QUIET).train_losses
    assert losses["bf16"][-1] < losses["bf16"][0]
    assert losses["bf16"] != losses["fp32"]  # (autocast changed the arithmetic)
    assert abs(losses["bf16"][-1] - losses["fp32"][-1]) < 0.05 * losses["fp32"][-1]


def test_resuming_float16_needs_its_scale(tmp_path):
    stage = _stage("stage2_autograd")
    task = tiny_gpt_task()
    cfg = dataclasses.replace(task.train_config, steps=1)
    train(task, stage, cfg, tmp_path, **QUIET)
    with pytest.raises(CheckpointError, match="another --precision"):
        train(task, stage, dataclasses.replace(cfg, steps=2, precision="fp16"), tmp_path, resume=True, **QUIET)


def test_bad_precision_is_named(tmp_path):
    stage = _stage("stage2_autograd")
    task = tiny_gpt_task()
    with pytest.raises(ValueError, match="precision must be one of"):
        train(task, stage, dataclasses.replace(task.train_config, precision="fp8"), tmp_path, **QUIET)


def test_checkpoints_keep_every_dtype(tmp_path):
    """Weights in the half types and the small ints go to the file and come back bit for bit."""
    stage = _stage("stage2_autograd")
    T, dtypes = stage.Tensor, stage.dtypes

    class Holder:
        pass

    model = Holder()
    values = np.array([0.1, -2.5, 65504.0, 3e-8], np.float32)
    names = ("float16", "bfloat16", "int8", "uint8", "int16", "uint16", "uint32", "uint64")
    for name in names:
        setattr(model, name, T(values).cast(getattr(dtypes, name)))
    task = tiny_gpt_task()
    path = save_checkpoint(tmp_path / "c.safetensors", stage, model, None, 0, np.random.default_rng(0),
                           {"task": task.name, "config": {}}, [])
    back = load_checkpoint(path).model
    for name in names:
        ours = getattr(model, name).numpy()
        assert back[name].dtype == ours.dtype and back[name].tobytes() == ours.tobytes(), name
