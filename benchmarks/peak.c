/* The machine's FP32 peak, measured: every thread runs 12 independent chains of fused
   multiply-adds as wide as the CPU's vectors (16 floats with AVX-512, 8 with AVX2; enough chains to
   cover the FMA latency on both FMA pipes), and the program prints the best GFLOP/s over a few
   repeats for each thread count given on the command line. (With 8-wide chains on a Zen 5, whose
   FMA pipes are 512 bits wide, it read 136 GFLOP/s a core where the AVX-512 GEMM rung ran at 239.)

       peak 1 2        ->   "1 <GFLOP/s>\n2 <GFLOP/s>\n"

   Built by benchmarks/peak.py with -O2 -march=native -fopenmp. Without AVX2/FMA it measures
   scalar FMA chains instead (and says so), which is that machine's honest scalar peak. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <omp.h>

#define CHAINS 12
#define ITERS 20000000L

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#if defined(__AVX512F__)
#define LANES 16
#define VEC __m512
#define SET1 _mm512_set1_ps
#define FMADD _mm512_fmadd_ps
#define STOREU _mm512_storeu_ps
#else
#define LANES 8
#define VEC __m256
#define SET1 _mm256_set1_ps
#define FMADD _mm256_fmadd_ps
#define STOREU _mm256_storeu_ps
#endif
static float run_chains(long iters, float seed) {
  VEC acc[CHAINS];
  const VEC mul = SET1(0.999999f), add = SET1(1e-7f);
  for (int i = 0; i < CHAINS; i++) acc[i] = SET1(seed + i);
  for (long it = 0; it < iters; it++)
#pragma GCC unroll 12
    for (int i = 0; i < CHAINS; i++) acc[i] = FMADD(acc[i], mul, add);
  float out[LANES], total = 0.0f;
  for (int i = 0; i < CHAINS; i++) {
    STOREU(out, acc[i]);
    for (int j = 0; j < LANES; j++) total += out[j];
  }
  return total;
}
#else
#include <math.h>
#define LANES 1
static float run_chains(long iters, float seed) {
  float acc[CHAINS], total = 0.0f;
  for (int i = 0; i < CHAINS; i++) acc[i] = seed + i;
  for (long it = 0; it < iters; it++)
    for (int i = 0; i < CHAINS; i++) acc[i] = fmaf(acc[i], 0.999999f, 1e-7f);
  for (int i = 0; i < CHAINS; i++) total += acc[i];
  return total;
}
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv) {
  if (LANES == 1) fprintf(stderr, "peak: no AVX2/FMA at build time; measuring scalar FMA\n");
  for (int arg = 1; arg < argc; arg++) {
    const int threads = atoi(argv[arg]);
    double best = 0.0;
    volatile float sink = 0.0f;  /* keeps the chains from being optimized away */
    for (int repeat = 0; repeat < 5; repeat++) {
      const double start = now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
      sink += run_chains(ITERS / 10, (float)omp_get_thread_num());
      const double seconds = now() - start;
      const double flops = 2.0 * CHAINS * LANES * (ITERS / 10) * threads;
      if (flops / seconds > best) best = flops / seconds;
    }
    printf("%d %.2f\n", threads, best / 1e9);
  }
  return 0;
}
