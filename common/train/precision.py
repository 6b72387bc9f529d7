"""Mixed-precision training: `sitp train ... --precision bf16|fp16`.

fp32 trains as before. bf16 and fp16 run each forward under the stage's autocast (autocast.py in
stages 2 and 3): the matmuls, convolutions and attention in the half type, softmax, the norms and the
loss in float32, the parameters, their gradients and the optimizer's state in float32. fp16's gradients
need the loss scaled on the way back (the stage's optim.GradScaler): the loop then skips a step whose
gradients overflowed and halves the scale; the scaler's state is saved in the checkpoint, so a resumed
run continues exactly as the uninterrupted one.
"""

from __future__ import annotations

import contextlib
from enum import StrEnum
from types import ModuleType
from typing import Any


class Precision(StrEnum):
    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"

    @property
    def half(self) -> str | None:
        """The dtype autocast computes in, or None for float32 training."""
        return {Precision.BF16: "bfloat16", Precision.FP16: "float16"}.get(self)


def parse_precision(value: str) -> Precision:
    try:
        return Precision(value)
    except ValueError:
        raise ValueError(f"train: precision must be one of {[p.value for p in Precision]}, got {value!r}") from None


def mixed(stage: ModuleType, precision: str) -> Any:
    """The context a forward runs in: the stage's autocast for bf16/fp16, nothing for fp32."""
    half = parse_precision(precision).half
    return stage.Tensor.autocast(half) if half is not None else contextlib.nullcontext()


def grad_scaler(stage: ModuleType, precision: str) -> Any:
    """float16's loss scaler (a new one, at torch's defaults), or None where no scaling is needed."""
    return stage.optim.GradScaler() if parse_precision(precision) is Precision.FP16 else None
