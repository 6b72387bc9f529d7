/* Shared by every kernel file: the API, the element types, and the N-d strided walk. */
#include <stdint.h>
#include <string.h>
#include <math.h>
#include "ops.h"  /* generated from ops.py at build time */
#include "api.h"

typedef int64_t i64;
#define MAXDIM 64

/* Number of rows of an N-d walk: every dim but the last (a 0-d tensor is one row of one). */
static inline i64 walk_rows(int ndim, const i64 *shape) {
  i64 rows = 1;
  for (int d = 0; d < ndim - 1; d++) rows *= shape[d];
  return rows;
}

/* Advance the row index (all dims but the last) and the element offsets of k operands. */
static inline void walk_next(int ndim, const i64 *shape, i64 *idx, int k, i64 *off,
                             const i64 *const *st) {
  for (int d = ndim - 2; d >= 0; d--) {
    idx[d]++;
    for (int j = 0; j < k; j++) off[j] += st[j][d];
    if (idx[d] < shape[d]) return;
    for (int j = 0; j < k; j++) off[j] -= st[j][d] * shape[d];
    idx[d] = 0;
  }
}

/* A unit-stride loop of a costly expression (a libm call) over at least PAR_MIN elements is
   split across the cores with OpenMP, where the build has it (OMP_NUM_THREADS caps the
   threads). Cheap loads-adds-stores are not: they are bound by memory, and a second core would
   fetch the first core's cached data instead of helping. SPLIT(MIN) tells whether an n-long loop
   splits: MIN is PAR_MIN, or SERIAL (0), which the compiler folds away with the parallel branch. */
#define PAR_MIN 32768
#define SERIAL 0
#define SPLIT(MIN) ((MIN) && n >= (MIN))
#define PARALLEL_FOR _Pragma("omp parallel for schedule(static)")

#define INNER_LEN(ndim, shape) ((ndim) ? (shape)[(ndim) - 1] : 1)
#define INNER_STRIDE(ndim, s) ((ndim) ? (s)[(ndim) - 1] : 0)
