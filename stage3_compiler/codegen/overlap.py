"""The overlap pass: a register tile whose lanes do not divide its axis.

UPCAST(axis, n) computes n neighbouring outputs a pass, so in the core n must divide the axis. A
matmul's best tile need not be a power of two: on AVX2's 16 vector registers it is 6 rows of 16
columns (12 accumulators, enough independent multiply-adds to keep both FMA pipes busy), and 6
divides few row counts (not 1024). Without this pass such a matmul falls back to the largest power
of two that divides (4 rows, 8 accumulators), a tile that leaves the pipes waiting.

With it, the axis of `size` outputs takes ceil(size / n) passes, and pass g starts at
(g * (size - n)) // (passes - 1): the first pass at 0, the last at size - n, the others spread
between, each at most n after the one before. Neighbouring passes then share a few outputs (size
rounded up to whole passes, less size: a handful of rows in a thousand), which both compute and
store. Each output is computed the same way in either pass, so it gets the same bits: the second
store writes the value the first wrote. The start is one division of the pass index by a constant,
outside the reduce loop, and its bounds are exact (0 to size - n), so no load needs clamping.

Storing an output twice is harmless only when the kernel does not read what it writes: a kernel
that writes in place (an assign, `ScheduleItem.in_place`) would read, in the second pass, a value
the first pass already replaced. Such a kernel keeps the core's rule.
"""

from __future__ import annotations

from ..graph.symbolic import Node, floordiv, mul
from ..passes import Pass, on
from .indexing import passes_of
from .item import ScheduleItem
from .renderer import Renderer

# The shortest axis (in tiles) that takes a tile not dividing it: 16 passes recompute at most
# 1/16 of the axis' outputs (a tile of 6 on 96 rows: 16 passes, 0 recomputed; on 100: 17, 2).
LEAST_PASSES = 16


def overlaps(item: ScheduleItem, size: int, lanes: int, renderer: Renderer) -> bool:
    """May UPCAST take `lanes` outputs a pass on an axis of `size` that they do not divide? (A CPU
    kernel's loops only: a GPU thread's place in the grid is its lanes' start, and no rule here moves it.)"""
    return on(Pass.OVERLAP) and not renderer.grid and not item.in_place and item.online is None and lanes < size


def tile_lanes(item: ScheduleItem, size: int, most: int, fallback: int, renderer: Renderer) -> int:
    """A tile axis's lanes: `most` where the overlap pass may take it on an axis long enough to waste
    little (LEAST_PASSES), else `fallback` (the largest power of two that divides the axis)."""
    if fallback < most and size >= LEAST_PASSES * most and overlaps(item, size, most, renderer):
        return most
    return fallback


def pass_start(g: Node, size: int, lanes: int) -> Node:
    """The first output of pass g on an axis of `size` that `lanes` do not divide."""
    return floordiv(mul(g, size - lanes), passes_of(size, lanes) - 1)
