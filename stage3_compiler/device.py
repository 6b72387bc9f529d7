"""Devices: where a tensor's memory lives, and so which kernels compute on it.

A tensor's Buffer decides everything device-specific: the CPU's Buffer (buffer.py) holds cffi
memory and its `kernels` are the C kernels' `lib`; the cuda Buffer (cuda/buffer.py) holds GPU
memory hosted by CuPy and its `kernels` are the cuda runtime (cuda/runtime.py), an object with the
same kernel names and signatures as `lib`. An op asks its operand `x._buf.kernels` for the
kernel and never asks which device it is on, so a later stage adds a device as new files (its
Buffer, its kernel table) and one entry here, and no op changes.

`Device.DEFAULT` (tinygrad's name) is where a tensor goes when no device is named; setting it to
"CUDA" moves a whole program, model parameters included, onto the GPU. CuPy is imported only when
the first cuda tensor is made, so the CPU works without CuPy or a GPU. Every kernel
returns a status, and `check` turns a nonzero one into an exception: a kernel call is never the
expression of an `assert`, which `python -O` would skip.
"""

from __future__ import annotations

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
    """The Buffer class of a canonical device (imported here: buffer.py itself uses `check`); for
    CUDA this starts the cuda runtime (CuPy) once, and raises RuntimeError saying what is missing
    when CuPy or a GPU is not there."""
    if device == "CPU":
        from .buffer import Buffer

        return Buffer
    from .cuda.buffer import CudaBuffer
    from .cuda.runtime import runtime

    runtime(op)  # raises here, naming the op, rather than at the first kernel
    return CudaBuffer


def check_same(op: str, *tensors) -> None:
    """Every tensor of one op lives on one device; else a RuntimeError naming them all."""
    first = tensors[0].device
    if any(t.device != first for t in tensors[1:]):
        shown = ", ".join(f"{t.device} {t.shape}" for t in tensors)
        raise RuntimeError(f"{op}: expected every tensor on one device, got {shown}; move them with .to()")


def check(status: int, kernel: str, op: str, *tensors) -> None:
    """A kernel's status: 0, or a RuntimeError naming the kernel, the op and its operands."""
    if status != 0:
        shown = ", ".join(f"{t.dtype.name} {t.shape}" for t in tensors)
        raise RuntimeError(f"{op}: kernel {kernel} failed (status {status}) on {shown or 'its operands'}")
