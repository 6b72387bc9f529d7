/* A first correct GEMM: i-k-j loop order so the inner loop streams rows of b and out with unit
   stride (the compiler vectorizes it), blocked over k so a panel of b stays in cache.
   The ladder of faster variants is its own lesson. */
#include "kernels.h"

#define KC 256

#define MATMUL_LOOP(T, ACC) do {                                                  \
    for (i64 z = 0; z < batch; z++) {                                             \
      T *restrict C = (T *)out + z * M * N;                                       \
      const T *A = (const T *)a + z * M * K, *B = (const T *)b + z * K * N;       \
      memset(C, 0, (size_t)(M * N) * sizeof(T));                                  \
      for (i64 k0 = 0; k0 < K; k0 += KC) {                                        \
        i64 k1 = k0 + KC < K ? k0 + KC : K;                                       \
        for (i64 i = 0; i < M; i++) {                                             \
          T *c = C + i * N;                                                       \
          for (i64 k = k0; k < k1; k++) {                                         \
            T aik = A[i * K + k];                                                 \
            const T *bk = B + k * N;                                              \
            for (i64 j = 0; j < N; j++) c[j] = ACC;                               \
          }                                                                       \
        }                                                                         \
      }                                                                           \
    }                                                                             \
    return 0;                                                                     \
  } while (0)

int matmul(int dtype, void *out, const void *a, const void *b,
           i64 batch, i64 M, i64 N, i64 K) {
  switch (dtype) {
    case DT_FLOAT32: MATMUL_LOOP(float, c[j] + aik * bk[j]);
    case DT_FLOAT64: MATMUL_LOOP(double, c[j] + aik * bk[j]);
    case DT_INT32: MATMUL_LOOP(int32_t, (int32_t)((uint32_t)c[j] + (uint32_t)aik * (uint32_t)bk[j]));
    case DT_INT64: MATMUL_LOOP(int64_t, (int64_t)((uint64_t)c[j] + (uint64_t)aik * (uint64_t)bk[j]));
  }
  return -1;
}
