/* gemm_01_naive: one thread per element of C, the definition of a matrix product.

   idea:     thread (row, col) walks K and keeps its dot product in a register.
   fixes:    nothing yet; it is the reference rung every later file improves on.
   launch:   threads=1024 bm=32 bn=32 smem=0 arch=sm_80 precision=fp32
   measured: 502 GFLOP/s at n=4096 on NVIDIA H100 80GB HBM3, 1% of cuBLAS fp32 (2026-11-27)

   Why it is slow: neighbouring threads get neighbouring *rows*, so the 32 lanes of a warp read
   A at addresses K floats apart (32 memory transactions per load instead of one) and write C
   down a column.

   Signature (every rung): C (M, N) fp32 = alpha * A (M, K) @ B (K, N) + beta * C, all row-major;
   C is not read when beta == 0. Sizes are ints: the host keeps M*K, K*N and M*N below 2^31. */

extern "C" __global__ void gemm_01_naive(float *C, const float *A, const float *B,
                                         int M, int N, int K, float alpha, float beta) {
  A += blockIdx.z * (size_t)M * K, B += blockIdx.z * (size_t)K * N, C += blockIdx.z * (size_t)M * N;  // matrix z of a batch
  const int row = blockIdx.y * 32 + threadIdx.x % 32;
  const int col = blockIdx.x * 32 + threadIdx.x / 32;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; k++) acc += A[row * K + k] * B[k * N + col];
  float *c = C + row * N + col;
  *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
}
