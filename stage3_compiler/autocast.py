"""Mixed precision: `with Tensor.autocast(dtypes.bfloat16):` runs the ops that multiply matrices in a
half type and keeps the rest where a half type would lose too much.

Inside the block, and nowhere else:
- matmul (and so `@` and dot), linear, conv2d, conv_transpose2d and scaled_dot_product_attention
  take their float32 operands in the half type and return it: the products round their inputs to
  8 (bfloat16) or 11 (float16) bits of mantissa, the sums accumulate in float32 (every kernel computes a
  half type in float32 and rounds once on store), and the activations they write take half the memory;
- softmax, log_softmax, layernorm and the losses take a half input in float32 and return float32: an
  exponential's sum and a variance lose their small terms in 8 bits;
- every other op computes in its inputs' types, as outside: x + y of a float32 and a bfloat16 tensor is
  float32 (the promotion lattice), so a residual stream kept in float32 stays there.

The parameters stay float32 and so do their gradients: autocast adds casts to the graph, and a cast's
gradient is cast back to its input's type. The optimizer's state and step never see a half type. This is
torch's `autocast` with its lists cut to the ops the stages have; float64 tensors are left alone, as
torch leaves them. float16's narrow range (largest 65504, smallest normal 6e-5) needs the loss scaled
while its gradients flow back (optim.GradScaler); bfloat16 has float32's range and needs no scaling.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .dtype import DType, dtypes, to_dtype


class AutocastMode:
    """The half type of the innermost `autocast` block, or None outside every block."""

    dtype: DType | None = None


@contextlib.contextmanager
def autocast(dtype=dtypes.bfloat16, enabled: bool = True) -> Iterator[None]:
    """`with Tensor.autocast(dtypes.float16):` (see the module's docstring); enabled=False turns it off
    inside an outer block."""
    half = to_dtype(dtype)
    if not half.is_half:
        raise TypeError(f"autocast: the type must be float16 or bfloat16, got {half.name}")
    before, AutocastMode.dtype = AutocastMode.dtype, half if enabled else None
    try:
        yield
    finally:
        AutocastMode.dtype = before


def lowered(*tensors) -> tuple:
    """The operands of a multiplying op: float32 tensors in autocast's half type; anything else (None,
    ints, float64, a half type already) as it is. Outside autocast, all as they are."""
    half = AutocastMode.dtype
    if half is None:
        return tensors
    return tuple(t.cast(half) if t is not None and t.dtype is dtypes.float32 else t for t in tensors)


def widened(t):
    """The input of an op autocast keeps in float32: a half tensor in float32 inside a block, else t."""
    return t.cast(dtypes.float32) if AutocastMode.dtype is not None and t.dtype.is_half else t
