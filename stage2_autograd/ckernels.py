"""Compile the C kernels in csrc/ through cffi and load them.

The build happens at first import, with no manual step, and is cached under
``$SITP_CACHE/kernels`` (default ``~/.cache/sitp/kernels``) by a hash of everything that shapes
the binary: the sources, the flags, the compiler, the Python ABI, and the machine the flags target:
every macro the compiler predefines under those flags (``-march=native`` turns the CPU's ISA into
``__AVX2__``, ``__AVX512F__``, ... and its family into ``__znver3__``-style names; one ``cc -dM -E``
run) and the CPU's model name (Linux's /proc/cpuinfo). Changing a source therefore rebuilds, and a
cache shared between an AVX2 machine and an AVX-512 one never loads the other's build.
``SITP_ISA=avx2`` (or ``avx512``, ``generic``) builds for a lower instruction set than the
machine's (isa.py), so that one machine tests every path; ``SITP_SANITIZE=address`` builds an
AddressSanitizer copy (run Python with libasan preloaded); ``CC`` picks the compiler as usual.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import cffi

from .isa import march_flags
from .ops import c_enum

CSRC = Path(__file__).with_name("csrc")
MODULE = f"_{__package__}_kernels"


def _flags() -> list[str]:
    # -fno-math-errno lets libm calls vectorize; we never read errno. No -ffast-math: NaN and
    # signed zeros must behave as in numpy.
    flags = ["-O3", "-std=c11", "-fno-math-errno", "-Wall", "-Wno-unused-function"]
    if os.environ.get("SITP_SANITIZE") == "address":
        flags = ["-O1", "-g", "-std=c11", "-fsanitize=address", "-fno-omit-frame-pointer"]
    flags += march_flags(_supports("-march=native"))  # SITP_ISA may ask for a lower instruction set
    # The threaded GEMM rungs use OpenMP where the compiler has it, and run serially where not.
    if _links_openmp():
        flags.append("-fopenmp")
    return flags


def _compiler() -> str:
    return os.environ.get("CC") or sysconfig.get_config_var("CC").split()[0] or "cc"


def _supports(flag: str) -> bool:
    probe = subprocess.run([_compiler(), flag, "-x", "c", "-c", "-o", os.devnull, "-"],
                           input=b"int x;", capture_output=True)
    return probe.returncode == 0


def _links_openmp() -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        probe = subprocess.run([_compiler(), "-fopenmp", "-x", "c", "-o", str(Path(tmp) / "probe"), "-"],
                               input=b"#include <omp.h>\nint main(void) { return omp_get_max_threads() < 1; }",
                               capture_output=True)
    return probe.returncode == 0


def gemm_variants() -> list[str]:
    """The float32 GEMM ladder: one entry point per csrc/gemm_NN_idea.c, named like its file."""
    return sorted(p.stem for p in CSRC.glob("gemm_[0-9][0-9]_*.c"))


def _gemm_declarations() -> str:
    """`int gemm_NN_idea(<GEMM_PARAMS>);` for every rung, with the parameter list read from gemm_ladder.h."""
    header = (CSRC / "gemm_ladder.h").read_text()
    params = re.search(r"^#define GEMM_PARAMS (.*)$", header, re.M).group(1).strip()
    return "".join(f"int {name}({params});\n" for name in gemm_variants())


def _cache_dir() -> Path:
    root = Path(os.environ.get("SITP_CACHE", Path.home() / ".cache" / "sitp"))
    return root / "kernels"


def _fingerprint(sources: list[Path], flags: list[str]) -> str:
    h = hashlib.sha256()
    for path in [*sorted(CSRC.glob("*")), Path(__file__).with_name("ops.py")]:  # ops.py writes ops.h
        h.update(path.name.encode())
        h.update(path.read_bytes())
    version = subprocess.run([_compiler(), "--version"], capture_output=True).stdout
    # The ISA the flags select on this CPU: -march=native means another binary on another machine.
    isa = subprocess.run([_compiler(), *flags, "-dM", "-E", "-x", "c", os.devnull], capture_output=True).stdout
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = re.findall(r"^model name\s*:(.*)$", cpuinfo, re.M)[:1]
    for part in (*flags, version, isa, model, sys.version, cffi.__version__, MODULE):
        h.update(str(part).encode())
    return h.hexdigest()[:16]


def _build(target: Path, flags: list[str]) -> None:
    ffi = cffi.FFI()
    gemms = _gemm_declarations()
    ffi.cdef(c_enum() + (CSRC / "api.h").read_text() + gemms)
    sources = sorted(str(p) for p in CSRC.glob("*.c"))
    ldflags = [f for f in flags if f in ("-fsanitize=address", "-fopenmp")]
    # Build in a private temp dir and rename into place, so two processes never see half a file.
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        (Path(tmp) / "ops.h").write_text(c_enum())  # the kernels' op codes, from the one op table
        ffi.set_source(MODULE, '#include "gemm_ladder.h"  /* and kernels.h */\n' + gemms, sources=sources,
                       include_dirs=[tmp, str(CSRC)],
                       extra_compile_args=flags, extra_link_args=ldflags, libraries=["m"])
        built = ffi.compile(tmpdir=tmp, verbose=False)
        os.replace(built, target)
        shutil.rmtree(Path(tmp) / "build", ignore_errors=True)


def load():
    """Return (ffi, lib) for the compiled kernels, building them first if the cache misses."""
    flags = _flags()
    sources = sorted(CSRC.glob("*.c"))
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    target = _cache_dir() / f"{MODULE}-{_fingerprint(sources, flags)}{suffix}"
    if not target.exists():
        _build(target, flags)
    spec = importlib.util.spec_from_file_location(MODULE, target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ffi, module.lib


ffi, lib = load()


def int64s(xs) -> object:
    """A C int64_t array for a shape or strides argument."""
    return ffi.new("int64_t[]", list(xs) or [0])
