"""Scatter and boolean-mask selection, written once on the Tensor API and shared by every stage (this
file is byte-identical in stage1, stage2 and stage3).

Both move elements to positions that data names, which no primitive addresses directly. So each
source element is compared with every target position (a one-hot mask), and a reduction over the
sources collects what lands on each target; backward flows through the same select and reduction.
That is m x n work along the scattered dim: right for the sizes models scatter (class scores,
pooling indices, a batch's rows), not for millions of targets.
"""

from __future__ import annotations

import math
from typing import Self

from .dtype import dtypes
from .errors import ArgumentError
from .hooks import TensorCore
from .shape import normalize_axis

_REDUCES = ("sum", "prod", "mean", "amax", "amin")


class ScatterMixin(TensorCore):
    def scatter(self, dim: int, index: Self, src, reduce: str | None = None) -> Self:
        """A copy of self with src[i] written at index[i] along dim (torch's scatter): src is a tensor
        at least as large as index, or a scalar. Where an index repeats, the last source along dim
        wins (torch leaves that undefined); reduce="add" or "multiply" combines them with self instead."""
        reduces = {None: None, "add": "sum", "multiply": "prod"}
        if reduce not in reduces:
            raise ArgumentError(f"scatter: reduce must be None, 'add' or 'multiply', got {reduce!r}")
        return self._scatter("scatter", dim, index, src, reduces[reduce], True)

    def scatter_reduce(self, dim: int, index: Self, src, reduce: str, include_self: bool = True) -> Self:
        """Combine every src[i] landing on a position with reduce ("sum", "prod", "mean", "amax",
        "amin"), and with self's value there when include_self (torch's scatter_reduce). Positions
        nothing lands on keep self's value; an integer mean rounds down, as torch's."""
        if reduce not in _REDUCES:
            raise ArgumentError(f"scatter_reduce: reduce must be one of {_REDUCES}, got {reduce!r}")
        return self._scatter("scatter_reduce", dim, index, src, reduce, include_self)

    def _scatter(self, name: str, dim: int, index: Self, src, reduce: str | None, include_self: bool) -> Self:
        d = normalize_axis(name, dim, self.ndim, self.shape)
        if not isinstance(index, TensorCore) or index.dtype.is_float or index.dtype is dtypes.bool:
            raise TypeError(f"{name}: index must be an int tensor, got {getattr(index, 'dtype', type(index))}")
        if not isinstance(src, TensorCore):
            src = self.full(index.shape, src, self.dtype, self.device)
        if (index.ndim != self.ndim or src.ndim != self.ndim
                or any(i > s for i, s in zip(index.shape, src.shape, strict=True))
                or any(i > n for k, (i, n) in enumerate(zip(index.shape, self.shape, strict=True)) if k != d)):
            raise ArgumentError(f"{name}: index {index.shape} must have the dims of self {self.shape} and src "
                                f"{src.shape}, and be no larger than src, nor than self except on dim {d}")
        n = self.shape[d]
        if index.numel() and (int(index.min().item()) < 0 or int(index.max().item()) >= n):
            raise IndexError(f"{name}: index values must lie in [0, {n}) for self {self.shape} on dim {d}")
        if index.numel() == 0:
            return self
        src = src.shrink(tuple((0, i) for i in index.shape)).cast(self.dtype).unsqueeze(d + 1)
        base = self.shrink(tuple((0, n) if k == d else (0, i) for k, i in enumerate(index.shape)))
        # hit[.., j, p, ..] (j on dim d, p on dim d + 1): does source j land on target p?
        positions = self.arange(n, device=self.device).reshape((1,) * (d + 1) + (n,) + (1,) * (self.ndim - d - 1))
        hit = index.unsqueeze(d + 1) == positions
        landed = hit.sum(d)
        touched = landed > 0

        def collect(empty, how: str, hits: Self = hit) -> Self:
            return getattr(hits.where(src, self.full((), empty, self.dtype, self.device)), how)(d).cast(self.dtype)

        if reduce is None:  # the source with the largest j among those landing on p
            m = index.shape[d]
            order = self.arange(m, device=self.device).reshape((1,) * d + (m,) + (1,) * (self.ndim - d))
            last = hit.where(order, -1).max(d, keepdim=True)
            out = touched.where(collect(0, "sum", hit & (order == last)), base)
        elif reduce == "sum":
            out = base + collect(0, "sum") if include_self else touched.where(collect(0, "sum"), base)
        elif reduce == "prod":
            out = base * collect(1, "prod") if include_self else touched.where(collect(1, "prod"), base)
        elif reduce in ("amax", "amin"):
            largest = reduce == "amax"
            got = collect(self._extreme_value(not largest), "max" if largest else "min")
            both = base.maximum(got) if largest else base.minimum(got)
            out = both if include_self else touched.where(got, base)
        else:  # mean: the sources and (with include_self) self's value, over their count
            total = hit.where(src, self.full((), 0, self.dtype, self.device)).sum(d) + (base if include_self else 0)
            count = (landed + 1 if include_self else landed).maximum(1)  # never 0: 0 * (1/0) in backward is nan
            mean = total / count if self.dtype.is_float else (total.cast(dtypes.float64) / count).floor()
            out = mean.cast(self.dtype) if include_self else touched.where(mean.cast(self.dtype), base)
        if out.shape == self.shape:
            return out.cast(self.dtype)
        grow = tuple((0, s - r) for s, r in zip(self.shape, out.shape, strict=True))
        inside = self.full(out.shape, True, dtypes.bool, self.device).pad(grow)
        return inside.where(out.cast(self.dtype).pad(grow), self)

    def _select_mask(self, mask: Self) -> Self:
        """x[mask] for a bool mask over x's leading dims (numpy's rule): the selected rows, in order, as
        one dim. Their count is read back to Python once; row i goes to slot k when it is selected and
        k selected rows precede it."""
        mask = mask.to(self.device)
        if mask.ndim > self.ndim or mask.shape != self.shape[:mask.ndim]:
            raise IndexError(f"getitem: a boolean index of shape {mask.shape} must match the leading dims of "
                             f"{self.shape}")
        rows, rest = math.prod(mask.shape), self.shape[mask.ndim:]
        m = mask.reshape(rows)
        k = int(m.sum().item())
        slot = m.cast(dtypes.int64).cumsum(0) - 1
        goes = m.reshape(1, rows) & (slot.reshape(1, rows) == self.arange(k, device=self.device).reshape(k, 1))
        picked = goes.reshape((k, rows) + (1,) * len(rest)).where(self.reshape((1, rows) + rest),
                                                                  self.full((), 0, self.dtype, self.device))
        return picked.sum(1).cast(self.dtype)
