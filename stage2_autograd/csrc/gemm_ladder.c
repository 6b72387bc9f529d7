/* What the GEMM ladder was built with, so Python can report it and tests can skip honestly, and
   the batched driver that runs any rung over a batch of products. */
#include "gemm_ladder.h"

/* 1 when the rungs were compiled with OpenMP (the threaded rungs then use `threads`). */
int gemm_has_openmp(void) {
#ifdef _OPENMP
  return 1;
#else
  return 0;
#endif
}

/* 1 when the rungs' AVX2/FMA microkernels were compiled in (else their plain C fallback was). */
int gemm_has_avx2_fma(void) {
#if defined(__AVX2__) && defined(__FMA__)
  return 1;
#else
  return 0;
#endif
}

/* 1 when rung 08's AVX-512 microkernel was compiled in (else gemm_08_avx512 runs rung 07's code). */
int gemm_has_avx512(void) {
#ifdef __AVX512F__
  return 1;
#else
  return 0;
#endif
}

/* count products out[z] (M, N) = A_z @ B_z, A_z at a + a_off[z] with strides (rsa, csa) and B_z at
   b + b_off[z] with (rsb, csb): any batch of views (attention's per-head products of transposed,
   sliced q, k and v) without copying them. outer_threads split the batch, each product running on
   inner_threads: small products want the cores on different products, where one product alone
   would spend more on waking the second core than it saves. */
int gemm_batched(gemm_rung rung, i64 count, float *out, const float *a, const i64 *a_off, i64 rsa, i64 csa,
                 const float *b, const i64 *b_off, i64 rsb, i64 csb, i64 M, i64 N, i64 K,
                 int outer_threads, int inner_threads) {
  int failed = 0;
#pragma omp parallel for num_threads(outer_threads) if (outer_threads > 1) schedule(static) reduction(|:failed)
  for (i64 z = 0; z < count; z++)
    failed |= rung(out + z * M * N, N, a + a_off[z], rsa, csa, b + b_off[z], rsb, csb, M, N, K, 1.0f, 0.0f,
                   inner_threads) != 0;
  return failed ? -1 : 0;
}
