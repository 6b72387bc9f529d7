/* gemm_06_threaded: rung 05 on every core, with OpenMP.

   idea:     the threads share one packed B panel (they pack its slivers in parallel) and split
             the ic loop: each thread packs its own MC x KC blocks of A into a private buffer and
             computes those rows of C. Rows of C never overlap between threads, so there is no
             reduction and no locking; two barriers per KC step keep B stable while it is read.
   fixes:    05 used one core of two. Splitting ic (not jr) keeps each thread's A block in its
             own core's L2, and B is packed once, not once per thread.
   measured: n=1024: 1 thread 79 GFLOP/s (rung 05 within noise); 2 threads 125 (1.6x; 76-84% of
             numpy on 2 threads in the same runs). n=2048, 2 threads: 115-135 (72-84%).

   Built without OpenMP, the pragmas are ignored and it runs serially, exactly as rung 05.
   What limits it: MC blocks are handed out whole, so when M / MC is not a multiple of the thread
   count one thread waits (n=1024: 11 blocks of 96 rows for 2 threads); the microkernel stalls on
   loads at the start of each sliver. */
#include "gemm_ladder.h"

#define MR 6
#define NR 16
#define KC 256
#define MC 96
#define NC 4096

static i64 min64(i64 x, i64 y) { return x < y ? x : y; }
static i64 round_up(i64 x, i64 m) { return (x + m - 1) / m * m; }

/* ap <- A[0:mc, 0:kc] as MR-row slivers: sliver s holds A[s*MR + r, p] at s*MR*kc + p*MR + r; rows past mc are 0. */
static void pack_a(i64 mc, i64 kc, const float *a, i64 rsa, i64 csa, float *restrict ap) {
  for (i64 i0 = 0; i0 < mc; i0 += MR, ap += MR * kc) {
    const i64 mr = min64(MR, mc - i0);
    for (i64 p = 0; p < kc; p++)
      for (i64 r = 0; r < MR; r++) ap[p * MR + r] = r < mr ? a[(i0 + r) * rsa + p * csa] : 0.0f;
  }
}

/* bp <- one NR-column sliver B[0:kc, 0:nr] (p-major: B[p, j] at p*NR + j); columns past nr are 0. */
static void pack_b_sliver(i64 kc, i64 nr, const float *b, i64 rsb, i64 csb, float *restrict bp) {
  for (i64 p = 0; p < kc; p++)
    for (i64 j = 0; j < NR; j++) bp[p * NR + j] = j < nr ? b[p * rsb + j * csb] : 0.0f;
}

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* C[0:MR, 0:NR] += alpha * (packed A sliver) @ (packed B sliver); acc[r][h] holds C[r, 8h : 8h + 8]. */
static void kernel(i64 kc, float alpha, const float *ap, const float *bp, float *c, i64 ldc) {
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (i64 p = 0; p < kc; p++, ap += MR, bp += NR) {
    const __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
      const __m256 ar = _mm256_broadcast_ss(ap + r);
      acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha);
#pragma GCC unroll 6
  for (int r = 0; r < MR; r++) {
    float *cr = c + r * ldc;
    _mm256_storeu_ps(cr, _mm256_fmadd_ps(va, acc[r][0], _mm256_loadu_ps(cr)));
    _mm256_storeu_ps(cr + 8, _mm256_fmadd_ps(va, acc[r][1], _mm256_loadu_ps(cr + 8)));
  }
}
#else
static void kernel(i64 kc, float alpha, const float *ap, const float *bp, float *c, i64 ldc) {
  float acc[MR][NR] = {{0}};
  for (i64 p = 0; p < kc; p++, ap += MR, bp += NR)
    for (int r = 0; r < MR; r++)
      for (int j = 0; j < NR; j++) acc[r][j] += ap[r] * bp[j];
  for (int r = 0; r < MR; r++)
    for (int j = 0; j < NR; j++) c[r * ldc + j] += alpha * acc[r][j];
}
#endif

/* One packed MC x KC block of A against one packed KC x NC panel of B, into C[0:mc, 0:nc]. */
static void macro_kernel(i64 mc, i64 nc, i64 kc, float alpha, const float *ap, const float *bp, float *c, i64 ldc) {
  for (i64 j = 0; j < nc; j += NR) {
    for (i64 i = 0; i < mc; i += MR) {
      const float *as = ap + i * kc, *bs = bp + j * kc;
      float *cij = c + i * ldc + j;
      if (i + MR <= mc && j + NR <= nc) {
        kernel(kc, alpha, as, bs, cij, ldc);
        continue;
      }
      float edge[MR * NR] = {0};  /* a partial tile: compute it whole, add back only what exists */
      kernel(kc, alpha, as, bs, edge, NR);
      for (i64 r = 0; r < min64(MR, mc - i); r++)
        for (i64 q = 0; q < min64(NR, nc - j); q++) cij[r * ldc + q] += edge[r * NR + q];
    }
  }
}

int gemm_06_threaded(GEMM_PARAMS) {
  gemm_scale_c(c, ldc, M, N, beta);
  if (M == 0 || N == 0 || K == 0) return 0;
  const int nt = threads > 1 ? threads : 1;
  const i64 kcap = min64(KC, K), ncap = round_up(min64(NC, N), NR), mcap = round_up(min64(MC, M), MR);
  float *ap = gemm_alloc(nt * mcap * kcap), *bp = gemm_alloc(kcap * ncap);
  if (ap == NULL || bp == NULL) {
    free(ap);
    free(bp);
    return -1;
  }
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    float *my_ap = ap + gemm_thread_id() * mcap * kcap;
    for (i64 jc = 0; jc < N; jc += NC) {
      const i64 nc = min64(NC, N - jc);
      for (i64 pc = 0; pc < K; pc += KC) {
        const i64 kc = min64(KC, K - pc);
#pragma omp for schedule(static)
        for (i64 j0 = 0; j0 < nc; j0 += NR)
          pack_b_sliver(kc, min64(NR, nc - j0), b + pc * rsb + (jc + j0) * csb, rsb, csb, bp + j0 * kc);
#pragma omp for schedule(static)
        for (i64 ic = 0; ic < M; ic += MC) {
          const i64 mc = min64(MC, M - ic);
          pack_a(mc, kc, a + ic * rsa + pc * csa, rsa, csa, my_ap);
          macro_kernel(mc, nc, kc, alpha, my_ap, bp, c + ic * ldc + jc, ldc);
        }
      }
    }
  }
  free(ap);
  free(bp);
  return 0;
}
