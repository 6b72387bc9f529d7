"""Reductions. The IR has REDUCE_ADD, REDUCE_MAX (and REDUCE_MUL for prod) over any set of axes,
keeping them as size-1 dims; min, argmax, argmin and cumsum are written on them, and so are the
composites (mean, var, softmax, logsumexp), stage1's text again."""

from __future__ import annotations

import math
from typing import Self

from .autocast import widened
from .autograd import record
from .dtype import dtypes, float_of, rounds_once
from .errors import ArgumentError
from .hooks import TensorCore
from .ops import Ops
from .shape import normalize_axes, normalize_axis, prod


class ReduceMixin(TensorCore):
    def _reduce(self, op: Ops, name: str, axis=None, keepdim: bool = False) -> Self:
        axes = normalize_axes(name, axis, self.ndim, self.shape)
        if op in (Ops.REDUCE_MAX, Ops.REDUCE_MIN) and any(self.shape[a] == 0 for a in axes):
            raise ArgumentError(f"{name}: cannot reduce an empty dim (shape {self.shape}, axis {axis}); "
                                "the op has no identity")
        if op is Ops.REDUCE_MIN:  # min(x) = -max(-x) for floats; ~ reverses the order of ints and bools
            flip = (lambda t: -t) if self.dtype.is_float else (lambda t: ~t)
            return flip(flip(self)._reduce(Ops.REDUCE_MAX, name, axis, keepdim))
        x = self._make(self.lazydata.reduce(op, axes))
        if not keepdim:
            x = x._make(x.lazydata.reshape(tuple(n for d, n in enumerate(self.shape) if d not in axes)))
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
        # The first position that holds the extreme (or a NaN, which numpy's argmax and argmin return):
        # counting down n, n-1, ..., 1 along the axis, the largest count among the hits is the first.
        n = self.shape[a]
        best = self.max(a, keepdim=True) if op is Ops.ARGMAX else self.min(a, keepdim=True)
        hit = (self == best) | (self != self)
        count = self.arange(n, 0, -1, device=self.device).reshape(tuple(n if d == a else 1 for d in range(self.ndim)))
        out = n - hit.where(count, 0).max(a, keepdim=keepdim)
        return out.cast(dtypes.int64)

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
        # out[i] = sum over j <= i of x[j]: x seen along a new axis next to a, kept where j <= i.
        x, n = self._wide(), self.shape[a]
        j = x.unsqueeze(a)  # (.., 1, n, ..): the summed index j on axis a + 1
        keep = self.arange(n, device=self.device).reshape(-1, 1) >= self.arange(n, device=self.device).reshape(1, -1)
        keep = keep.reshape((1,) * a + (n, n) + (1,) * (self.ndim - a - 1))
        return keep.where(j, x.full((), 0, x.dtype, x.device)).sum(a + 1)

    def softmax(self, axis: int = -1) -> Self:
        x = widened(self)  # (autocast: in float32)
        x = x.cast(float_of(x.dtype))
        e = (x - x.max(axis, keepdim=True)).exp()
        return e / e.sum(axis, keepdim=True)

    def log_softmax(self, axis: int = -1) -> Self:
        x = widened(self)  # (autocast: in float32)
        x = x.cast(float_of(x.dtype))
        shifted = x - x.max(axis, keepdim=True)
        return shifted - shifted.exp().sum(axis, keepdim=True).log()

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

