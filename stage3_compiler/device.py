"""Devices: where a tensor's memory lives, and so which runtime computes on it.

A device is a Buffer class and a runtime: the CPU's Buffer (buffer.py) holds cffi memory and the
CPU's runtime (cpu/runtime.py: the C renderer, the C compiler driver, the launch, the fixed kernels)
computes on it; the cuda Buffer (cuda/buffer.py) holds GPU memory hosted by CuPy and the cuda runtime
(cuda/runtime.py) computes on it. Both runtimes implement one contract (codegen/runtime.Runtime),
and `runtime_of` is the one way to reach a device's runtime: realize asks it for the device of a
kernel's output and never asks which device that is, so a device is new files (its Buffer, its
runtime, its renderer) and one entry here.

`Device.DEFAULT` (tinygrad's name) is where a tensor goes when no device is named; setting it to
"CUDA" moves a whole program, model parameters included, onto the GPU. CuPy is imported only when
the first cuda tensor is made, so the CPU works without CuPy or a GPU. A runtime raises where a
kernel fails: no status comes back for a caller to check.
"""

from __future__ import annotations

from .buffer import Buffer
from .codegen.runtime import Runtime
from .cpu.runtime import cpu_runtime
from .cuda.buffer import CudaBuffer
from .cuda.runtime import runtime

ALIASES = {"cpu": "CPU", "clang": "CPU", "c": "CPU", "cuda": "CUDA", "gpu": "CUDA", "cuda:0": "CUDA"}


class Device:
    DEFAULT: str = "CPU"


def canonical(op: str, device: str | None) -> str:
    """The device's name as Tensor.device spells it ("CPU", "CUDA"); None means Device.DEFAULT."""
    if device is None:
        device = Device.DEFAULT
    name = ALIASES.get(str(device).lower())
    if name is None:
        raise RuntimeError(f"{op}: device {device!r} is not available in this stage; "
                           f"expected one of {sorted({name.lower() for name in ALIASES.values()})}")
    return name


def buffer_class(op: str, device: str) -> type:
    """The Buffer class of a canonical device; for CUDA this starts the cuda runtime (CuPy) once, and
    raises RuntimeError saying what is missing when CuPy or a GPU is not there."""
    if device == "CPU":
        return Buffer
    runtime_of(op, device)  # starts the device: raises here, naming the op, rather than at the first kernel
    return CudaBuffer


def runtime_of(op: str, device: str) -> Runtime:
    """The device's runtime (codegen/runtime.Runtime: its renderer, compiler, launcher and fixed kernels),
    started on first use."""
    return cpu_runtime if device == "CPU" else runtime(op)


def check_same(op: str, *tensors) -> None:
    """Every tensor of one op lives on one device; else a RuntimeError naming them all."""
    first = tensors[0].device
    if any(t.device != first for t in tensors[1:]):
        shown = ", ".join(f"{t.device} {t.shape}" for t in tensors)
        raise RuntimeError(f"{op}: expected every tensor on one device, got {shown}; move them with .to()")
