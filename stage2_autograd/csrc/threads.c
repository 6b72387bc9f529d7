/* The thread count of the OpenMP loops: threads.py sets it from the one thread setting, so the
   elementwise libm loops follow the same count as the GEMM rungs (which take theirs as an argument). */
#include "kernels.h"
#ifdef _OPENMP
#include <omp.h>
#endif

void set_num_threads(int n) {
#ifdef _OPENMP
  omp_set_num_threads(n);
#else
  (void)n;
#endif
}
