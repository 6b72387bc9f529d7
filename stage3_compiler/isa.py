"""The instruction set the C kernels are built for: the machine's own, or a lower one on request.

A C compiler given ``-march=native`` writes code for this CPU alone: AVX-512 here, AVX2 there, and the
kernels pick their paths by what that turns on (``#ifdef __AVX512F__``). So a machine tests only its
own path. ``SITP_ISA`` builds for a lower instruction set the machine can also run, so that an
AVX-512 machine tests the AVX2 and the plain-C code too:

    SITP_ISA=native   the machine's own (the default)
    SITP_ISA=avx512   x86-64-v4: AVX-512 F, BW, CD, DQ, VL
    SITP_ISA=avx2     x86-64-v3: AVX2, FMA, F16C, BMI2
    SITP_ISA=generic  the baseline of the architecture, no vector extension beyond it (SSE2 on x86-64)

The CPU's matrix unit (`matrix_unit`: Intel's AMX, for the tiles pass, codegen/tiles.py) is used only in a
native build, where the compiler targets it; ``SITP_TILES=emulate`` writes C that does what it does instead,
on any CPU (cpu/tiles.py).

A lowered build keeps the machine's tuning (``-mtune=native``), so it times as the same code would on
a CPU of that class. The flags key every build cache (the compiler's predefined macros under them),
so the builds of different settings live side by side.
"""

from __future__ import annotations

import ctypes
import enum
import functools
import os
import platform
import re
from pathlib import Path


class ISA(enum.Enum):
    NATIVE = "native"
    AVX512 = "avx512"
    AVX2 = "avx2"
    GENERIC = "generic"


# what /proc/cpuinfo must list for a lowered x86-64 build to run here
CPU_FLAGS = {ISA.AVX512: {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"},
             ISA.AVX2: {"avx2", "fma", "f16c", "bmi2", "movbe"}}
MARCH = {ISA.AVX512: "x86-64-v4", ISA.AVX2: "x86-64-v3"}


def requested() -> ISA:
    """The setting of SITP_ISA (native when unset)."""
    raw = os.environ.get("SITP_ISA", "").strip().lower() or "native"
    try:
        return ISA(raw)
    except ValueError:
        names = ", ".join(isa.value for isa in ISA)
        raise ValueError(f"SITP_ISA must be one of {names}, got {raw!r}") from None


def cpu_flags() -> set[str]:
    """The feature flags Linux lists for this CPU (empty where /proc/cpuinfo does not exist)."""
    path = Path("/proc/cpuinfo")
    text = path.read_text() if path.exists() else ""
    found = re.search(r"^flags\s*:(.*)$", text, re.M)
    return set(found.group(1).split()) if found else set()


def runnable(isa: ISA) -> bool:
    """Can this machine run code built for `isa`?"""
    if isa in (ISA.NATIVE, ISA.GENERIC):
        return True
    return platform.machine() in ("x86_64", "AMD64") and CPU_FLAGS[isa] <= cpu_flags()


def lower_than_native() -> list[ISA]:
    """The instruction sets below this CPU's own that it can run: the ones `nox` tests besides it (AVX2
    below AVX-512; the baseline below anything)."""
    return [*([ISA.AVX2] if runnable(ISA.AVX512) else []), ISA.GENERIC]


def march_flags(native_works: bool) -> list[str]:
    """The compiler flags of the requested instruction set. `native_works`: does the compiler take
    -march=native (a compiler for another architecture may not)."""
    isa = requested()
    if not runnable(isa):
        raise RuntimeError(f"SITP_ISA={isa.value}: this CPU cannot run {MARCH[isa]} code "
                           f"(it lacks {', '.join(sorted(CPU_FLAGS[isa] - cpu_flags()))}); "
                           f"choose a lower setting or native")
    tune = ["-mtune=native"] if native_works else []
    if isa is ISA.NATIVE:
        return ["-march=native"] if native_works else []
    if isa is ISA.GENERIC:
        return ["-march=x86-64", *tune] if platform.machine() in ("x86_64", "AMD64") else []
    return [f"-march={MARCH[isa]}", *tune]


class TileUnit(enum.Enum):
    AMX = "amx"  # Intel's AMX-BF16 instructions
    EMULATED = "emulate"  # C functions doing what they do, for a CPU without them


# Linux's arch_prctl on x86-64: its syscall number, the request, and the state AMX's tiles need
SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 158, 0x1023, 18


def amx_permitted() -> bool:
    """Ask Linux for the tiles' state (8 KiB a thread, given only to a process that asks); True when
    this process may use them."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0


@functools.cache
def matrix_unit() -> TileUnit | None:
    """The matrix unit the C kernels use: AMX where the CPU has AMX-BF16, the build is native and Linux
    grants the tiles; the emulation where SITP_TILES=emulate; else none."""
    setting = os.environ.get("SITP_TILES", "").strip().lower() or "native"
    if setting == TileUnit.EMULATED.value:
        return TileUnit.EMULATED
    if setting != "native":
        raise ValueError(f"SITP_TILES must be native or {TileUnit.EMULATED.value}, got {setting!r}")
    if requested() is ISA.NATIVE and {"amx_tile", "amx_bf16"} <= cpu_flags() and amx_permitted():
        return TileUnit.AMX
    return None
