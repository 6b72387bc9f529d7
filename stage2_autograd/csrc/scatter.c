/* Scatter-add: the adjoint of gather. Gradients of integer-array indexing (embedding lookups, the
   windows of conv2d and pooling) add each output gradient back at the element it was read from.
   One sequential loop: repeated indices accumulate in index order, so results are deterministic. */
#include "kernels.h"

#define SCATTER_LOOP(T) do {                                                      \
    T *o = (T *)out;                                                              \
    const T *s = (const T *)src;                                                  \
    for (i64 i = 0; i < n; i++) o[index[i]] += s[i];                              \
    return 0;                                                                     \
  } while (0)

int scatter_add(int dtype, void *out, const void *src, const i64 *index, i64 n) {
  switch (dtype) {
    case DT_FLOAT32: SCATTER_LOOP(float);
    case DT_FLOAT64: SCATTER_LOOP(double);
  }
  return -1;
}
