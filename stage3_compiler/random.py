"""The random state: a seed and a counter. Each draw of n numbers consumes n counter values, so
the numbers depend only on the seed and the order of draws (see csrc/random.c)."""

from __future__ import annotations

import time

from .buffer import Buffer
from .device import runtime_of
from .dtype import DType
from .engine import capture


class RandomState:
    seed: int = int(time.time_ns()) & 0xFFFFFFFFFFFFFFFF
    counter: int = 0


def manual_seed(seed: int = 0) -> None:
    RandomState.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    RandomState.counter = 0


def uniform_buffer(n: int, dtype: DType, buffer: type = Buffer) -> Buffer:
    """n uniform numbers in [0, 1) of a float dtype, the next n of the stream, in a `buffer` (the
    device's Buffer class): every device draws the same numbers for the same seed."""
    buf = buffer(n * dtype.itemsize)
    draw(buf, n, dtype)
    if capture.CAPTURING:  # a replay draws the next n again (engine/capture.py)
        capture.note_fixed(buf, f"{n} random numbers", lambda out: draw(out, n, dtype))
    return buf


def draw(buf, n: int, dtype: DType) -> None:
    runtime_of("rand", buf.device).rand_uniform(dtype, buf.ptr(0, dtype), n, RandomState.seed, RandomState.counter)
    RandomState.counter = (RandomState.counter + n) & 0xFFFFFFFFFFFFFFFF
