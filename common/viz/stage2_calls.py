"""stage2's kernel calls, counted and timed, for the page's side-by-side: stage2 runs each op of a Tensor
program eagerly, as one call (or a few) of its C kernels, where stage3 fuses them into fewer kernels.

The calls are caught by Python's profiler hook (sys.setprofile): each call of a function of stage2's
compiled library (a `c_call` event whose function is one of the library's) until it returns. stage2 itself
is not changed, and nothing runs while no count is on. (Its cuda device's launches, through CuPy, are not
counted.)
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from contextlib import contextmanager

from stage2_autograd.ckernels import lib


@contextmanager
def counting():
    """`with counting() as calls:` counts stage2's C kernel calls in the block: calls() -> the record."""
    functions = {id(getattr(lib, n)): n for n in dir(lib) if callable(getattr(lib, n))}
    counts, seconds, started = defaultdict(int), defaultdict(float), []

    def hook(frame, event, arg) -> None:
        if event == "c_call" and id(arg) in functions:
            started.append((functions[id(arg)], time.perf_counter()))
        elif event in ("c_return", "c_exception") and id(arg) in functions and started:
            name, start = started.pop()
            counts[name] += 1
            seconds[name] += time.perf_counter() - start

    def record() -> dict:
        by_count = sorted(counts.items(), key=lambda kv: -kv[1])
        calls = [{"name": n, "count": c, "seconds": seconds[n]} for n, c in by_count]
        return {"calls": calls, "total": sum(counts.values()), "seconds": sum(seconds.values())}

    sys.setprofile(hook)
    try:
        yield record
    finally:
        sys.setprofile(None)
