"""Memory we own: a Buffer is a block of bytes allocated through cffi, freed with it (or kept for
the next buffer of its size).

A realized base of the lazy graph holds one; a kernel writes it once and any number read it.
numpy appears here only at the door: copying an array in, and copying bytes out.
"""

from __future__ import annotations

import os

import cffi
import numpy as np

from .dtype import DType

ffi = cffi.FFI()
# Skip zero-filling: every kernel writes its whole output.
_alloc = ffi.new_allocator(should_clear_after_alloc=False)

# Freed blocks by size, for the next buffer of that size: a training step frees and allocates the
# same sizes every step, and a fresh large block (malloc maps new pages for it) costs a page fault
# per 4 KiB on its first write, a measurable share of a training step's kernel time
# (benchmarks/results/stage3_rule_measurements.md). At most POOL_LIMIT bytes wait here; beyond that
# a freed block goes back to malloc.
_pool: dict[int, list] = {}
_pooled = [0]
POOL_LIMIT = 0 if os.environ.get("SITP_SANITIZE") else 1 << 30  # ASan sees a reused block as live
# A buffer starts on a cache line, which is one AVX-512 vector: cffi's blocks below about 1 MB start 16
# or 32 bytes into one, and then every vector load of a kernel straddles two lines, which slows a
# matmul tile (benchmarks/results/stage3_rule_measurements.md). Under ASan a block is exactly its
# size, so that a read one byte past it is caught.
ALIGN = 1 if os.environ.get("SITP_SANITIZE") else 64


class Buffer:
    __slots__ = ("nbytes", "mem", "data", "address", "version", "__weakref__")
    device = "CPU"  # the runtime that computes on it: device.runtime_of

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self.version = 0  # writes in place so far (an assign's; see lazy.LazyBuffer.seen)
        free = _pool.get(nbytes)
        if free:
            self.mem = free.pop()
            _pooled[0] -= nbytes
        else:
            self.mem = _alloc("char[]", max(nbytes, 1) + ALIGN - 1)  # the block, owned: freed with it
        start = int(ffi.cast("uintptr_t", self.mem))
        self.data = self.mem + (-start) % ALIGN  # the buffer, within the block
        self.address = int(ffi.cast("uintptr_t", self.data))

    def __del__(self) -> None:
        if _pooled and _pooled[0] + self.nbytes <= POOL_LIMIT:  # (_pooled is None at interpreter exit)
            _pool.setdefault(self.nbytes, []).append(self.mem)
            _pooled[0] += self.nbytes

    def ptr(self, offset: int, dtype: DType) -> int:
        """The address of element `offset` (in elements of dtype), as the compiled kernels take it."""
        return self.address + offset * dtype.itemsize

    @staticmethod
    def from_numpy(arr: np.ndarray) -> Buffer:
        arr = np.ascontiguousarray(arr)
        buf = Buffer(arr.nbytes)
        if arr.nbytes:
            ffi.memmove(buf.data, ffi.from_buffer(arr), arr.nbytes)
        return buf

    def to_numpy(self, offset: int, count: int, dtype: DType) -> np.ndarray:
        """A copy of `count` contiguous elements starting at element `offset`."""
        out = np.empty(count, dtype=dtype.np)
        if count:
            ffi.memmove(ffi.from_buffer(out), self.data + offset * dtype.itemsize, count * dtype.itemsize)
        return out
