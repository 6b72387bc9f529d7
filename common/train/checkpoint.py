"""Checkpoints: one safetensors file holding everything a run needs to continue bit-exactly.

Contents: the model weights (``model.<name>``), the optimizer state (``optim.<key>``), the train
losses so far (``log.train_loss``), and in the string ``__metadata__``: the step, the numpy
batch RNG's state, the stage RNG's seed and counter (dropout and init draw from it), and what
is needed to rebuild the model (task, config, tokenizer). Written with the ``safetensors``
package's numpy API, so reading one needs no ``nn`` (stage1 samples from stage2's checkpoints)
and never runs code (no pickle). The file is written to a temp file in the same folder and
renamed over the old one (os.replace is atomic), so a killed run leaves the last good
checkpoint, never half of one.
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
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from ..models.layers import named_tensors

FORMAT = "sitp-checkpoint-v1"


@dataclass
class Checkpoint:
    model: dict[str, np.ndarray]
    optim: dict[str, np.ndarray]
    step: int
    meta: dict[str, Any]  # task, config, tokenizer, rng states, val history
    train_losses: list[float] = field(default_factory=list)


def stage_random(stage: ModuleType) -> Any:
    """The stage's RandomState class (its ``seed`` and ``counter`` are the whole RNG state)."""
    return importlib.import_module(stage.__name__ + ".random").RandomState


def model_state(stage: ModuleType, model: Any) -> dict[str, Any]:
    """The model's tensors by dotted name, through the stage's ``nn.state`` when it has one."""
    nn = getattr(stage, "nn", None)
    return nn.state.get_state_dict(model) if nn is not None else named_tensors(model)


def save_checkpoint(path: str | Path, stage: ModuleType, model: Any, optimizer: Any, step: int,
                    batch_rng: np.random.Generator, meta: dict[str, Any], train_losses: list[float]) -> Path:
    """Write the checkpoint atomically (temp file + os.replace) and return its path."""
    path = Path(path)
    tensors = {f"model.{k}": np.ascontiguousarray(t.numpy()) for k, t in model_state(stage, model).items()}
    if optimizer is not None:
        tensors.update({f"optim.{k}": np.ascontiguousarray(t.numpy()) for k, t in optimizer.state_dict().items()})
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
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint` (numpy arrays and plain metadata)."""
    path = Path(path)
    if not path.is_file():
        raise RuntimeError(f"load_checkpoint: {path} does not exist")
    with safe_open(str(path), framework="np") as f:
        header = f.metadata() or {}
    if header.get("format") != FORMAT:
        raise ValueError(f"load_checkpoint: {path} is not a {FORMAT} file (format {header.get('format')!r})")
    arrays = load_file(str(path))
    meta = json.loads(header["meta"])
    meta["batch_rng"] = json.loads(header["batch_rng"])
    meta["stage_rng"] = json.loads(header["stage_rng"])
    return Checkpoint(
        model={k[6:]: v for k, v in arrays.items() if k.startswith("model.")},
        optim={k[6:]: v for k, v in arrays.items() if k.startswith("optim.")},
        step=int(header["step"]),
        meta=meta,
        train_losses=arrays.get("log.train_loss", np.zeros(0)).tolist(),
    )


def load_model_weights(stage: ModuleType, model: Any, weights: dict[str, np.ndarray]) -> None:
    """Copy checkpoint weights into a model built on ``stage``, checking names, shapes and dtypes.

    With ``nn.state`` the values are copied in place (optimizers keep holding the same tensors);
    a stage without it gets new tensors set on the attributes, one per distinct tensor, so weight
    tying survives.
    """
    T = stage.Tensor
    own = model_state(stage, model)
    missing, unexpected = sorted(set(own) - set(weights)), sorted(set(weights) - set(own))
    if missing or unexpected:
        raise ValueError(f"load_model_weights: missing {missing}, unexpected {unexpected}")
    for name, t in own.items():
        if tuple(weights[name].shape) != tuple(t.shape) or weights[name].dtype != t.dtype.np:
            raise ValueError(f"load_model_weights: {name!r} is {weights[name].dtype}{list(weights[name].shape)}, "
                             f"the model expects {t.dtype.name}{list(t.shape)}")
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


def restore_rngs(stage: ModuleType, checkpoint: Checkpoint, batch_rng: np.random.Generator) -> None:
    """Put both random streams back where they were when the checkpoint was written."""
    batch_rng.bit_generator.state = checkpoint.meta["batch_rng"]
    rs = stage_random(stage)
    rs.seed, rs.counter = int(checkpoint.meta["stage_rng"]["seed"]), int(checkpoint.meta["stage_rng"]["counter"])
