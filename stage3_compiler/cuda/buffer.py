"""Memory on the cuda device: the GPU twin of buffer.py, with the same methods.

`address` is a device address (an int): only kernels on the device read through it. numpy
appears only at the door, as on the CPU: an array is copied in, bytes are copied out.
"""

from __future__ import annotations

import numpy as np

from ..dtype import DType
from .runtime import runtime


class CudaBuffer:
    __slots__ = ("nbytes", "mem", "address", "backend", "version", "__weakref__")
    device = "CUDA"  # the runtime that computes on it: device.runtime_of

    def __init__(self, nbytes: int):
        self.backend = runtime().backend  # what owns the device's memory (CuPy, or the CPU emulator)
        self.nbytes = nbytes
        self.version = 0  # writes in place so far (an assign's; see lazy.LazyBuffer.seen)
        self.mem = self.backend.alloc(max(nbytes, 1))  # keeps the memory alive
        self.address = int(self.mem.ptr)

    def ptr(self, offset: int, dtype: DType) -> int:
        """The device address of element `offset` (in elements of dtype)."""
        return self.address + offset * dtype.itemsize

    @staticmethod
    def from_numpy(arr: np.ndarray) -> CudaBuffer:
        arr = np.ascontiguousarray(arr)
        buf = CudaBuffer(arr.nbytes)
        buf.backend.upload(buf.address, arr.reshape(-1).view(np.uint8))
        return buf

    def to_numpy(self, offset: int, count: int, dtype: DType) -> np.ndarray:
        """A host copy of `count` contiguous elements starting at element `offset`."""
        raw = self.backend.download(self.ptr(offset, dtype), count * dtype.itemsize)
        return raw.view(dtype.np)
