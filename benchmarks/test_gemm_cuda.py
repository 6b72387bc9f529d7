"""The CUDA GEMM ladder on a GPU: every rung checked against cuBLAS, then timed against cuBLAS at
the same precision in the same run.

- correctness (fast): every rung on awkward shapes (1x1x1, primes, non-multiples of the tiles,
  a base pointer off 16-byte alignment), with alpha and beta, against cupy.matmul in FP32;
  beta == 0 must not read C (it starts as NaN).
- benchmarks: rung x n for n in SIZES (square), each result checked against cuBLAS before it is
  timed; cuBLAS SGEMM (true FP32: CUPY_TF32 must be unset) and cuBLAS BF16 (gemmEx, bf16 inputs,
  FP32 accumulation and output) timed alike. A round launches a batch of kernels and then
  synchronises, so launch and sync overheads vanish into the batch; extra_info holds the batch
  size, the FLOPs, the GPU and its peaks (FP32 measured by an FMA microbenchmark, BF16 tensor
  from the SM count and clock).

Skips with a reason without CuPy or a GPU. `nox -s gemm_cuda` runs it into
benchmarks/results/gemm_cuda.json and renders the leaderboard; SITP_GEMM_SIZES=1024,2048 narrows
the sizes."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

try:
    import cupy
except ImportError:
    pytest.skip("CuPy is not installed: the CUDA GEMM suite runs on a GPU machine", allow_module_level=True)
try:
    GPUS = cupy.cuda.runtime.getDeviceCount()
except cupy.cuda.runtime.CUDARuntimeError:
    GPUS = 0
if GPUS == 0:
    pytest.skip("no CUDA GPU visible to CuPy", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]
SIZES = tuple(int(n) for n in os.environ.get("SITP_GEMM_SIZES", "1024,2048,4096,8192").split(","))
ROUND_SECONDS = 0.05  # one timed round: enough launches to fill this
BUDGET_SECONDS = 1.0  # per case, at least MIN_ROUNDS rounds
MIN_ROUNDS = 3


def _load_gemm():
    spec = importlib.util.spec_from_file_location("sitp_cuda_gemm", ROOT / "stage2_autograd" / "cuda" / "gemm.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gemm = _load_gemm()
RUNGS = list(gemm.variants())


# ---- inputs and oracles ----


def to_bf16_bits(x):
    """float32 -> bfloat16 bit patterns (uint16), rounding to nearest even (finite inputs)."""
    u = x.astype(cupy.float32).view(cupy.uint32)
    return ((u + cupy.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(cupy.uint16)


def from_bf16_bits(b):
    return (b.astype(cupy.uint32) << 16).view(cupy.float32)


def random_operands(M, N, K, precision, seed=0):
    """(A, B) for the rung and their exact float32 values for the oracle."""
    rng = cupy.random.default_rng(seed)
    A = rng.standard_normal((M, K), dtype=cupy.float32)
    B = rng.standard_normal((K, N), dtype=cupy.float32)
    if precision == "bf16":
        A, B = to_bf16_bits(A), to_bf16_bits(B)
        return A, B, from_bf16_bits(A), from_bf16_bits(B)
    return A, B, A, B


def assert_close(ours, reference, K, what, precision="fp32"):
    # Two FP32 sums of K terms in different orders differ by about sqrt(K) * eps * |terms| * sqrt(K);
    # allow 30x that (tensor cores' accumulation 4x more). A wrong index or a lost tile is off by O(1).
    tol = 4e-6 * (K + 16) * (4 if precision == "bf16" else 1)
    assert bool(cupy.isfinite(ours).all()), f"{what}: non-finite values in the result"
    excess = cupy.abs(ours - reference) - tol * (1 + cupy.abs(reference))
    worst = int(cupy.argmax(excess))
    if float(excess.ravel()[worst]) > 0:
        i, j = divmod(worst, reference.shape[1])
        raise AssertionError(f"{what}: C[{i}, {j}] = {float(ours[i, j])}, cuBLAS {float(reference[i, j])} "
                             f"(tolerance {tol:.2g} * (1 + |ref|))")


CAPABILITY = int(cupy.cuda.Device().compute_capability)


def runnable(rung: str):
    """The rung's Variant, or a skip when this GPU lacks its arch (sm_90a code runs on sm_90 only)."""
    v = gemm.get_variant(rung)
    if not gemm.runs_on(v, CAPABILITY):
        pytest.skip(f"{rung} needs {v.arch}; this GPU is sm_{CAPABILITY}")
    return v


def fp32_mode_is_true_fp32():
    if os.environ.get("CUPY_TF32", "0") != "0" or os.environ.get("NVIDIA_TF32_OVERRIDE", "") not in ("", "0"):
        pytest.fail("CUPY_TF32 / NVIDIA_TF32_OVERRIDE is set: cuBLAS SGEMM would run in TF32, not FP32")


# ---- correctness on awkward shapes ----

EDGE_SHAPES = [(1, 1, 1), (17, 33, 9), (127, 129, 65), (128, 128, 128), (255, 257, 300), (64, 1000, 3),
               (300, 5, 1031)]


@pytest.mark.parametrize("M,N,K", EDGE_SHAPES)
@pytest.mark.parametrize("rung", RUNGS)
def test_rung_matches_cublas_on_edges(rung, M, N, K):
    fp32_mode_is_true_fp32()
    v = runnable(rung)
    A, B, A32, B32 = random_operands(M, N, K, v.precision, seed=M + N + K)
    C = cupy.full((M, N), cupy.nan, dtype=cupy.float32)
    out = gemm.gemm(rung, A, B, C)  # beta == 0: the NaNs must not be read
    assert out is C
    assert_close(C, cupy.matmul(A32, B32), K, f"{rung} {M}x{N}x{K}", v.precision)
    C0 = cupy.random.default_rng(1).standard_normal((M, N), dtype=cupy.float32)
    C1 = C0.copy()
    gemm.gemm(rung, A, B, C1, alpha=0.5, beta=-2.0)
    assert_close(C1, 0.5 * cupy.matmul(A32, B32) - 2.0 * C0, K, f"{rung} alpha/beta {M}x{N}x{K}", v.precision)


@pytest.mark.parametrize("rung", RUNGS)
def test_rung_handles_unaligned_pointers(rung):
    # A view one element into a buffer: contiguous, but not 16-byte aligned, so vector paths must fall back.
    v = runnable(rung)
    M, N, K = 129, 136, 72
    A, B, A32, B32 = random_operands(M, N, K, v.precision, seed=3)
    shifted = cupy.empty(M * K + 1, dtype=A.dtype)
    shifted[1:] = A.ravel()
    A_off = shifted[1:].reshape(M, K)
    assert A_off.data.ptr % 16 != 0
    assert_close(gemm.gemm(rung, A_off, B), cupy.matmul(A32, B32), K, f"{rung} unaligned A", v.precision)


# ---- the GPU and its peaks ----

FMA_PEAK_SRC = r"""
extern "C" __global__ void fma_peak(float *out, int iters, float b, float c) {
  float x[8];
  for (int j = 0; j < 8; j++) x[j] = threadIdx.x + j;
  for (int i = 0; i < iters; i++) {
#pragma unroll
    for (int j = 0; j < 8; j++) x[j] = fmaf(x[j], b, c);  // 8 independent chains hide the FMA latency
  }
  float s = 0.0f;
  for (int j = 0; j < 8; j++) s += x[j];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""
BF16_FLOPS_PER_SM_CLOCK = {80: 2048, 90: 4096}  # dense tensor-core bf16, from NVIDIA's A100 / H100 specs


@pytest.fixture(scope="session")
def gpu() -> dict:
    device = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(device.id)
    sms = props["multiProcessorCount"]
    capability = int(device.compute_capability)
    clock_khz = props.get("clockRate")
    if not clock_khz:  # dropped from cudaDeviceProp in CUDA 13; still an attribute (cudaDevAttrClockRate = 13)
        try:
            clock_khz = cupy.cuda.runtime.deviceGetAttribute(13, device.id)
        except cupy.cuda.runtime.CUDARuntimeError:
            clock_khz = None
    clock_hz = clock_khz * 1e3 if clock_khz else None
    kernel = cupy.RawKernel(FMA_PEAK_SRC, "fma_peak")
    blocks, threads, iters = sms * 16, 256, 1 << 14
    out = cupy.empty(blocks * threads, dtype=cupy.float32)
    args = (out, np.int32(iters), np.float32(0.999), np.float32(0.001))
    seconds = min(time_batch(lambda: kernel((blocks,), (threads,), args), 1) for _ in range(5))
    bf16_rate = BF16_FLOPS_PER_SM_CLOCK.get(capability)
    return {"gpu": props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
            "compute_capability": capability, "sms": sms, "clock_hz": clock_hz,
            "peak_fp32_measured": 2 * 8 * iters * blocks * threads / seconds,
            "peak_bf16_spec": bf16_rate * sms * clock_hz if bf16_rate and clock_hz else None}


# ---- timing ----


def time_batch(launch, count: int) -> float:
    """Seconds for `count` back-to-back launches, by CUDA events."""
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(count):
        launch()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / 1e3


def bench(benchmark, launch, flops: float, info: dict) -> None:
    launch()
    cupy.cuda.Device().synchronize()
    once = time_batch(launch, 1)
    batch = max(1, round(ROUND_SECONDS / once))
    rounds = max(MIN_ROUNDS, min(20, round(BUDGET_SECONDS / (batch * once))))

    def round_of_launches():
        for _ in range(batch):
            launch()
        cupy.cuda.Device().synchronize()

    benchmark.extra_info.update(info, launches_per_round=batch, flops=flops)
    benchmark.pedantic(round_of_launches, rounds=rounds, iterations=1, warmup_rounds=1)


def cublas_launcher(A, B, C, precision: str):
    """A no-argument launch of cuBLAS on C (M, N) fp32 = A (M, K) @ B (K, N), bound once like the
    rungs' launchers: SGEMM for fp32, GemmEx on bf16 bit patterns with FP32 compute for bf16.
    cuBLAS is column-major: the row-major product is C^T = B^T A^T, so B goes first."""
    from cupy_backends.cuda.libs import cublas

    (M, K), N = A.shape, B.shape[1]
    one, zero = np.array(1.0, np.float32), np.array(0.0, np.float32)
    handle = cupy.cuda.device.get_cublas_handle()
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    op = cublas.CUBLAS_OP_N
    if precision == "fp32":
        def launch():
            cublas.sgemm(handle, op, op, N, M, K, one.ctypes.data, B.data.ptr, N, A.data.ptr, K,
                         zero.ctypes.data, C.data.ptr, N)
        return launch
    cuda_r_16bf, cuda_r_32f, compute_32f, gemm_default = 14, 0, 68, -1  # library_types.h, cublas_api.h

    def launch():
        cublas.gemmEx(handle, op, op, N, M, K, one.ctypes.data, B.data.ptr, cuda_r_16bf, N, A.data.ptr,
                      cuda_r_16bf, K, zero.ctypes.data, C.data.ptr, cuda_r_32f, N, compute_32f, gemm_default)
    return launch


def gpu_info(gpu: dict, impl: str, precision: str, n: int) -> dict:
    return {**gpu, "impl": impl, "precision": precision, "n": n}


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("rung", RUNGS)
def test_bench_rung(benchmark, gpu, rung, n):
    fp32_mode_is_true_fp32()
    v = runnable(rung)
    A, B, A32, B32 = random_operands(n, n, n, v.precision)
    C = cupy.empty((n, n), dtype=cupy.float32)
    gemm.gemm(rung, A, B, C)
    reference = cupy.matmul(A32, B32)
    assert_close(C, reference, n, f"{rung} n={n}", v.precision)
    del reference, A32, B32
    benchmark.group = f"n={n}"
    bench(benchmark, gemm.launcher(rung, A, B, C), 2.0 * n**3, gpu_info(gpu, rung, v.precision, n))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_bench_cublas(benchmark, gpu, precision, n):
    fp32_mode_is_true_fp32()
    A, B, A32, B32 = random_operands(n, n, n, precision)
    C = cupy.full((n, n), cupy.nan, dtype=cupy.float32)
    launch = cublas_launcher(A, B, C, precision)
    launch()
    assert_close(C, cupy.matmul(A32, B32), n, f"cuBLAS {precision} n={n}", precision)
    benchmark.group = f"n={n}"
    bench(benchmark, launch, 2.0 * n**3, gpu_info(gpu, f"cublas_{precision}", precision, n))
