"""The cuda runtime, CUDARuntime: what realize asks of a device (a renderer, `compile`, `launch`) and
what a Buffer's `kernels` answer (the random stream and iota), on a backend that owns memory, compilation
and launches:

    alloc(nbytes) -> object with .ptr     upload(ptr, array)        download(ptr, nbytes) -> uint8 array
    function(name, source) -> f           f(grid, block, args)      args: numpy scalars, pointers as uint64

`CupyBackend` (backend.py) is the real one. Tests may install another with `use_backend` before
the first cuda tensor is made: the CPU emulator of common/cuda_emulation.py compiles the same
sources with g++ and runs them as one thread on host memory, which is how CI checks this device
without a GPU. A program is compiled once per source in a process (a dict here) and once per
machine (CuPy's kernel cache on disk, or the emulator's).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..codegen.program import CompileError, Program
from ..codegen.runtime import Runtime, rand_kernel
from ..dtype import DType
from .backend import CupyBackend  # (CuPy itself is imported when the first cuda tensor is made)
from .group import group_shape, output_size
from .local import LOCAL_THREADS
from .renderer import CUDARenderer, local_tiles

THREADS = 128  # per block for the grid-stride kernels; any grid is correct, this one is ordinary
MAX_BLOCKS = 65535  # enough blocks to fill any GPU; the grid-stride loops cover the rest

# The CPU's two fixed kernels (cpu/runtime.py's FIXED_SOURCE), the same numbers, each thread its entries.
FIXED_SOURCE = r"""
__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
#define GRID_STRIDE(i, n) \
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)blockDim.x * gridDim.x)
extern "C" __global__ void rand_f32(float *out, long long n, unsigned long long seed, unsigned long long counter) {
  unsigned long long key = mix64(seed);
  GRID_STRIDE(i, n)
    out[i] = (float)(mix64(key + (counter + (unsigned long long)i + 1) * 0x9e3779b97f4a7c15ULL) >> 40) * 0x1p-24f;
}
extern "C" __global__ void rand_f64(double *out, long long n, unsigned long long seed, unsigned long long counter) {
  unsigned long long key = mix64(seed);
  GRID_STRIDE(i, n)
    out[i] = (double)(mix64(key + (counter + (unsigned long long)i + 1) * 0x9e3779b97f4a7c15ULL) >> 11) * 0x1p-53;
}
extern "C" __global__ void iota(long long *out, long long n) {
  GRID_STRIDE(i, n) out[i] = i;
}
"""


class LaunchShape(NamedTuple):
    outputs: int  # output entries the grid-stride loop walks (at most)
    per_block: int  # outputs a block takes a pass
    threads: int  # threads a block


def launch_shape(kernel) -> LaunchShape:
    """A thread per output, or (GROUP) a block of threads per output or per WIDE_LANES of them, or (LOCAL)
    a block of LOCAL_THREADS per as many tiles."""
    group = group_shape(kernel)
    if group is not None:
        return LaunchShape(output_size(kernel), group.lanes, group.threads)
    if local_tiles(kernel) is not None:
        return LaunchShape(output_size(kernel), LOCAL_THREADS, LOCAL_THREADS)
    return LaunchShape(output_size(kernel), THREADS, THREADS)


class CUDARuntime(Runtime):
    def __init__(self, backend):
        self.backend = backend
        self.renderer = CUDARenderer()
        self._functions: dict[tuple[str, str], object] = {}
        self._shapes: dict[str, LaunchShape] = {}  # by source: read from the kernel once, not at every launch

    # ---- what realize asks of a device ----

    def compile(self, source: str, name: str):
        """The kernel `name` of a CUDA source, compiled once per process."""
        fn = self._functions.get((source, name))
        if fn is None:
            try:
                fn = self.backend.function(name, source)
            except Exception as e:  # NVRTC and g++ each raise their own error type
                raise CompileError(f"compile of kernel {name} failed ({self.backend.name}): {e}\n"
                                   f"--- source ---\n{source}") from e
            self._functions[(source, name)] = fn
        return fn

    def compile_many(self, kernels: list[tuple[str, str]]) -> list:
        """NVRTC compiles in-process and fast: one at a time."""
        return [self.compile(source, name) for source, name in kernels]

    def launch(self, program: Program, buffers: list, values: tuple[int, ...] = ()) -> None:
        """Run a compiled kernel over its output: buffers in the kernel's argument order (outputs first),
        then its Variables' values."""
        shape = self._shapes.get(program.source)
        if shape is None:
            shape = self._shapes[program.source] = launch_shape(program.kernel)
        args = [*(np.uint64(b.address) for b in buffers), *(np.int64(v) for v in values)]
        self._launch(program.fn, shape.outputs, args, shape.per_block, shape.threads)

    def synchronize(self) -> None:
        """Wait for every kernel launched so far (a launch returns before its kernel has run)."""
        self.backend.synchronize()

    def _launch(self, fn, n: int, args: list, per_block: int = THREADS, threads: int = THREADS) -> None:
        """n outputs, `per_block` of them a block (the grid-stride loop takes the rest)."""
        if n > 0:  # a grid of zero blocks is an error in CUDA; nothing to do anyway
            fn((min(-(-n // per_block), MAX_BLOCKS), 1, 1), (threads, 1, 1), args)

    # ---- the fixed kernels (random.py, Tensor._iota), the CPU's numbers ----

    def rand_uniform(self, dtype: DType, out: int, n: int, seed: int, counter: int) -> None:
        self._launch(self.compile(FIXED_SOURCE, rand_kernel(dtype)), n, [np.uint64(out), np.int64(n), np.uint64(seed),
                                                                          np.uint64(counter)])

    def iota(self, out: int, n: int) -> None:
        self._launch(self.compile(FIXED_SOURCE, "iota"), n, [np.uint64(out), np.int64(n)])


_state: dict = {"runtime": None, "backend": None}


def use_backend(backend) -> None:
    """Run the cuda device on `backend` (tests install the CPU emulator this way). Only before the
    first cuda tensor: tensors made on one backend's memory mean nothing to another. Asking again
    for the kind of backend already running (the same .name) keeps the running one."""
    current = _state["runtime"]
    if current is not None:
        if current.backend.name != backend.name:
            raise RuntimeError(f"cuda: the {current.backend.name} backend is already in use; "
                               "choose one before the first cuda tensor")
        return
    _state["backend"] = backend


def runtime(op: str = "cuda") -> CUDARuntime:
    """The process's CUDARuntime, started on first use (CupyBackend unless use_backend chose another)."""
    rt = _state["runtime"]
    if rt is None:
        backend = _state["backend"]
        if backend is None:
            backend = CupyBackend(op)
        rt = _state["runtime"] = CUDARuntime(backend)
    return rt
