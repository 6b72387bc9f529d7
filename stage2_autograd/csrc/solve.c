/* Gaussian elimination with partial pivoting: solves a (n, n) @ x = b (n, nrhs) in place.
   Used for the normal equations of linear regression. */
#include "kernels.h"

#define SOLVE_LOOP(T, FABS) do {                                                  \
    T *A = (T *)a, *B = (T *)b;                                                   \
    for (i64 c = 0; c < n; c++) {                                                 \
      i64 piv = c;                                                                \
      for (i64 r = c + 1; r < n; r++)                                             \
        if (FABS(A[r * n + c]) > FABS(A[piv * n + c])) piv = r;                   \
      if (!(FABS(A[piv * n + c]) > 0)) return 1;                                  \
      if (piv != c) {                                                             \
        for (i64 j = 0; j < n; j++) { T t = A[c * n + j]; A[c * n + j] = A[piv * n + j]; A[piv * n + j] = t; } \
        for (i64 j = 0; j < nrhs; j++) { T t = B[c * nrhs + j]; B[c * nrhs + j] = B[piv * nrhs + j]; B[piv * nrhs + j] = t; } \
      }                                                                           \
      for (i64 r = c + 1; r < n; r++) {                                           \
        T f = A[r * n + c] / A[c * n + c];                                        \
        for (i64 j = c; j < n; j++) A[r * n + j] -= f * A[c * n + j];             \
        for (i64 j = 0; j < nrhs; j++) B[r * nrhs + j] -= f * B[c * nrhs + j];    \
      }                                                                           \
    }                                                                             \
    for (i64 c = n - 1; c >= 0; c--)                                              \
      for (i64 j = 0; j < nrhs; j++) {                                            \
        T s = B[c * nrhs + j];                                                    \
        for (i64 k = c + 1; k < n; k++) s -= A[c * n + k] * B[k * nrhs + j];      \
        B[c * nrhs + j] = s / A[c * n + c];                                       \
      }                                                                           \
    return 0;                                                                     \
  } while (0)

int solve(int dtype, void *a, void *b, i64 n, i64 nrhs) {
  switch (dtype) {
    case DT_FLOAT32: SOLVE_LOOP(float, fabsf);
    case DT_FLOAT64: SOLVE_LOOP(double, fabs);
  }
  return -1;
}
