"""Sorting, written once on the Tensor API and shared by every stage (this file is byte-identical in
stage1, stage2 and stage3). Two ways, both stable, both with NaN as the largest value (last
ascending, first descending, as numpy and torch), and both moving values with `where`, so the
sorted values carry the gradient back to where they came from:
- Short lines rank: each element counts the elements that sort before it and goes to that slot.
  n^2 comparisons a line, in a few fused ops.
- Long lines (more than NETWORK_FROM) go through a bitonic sorting network: the line is padded to
  a power of two N, and log2(N) (log2(N) + 1) / 2 rounds of compare-exchange put it in order, each
  round pairing every element with the one a power of two away (a reshape to (.., N / 2j, 2, j)).
  Every element carries its index and ties are broken by it, so all keys differ, which makes the
  network stable. n log^2 n work.
"""

from __future__ import annotations

import math
from typing import Self

from .dtype import dtypes
from .errors import ArgumentError
from .hooks import TensorCore
from .shape import normalize_axis

NETWORK_FROM = 64


class SortingMixin(TensorCore):
    def _ranks(self, a: int, descending: bool) -> Self:
        """Where each element of a line along axis a goes in the stably sorted line: the count of
        elements that sort before it (smaller, or equal and earlier). NaN sorts as the largest
        value (last ascending, first descending, as numpy and torch). n^2 comparisons a line."""
        n = self.shape[a]
        xi, xj = self.unsqueeze(a + 1), self.unsqueeze(a)  # (.., n_i, 1, ..) and (.., 1, n_j, ..)
        ni, nj = xi != xi, xj != xj
        first = (xj > xi) | (nj & ~ni) if descending else (xj < xi) | (ni & ~nj)
        index = self.arange(n, device=self.device)
        earlier = (index.reshape(1, n) < index.reshape(n, 1)).reshape((1,) * a + (n, n) + (1,) * (self.ndim - a - 1))
        same = (xj == xi) | (ni & nj)
        return (first | (same & earlier)).sum(a + 1)

    def _network_sort(self, a: int, descending: bool) -> tuple[Self, Self]:
        x = self if a == self.ndim - 1 else self.transpose(a, -1)
        n = x.shape[-1]
        size = 1 << (n - 1).bit_length()
        lead = x.shape[:-1]
        # the padding sorts after every element: NaN ascending (ties with NaN go by index), the
        # lowest value descending
        fill = (math.nan if not descending else -math.inf) if x.dtype.is_float else x._extreme_value(not descending)
        values = x.pad(((0, 0),) * len(lead) + ((0, size - n),), fill)
        index = self.arange(size, device=self.device).reshape((1,) * len(lead) + (size,)).expand(lead + (size,))

        def before(u: Self, ui: Self, v: Self, vi: Self) -> Self:
            """Does (u, ui) sort before (v, vi)?"""
            nu, nv = u != u, v != v
            first = (u > v) | (nu & ~nv) if descending else (u < v) | (nv & ~nu)
            return first | (((u == v) | (nu & nv)) & (ui < vi))

        block = 2
        while block <= size:
            j = block // 2
            while j >= 1:
                pairs = lead + (size // (2 * j), 2, j)
                v, i = values.reshape(pairs), index.reshape(pairs)
                half = [tuple((k, k + 1) if d == len(lead) + 1 else None for d in range(len(pairs))) for k in (0, 1)]
                v0, v1 = v.shrink(half[0]), v.shrink(half[1])
                i0, i1 = i.shrink(half[0]), i.shrink(half[1])
                # blocks of `block` elements alternate direction, so each pair of them is bitonic
                down = self._like([(g * 2 * j // block) % 2 == 1 for g in range(size // (2 * j))], dtypes.bool)
                swap = before(v1, i1, v0, i0) != down.reshape((size // (2 * j), 1, 1))
                values = swap.where(v1, v0).cat(swap.where(v0, v1), dim=-2).reshape(lead + (size,))
                index = swap.where(i1, i0).cat(swap.where(i0, i1), dim=-2).reshape(lead + (size,))
                j //= 2
            block *= 2
        keep = tuple((0, n) if d == len(lead) else None for d in range(len(lead) + 1))
        values, index = values.shrink(keep).cast(self.dtype), index.shrink(keep)
        if a != self.ndim - 1:
            values, index = values.transpose(a, -1), index.transpose(a, -1)
        return values, index

    def sort(self, dim: int = -1, descending: bool = False) -> tuple[Self, Self]:
        """(values, indices), stable (torch's and tinygrad's sort); the values carry the gradient."""
        if self.ndim == 0:
            return self, self.full((), 0, dtypes.int64, self.device)
        a = normalize_axis("sort", dim, self.ndim, self.shape)
        n = self.shape[a]
        if n > NETWORK_FROM:
            return self._network_sort(a, descending)
        slots = self.arange(n, device=self.device).reshape((1,) * a + (n, 1) + (1,) * (self.ndim - a - 1))
        goes = self._ranks(a, descending).unsqueeze(a) == slots  # (.., slot, element, ..)
        values = goes.where(self.unsqueeze(a), self.full((), 0, self.dtype, self.device)).sum(a + 1)
        index = self.arange(n, device=self.device).reshape((1,) * (a + 1) + (n,) + (1,) * (self.ndim - a - 1))
        indices = goes.where(index, 0).sum(a + 1)
        return values.cast(self.dtype), indices.cast(dtypes.int64)

    def argsort(self, dim: int = -1, descending: bool = False) -> Self:
        return self.sort(dim, descending)[1]

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> tuple[Self, Self]:
        """The k largest (or smallest) along dim, as (values, indices), in sorted order."""
        a = normalize_axis("topk", dim, self.ndim, self.shape)
        n = self.shape[a] if self.ndim else 1
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= n:
            raise ArgumentError(f"topk: k must be an int in [0, {n}] for shape {self.shape} on dim {a}, got {k!r}")
        values, indices = self.sort(a, descending=largest)
        if self.ndim == 0:
            return values, indices
        keep = tuple((0, k) if d == a else None for d in range(self.ndim))
        return values.shrink(keep), indices.shrink(keep)
