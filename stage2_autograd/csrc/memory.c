/* Keep freed memory in the process instead of handing it back to the OS.

   A training step allocates and frees the same few hundred buffers every step: activations,
   gradients, the GEMM's packing panels. By default glibc serves each block over its mmap
   threshold (128 KiB at start, adapting) with fresh pages from the kernel and trims free memory
   at the top of the heap, so the next step faults those pages back in, zero-filled: 13,000 page
   faults per nanoGPT CPU-config step here, and 15-25% of its time (GEMM and elementwise kernels
   slowed on the fresh pages). With blocks up to 32 MiB served from the heap and up to 128 MiB of
   free heap kept, a warm step faults about 20 pages. The price: the process keeps its peak
   footprint (up to that much more) after tensors die, as PyTorch's caching allocators do.
   Other C libraries have their own mallopt; ASan's malloc ignores it. */
#include "kernels.h"
#ifdef __GLIBC__
#include <malloc.h>
#endif

void keep_freed_memory(void) {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  /* glibc's cap for this setting on 64-bit */
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
#endif
}
