"""The one thread setting every threaded kernel follows: the THREAD option (codegen/opts.py) splits a
generated kernel across this many threads, and the heuristics and BEAM key their choices by it
(a kernel compiled for 2 threads is another kernel than for 1). The default is
``$OMP_NUM_THREADS`` (its first entry), else every core this process may run on (its affinity
mask); ``Tensor.set_num_threads(n)`` changes it for the process. One process per core (data
parallel) and a user sharing a machine both need the count honoured.
"""

from __future__ import annotations

import os


def available() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def check_threads(n, source: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: {source} must be a positive int, got {n!r}")
    return n


def from_environment() -> int:
    """$OMP_NUM_THREADS (OpenMP's own syntax allows a list per nesting level: the first counts), else every core."""
    raw = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if not raw:
        return available()
    try:
        return check_threads(int(raw), "OMP_NUM_THREADS")
    except ValueError:
        raise ValueError(f"set_num_threads: OMP_NUM_THREADS must be a positive int, got {raw!r}") from None


class ThreadState:
    count: int = from_environment()


def get_num_threads() -> int:
    return ThreadState.count


def set_num_threads(n: int) -> None:
    """Every threaded kernel uses n threads from now on (the OpenMP loops at most n)."""
    ThreadState.count = check_threads(n, "n")
