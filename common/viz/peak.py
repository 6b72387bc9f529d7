"""The machine's measured ceilings, which the page sets each kernel's GFLOP/s and GB/s against: the float32
FMA rate of independent vector chains on every thread the kernels use, and the rate a parallel loop reads
a 64 MiB array (past every cache). Compiled by stage3's C compiler with the kernels' flags, so that the
vector width is the kernels' own; measured once a process (a few hundred ms), best of a few runs.
"""

from __future__ import annotations

import ctypes
import functools
import time
from dataclasses import dataclass

from stage3_compiler.cpu.compiler import compile_c
from stage3_compiler.threads import get_num_threads

SOURCE = r"""
#pragma GCC optimize ("fp-contract=fast")
#if defined(__AVX512F__)
typedef float vec __attribute__((vector_size(64)));
#elif defined(__AVX__)
typedef float vec __attribute__((vector_size(32)));
#else
typedef float vec __attribute__((vector_size(16)));
#endif
#define LANES ((long long)(sizeof(vec) / sizeof(float)))

/* 12 independent chains of a * m + c per thread (enough to cover an FMA's latency on two ports); returns
   the flops done, and a checksum in *out so that nothing is optimised away. */
double sitp_peak_fma(long long iters, int threads, float m, float c, float* out) {
  float total = 0.0f;
  #pragma omp parallel num_threads(threads) reduction(+:total)
  {
    vec a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0};
    vec a6 = {0}, a7 = {0}, a8 = {0}, a9 = {0}, a10 = {0}, a11 = {0};
    for (long long i = 0; i < iters; i++) {
      a0 = a0 * m + c; a1 = a1 * m + c; a2 = a2 * m + c; a3 = a3 * m + c;
      a4 = a4 * m + c; a5 = a5 * m + c; a6 = a6 * m + c; a7 = a7 * m + c;
      a8 = a8 * m + c; a9 = a9 * m + c; a10 = a10 * m + c; a11 = a11 * m + c;
    }
    vec s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
    for (int k = 0; k < LANES; k++) total += s[k];
  }
  *out = total;
  return 2.0 * 12 * LANES * (double)iters * threads;
}

/* The sum of n floats (n a multiple of 4 vectors), each thread a slice, in four vector sums: the memory's
   read rate. */
float sitp_peak_read(const float* x, long long n, int threads) {
  float total = 0.0f;
  long long blocks = n / (4 * LANES);
  #pragma omp parallel num_threads(threads) reduction(+:total)
  {
    vec s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    #pragma omp for schedule(static)
    for (long long b = 0; b < blocks; b++) {
      vec v0, v1, v2, v3;
      __builtin_memcpy(&v0, x + b * 4 * LANES, sizeof(vec));
      __builtin_memcpy(&v1, x + b * 4 * LANES + LANES, sizeof(vec));
      __builtin_memcpy(&v2, x + b * 4 * LANES + 2 * LANES, sizeof(vec));
      __builtin_memcpy(&v3, x + b * 4 * LANES + 3 * LANES, sizeof(vec));
      s0 += v0; s1 += v1; s2 += v2; s3 += v3;
    }
    vec s = s0 + s1 + s2 + s3;
    for (int k = 0; k < LANES; k++) total += s[k];
  }
  return total;
}
"""

READ_FLOATS = 16 << 20  # 64 MiB
ROUNDS = 3


@dataclass(frozen=True)
class Peak:
    threads: int
    gflops: float  # float32 FMA GFLOP/s
    gbs: float  # GB/s read


def best_seconds(run) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


@functools.cache
def measure(threads: int | None = None) -> Peak:
    threads = threads or get_num_threads()
    fma = compile_c(SOURCE, "sitp_peak_fma")
    fma.restype = ctypes.c_double
    fma.argtypes = [ctypes.c_longlong, ctypes.c_int, ctypes.c_float, ctypes.c_float, ctypes.POINTER(ctypes.c_float)]
    read = compile_c(SOURCE, "sitp_peak_read")
    read.restype = ctypes.c_float
    read.argtypes = [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int]
    out, iters = ctypes.c_float(), 20_000_000
    flops = fma(iters, threads, 0.999999, 1e-6, ctypes.byref(out))
    gflops = flops / best_seconds(lambda: fma(iters, threads, 0.999999, 1e-6, ctypes.byref(out))) / 1e9
    data = (ctypes.c_float * READ_FLOATS)()
    ctypes.memset(data, 0, ctypes.sizeof(data))  # touched, so the pages exist before the timing
    gbs = ctypes.sizeof(data) / best_seconds(lambda: read(ctypes.addressof(data), READ_FLOATS, threads)) / 1e9
    return Peak(threads, gflops, gbs)
