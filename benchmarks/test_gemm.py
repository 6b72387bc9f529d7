"""The CPU GEMM leaderboard: every float32 rung of stage1's ladder, the numba and Python loops,
numpy/OpenBLAS and torch, timed in one run on square sizes and a few skinny/odd shapes, on 1
thread and (for the threaded ones) 2 threads.

- Before it is timed, every case is checked against float64 numpy (max |err| / max |ref| < 1e-5).
- Thread counts are set per case: the rungs by their `threads` argument, OpenBLAS through
  threadpoolctl, torch by torch.set_num_threads, numba by numba.set_num_threads. Serial
  implementations run on 1 thread only; slow ones (naive loops, the Python floor) only at small
  sizes (see FLOP_CAP), so the whole run stays near 15 minutes on 2 cores.
- The machine's peak is measured by benchmarks/peak.c in the same run; each result's extra_info
  holds the impl, its kind, the shape, threads, FLOPs, those peaks and the ISA the rungs were built
  for (AVX-512 or AVX2/FMA: -march=native picks it, so it names the machine too).

`nox -s gemm` runs it into benchmarks/results/gemm.json and renders the leaderboard
(benchmarks/gemm_leaderboard.py). SITP_GEMM_SIZES=64,256,1024 narrows the square sizes and
SITP_GEMM_THREADS=1 the thread counts; skinny shapes run unless SITP_GEMM_SKINNY=0."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

pytest.importorskip("numba", reason="numba is not installed (pip install .[gemm])")
threadpoolctl = pytest.importorskip("threadpoolctl", reason="threadpoolctl is not installed (pip install .[gemm])")

from benchmarks import gemm_numba as numba_loops  # noqa: E402
from benchmarks import peak  # noqa: E402
from stage1_ndarray import Tensor, gemm  # noqa: E402
from stage1_ndarray.ckernels import lib  # noqa: E402

try:
    import torch
except ImportError:  # torch is one competitor among several; the rest still run
    torch = None

SIZES = tuple(int(n) for n in os.environ.get("SITP_GEMM_SIZES", "64,128,256,512,1024,2048").split(","))
THREADS = tuple(int(t) for t in os.environ.get("SITP_GEMM_THREADS", "1,2").split(","))
# (M, N, K): a batch-1 linear layer, a small-batch one, a tall-skinny product, and odd sizes.
SKINNY = [(1, 4096, 1024), (64, 4096, 1024), (4096, 64, 1024), (1000, 1000, 1000), (127, 1031, 257)]
SHAPES = [(n, n, n) for n in SIZES] + (SKINNY if os.environ.get("SITP_GEMM_SKINNY", "1") != "0" else [])
FLOP_CAP = {"python_loop": 2 * 64**3, "01_naive": 2 * 512**3, "numba_naive": 2 * 512**3}
# stage3's generated GEMM: (a @ b) on stage3 Tensors, a reshape + expand + mul + sum lowered to a kernel
# (no MATMUL op), jitted so a timed call replays its kernels; options by the heuristics, or by BEAM
# (searched on the first call, BEAM_WIDTH wide, its winners cached on disk under $SITP_CACHE).
STAGE3 = {"stage3_heuristic": 0, "stage3_beam": int(os.environ.get("SITP_GEMM_BEAM", "4"))}
BEAM_MIN_FLOPS = 2 * 256**3  # BEAM searches only the larger squares (its search costs seconds per shape)
ROUND_BUDGET_S = 1.5  # timed seconds per case (at least MIN_ROUNDS rounds, at most 50)
MIN_ROUNDS = 3


def impls() -> dict[str, tuple[str, bool]]:
    """name -> (kind, threaded), in leaderboard order."""
    table = {name: ("rung", v.threaded) for name, v in gemm.variants().items()}
    table |= {name: ("numba" if name.startswith("numba") else "python", name in numba_loops.THREADED)
              for name in numba_loops.IMPLS}
    table |= {name: ("stage3", True) for name in STAGE3}
    table["numpy"] = ("vendor", True)
    if torch is not None:
        table["torch"] = ("vendor", True)
    return table


def cases() -> list[tuple[str, tuple[int, int, int], int]]:
    out = []
    for threads in THREADS:
        for shape in SHAPES:
            for name, (_, threaded) in impls().items():
                flops = 2 * shape[0] * shape[1] * shape[2]
                if (threads == 1 or threaded) and flops <= FLOP_CAP.get(name, float("inf")):
                    if name == "stage3_beam" and (flops < BEAM_MIN_FLOPS or len(set(shape)) != 1):
                        continue
                    out.append((name, shape, threads))
    return out


def isa() -> str:
    """The vector ISA the rungs were built for (-march=native): the leaderboard names it beside the CPU."""
    if lib.gemm_has_avx512():
        return "AVX-512"
    return "AVX2/FMA" if lib.gemm_has_avx2_fma() else "no AVX2 (the rungs' plain C fallbacks)"


@pytest.fixture(scope="session")
def peaks() -> dict[int, float]:
    return peak.measure(tuple(sorted(set(THREADS))))


_operands: dict = {}


def operands(shape):
    """(a, b, float64 reference) for a shape, made once: the reference is the slow part."""
    if shape not in _operands:
        _operands.clear()  # keep one shape's arrays alive at a time (2048^2 float64 is 32 MiB)
        M, N, K = shape
        rng = np.random.default_rng(M * 31 + N * 7 + K)
        a = rng.standard_normal((M, K), dtype=np.float32)
        b = rng.standard_normal((K, N), dtype=np.float32)
        _operands[shape] = (a, b, a.astype(np.float64) @ b.astype(np.float64))
    return _operands[shape]


def runner(name: str, a: np.ndarray, b: np.ndarray, threads: int):
    """A no-argument callable computing a @ b with `threads` threads, and a function reading its result."""
    M, N = a.shape[0], b.shape[1]
    if name in gemm.variants():
        ta, tb, tc = Tensor(a), Tensor(b), Tensor(np.empty((M, N), np.float32))
        return (lambda: gemm.gemm(ta, tb, tc, variant=name, threads=threads)), tc.numpy
    if name in STAGE3:
        return stage3_runner(STAGE3[name], a, b, threads)
    if name == "numpy":
        c = np.empty((M, N), np.float32)
        return (lambda: np.matmul(a, b, out=c)), lambda: c
    if name == "torch":
        torch.set_num_threads(threads)
        ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.empty((M, N), dtype=torch.float32)
        return (lambda: torch.mm(ta, tb, out=tc)), lambda: tc.numpy()
    numba_loops.set_threads(threads)
    run, box = numba_loops.IMPLS[name], {}
    return (lambda: box.__setitem__("c", run(a, b))), lambda: box["c"]


def stage3_runner(beam: int, a: np.ndarray, b: np.ndarray, threads: int):
    """stage3's a @ b under TinyJit with `threads` threads: the first call compiles (and under BEAM
    searches), the second captures, later ones replay the kernels (the padded copies of 4 KiB-row
    operands included: they are part of what the generated GEMM costs)."""
    import stage3_compiler as s3
    from stage3_compiler.threads import set_num_threads

    set_num_threads(threads)
    ta, tb = s3.Tensor(a).realize(), s3.Tensor(b).realize()
    matmul = s3.TinyJit(lambda x, y: x @ y)
    box = {}
    old = os.environ.get("BEAM")
    os.environ["BEAM"] = str(beam)
    try:
        for _ in range(3):
            box["c"] = matmul(ta, tb)
    finally:
        os.environ.pop("BEAM") if old is None else os.environ.__setitem__("BEAM", old)
    return (lambda: box.__setitem__("c", matmul(ta, tb))), lambda: box["c"].numpy()


@pytest.fixture(scope="session", autouse=True)
def compiled_numba():
    numba_loops.warm_up()


@pytest.mark.parametrize("name,shape,threads", cases(),
                         ids=[f"{n}-{s[0]}x{s[1]}x{s[2]}-t{t}" for n, s, t in cases()])
def test_gemm(benchmark, peaks, name, shape, threads):
    a, b, reference = operands(shape)
    kind, _ = impls()[name]
    with threadpoolctl.threadpool_limits(limits=threads, user_api="blas"):
        time.sleep(0.2)  # let the previous case's spinning worker threads (OpenMP, OpenBLAS) go idle
        run, result = runner(name, a, b, threads)
        start = time.perf_counter()
        run()
        first = time.perf_counter() - start
        err = np.abs(result().astype(np.float64) - reference).max() / max(np.abs(reference).max(), 1e-30)
        assert err < 1e-5, f"{name} {shape} on {threads} thread(s): relative error {err:.2e} against float64 numpy"
        M, N, K = shape
        benchmark.group = f"{M}x{N}x{K} t{threads}"
        benchmark.extra_info.update(impl=name, kind=kind, threads=threads, M=M, N=N, K=K, flops=2 * M * N * K,
                                    peak_flops={str(t): p for t, p in peaks.items()}, max_rel_err=float(err),
                                    isa=isa())
        iterations = max(1, round(1e-3 / max(first, 1e-7)))  # a round of at least ~1 ms: the timer's noise vanishes
        rounds = max(MIN_ROUNDS, min(50, int(ROUND_BUDGET_S / (first * iterations))))
        benchmark.pedantic(run, rounds=rounds, iterations=iterations, warmup_rounds=1)
