/* gemm_01_naive: the definition of a matrix product, three loops in i, j, k order.

   idea:     C[i, j] is the dot product of row i of A and column j of B; compute each in turn.
   fixes:    nothing yet; it is the oracle every later rung is checked against.
   measured: 0.42 GFLOP/s at n=1024 on 1 thread; numpy/OpenBLAS 92 in the same run (0.5%).

   Why it is slow: the inner loop walks a column of B, K floats apart, so every multiply-add
   loads a new cache line and uses 4 of its 64 bytes; the loop-carried sum cannot be vectorized
   without reassociating floating-point adds, which -O3 (without -ffast-math) refuses to do. */
#include "gemm_ladder.h"

int gemm_01_naive(GEMM_PARAMS) {
  (void)threads;
  for (i64 i = 0; i < M; i++) {
    for (i64 j = 0; j < N; j++) {
      float acc = 0.0f;
      for (i64 k = 0; k < K; k++) acc += a[i * rsa + k * csa] * b[k * rsb + j * csb];
      float *cij = c + i * ldc + j;
      *cij = beta == 0.0f ? alpha * acc : alpha * acc + beta * *cij;
    }
  }
  return 0;
}
