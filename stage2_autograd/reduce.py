"""Reductions. The C kernel reduces the middle axis of an (O, R, I) view; a reduction over several
axes runs once per run of neighbouring axes, last run first, so earlier axis numbers stay valid."""

from __future__ import annotations

import math
from typing import Self

from .autocast import widened
from .autograd import no_grad, record
from .ckernels import ffi
from .device import check
from .dtype import compute_of, dtypes, float_of, rounds_once
from .errors import ArgumentError
from .hooks import TensorCore
from .ops import Ops
from .shape import normalize_axes, normalize_axis, prod, reshape_strides


def _runs(axes: tuple[int, ...]) -> list[tuple[int, int]]:
    """Sorted axes grouped into [start, end) runs of neighbours."""
    runs: list[tuple[int, int]] = []
    for a in sorted(axes):
        if runs and runs[-1][1] == a:
            runs[-1] = (runs[-1][0], a + 1)
        else:
            runs.append((a, a + 1))
    return runs


def _as_ori(x, start: int, end: int):
    """View x as (O, R, I) with R = dims [start, end); copy first if the dims cannot merge."""
    ori = (prod(x.shape[:start]), prod(x.shape[start:end]), prod(x.shape[end:]))
    strides = reshape_strides(x.shape, x._strides, ori)
    if strides is None:
        x = x.contiguous()
        strides = reshape_strides(x.shape, x._strides, ori)
    return x, ori, strides


class ReduceMixin(TensorCore):
    def _reduce(self, op: Ops, name: str, axis=None, keepdim: bool = False) -> Self:
        axes = normalize_axes(name, axis, self.ndim, self.shape)
        if op in (Ops.REDUCE_MAX, Ops.REDUCE_MIN) and any(self.shape[a] == 0 for a in axes):
            raise ArgumentError(f"{name}: cannot reduce an empty dim (shape {self.shape}, axis {axis}); "
                                "the op has no identity")
        if compute_of(self.dtype) is not self.dtype:  # half types in float32, narrow ints in int64
            return self.cast(compute_of(self.dtype))._reduce(op, name, axis, keepdim).cast(self.dtype)
        x = self
        for start, end in reversed(_runs(axes)):
            x, (O, R, I), (so, sr, si) = _as_ori(x, start, end)
            out = x._alloc(x.shape[:start] + x.shape[end:], x.dtype)
            check(x._buf.kernels.reduce(op, x.dtype.code, out._ptr(), x._ptr(), O, R, I, so, sr, si), "reduce", name, x)
            x = out
        if keepdim:
            x = x.reshape(tuple(1 if d in axes else n for d, n in enumerate(self.shape)))
        return record(x, op, (self,), axes=axes)

    def _wide(self) -> Self:
        """Sums and products of bool and of every int accumulate in int64, as torch's do (uint64's
        bits wrap alike in int64)."""
        return self.cast(dtypes.int64) if self.dtype is dtypes.bool or self.dtype.is_int else self

    def sum(self, axis=None, keepdim: bool = False, dtype=None) -> Self:
        """dtype: cast to it first, and accumulate in it (torch's and tinygrad's)."""
        return (self._wide() if dtype is None else self.cast(dtype))._reduce(Ops.REDUCE_ADD, "sum", axis, keepdim)

    def prod(self, axis=None, keepdim: bool = False, dtype=None) -> Self:
        """dtype: cast to it first, and accumulate in it (torch's and tinygrad's)."""
        return (self._wide() if dtype is None else self.cast(dtype))._reduce(Ops.REDUCE_MUL, "prod", axis, keepdim)

    def max(self, axis=None, keepdim: bool = False) -> Self:
        return self._reduce(Ops.REDUCE_MAX, "max", axis, keepdim)

    def min(self, axis=None, keepdim: bool = False) -> Self:
        return self._reduce(Ops.REDUCE_MIN, "min", axis, keepdim)

    def mean(self, axis=None, keepdim: bool = False) -> Self:
        axes = normalize_axes("mean", axis, self.ndim, self.shape)
        count = prod(self.shape[a] for a in axes)
        total = self.cast(float_of(self.dtype)).sum(axis, keepdim)
        return total / count if count else total * float("nan")

    @rounds_once
    def var(self, axis=None, keepdim: bool = False, correction: int = 1) -> Self:
        axes = normalize_axes("var", axis, self.ndim, self.shape)
        x = self.cast(float_of(self.dtype))
        deviation = x - x.mean(axis, keepdim=True)
        n = prod(self.shape[a] for a in axes) - correction
        total = deviation.square().sum(axis, keepdim)
        # no degrees of freedom left: torch's total / 0, inf (or nan where every deviation is 0)
        return total / n if n > 0 else total * math.inf

    @rounds_once
    def std(self, axis=None, keepdim: bool = False, correction: int = 1) -> Self:
        # sqrt's slope is infinite at 0; a slice with no variance gets gradient 0, as in torch, so the root is
        # taken only where the variance is not 0
        var = self.var(axis, keepdim, correction)
        still = var == 0
        return still.where(0.0, still.where(1.0, var).sqrt())

    def _arg_reduce(self, op: Ops, name: str, axis=None, keepdim: bool = False) -> Self:
        if axis is None:
            out = self.flatten()._arg_reduce(op, name, 0)
            return out.reshape((1,) * self.ndim) if keepdim else out
        a = normalize_axis(name, axis, self.ndim, self.shape)
        if self.ndim == 0:
            return self.full((), 0, dtypes.int64, self.device)
        if self.shape[a] == 0:
            raise ArgumentError(f"{name}: cannot take {name} of an empty dim (shape {self.shape}, axis {axis})")
        x, (O, R, I), (so, sr, si) = _as_ori(self.cast(compute_of(self.dtype)), a, a + 1)
        out = x._alloc(x.shape[:a] + x.shape[a + 1:], dtypes.int64)
        index_ptr = ffi.cast("int64_t *", out._ptr())
        check(x._buf.kernels.arg_reduce(op, x.dtype.code, index_ptr, x._ptr(), O, R, I, so, sr, si),
              "arg_reduce", name, x)
        return out.unsqueeze(a) if keepdim else out

    def argmax(self, axis=None, keepdim: bool = False) -> Self:
        return self._arg_reduce(Ops.ARGMAX, "argmax", axis, keepdim)

    def argmin(self, axis=None, keepdim: bool = False) -> Self:
        return self._arg_reduce(Ops.ARGMIN, "argmin", axis, keepdim)

    def cumsum(self, axis: int | None = 0) -> Self:
        if axis is None:
            return self.flatten().cumsum(0)
        a = normalize_axis("cumsum", axis, self.ndim, self.shape)
        if self.ndim == 0:
            return self._wide().reshape(1).cumsum(0).reshape(())
        if self.dtype.is_half:  # accumulated in float32, each running sum rounded once
            return self.cast(dtypes.float32).cumsum(a).cast(self.dtype)
        x, (O, R, I), (so, sr, si) = _as_ori(self._wide(), a, a + 1)
        out = x._alloc(x.shape, x.dtype)
        check(x._buf.kernels.cumsum(x.dtype.code, out._ptr(), x._ptr(), O, R, I, so, sr, si), "cumsum", "cumsum", x)
        return record(out, Ops.CUMSUM, (x,), axis=a)

    # softmax and log_softmax are promoted to primitives with their own rules (autograd.py) for
    # speed: the chain rule through max, exp, sum and div walks the data many more times than the
    # fused rules. Measured fwd+bwd, medians of one run: attention's (12, 4, 64, 64) softmax
    # 3.7 -> 2.3 ms, log_softmax + NLL on (768, 65) 1.4 -> 1.0 ms. The forward is stage1's text,
    # run without recording.

    def softmax(self, axis: int = -1) -> Self:
        x = widened(self)  # (autocast: in float32)
        x = x.cast(float_of(x.dtype))
        with no_grad():
            e = (x - x.max(axis, keepdim=True)).exp()
            out = e / e.sum(axis, keepdim=True)
        return record(out, Ops.SOFTMAX, (x,), axis=axis)

    def log_softmax(self, axis: int = -1) -> Self:
        x = widened(self)  # (autocast: in float32)
        x = x.cast(float_of(x.dtype))
        with no_grad():
            shifted = x - x.max(axis, keepdim=True)
            out = shifted - shifted.exp().sum(axis, keepdim=True).log()
        return record(out, Ops.LOG_SOFTMAX, (x,), axis=axis)

    def logsumexp(self, axis=None, keepdim: bool = False) -> Self:
        x = self.cast(float_of(self.dtype))
        m = x.max(axis, keepdim=True)
        # an all -inf row has max -inf; shift by 0 there so the result is -inf, not nan
        m = (m == float("-inf")).where(0.0, m)
        out = (x - m).exp().sum(axis, keepdim=True).log() + m
        return out if keepdim else out.squeeze_axes(normalize_axes("logsumexp", axis, self.ndim, self.shape))

    def squeeze_axes(self, axes: tuple[int, ...]) -> Self:
        """Drop the given size-1 axes (keepdim=False for composites)."""
        return self.reshape(tuple(n for d, n in enumerate(self.shape) if d not in axes))

