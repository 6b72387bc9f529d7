"""Unusable checkpoints give one clear line, never a traceback: a truncated file, garbage bytes,
an empty file, a file of someone else's, a file missing a tensor or holding one of the wrong
shape each raise CheckpointError naming the file and the fault, and `sitp sample --ckpt` and
`sitp train --resume` print it as `sitp: error: ...` and exit 1. A save that fails half-way
leaves the previous checkpoint byte for byte and no temp file; a good save is fsynced before
it is renamed into place."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from common.cli import main
from common.models.mlp import MLPConfig
from common.train import checkpoint as ckpt_mod
from common.train.batching import ArrayBatches
from common.train.checkpoint import CheckpointError, load_checkpoint, load_model_weights
from common.train.loop import CHECKPOINT, train
from common.train.tasks import Task, TrainConfig, task_from_meta

ROOT = Path(__file__).resolve().parents[2]


def tiny_mlp_task(steps: int = 1) -> Task:
    """A makemore MLP on synthetic contexts (no data files needed)."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 27, (120, 3))
    y = (x[:, -1] + 1) % 27
    cfg = TrainConfig(steps=steps, batch_size=8, lr=1e-2, eval_every=0, eval_batches=1, optimizer="adam")
    return Task("mlp", MLPConfig(block_size=3, n_embd=4, n_hidden=8), cfg, "." + "abcdefghijklmnopqrstuvwxyz",
                ArrayBatches(x[:100], y[:100]), ArrayBatches(x[100:], y[100:]))


@pytest.fixture
def good(stage2, tmp_path) -> Path:
    """A real checkpoint written by the training loop."""
    task = tiny_mlp_task()
    return train(task, stage2, task.train_config, tmp_path / "run", progress=False, log=lambda *_: None).checkpoint


def _rewrite(path: Path, edit: Callable[[dict[str, np.ndarray]], None]) -> bytes:
    """The checkpoint's bytes after ``edit`` changed its tensors (its metadata kept)."""
    with safe_open(str(path), framework="np") as f:
        metadata = f.metadata()
    tensors = load_file(str(path))
    edit(tensors)
    out = path.with_name("edited.safetensors")
    save_file(tensors, str(out), metadata=metadata)
    return out.read_bytes()


def _drop_first_model_tensor(t: dict[str, np.ndarray]) -> None:
    del t[min(k for k in t if k.startswith("model."))]


def _reshape_first_model_tensor(t: dict[str, np.ndarray]) -> None:
    name = min(k for k in t if k.startswith("model."))
    t[name] = np.zeros((3, 5), dtype=t[name].dtype)


# case -> (how to spoil the good file's bytes, what the message must say)
CORRUPT: dict[str, tuple[Callable[[bytes, Path], bytes], str]] = {
    "truncated": (lambda b, p: b[: len(b) // 2], r"truncated: its tensors need \d+ bytes of data, the file holds \d+"),
    "truncated_header": (lambda b, p: b[:100], r"truncated: its header alone needs \d+ bytes, the file has 100"),
    "garbage": (lambda b, p: b"this is not a checkpoint at all\n" * 20, r"not a safetensors file"),
    "empty": (lambda b, p: b"", r"the file is empty"),
    "tiny": (lambda b, p: b"abc", r"only 3 bytes"),
    "foreign": (lambda b, p: _foreign(p), r"not a sitp-checkpoint-v1 file"),
    "missing_tensor": (lambda b, p: _rewrite(p, _drop_first_model_tensor),
                       r"missing tensor \S+ \(the model has \d+, the file \d+\)"),
    "wrong_shape": (lambda b, p: _rewrite(p, _reshape_first_model_tensor), r"shape mismatch: \S+ is float32\[3, 5\]"),
}


def _foreign(path: Path) -> bytes:
    out = path.with_name("foreign.safetensors")
    save_file({"w": np.zeros(3, dtype=np.float32)}, str(out))
    return out.read_bytes()


def _spoil(good: Path, case: str) -> tuple[Path, str]:
    spoil, reason = CORRUPT[case]
    bad = good.with_name(f"{case}.safetensors")
    bad.write_bytes(spoil(good.read_bytes(), good))
    return bad, reason


def _load_into_model(stage, path: Path) -> None:
    state = load_checkpoint(path)
    load_model_weights(stage, task_from_meta(state.meta).build(stage), state.model)


@pytest.mark.parametrize("case", list(CORRUPT))
def test_corrupt_file_raises_checkpoint_error(stage2, good, case):
    bad, reason = _spoil(good, case)
    with pytest.raises(CheckpointError, match=reason) as info:
        _load_into_model(stage2, bad)
    message = str(info.value)
    assert message.startswith(f"checkpoint {bad}: ") and "\n" not in message
    assert isinstance(info.value, ValueError) and info.value.path == bad


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="no such file"):
        load_checkpoint(tmp_path / "nope.safetensors")


def _one_error_line(err: str, path: Path, reason: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"sitp: error: checkpoint {path}: ")
    assert re.search(reason, lines[0]), lines[0]
    assert "Traceback" not in err


@pytest.mark.parametrize("case", list(CORRUPT))
def test_sample_prints_one_line(stage2, good, case, capsys):
    bad, reason = _spoil(good, case)
    assert main(["sample", "--ckpt", str(bad), "--stage", "2", "--num", "1"]) == 1
    captured = capsys.readouterr()
    _one_error_line(captured.err, bad, reason)
    assert captured.out == ""


@pytest.mark.parametrize("case", ["truncated", "garbage", "missing_tensor"])
def test_console_command_exits_nonzero(stage2, good, case):
    """The real entry point in a fresh process: exit status 1, one line on stderr, no traceback."""
    bad, reason = _spoil(good, case)
    proc = subprocess.run([sys.executable, "-m", "common.cli", "sample", "--ckpt", str(bad), "--num", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr
    _one_error_line(proc.stderr, bad, reason)


@pytest.mark.parametrize("case", ["truncated", "empty", "garbage"])
def test_resume_prints_one_line(stage2, names_fetched, tmp_path, case, capsys):
    """`sitp train mlp --resume` on a spoiled checkpoint in --out stops before training, in one line."""
    task = tiny_mlp_task()
    good = train(task, stage2, task.train_config, tmp_path / "run", progress=False, log=lambda *_: None).checkpoint
    bad, reason = _spoil(good, case)
    os.replace(bad, good)
    assert main(["train", "mlp", "--stage", "2", "--steps", "2", "--out", str(good.parent), "--resume",
                 "--quiet", "--samples", "0"]) == 1
    _one_error_line(capsys.readouterr().err, good, reason)


def test_resume_with_wrong_optimizer_state(stage2, tmp_path):
    """Weights that fit but optimizer state that does not: still a CheckpointError naming the file."""
    task = tiny_mlp_task()
    path = train(task, stage2, task.train_config, tmp_path, progress=False, log=lambda *_: None).checkpoint
    path.write_bytes(_rewrite(path, lambda t: t.pop(min(k for k in t if k.startswith("optim.")))))
    with pytest.raises(CheckpointError, match=f"checkpoint {path}: optimizer state does not fit"):
        train(task, stage2, dataclasses.replace(task.train_config, steps=2), tmp_path, resume=True,
              progress=False, log=lambda *_: None)


def test_failed_save_keeps_the_old_checkpoint(stage2, good, monkeypatch):
    before = good.read_bytes()
    real_save = ckpt_mod.save_file

    def half_then_fail(tensors, filename, metadata=None):
        real_save(tensors, filename, metadata=metadata)
        data = Path(filename).read_bytes()
        Path(filename).write_bytes(data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt_mod, "save_file", half_then_fail)
    task = tiny_mlp_task(steps=2)
    with pytest.raises(OSError, match="No space left"):
        train(task, stage2, task.train_config, good.parent, progress=False, log=lambda *_: None)
    assert good.read_bytes() == before
    assert [p.name for p in good.parent.iterdir() if p.name.endswith(".tmp")] == []
    assert load_checkpoint(good).step == 1


def test_save_fsyncs_before_rename(stage2, good, monkeypatch):
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(ckpt_mod.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(ckpt_mod.os, "replace", lambda a, b: (events.append("replace"), real_replace(a, b))[1])
    task = tiny_mlp_task(steps=2)
    train(task, stage2, task.train_config, good.parent, progress=False, log=lambda *_: None)
    assert events[:2] == ["fsync", "replace"]
    assert load_checkpoint(good.parent / CHECKPOINT).step == 2
