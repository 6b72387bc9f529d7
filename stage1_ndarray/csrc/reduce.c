/* Reductions over the middle axis of an (O, R, I) strided view: out (O, I).
   I == 1 reduces rows; I > 1 sweeps r outside and i inside so unit-stride columns vectorize. */
#include "kernels.h"

/* A contiguous float row: 16 independent partial sums the compiler keeps in vector registers,
   folded into a double every block so long rows keep float64-like accuracy. */
#define SUM_ROW(T)                                                                \
  static T sum_row_##T(const T *p, i64 n) {                                       \
    double total = 0;                                                             \
    i64 i = 0;                                                                    \
    while (i + 16 <= n) {                                                         \
      T acc[16] = {0};                                                            \
      i64 end = i + 4096 <= n ? i + 4096 : n - (n - i) % 16;                      \
      for (; i < end; i += 16)                                                    \
        for (int k = 0; k < 16; k++) acc[k] += p[i + k];                          \
      for (int k = 0; k < 16; k++) total += acc[k];                               \
    }                                                                             \
    for (; i < n; i++) total += p[i];                                             \
    return (T)total;                                                              \
  }
SUM_ROW(float)
SUM_ROW(double)

#define REDUCE_LOOP(T, INIT, STEP) do {                                           \
    T *restrict o = (T *)out;                                                     \
    const T *A = (const T *)a;                                                    \
    for (i64 q = 0; q < O; q++) {                                                 \
      const T *p = A + q * so;                                                    \
      T *oq = o + q * I;                                                          \
      if (I == 1) {                                                               \
        T acc = INIT;                                                             \
        for (i64 r = 0; r < R; r++) { T x = p[r * sr]; acc = STEP; }              \
        oq[0] = acc;                                                              \
        continue;                                                                 \
      }                                                                           \
      for (i64 i = 0; i < I; i++) oq[i] = INIT;                                   \
      for (i64 r = 0; r < R; r++) {                                               \
        const T *pr = p + r * sr;                                                 \
        if (si == 1) for (i64 i = 0; i < I; i++) { T acc = oq[i], x = pr[i]; oq[i] = STEP; } \
        else for (i64 i = 0; i < I; i++) { T acc = oq[i], x = pr[i * si]; oq[i] = STEP; } \
      }                                                                           \
    }                                                                             \
    return 0;                                                                     \
  } while (0)

#define REDUCE_FLOAT(T, LOWEST, HIGHEST)                                          \
  switch (op) {                                                                   \
    case OP_REDUCE_ADD:                                                                   \
      if (I == 1 && sr == 1) {                                                    \
        for (i64 q = 0; q < O; q++) ((T *)out)[q] = sum_row_##T((const T *)a + q * so, R); \
        return 0;                                                                 \
      }                                                                           \
      REDUCE_LOOP(T, 0, acc + x);                                                 \
    case OP_REDUCE_MUL: REDUCE_LOOP(T, 1, acc * x);                                      \
    case OP_REDUCE_MAX: REDUCE_LOOP(T, LOWEST, (x > acc || x != x) ? x : acc);            \
    case OP_REDUCE_MIN: REDUCE_LOOP(T, HIGHEST, (x < acc || x != x) ? x : acc);           \
  }                                                                               \
  return -1;

#define REDUCE_INT(T, UT, LOWEST, HIGHEST)                                        \
  switch (op) {                                                                   \
    case OP_REDUCE_ADD: REDUCE_LOOP(T, 0, (T)((UT)acc + (UT)x));                          \
    case OP_REDUCE_MUL: REDUCE_LOOP(T, 1, (T)((UT)acc * (UT)x));                         \
    case OP_REDUCE_MAX: REDUCE_LOOP(T, LOWEST, x > acc ? x : acc);                        \
    case OP_REDUCE_MIN: REDUCE_LOOP(T, HIGHEST, x < acc ? x : acc);                       \
  }                                                                               \
  return -1;

int reduce(int op, int dtype, void *out, const void *a,
           i64 O, i64 R, i64 I, i64 so, i64 sr, i64 si) {
  switch (dtype) {
    case DT_FLOAT32: REDUCE_FLOAT(float, -INFINITY, INFINITY)
    case DT_FLOAT64: REDUCE_FLOAT(double, -INFINITY, INFINITY)
    case DT_INT32: REDUCE_INT(int32_t, uint32_t, INT32_MIN, INT32_MAX)
    case DT_INT64: REDUCE_INT(int64_t, uint64_t, INT64_MIN, INT64_MAX)
    case DT_UINT64: REDUCE_INT(uint64_t, uint64_t, 0, UINT64_MAX)
    case DT_BOOL:
      if (op == OP_REDUCE_MAX) REDUCE_LOOP(uint8_t, 0, x | acc);
      if (op == OP_REDUCE_MIN) REDUCE_LOOP(uint8_t, 1, x & acc);
      return -1;
  }
  return -1;
}

/* First index of the extreme value (R >= 1); a NaN counts as the extreme, like numpy. */
#define ARG_LOOP(T, BETTER) do {                                                  \
    const T *A = (const T *)a;                                                    \
    for (i64 q = 0; q < O; q++)                                                   \
      for (i64 i = 0; i < I; i++) {                                               \
        const T *p = A + q * so + i * si;                                         \
        T best = p[0];                                                            \
        i64 arg = 0;                                                              \
        for (i64 r = 1; r < R; r++) {                                             \
          T x = p[r * sr];                                                        \
          if (best == best && (BETTER || x != x)) { best = x; arg = r; }          \
        }                                                                         \
        out[q * I + i] = arg;                                                     \
      }                                                                           \
    return 0;                                                                     \
  } while (0)

#define ARG_DTYPE(T)                                                              \
  if (op == OP_ARGMAX) ARG_LOOP(T, x > best);                                      \
  if (op == OP_ARGMIN) ARG_LOOP(T, x < best);                                      \
  return -1;

int arg_reduce(int op, int dtype, i64 *out, const void *a,
               i64 O, i64 R, i64 I, i64 so, i64 sr, i64 si) {
  switch (dtype) {
    case DT_BOOL: ARG_DTYPE(uint8_t)
    case DT_INT32: ARG_DTYPE(int32_t)
    case DT_INT64: ARG_DTYPE(int64_t)
    case DT_UINT64: ARG_DTYPE(uint64_t)
    case DT_FLOAT32: ARG_DTYPE(float)
    case DT_FLOAT64: ARG_DTYPE(double)
  }
  return -1;
}

/* Running sum along R; the output is contiguous (O, R, I). */
#define CUMSUM_LOOP(T, UT) do {                                                   \
    T *restrict o = (T *)out;                                                     \
    const T *A = (const T *)a;                                                    \
    for (i64 q = 0; q < O; q++)                                                   \
      for (i64 i = 0; i < I; i++) {                                               \
        const T *p = A + q * so + i * si;                                         \
        T *oq = o + q * R * I + i;                                                \
        UT acc = 0;                                                               \
        for (i64 r = 0; r < R; r++) { acc += (UT)p[r * sr]; oq[r * I] = (T)acc; } \
      }                                                                           \
    return 0;                                                                     \
  } while (0)

int cumsum(int dtype, void *out, const void *a,
           i64 O, i64 R, i64 I, i64 so, i64 sr, i64 si) {
  switch (dtype) {
    case DT_INT32: CUMSUM_LOOP(int32_t, uint32_t);
    case DT_INT64: CUMSUM_LOOP(int64_t, uint64_t);
    case DT_FLOAT32: CUMSUM_LOOP(float, float);
    case DT_FLOAT64: CUMSUM_LOOP(double, double);
  }
  return -1;
}
