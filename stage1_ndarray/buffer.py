"""Memory we own: a Buffer is a block of bytes allocated through cffi and freed with it.

Tensors are views (shape, strides, offset) over a Buffer; many tensors can share one.
numpy appears here only at the door: copying an array in, and copying bytes out.
"""

from __future__ import annotations

import os

import numpy as np

from .ckernels import ffi, lib
from .device import check
from .dtype import DType, half_bits, half_value, python_type

# Skip zero-filling: every kernel writes its whole output, and fill() exists for zeros.
_alloc = ffi.new_allocator(should_clear_after_alloc=False)
lib.keep_freed_memory()  # a step's freed buffers stay for the next step (csrc/memory.c)
# A buffer starts on a cache line, which is one AVX-512 vector and one AMX tile row: malloc's blocks start 16
# bytes into one, and then every row a GEMM loads whole straddles two lines (the bfloat16 rung's tiles read
# A in place; benchmarks/results/gemm_bf16.md). Under ASan a block is exactly its size, so that a read one
# byte past it is caught.
ALIGN = 1 if os.environ.get("SITP_SANITIZE") else 64


class Buffer:
    __slots__ = ("nbytes", "block", "mem")
    kernels = lib  # what ops call on this memory: the C kernels (device.py)

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self.block = _alloc("char[]", max(nbytes, 1) + ALIGN - 1)  # owned: freed with the Buffer
        self.mem = self.block + (-int(ffi.cast("uintptr_t", self.block))) % ALIGN  # the buffer, within it

    def ptr(self, offset: int, dtype: DType):
        """A pointer to element `offset` (in elements of dtype)."""
        return self.mem + offset * dtype.itemsize

    @staticmethod
    def from_numpy(arr: np.ndarray) -> Buffer:
        arr = np.ascontiguousarray(arr)
        buf = Buffer(arr.nbytes)
        if arr.nbytes:
            ffi.memmove(buf.mem, ffi.from_buffer(arr), arr.nbytes)
        return buf

    def to_numpy(self, offset: int, count: int, dtype: DType) -> np.ndarray:
        """A copy of `count` contiguous elements starting at element `offset`."""
        out = np.empty(count, dtype=dtype.np)
        if count:
            ffi.memmove(ffi.from_buffer(out), self.ptr(offset, dtype), count * dtype.itemsize)
        return out

    def fill(self, count: int, dtype: DType, value) -> None:
        """Write `value` (already converted to dtype's Python type) into the first count elements."""
        if dtype.is_half:  # no C type of cffi's holds them: the bits are rounded in Python
            pattern = half_bits(value, dtype)
        else:
            cell = ffi.new(f"{dtype.ctype}[1]", [value])
            pattern = int.from_bytes(ffi.buffer(cell), "little")
        check(self.kernels.fill(dtype.itemsize, self.mem, count, pattern), "fill", "fill")

    def read(self, offset: int, dtype: DType):
        """One element as a Python scalar."""
        if dtype.is_half:
            return half_value(ffi.cast("uint16_t *", self.ptr(offset, dtype))[0], dtype)
        value = ffi.cast(f"{dtype.ctype} *", self.ptr(offset, dtype))[0]
        return python_type(dtype)(value)
