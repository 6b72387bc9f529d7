"""The runtime contract: what the engine asks of a device, which each device's runtime implements
(cpu/runtime.py's CPURuntime, cuda/runtime.py's CUDARuntime) and device.runtime_of finds.

A runtime renders with its renderer, compiles rendered source into a callable, launches a compiled
Program on buffers, and runs the two fixed kernels the IR does not write: the counter-based random
stream and iota. A failure raises (CompileError, or a RuntimeError naming the kernel): no status code
comes back for a caller to forget.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from ..dtype import DType, dtypes
from .program import Program
from .renderer import Renderer

RAND_KERNELS = {dtypes.float32: "rand_f32", dtypes.float64: "rand_f64"}  # the random stream's kernel a dtype


class Runtime(ABC):
    renderer: Renderer

    @abstractmethod
    def compile(self, source: str, name: str):
        """The kernel `name` of a rendered source, compiled into something `launch` calls."""

    def compile_many(self, kernels: list[tuple[str, str]]) -> list:
        """(source, name) each, compiled: one at a time unless a device does better."""
        return [self.compile(source, name) for source, name in kernels]

    @abstractmethod
    def launch(self, program: Program, buffers: list, values: tuple[int, ...] = ()) -> None:
        """Run a Program: buffers in its argument order (outputs first), then its Variables' values."""

    @abstractmethod
    def synchronize(self) -> None:
        """Wait for every kernel launched so far (to time them)."""

    @abstractmethod
    def rand_uniform(self, dtype: DType, out: int, n: int, seed: int, counter: int) -> None:
        """n numbers of the random stream in [0, 1) at address `out`: the (counter + 1)th on."""

    @abstractmethod
    def iota(self, out: int, n: int) -> None:
        """0, 1, ..., n - 1 as int64 at address `out`."""


def rand_kernel(dtype: DType) -> str:
    """The random stream's kernel for a float dtype; a TypeError for any other."""
    name = RAND_KERNELS.get(dtype)
    if name is None:
        raise TypeError(f"rand: the random stream draws float32 or float64, got {dtype.name}")
    return name
