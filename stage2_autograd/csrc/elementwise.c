/* Elementwise kernels: unary, binary, where and cast over an N-d strided walk.
   The inner loop has a unit-stride branch (and scalar-broadcast branches for binary ops) so the
   compiler can vectorize contiguous inputs; Python merges dims first to make that loop long. */
#include "kernels.h"
#include "gelu.h"
#include "half.h"

/* ---- unary ---- */

#define UNARY_LOOP(T, OUT_T, EXPR) UNARY_WALK(T, OUT_T, EXPR, SERIAL)
#define UNARY_LIBM(T, OUT_T, EXPR) UNARY_WALK(T, OUT_T, EXPR, PAR_MIN)
#define UNARY_WALK(T, OUT_T, EXPR, MIN) do {                                      \
    OUT_T *restrict o = (OUT_T *)out;                                             \
    const T *A = (const T *)a;                                                    \
    i64 n = INNER_LEN(ndim, shape), s = INNER_STRIDE(ndim, sa);                   \
    i64 rows = walk_rows(ndim, shape), idx[MAXDIM] = {0}, off[1] = {0};           \
    const i64 *st[1] = {sa};                                                      \
    for (i64 r = 0; r < rows; r++, o += n) {                                      \
      const T *p = A + off[0];                                                    \
      if (s == 1 && SPLIT(MIN)) {                                                 \
        PARALLEL_FOR                                                              \
        for (i64 i = 0; i < n; i++) { T x = p[i]; o[i] = (EXPR); }                \
      } else if (s == 1)                                                          \
        for (i64 i = 0; i < n; i++) { T x = p[i]; o[i] = (EXPR); }                \
      else                                                                        \
        for (i64 i = 0; i < n; i++) { T x = p[i * s]; o[i] = (EXPR); }            \
      walk_next(ndim, shape, idx, 1, off, st);                                    \
    }                                                                             \
    return 0;                                                                     \
  } while (0)

/* SUF is the libm suffix: f for float, empty for double. */
#define UNARY_FLOAT(T, SUF)                                                       \
  switch (op) {                                                                   \
    case OP_NEG: UNARY_LOOP(T, T, -x);                                            \
    case OP_RECIP: UNARY_LOOP(T, T, (T)1 / x);                                    \
    case OP_SQRT: UNARY_LOOP(T, T, sqrt##SUF(x));                                 \
    case OP_EXP: UNARY_LIBM(T, T, exp##SUF(x));                                   \
    case OP_LOG: UNARY_LIBM(T, T, log##SUF(x));                                   \
    case OP_EXP2: UNARY_LIBM(T, T, exp2##SUF(x));                                 \
    case OP_LOG2: UNARY_LIBM(T, T, log2##SUF(x));                                 \
    case OP_SIN: UNARY_LIBM(T, T, sin##SUF(x));                                   \
    case OP_COS: UNARY_LIBM(T, T, cos##SUF(x));                                   \
    case OP_TANH: UNARY_LIBM(T, T, tanh##SUF(x));                                 \
    case OP_ERF: UNARY_LIBM(T, T, erf##SUF(x));                                   \
    case OP_ABS: UNARY_LOOP(T, T, fabs##SUF(x));                                  \
    case OP_SIGN: UNARY_LOOP(T, T, (T)((x > 0) - (x < 0))); /* NaN: 0, torch's */ \
    case OP_GELU: UNARY_LIBM(T, T, gelu##SUF(x));                                 \
  }                                                                               \
  return -1;

/* Signed overflow is undefined in C; numpy wraps, so negate through the unsigned type. */
#define UNARY_INT(T, UT)                                                          \
  switch (op) {                                                                   \
    case OP_NEG: UNARY_LOOP(T, T, (T)(0 - (UT)x));                                \
    case OP_ABS: UNARY_LOOP(T, T, x < 0 ? (T)(0 - (UT)x) : x);                    \
    case OP_SIGN: UNARY_LOOP(T, T, (T)((x > 0) - (x < 0)));                       \
    case OP_NOT: UNARY_LOOP(T, T, ~x);                                            \
  }                                                                               \
  return -1;

int unary(int op, int dtype, void *out, const void *a,
          int ndim, const i64 *shape, const i64 *sa) {
  switch (dtype) {
    case DT_FLOAT32: UNARY_FLOAT(float, f)
    case DT_FLOAT64: UNARY_FLOAT(double, )
    case DT_INT32: UNARY_INT(int32_t, uint32_t)
    case DT_INT64: UNARY_INT(int64_t, uint64_t)
    case DT_UINT64: UNARY_INT(uint64_t, uint64_t)
    case DT_BOOL:
      if (op == OP_NOT) UNARY_LOOP(uint8_t, uint8_t, (uint8_t)!x);
      return -1;
  }
  return -1;
}

/* ---- binary ---- */

#define BINARY_LOOP(T, OUT_T, EXPR) BINARY_WALK(T, OUT_T, EXPR, SERIAL)
#define BINARY_LIBM(T, OUT_T, EXPR) BINARY_WALK(T, OUT_T, EXPR, PAR_MIN)
#define BINARY_WALK(T, OUT_T, EXPR, MIN) do {                                     \
    OUT_T *restrict o = (OUT_T *)out;                                             \
    const T *A = (const T *)a, *B = (const T *)b;                                 \
    i64 n = INNER_LEN(ndim, shape);                                               \
    i64 s = INNER_STRIDE(ndim, sa), t = INNER_STRIDE(ndim, sb);                   \
    i64 rows = walk_rows(ndim, shape), idx[MAXDIM] = {0}, off[2] = {0, 0};        \
    const i64 *st[2] = {sa, sb};                                                  \
    for (i64 r = 0; r < rows; r++, o += n) {                                      \
      const T *p = A + off[0], *q = B + off[1];                                   \
      if (s == 1 && t == 1 && SPLIT(MIN)) {                                       \
        PARALLEL_FOR                                                              \
        for (i64 i = 0; i < n; i++) { T x = p[i], y = q[i]; o[i] = (EXPR); }      \
      } else if (s == 1 && t == 1)                                                \
        for (i64 i = 0; i < n; i++) { T x = p[i], y = q[i]; o[i] = (EXPR); }      \
      else if (s == 1 && t == 0)                                                  \
        for (i64 i = 0; i < n; i++) { T x = p[i], y = q[0]; o[i] = (EXPR); }      \
      else if (s == 0 && t == 1)                                                  \
        for (i64 i = 0; i < n; i++) { T x = p[0], y = q[i]; o[i] = (EXPR); }      \
      else                                                                        \
        for (i64 i = 0; i < n; i++) { T x = p[i * s], y = q[i * t]; o[i] = (EXPR); } \
      walk_next(ndim, shape, idx, 2, off, st);                                    \
    }                                                                             \
    return 0;                                                                     \
  } while (0)

/* max/min propagate NaN like numpy's maximum/minimum. */
#define BINARY_FLOAT(T, SUF)                                                      \
  switch (op) {                                                                   \
    case OP_ADD: BINARY_LOOP(T, T, x + y);                                        \
    case OP_SUB: BINARY_LOOP(T, T, x - y);                                        \
    case OP_MUL: BINARY_LOOP(T, T, x * y);                                        \
    case OP_DIV: BINARY_LOOP(T, T, x / y);                                        \
    case OP_POW: BINARY_LIBM(T, T, pow##SUF(x, y));                               \
    case OP_GELU_GRAD: BINARY_LIBM(T, T, y * gelu_slope##SUF(x));                 \
    case OP_MAX: BINARY_LOOP(T, T, (x > y || x != x) ? x : y);                    \
    case OP_MIN: BINARY_LOOP(T, T, (x < y || x != x) ? x : y);                    \
    case OP_CMPLT: BINARY_LOOP(T, uint8_t, x < y);                                \
    case OP_CMPLE: BINARY_LOOP(T, uint8_t, x <= y);                               \
    case OP_CMPEQ: BINARY_LOOP(T, uint8_t, x == y);                               \
    case OP_CMPNE: BINARY_LOOP(T, uint8_t, x != y);                               \
  }                                                                               \
  return -1;

/* Integer power by squaring; Python rejects negative exponents before calling. */
#define IPOW(T, UT)                                                               \
  static inline T ipow_##T(T x, T y) {                                            \
    UT r = 1, base = (UT)x;                                                       \
    while (y > 0) { if (y & 1) r *= base; base *= base; y >>= 1; }                \
    return (T)r;                                                                  \
  }
IPOW(int32_t, uint32_t)
IPOW(int64_t, uint64_t)
IPOW(uint64_t, uint64_t)

/* Wrapping arithmetic through the unsigned type, as numpy does, without undefined behaviour. */
#define BINARY_INT(T, UT)                                                         \
  switch (op) {                                                                   \
    case OP_ADD: BINARY_LOOP(T, T, (T)((UT)x + (UT)y));                           \
    case OP_SUB: BINARY_LOOP(T, T, (T)((UT)x - (UT)y));                           \
    case OP_MUL: BINARY_LOOP(T, T, (T)((UT)x * (UT)y));                           \
    case OP_POW: BINARY_LOOP(T, T, ipow_##T(x, y));                               \
    case OP_MAX: BINARY_LOOP(T, T, x > y ? x : y);                                \
    case OP_MIN: BINARY_LOOP(T, T, x < y ? x : y);                                \
    case OP_CMPLT: BINARY_LOOP(T, uint8_t, x < y);                                \
    case OP_CMPLE: BINARY_LOOP(T, uint8_t, x <= y);                               \
    case OP_CMPEQ: BINARY_LOOP(T, uint8_t, x == y);                               \
    case OP_CMPNE: BINARY_LOOP(T, uint8_t, x != y);                               \
    case OP_AND: BINARY_LOOP(T, T, x & y);                                        \
    case OP_OR: BINARY_LOOP(T, T, x | y);                                         \
    case OP_XOR: BINARY_LOOP(T, T, x ^ y);                                        \
  }                                                                               \
  return -1;

/* Bools are bytes holding 0 or 1; every op keeps them 0 or 1. */
#define BINARY_BOOL(T)                                                            \
  switch (op) {                                                                   \
    case OP_MAX: case OP_OR: BINARY_LOOP(T, T, x | y);                            \
    case OP_MIN: case OP_AND: BINARY_LOOP(T, T, x & y);                           \
    case OP_XOR: case OP_CMPNE: BINARY_LOOP(T, T, x ^ y);                         \
    case OP_CMPEQ: BINARY_LOOP(T, T, x == y);                                     \
    case OP_CMPLT: BINARY_LOOP(T, T, x < y);                                      \
    case OP_CMPLE: BINARY_LOOP(T, T, x <= y);                                     \
  }                                                                               \
  return -1;

int binary(int op, int dtype, void *out, const void *a, const void *b,
           int ndim, const i64 *shape, const i64 *sa, const i64 *sb) {
  switch (dtype) {
    case DT_FLOAT32: BINARY_FLOAT(float, f)
    case DT_FLOAT64: BINARY_FLOAT(double, )
    case DT_INT32: BINARY_INT(int32_t, uint32_t)
    case DT_INT64: BINARY_INT(int64_t, uint64_t)
    case DT_UINT64: BINARY_INT(uint64_t, uint64_t)
    case DT_BOOL: BINARY_BOOL(uint8_t)
  }
  return -1;
}

/* ---- where: only the element size matters ---- */

#define WHERE_LOOP(T) do {                                                        \
    T *restrict o = (T *)out;                                                     \
    const T *A = (const T *)a, *B = (const T *)b;                                 \
    i64 n = INNER_LEN(ndim, shape), u = INNER_STRIDE(ndim, sc);                   \
    i64 s = INNER_STRIDE(ndim, sa), t = INNER_STRIDE(ndim, sb);                   \
    i64 rows = walk_rows(ndim, shape), idx[MAXDIM] = {0}, off[3] = {0, 0, 0};     \
    const i64 *st[3] = {sc, sa, sb};                                              \
    for (i64 r = 0; r < rows; r++, o += n) {                                      \
      const uint8_t *c = cond + off[0];                                           \
      const T *p = A + off[1], *q = B + off[2];                                   \
      if (u == 1 && s == 1 && t == 1)                                             \
        for (i64 i = 0; i < n; i++) o[i] = c[i] ? p[i] : q[i];                    \
      else                                                                        \
        for (i64 i = 0; i < n; i++) o[i] = c[i * u] ? p[i * s] : q[i * t];        \
      walk_next(ndim, shape, idx, 3, off, st);                                    \
    }                                                                             \
    return 0;                                                                     \
  } while (0)

int where(int itemsize, void *out, const uint8_t *cond, const void *a, const void *b,
          int ndim, const i64 *shape, const i64 *sc, const i64 *sa, const i64 *sb) {
  switch (itemsize) {
    case 1: WHERE_LOOP(uint8_t);
    case 2: WHERE_LOOP(uint16_t);
    case 4: WHERE_LOOP(uint32_t);
    case 8: WHERE_LOOP(uint64_t);
  }
  return -1;
}

/* ---- cast ---- */

/* How a value v becomes the output type T: to bool means "is nonzero". */
#define AS_PLAIN(T, v) ((T)(v))
#define AS_BOOL(T, v) ((T)((v) != 0))

/* The pairs with a loop of their own: the five core dtypes among themselves, the narrow ints to and
   from int64, uint64 to and from the floats, the half types to and from float32. Python takes any
   other pair in two steps through one of them (dtype.cast_hub), which keeps this file's loops (and
   its compile time) to a few dozen instead of 13 x 13. */
#define FROM_CORE(TO, AS)                                                         \
    case DT_BOOL: UNARY_LOOP(uint8_t, TO, AS(TO, x));                             \
    case DT_INT32: UNARY_LOOP(int32_t, TO, AS(TO, x));                            \
    case DT_INT64: UNARY_LOOP(int64_t, TO, AS(TO, x));                            \
    case DT_FLOAT32: UNARY_LOOP(float, TO, AS(TO, x));                            \
    case DT_FLOAT64: UNARY_LOOP(double, TO, AS(TO, x));
#define FROM_NARROW_INTS(TO)                                                      \
    case DT_INT8: UNARY_LOOP(int8_t, TO, (TO)x);                                  \
    case DT_INT16: UNARY_LOOP(int16_t, TO, (TO)x);                                \
    case DT_UINT8: UNARY_LOOP(uint8_t, TO, (TO)x);                                \
    case DT_UINT16: UNARY_LOOP(uint16_t, TO, (TO)x);                              \
    case DT_UINT32: UNARY_LOOP(uint32_t, TO, (TO)x);                              \
    case DT_UINT64: UNARY_LOOP(uint64_t, TO, (TO)x);
#define FROM_INT64(TO) if (from == DT_INT64) UNARY_LOOP(int64_t, TO, (TO)x); return -1;

int cast(int to, int from, void *out, const void *a,
         int ndim, const i64 *shape, const i64 *sa) {
  switch (to) {
    case DT_BOOL: switch (from) { FROM_CORE(uint8_t, AS_BOOL) } return -1;
    case DT_INT32: switch (from) { FROM_CORE(int32_t, AS_PLAIN) } return -1;
    case DT_INT64: switch (from) { FROM_CORE(int64_t, AS_PLAIN) FROM_NARROW_INTS(int64_t) } return -1;
    case DT_FLOAT32:
      switch (from) {
        FROM_CORE(float, AS_PLAIN)
        case DT_UINT64: UNARY_LOOP(uint64_t, float, (float)x);
        case DT_FLOAT16: UNARY_LOOP(uint16_t, float, f16_to_f32(x));
        case DT_BFLOAT16: UNARY_LOOP(uint16_t, float, bf16_to_f32(x));
      }
      return -1;
    case DT_FLOAT64: switch (from) { FROM_CORE(double, AS_PLAIN) case DT_UINT64: UNARY_LOOP(uint64_t, double, (double)x); }
      return -1;
    case DT_INT8: FROM_INT64(int8_t)
    case DT_INT16: FROM_INT64(int16_t)
    case DT_UINT8: FROM_INT64(uint8_t)
    case DT_UINT16: FROM_INT64(uint16_t)
    case DT_UINT32: FROM_INT64(uint32_t)
    case DT_UINT64:
      switch (from) {
        case DT_INT64: UNARY_LOOP(int64_t, uint64_t, (uint64_t)x);
        case DT_FLOAT32: UNARY_LOOP(float, uint64_t, (uint64_t)x);
        case DT_FLOAT64: UNARY_LOOP(double, uint64_t, (uint64_t)x);
      }
      return -1;
    case DT_FLOAT16: if (from == DT_FLOAT32) UNARY_LOOP(float, uint16_t, f32_to_f16(x)); return -1;
    case DT_BFLOAT16: if (from == DT_FLOAT32) UNARY_LOOP(float, uint16_t, f32_to_bf16(x)); return -1;
  }
  return -1;
}
