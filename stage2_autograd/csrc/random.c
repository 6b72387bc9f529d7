/* A counter-based generator: element i of a draw is a pure function of (seed, counter + i), so
   the stream is defined by the seed alone and any device can reproduce it in parallel.
   The mixer is SplitMix64's finaliser, applied twice. */
#include "kernels.h"

static inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static inline uint64_t draw(uint64_t key, uint64_t i) {
  return mix64(key + (i + 1) * 0x9e3779b97f4a7c15ULL);
}

int rand_uniform(int dtype, void *out, i64 n, uint64_t seed, uint64_t counter) {
  uint64_t key = mix64(seed);
  if (dtype == DT_FLOAT32) {
    float *o = (float *)out;
    for (i64 i = 0; i < n; i++) o[i] = (float)(draw(key, counter + (uint64_t)i) >> 40) * 0x1p-24f;
    return 0;
  }
  if (dtype == DT_FLOAT64) {
    double *o = (double *)out;
    for (i64 i = 0; i < n; i++) o[i] = (double)(draw(key, counter + (uint64_t)i) >> 11) * 0x1p-53;
    return 0;
  }
  return -1;
}
