"""Checks that only the data can answer: every value of an index tensor lies in [0, high).

The shapes, dtypes and devices of a call are checked at the call, from the graph alone. Whether an
index is in range depends on the values, so the check needs them back from the kernels: the
lowest and the highest index, two reductions, read back as two numbers.

- `check_now` realizes them at the call and raises there (getitem with index tensors, whose
  error belongs to the line that indexed).
- `check_later` lets the graph stay lazy (a loss's labels): the two reductions wait in PENDING
  and the next realize computes them with whatever it computes, in the same kernels where they
  share a loop (cross_entropy's mean over the rows reduces the same axis), then raises before it
  returns. The gathers these checks guard are one-hot masks, never memory reads at the index, so a
  kernel that ran with a bad index read nothing out of bounds: it only computed a wrong value,
  which the raise stops before anyone sees it.

Inside a TinyJit capture each check is a step of the capture (capture.py), so a replay checks the
call's own values after the kernel that computed them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import capture


@dataclass
class RangeCheck:
    low: Any  # LazyBuffers of shape (): the lowest and the highest index
    top: Any
    high: int  # every index must be < high
    fail: Callable[[int, int], Exception]  # (lowest, highest) -> the error to raise; holds plain values


PENDING: list[RangeCheck] = []  # check_later's, for the next realize (engine/realize.py)


def bounds(t) -> tuple:
    """The int tensor t's lowest and highest value, as two lazy 0-d tensors (one loop when realized together)."""
    flat = t.flatten()
    return flat.min(), flat.max()


def check_now(t, high: int, fail: Callable[[int, int], Exception]) -> None:
    """Raise fail(lowest, highest) now unless every value of t lies in [0, high)."""
    if not t.numel():
        return
    low, top = bounds(t)
    low.realize(top)
    verify(RangeCheck(low.lazydata, top.lazydata, high, fail))


def check_later(t, high: int, fail: Callable[[int, int], Exception]) -> None:
    """The same check, made by the next realize (the graph stays lazy until then)."""
    if not t.numel():
        return
    low, top = bounds(t)
    PENDING.append(RangeCheck(low.lazydata, top.lazydata, high, fail))


def take_pending() -> list[RangeCheck]:
    """The checks waiting for a realize, handed over once."""
    out = PENDING[:]
    PENDING.clear()
    return out


def verify(check: RangeCheck) -> None:
    """Read the realized bounds back and raise the check's error if an index is out of range."""
    low_buf, top_buf = check.low.realized, check.top.realized
    if capture.CAPTURING:
        capture.note_check(check.fail, low_buf, top_buf, check.high, check.low.dtype)
    low, top = int(low_buf.to_numpy(0, 1, check.low.dtype)[0]), int(top_buf.to_numpy(0, 1, check.top.dtype)[0])
    if low < 0 or top >= check.high:
        raise check.fail(low, top)
