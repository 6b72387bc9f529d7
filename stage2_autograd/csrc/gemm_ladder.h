/* Shared by every rung of the float32 GEMM ladder (gemm_NN_idea.c): the one signature and two
   helpers. Each rung computes

       C (M, N) = alpha * A (M, K) @ B (K, N) + beta * C

   Outputs first, then inputs, then sizes (llm.c order):
     c, ldc        C, row-major with row stride ldc (its columns are unit stride: Python arranges it)
     a, rsa, csa   A with any row and column strides (a transposed view just swaps them)
     b, rsb, csb   B likewise
     M, N, K       any sizes >= 0; K == 0 leaves C = beta * C
     alpha, beta   as in BLAS sgemm; beta == 0 never reads C (it may hold NaN)
     threads       how many threads a threaded rung uses; serial rungs ignore it
   Returns 0, or -1 when a scratch buffer could not be allocated (C is then unspecified).
   ckernels.py reads GEMM_PARAMS below to declare every gemm_NN_*() for cffi. */
#ifndef GEMM_LADDER_H
#define GEMM_LADDER_H
#include <stdlib.h>
#include "kernels.h"
#ifdef _OPENMP
#include <omp.h>
#endif

#define GEMM_PARAMS float *c, int64_t ldc, const float *a, int64_t rsa, int64_t csa, const float *b, int64_t rsb, int64_t csb, int64_t M, int64_t N, int64_t K, float alpha, float beta, int threads

/* C = beta * C on an (M, N) block. beta == 0 writes zeros without reading (NaN * 0 is NaN). */
static void gemm_scale_c(float *c, i64 ldc, i64 M, i64 N, float beta) {
  if (beta == 1.0f) return;
  for (i64 i = 0; i < M; i++) {
    float *ci = c + i * ldc;
    if (beta == 0.0f) memset(ci, 0, (size_t)N * sizeof(float));
    else for (i64 j = 0; j < N; j++) ci[j] *= beta;
  }
}

/* The operand x (rows, cols) with unit column stride: x itself when it already has one, else a
   row-major copy in *owned (the caller frees it) with *rs set to its row stride. NULL when the
   copy cannot be allocated. */
static const float *gemm_unit_columns(const float *x, i64 rows, i64 cols, i64 *rs, i64 cs, float **owned) {
  *owned = NULL;
  if (cs == 1 || cols <= 1) return x;
  float *copy = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof(float));
  if (copy == NULL) return NULL;
  for (i64 i = 0; i < rows; i++)
    for (i64 j = 0; j < cols; j++) copy[i * cols + j] = x[i * *rs + j * cs];
  *owned = copy;
  *rs = cols;
  return copy;
}

/* A 64-byte aligned scratch buffer of count floats (cache-line and AVX aligned), or NULL.
   aligned_alloc wants the size to be a multiple of the alignment (ASan checks it). */
static float *gemm_alloc(i64 count) {
  const size_t bytes = ((size_t)(count > 0 ? count : 1) * sizeof(float) + 63) / 64 * 64;
  return aligned_alloc(64, bytes);
}

/* Which thread of the enclosing parallel region this is (0 when built without OpenMP). */
static int gemm_thread_id(void) {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

#endif
