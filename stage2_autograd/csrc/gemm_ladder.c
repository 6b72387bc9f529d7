/* What the GEMM ladder was built with, so Python can report it and tests can skip honestly. */
#include "gemm_ladder.h"

/* 1 when the rungs were compiled with OpenMP (the threaded rungs then use `threads`). */
int gemm_has_openmp(void) {
#ifdef _OPENMP
  return 1;
#else
  return 0;
#endif
}

/* 1 when the rungs' AVX2/FMA microkernels were compiled in (else their plain C fallback was). */
int gemm_has_avx2_fma(void) {
#if defined(__AVX2__) && defined(__FMA__)
  return 1;
#else
  return 0;
#endif
}
