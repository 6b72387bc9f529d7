/* Byte-level kernels: strided copy, gather, fill and iota. They move elements, never look at
   values, so they dispatch on the element size alone (1, 2, 4 or 8 bytes). */
#include "kernels.h"

#define COPY_LOOP(T) do {                                                         \
    T *O = (T *)out;                                                              \
    const T *A = (const T *)a;                                                    \
    i64 n = INNER_LEN(ndim, shape);                                               \
    i64 s = INNER_STRIDE(ndim, so), t = INNER_STRIDE(ndim, sa);                   \
    i64 rows = walk_rows(ndim, shape), idx[MAXDIM] = {0}, off[2] = {0, 0};        \
    const i64 *st[2] = {so, sa};                                                  \
    for (i64 r = 0; r < rows; r++) {                                              \
      T *o = O + off[0];                                                          \
      const T *p = A + off[1];                                                    \
      if (s == 1 && t == 1) memmove(o, p, (size_t)n * sizeof(T));                 \
      else for (i64 i = 0; i < n; i++) o[i * s] = p[i * t];                       \
      walk_next(ndim, shape, idx, 2, off, st);                                    \
    }                                                                             \
    return 0;                                                                     \
  } while (0)

int copy_strided(int itemsize, void *out, const i64 *so, const void *a, const i64 *sa,
                 int ndim, const i64 *shape) {
  switch (itemsize) {
    case 1: COPY_LOOP(uint8_t);
    case 2: COPY_LOOP(uint16_t);
    case 4: COPY_LOOP(uint32_t);
    case 8: COPY_LOOP(uint64_t);
  }
  return -1;
}

/* out[b, ...] = the strided block (shape, sa) that starts at a + offsets[b]. */
#define GATHER_LOOP(T) do {                                                       \
    T *o = (T *)out;                                                              \
    const T *A = (const T *)a;                                                    \
    i64 n = INNER_LEN(ndim, shape), t = INNER_STRIDE(ndim, sa);                   \
    i64 rows = walk_rows(ndim, shape);                                            \
    const i64 *st[1] = {sa};                                                      \
    for (i64 b = 0; b < nb; b++) {                                                \
      i64 idx[MAXDIM] = {0}, off[1] = {offsets[b]};                               \
      for (i64 r = 0; r < rows; r++, o += n) {                                    \
        const T *p = A + off[0];                                                  \
        for (i64 i = 0; i < n; i++) o[i] = p[i * t];                              \
        walk_next(ndim, shape, idx, 1, off, st);                                  \
      }                                                                           \
    }                                                                             \
    return 0;                                                                     \
  } while (0)

int gather(int itemsize, void *out, const void *a, const i64 *offsets, i64 nb,
           int ndim, const i64 *shape, const i64 *sa) {
  switch (itemsize) {
    case 1: GATHER_LOOP(uint8_t);
    case 2: GATHER_LOOP(uint16_t);
    case 4: GATHER_LOOP(uint32_t);
    case 8: GATHER_LOOP(uint64_t);
  }
  return -1;
}

/* pattern holds the element's bytes in its low itemsize bytes. */
#define FILL_LOOP(T) do {                                                         \
    T *restrict o = (T *)out, v = (T)pattern;                                     \
    for (i64 i = 0; i < n; i++) o[i] = v;                                         \
    return 0;                                                                     \
  } while (0)

int fill(int itemsize, void *out, i64 n, uint64_t pattern) {
  switch (itemsize) {
    case 1: FILL_LOOP(uint8_t);
    case 2: FILL_LOOP(uint16_t);
    case 4: FILL_LOOP(uint32_t);
    case 8: FILL_LOOP(uint64_t);
  }
  return -1;
}

void iota(i64 *out, i64 n) {
  for (i64 i = 0; i < n; i++) out[i] = i;
}
