"""A Program: a kernel compiled for a device, ready to launch (tinygrad's name; the book's table
maps teenygrad's Kernel to it). A runtime (cpu/runtime.py, cuda/runtime.py) compiles rendered
source into the function `fn`; the engine keeps Programs by the kernel's identity
(engine/identity.py), so a kernel seen before is neither lowered nor rendered nor compiled again.
"""

from __future__ import annotations

from dataclasses import dataclass

from .uops import Kernel


class CompileError(RuntimeError):
    pass


@dataclass
class Program:
    """It holds no buffers (they would stay alive with it): `kernel.buffers` is empty, and `slots`
    says which of a kernel's loaded inputs, in identity order, each argument after the outputs is."""

    kernel: Kernel
    source: str
    fn: object
    slots: list[int]

    @property
    def name(self) -> str:
        return self.kernel.name
