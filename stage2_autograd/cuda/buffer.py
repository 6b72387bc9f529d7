"""Memory on the cuda device: the GPU twin of buffer.py, with the same methods.

`ptr` returns a device address (an int): only the cuda runtime's kernels read through it. numpy
appears only at the door, as on the CPU: an array is copied in, bytes are copied out.
"""

from __future__ import annotations

import numpy as np

from ..device import check
from ..dtype import DType
from .runtime import runtime


class CudaBuffer:
    __slots__ = ("nbytes", "mem", "base", "kernels")

    def __init__(self, nbytes: int):
        self.kernels = runtime()  # what ops launch on this memory (device.py)
        self.nbytes = nbytes
        self.mem = self.kernels.backend.alloc(max(nbytes, 1))  # keeps the memory alive
        self.base = int(self.mem.ptr)

    def ptr(self, offset: int, dtype: DType) -> int:
        """The device address of element `offset` (in elements of dtype)."""
        return self.base + offset * dtype.itemsize

    @staticmethod
    def from_numpy(arr: np.ndarray) -> CudaBuffer:
        arr = np.ascontiguousarray(arr)
        buf = CudaBuffer(arr.nbytes)
        if arr.size == 1:
            # One element is every Python scalar an op meets (x * 2). A copy from host memory waits
            # for every kernel queued before it; a fill launch queues behind them and returns.
            check(buf.kernels.fill_value(buf.base, 1, arr.dtype.name, arr.reshape(-1)[0]), "fill", "Tensor")
            return buf
        buf.kernels.backend.upload(buf.base, arr.reshape(-1).view(np.uint8))
        return buf

    def to_numpy(self, offset: int, count: int, dtype: DType) -> np.ndarray:
        """A host copy of `count` contiguous elements starting at element `offset`."""
        raw = self.kernels.backend.download(self.ptr(offset, dtype), count * dtype.itemsize)
        return raw.view(dtype.np)

    def fill(self, count: int, dtype: DType, value) -> None:
        """Write `value` (already converted to dtype's Python type) into the first count elements."""
        check(self.kernels.fill_value(self.base, count, dtype.name, value), "fill", "fill")

    def read(self, offset: int, dtype: DType):
        """One element as a Python scalar."""
        return self.to_numpy(offset, 1, dtype)[0].item()
