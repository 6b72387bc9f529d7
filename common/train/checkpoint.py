"""Checkpoints: one safetensors file holding everything a run needs to continue bit-exactly.

Contents: the model weights (``model.<name>``), the optimizer state (``optim.<key>``), float16
training's loss scale (``scaler.<key>``, precision.py), the train losses so far
(``log.train_loss``), and in the string ``__metadata__``: the step, the numpy batch RNG's state,
the stage RNG's seed and counter (dropout and init draw from it), and what is needed to rebuild
the model (task, config, tokenizer). Written with the ``safetensors`` package's numpy API, so
reading one needs no ``nn`` (stage1 samples from stage2's checkpoints) and never runs code (no
pickle). The weights keep their dtypes (bfloat16 through ``ml_dtypes``, which the package reads
and writes). The file is written to a temp file in the same folder and renamed over the old one
(fsync, then os.replace, which is atomic), so a killed run or a failed save leaves the last good
checkpoint, never half of one.

A file that cannot be used (empty, truncated, not safetensors, not ours, missing a tensor, a
tensor of the wrong shape) raises :class:`CheckpointError`, whose one-line message names the
file and what is wrong; ``sitp`` prints it without a traceback.
"""

from __future__ import annotations

import importlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import load_file, save_file

from ..models.layers import named_tensors

FORMAT = "sitp-checkpoint-v1"
HEADER_KEYS = ("format", "step", "batch_rng", "stage_rng", "meta")


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used; the message names the file and what is wrong."""

    def __init__(self, path: str | Path | None, reason: str):
        super().__init__(f"checkpoint {path if path is not None else '(in memory)'}: {reason}")
        self.path = Path(path) if path is not None else None
        self.reason = reason


class Weights(dict):
    """A checkpoint's arrays by name, remembering the file they came from so errors can name it."""

    def __init__(self, arrays: dict[str, np.ndarray], path: Path | None = None):
        super().__init__(arrays)
        self.path = path


@dataclass
class Checkpoint:
    model: dict[str, np.ndarray]
    optim: dict[str, np.ndarray]
    step: int
    meta: dict[str, Any]  # task, config, tokenizer, rng states, val history
    train_losses: list[float] = field(default_factory=list)
    scaler: dict[str, np.ndarray] = field(default_factory=dict)  # float16's loss scaler; empty without one


def stage_random(stage: ModuleType) -> Any:
    """The stage's RandomState class (its ``seed`` and ``counter`` are the whole RNG state)."""
    return importlib.import_module(stage.__name__ + ".random").RandomState


def model_state(stage: ModuleType, model: Any) -> dict[str, Any]:
    """The model's tensors by dotted name, through the stage's ``nn.state`` when it has one."""
    nn = getattr(stage, "nn", None)
    return nn.state.get_state_dict(model) if nn is not None else named_tensors(model)


def save_checkpoint(path: str | Path, stage: ModuleType, model: Any, optimizer: Any, step: int,
                    batch_rng: np.random.Generator, meta: dict[str, Any], train_losses: list[float],
                    scaler: Any = None) -> Path:
    """Write the checkpoint atomically (temp file + os.replace) and return its path."""
    path = Path(path)
    tensors = {f"model.{k}": np.ascontiguousarray(t.numpy()) for k, t in model_state(stage, model).items()}
    if optimizer is not None:
        tensors.update({f"optim.{k}": np.ascontiguousarray(t.numpy()) for k, t in optimizer.state_dict().items()})
    if scaler is not None:
        tensors.update({f"scaler.{k}": t.numpy() for k, t in scaler.state_dict().items()})
    tensors["log.train_loss"] = np.asarray(train_losses, dtype=np.float64)
    rs = stage_random(stage)
    header = {
        "format": FORMAT,
        "step": str(step),
        "batch_rng": json.dumps(batch_rng.bit_generator.state),
        "stage_rng": json.dumps({"seed": rs.seed, "counter": rs.counter}),
        "meta": json.dumps(meta),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=header)
        with open(tmp, "rb+") as f:  # the bytes reach the disk before the name points at them
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (POSIX; a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_layout(path: Path) -> None:
    """Check the safetensors framing (8-byte header length, JSON header, tensor data) and say
    what is wrong in words; the safetensors package only says 'error while deserializing header'."""
    size = path.stat().st_size
    if size == 0:
        raise CheckpointError(path, "the file is empty")
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise CheckpointError(path, f"truncated or not a safetensors file: only {size} bytes")
        n = int.from_bytes(head, "little")
        raw = f.read(min(n, size - 8))
    if not raw.startswith(b"{"):
        raise CheckpointError(path, "not a safetensors file (no JSON header after the first 8 bytes)")
    if n > size - 8:
        raise CheckpointError(path, f"truncated: its header alone needs {n + 8} bytes, the file has {size}")
    try:
        header = json.loads(raw)
        ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        raise CheckpointError(path, "not a safetensors file (its header is not a table of tensors)") from None
    need, have = max(ends, default=0), size - 8 - n
    if have < need:
        raise CheckpointError(path, f"truncated: its tensors need {need} bytes of data, the file holds {have}")


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint` (numpy arrays and plain metadata)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(path, "no such file")
    check_layout(path)
    try:
        with safe_open(str(path), framework="np") as f:
            header = f.metadata() or {}
        arrays = load_file(str(path))
    except SafetensorError as e:  # framing passed check_layout, so this is a damaged table or dtype
        raise CheckpointError(path, f"not a readable safetensors file ({e})") from None
    if header.get("format") != FORMAT:
        raise CheckpointError(path, f"not a {FORMAT} file (format {header.get('format')!r})")
    missing = [k for k in HEADER_KEYS if k not in header]
    if missing:
        raise CheckpointError(path, f"its metadata lacks {missing}")
    try:
        meta = json.loads(header["meta"])
        meta["batch_rng"] = json.loads(header["batch_rng"])
        meta["stage_rng"] = json.loads(header["stage_rng"])
        step = int(header["step"])
    except (ValueError, TypeError) as e:
        raise CheckpointError(path, f"damaged metadata ({e})") from None
    if "task" not in meta or "config" not in meta:
        raise CheckpointError(path, "its metadata does not say which model it holds (task, config)")
    return Checkpoint(
        model=Weights({k[6:]: v for k, v in arrays.items() if k.startswith("model.")}, path),
        optim=Weights({k[6:]: v for k, v in arrays.items() if k.startswith("optim.")}, path),
        step=step,
        meta=meta,
        train_losses=arrays.get("log.train_loss", np.zeros(0)).tolist(),
        scaler=Weights({k[7:]: v for k, v in arrays.items() if k.startswith("scaler.")}, path),
    )


def load_model_weights(stage: ModuleType, model: Any, weights: dict[str, np.ndarray]) -> None:
    """Copy checkpoint weights into a model built on ``stage``, checking names, shapes and dtypes.

    With ``nn.state`` the values are copied in place (optimizers keep holding the same tensors);
    a stage without it gets new tensors set on the attributes, one per distinct tensor, so weight
    tying survives. A mismatch raises :class:`CheckpointError` naming the file the weights came from.
    """
    T = stage.Tensor
    own = model_state(stage, model)
    source = getattr(weights, "path", None)
    missing, unexpected = sorted(set(own) - set(weights)), sorted(set(weights) - set(own))
    if missing:
        raise CheckpointError(source, f"missing tensor{'s' * (len(missing) > 1)} {', '.join(missing)} "
                                      f"(the model has {len(own)}, the file {len(weights)})")
    if unexpected:
        raise CheckpointError(source, f"tensors the model does not have: {', '.join(unexpected)}")
    for name, t in own.items():
        if tuple(weights[name].shape) != tuple(t.shape) or weights[name].dtype != t.dtype.np:
            found, expected = f"{weights[name].dtype}{list(weights[name].shape)}", f"{t.dtype.name}{list(t.shape)}"
            raise CheckpointError(source, f"shape mismatch: {name} is {found}, the model expects {expected}")
    nn = getattr(stage, "nn", None)
    if nn is not None:
        nn.state.load_state_dict(model, {k: T(np.ascontiguousarray(v)) for k, v in weights.items()})
        return
    replaced: dict[int, Any] = {}
    for name, t in own.items():
        new = replaced.setdefault(id(t), T(np.ascontiguousarray(weights[name])))
        owner_path, _, attr = name.rpartition(".")
        owner = model
        for part in owner_path.split(".") if owner_path else []:
            owner = owner[int(part)] if isinstance(owner, (list, tuple)) else getattr(owner, part)
        setattr(owner, attr, new)


def load_optimizer_state(stage: ModuleType, optimizer: Any, state: dict[str, np.ndarray]) -> None:
    """Copy a checkpoint's optimizer state in; a mismatch raises :class:`CheckpointError` naming the file."""
    try:
        optimizer.load_state_dict({k: stage.Tensor(np.ascontiguousarray(v)) for k, v in state.items()})
    except (ValueError, KeyError) as e:
        raise CheckpointError(getattr(state, "path", None), f"optimizer state does not fit: {e}") from None


def load_scaler_state(stage: ModuleType, scaler: Any, state: dict[str, np.ndarray]) -> None:
    """float16's loss scale and counters from a checkpoint; one written without them (another precision)
    raises :class:`CheckpointError`."""
    try:
        scaler.load_state_dict({k: stage.Tensor(v) for k, v in state.items()})
    except KeyError as e:
        raise CheckpointError(getattr(state, "path", None), f"no float16 loss scale to resume ({e}): it was "
                                                            "written by a run of another --precision") from None


def restore_rngs(stage: ModuleType, checkpoint: Checkpoint, batch_rng: np.random.Generator) -> None:
    """Put both random streams back where they were when the checkpoint was written."""
    batch_rng.bit_generator.state = checkpoint.meta["batch_rng"]
    rs = stage_random(stage)
    rs.seed, rs.counter = int(checkpoint.meta["stage_rng"]["seed"]), int(checkpoint.meta["stage_rng"]["counter"])
