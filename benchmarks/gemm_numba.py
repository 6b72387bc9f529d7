"""The same loops as the first C rungs, in Python: the "accelerating interpreted languages" lesson.

- ``python_loop``: the triple loop on lists, interpreted: the floor (small n only).
- ``numba_naive``: rung 01's i-j-k loops, compiled by numba (LLVM), one thread.
- ``numba_reordered``: rung 02's i-k-j loops, unit stride in the inner loop, one thread.
- ``numba_parallel``: the i-k-j loops with the rows of C split across threads (``prange``).

Each takes float32 arrays (a (M, K), b (K, N)) and returns C (M, N); the numba ones are compiled
on first call (``warm_up`` does that before timing). No fastmath: like the C rungs, they keep
IEEE semantics, so the compiler may not reassociate the naive loop's sum.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange


def python_loop(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    A, B = a.tolist(), b.tolist()
    M, K, N = len(A), len(B), len(B[0]) if B else 0
    C = [[0.0] * N for _ in range(M)]
    for i in range(M):
        for j in range(N):
            acc = 0.0
            for k in range(K):
                acc += A[i][k] * B[k][j]
            C[i][j] = acc
    return np.array(C, dtype=np.float32).reshape(M, N)


@njit(cache=False)
def _naive(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    for i in range(M):
        for j in range(N):
            acc = np.float32(0.0)
            for k in range(K):
                acc += a[i, k] * b[k, j]
            c[i, j] = acc


@njit(cache=False)
def _reordered(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    c[:, :] = 0
    for i in range(M):
        for k in range(K):
            aik = a[i, k]
            for j in range(N):
                c[i, j] += aik * b[k, j]


@njit(cache=False, parallel=True)
def _parallel(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    for i in prange(M):
        for j in range(N):
            c[i, j] = 0
        for k in range(K):
            aik = a[i, k]
            for j in range(N):
                c[i, j] += aik * b[k, j]


def _runner(kernel):
    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        c = np.empty((a.shape[0], b.shape[1]), dtype=np.float32)
        kernel(a, b, c)
        return c

    return run


numba_naive = _runner(_naive)
numba_reordered = _runner(_reordered)
numba_parallel = _runner(_parallel)
IMPLS = {"python_loop": python_loop, "numba_naive": numba_naive, "numba_reordered": numba_reordered,
         "numba_parallel": numba_parallel}
THREADED = {"numba_parallel"}


def set_threads(n: int) -> None:
    numba.set_num_threads(n)


def warm_up() -> None:
    """Compile every numba kernel once for float32 2-D arrays, so no timing includes the compiler."""
    a = np.ones((3, 2), np.float32)
    b = np.ones((2, 4), np.float32)
    for name, run in IMPLS.items():
        if name != "python_loop":
            run(a, b)
