"""The CPU's runtime: the device object realize asks to render, compile and launch a kernel on the
CPU (cuda/runtime.py's CUDARuntime answers the same on the GPU), and a Buffer's `kernels` (stage2's
name for the device's kernel table): the two fixed kernels the IR does not write, the
counter-based random stream (the same numbers as the earlier stages' csrc/random.c, so a seed gives
the same model on every stage) and iota (0, 1, ..., n-1).
"""

from __future__ import annotations

import ctypes
import functools

from ..codegen.program import Program
from ..codegen.runtime import Runtime, rand_kernel
from ..dtype import DType
from ..isa import matrix_unit
from .compiler import compile_c, compile_kernels, vector_registers
from .renderer import CRenderer

FIXED_SOURCE = r"""
#include <stdint.h>
static inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
void rand_f32(float *out, long long n, uint64_t seed, uint64_t counter) {
  uint64_t key = mix64(seed);
  for (long long i = 0; i < n; i++)
    out[i] = (float)(mix64(key + (counter + (uint64_t)i + 1) * 0x9e3779b97f4a7c15ULL) >> 40) * 0x1p-24f;
}
void rand_f64(double *out, long long n, uint64_t seed, uint64_t counter) {
  uint64_t key = mix64(seed);
  for (long long i = 0; i < n; i++)
    out[i] = (double)(mix64(key + (counter + (uint64_t)i + 1) * 0x9e3779b97f4a7c15ULL) >> 11) * 0x1p-53;
}
void iota(long long *out, long long n) {
  for (long long i = 0; i < n; i++) out[i] = i;
}
"""


class CPURuntime(Runtime):
    @functools.cached_property
    def renderer(self) -> CRenderer:
        """The C renderer for this CPU (made on first use: probing the compiler starts a process)."""
        renderer = CRenderer(*vector_registers())
        renderer.matrix_tiles = matrix_unit()
        return renderer

    def compile(self, source: str, name: str) -> ctypes._CFuncPtr:
        return compile_kernels([(source, name)])[0]

    def compile_many(self, kernels: list[tuple[str, str]]) -> list[ctypes._CFuncPtr]:
        """(source, name) each, compiled together: compiler.compile_kernels."""
        return compile_kernels(kernels)

    def launch(self, program: Program, buffers: list, values: tuple[int, ...] = ()) -> None:
        """One call runs the whole kernel: its loops are in the C. buffers: outputs first, as the kernel's;
        values: its Variables' values, in the kernel's order (kernel.variables)."""
        program.fn(*[ctypes.c_void_p(b.address) for b in buffers], *[ctypes.c_longlong(v) for v in values])

    def synchronize(self) -> None:
        """Nothing to wait for: a kernel has run when its launch returns."""

    # ---- the fixed kernels (random.py, Tensor._iota) ----

    def rand_uniform(self, dtype: DType, out: int, n: int, seed: int, counter: int) -> None:
        fn = compile_c(FIXED_SOURCE, rand_kernel(dtype))
        fn(ctypes.c_void_p(out), ctypes.c_longlong(n), ctypes.c_uint64(seed), ctypes.c_uint64(counter))

    def iota(self, out: int, n: int) -> None:
        compile_c(FIXED_SOURCE, "iota")(ctypes.c_void_p(out), ctypes.c_longlong(n))


cpu_runtime = CPURuntime()
