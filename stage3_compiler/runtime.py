"""The runtime: compiles rendered C with the system C compiler into a shared library, loads it and
calls it. Programs are cached on disk (under ``$SITP_CACHE/stage3``) by a hash of the source, the
flags, the compiler and the CPU's features, so a second run of the same model compiles nothing,
and in memory by their source, so a kernel seen before in this process costs one dict lookup.

Two fixed kernels live here too, the only ones the IR does not write: the counter-based random
stream (the same numbers as the earlier stages' csrc/random.c, so a seed gives the same model on
every stage) and iota (0, 1, ..., n-1).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

# -O3 and -fno-trapping-math let gcc vectorize loops with selects in them (a WHERE, a NaN-aware
# max): we never read the floating-point exception flags. -ffp-contract=off keeps a*b+c two
# roundings, as numpy computes it.
FLAGS = ["-O3", "-std=c11", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off"]


class CompileError(RuntimeError):
    pass


def compiler() -> str:
    return os.environ.get("CC") or (sysconfig.get_config_var("CC") or "cc").split()[0]


@functools.cache
def flags() -> list[str]:
    native = subprocess.run([compiler(), "-march=native", "-x", "c", "-c", "-o", os.devnull, "-"],
                            input=b"int x;", capture_output=True).returncode == 0
    return FLAGS + (["-march=native"] if native else []) + sanitize_flags()


def sanitize_flags() -> list[str]:
    """SITP_SANITIZE=address builds every kernel with AddressSanitizer (Python must run with libasan
    preloaded, as `nox -s asan` does); the flags key the disk cache, so both builds live side by side."""
    if os.environ.get("SITP_SANITIZE") == "address":
        return ["-fsanitize=address", "-fno-omit-frame-pointer", "-g"]
    return []


@functools.cache
def macros() -> bytes:
    """Every macro the compiler predefines under our flags (the CPU's ISA among them)."""
    return subprocess.run([compiler(), *[f for f in flags() if f != "-shared"], "-dM", "-E", "-x", "c", "-"],
                          input=b"", capture_output=True).stdout


@functools.cache
def machine_key() -> str:
    """The compiler's version and its predefined macros."""
    version = subprocess.run([compiler(), "--version"], capture_output=True).stdout
    return hashlib.sha256(version + macros() + sys.version.encode()).hexdigest()[:16]


@functools.cache
def wide_vector_registers() -> bool:
    """Does the compiler target a CPU with 32 vector registers of 16 floats (AVX-512)? It sets the
    size of a matmul's register tile (lower.matmul_tile)."""
    return b"__AVX512F__" in macros()


def cache_dir() -> Path:
    return Path(os.environ.get("SITP_CACHE", Path.home() / ".cache" / "sitp")) / "stage3"


_programs: dict[tuple[str, str], ctypes._CFuncPtr] = {}


def compile_c(source: str, name: str) -> ctypes._CFuncPtr:
    """The function `name` of a C source, compiled once per machine and loaded once per process."""
    fn = _programs.get((source, name))
    if fn is not None:
        return fn
    key = hashlib.sha256((source + " ".join(flags()) + machine_key()).encode()).hexdigest()[:24]
    path = cache_dir() / f"{name[:40]}-{key}.so"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            src, out = Path(tmp) / "kernel.c", Path(tmp) / "kernel.so"
            src.write_text(source)
            done = subprocess.run([compiler(), *flags(), "-o", str(out), str(src), "-lm"], capture_output=True,
                                  text=True)
            if done.returncode != 0:
                raise CompileError(f"compile of kernel {name} failed:\n{done.stderr}\n--- source ---\n{source}")
            os.replace(out, path)  # whole or absent: two processes never see half a library
    fn = getattr(ctypes.CDLL(str(path)), name)
    fn.restype = None
    _programs[(source, name)] = fn
    return fn


HOST_SOURCE = r"""
#include <stdint.h>
static inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
void rand_f32(float *out, long long n, uint64_t seed, uint64_t counter) {
  uint64_t key = mix64(seed);
  for (long long i = 0; i < n; i++)
    out[i] = (float)(mix64(key + (counter + (uint64_t)i + 1) * 0x9e3779b97f4a7c15ULL) >> 40) * 0x1p-24f;
}
void rand_f64(double *out, long long n, uint64_t seed, uint64_t counter) {
  uint64_t key = mix64(seed);
  for (long long i = 0; i < n; i++)
    out[i] = (double)(mix64(key + (counter + (uint64_t)i + 1) * 0x9e3779b97f4a7c15ULL) >> 11) * 0x1p-53;
}
void iota(long long *out, long long n) {
  for (long long i = 0; i < n; i++) out[i] = i;
}
"""


class HostKernels:
    """The CPU's side of the device seam, found as a Buffer's `kernels`: what realize asks of a device
    (a renderer, `compile`, `launch`; cuda/runtime.py answers the same on the GPU) and what random.py
    and Tensor._iota call, with the earlier stages' signatures."""

    @functools.cached_property
    def renderer(self):
        # imported on first use: renderer.py -> lower.py -> lazy.py -> debug.py lead back here
        from .renderer import CRenderer

        return CRenderer()

    def compile(self, source: str, name: str) -> ctypes._CFuncPtr:
        return compile_c(source, name)

    def launch(self, fn: ctypes._CFuncPtr, kernel, buffers: list) -> None:
        """One call runs the whole kernel: its loops are in the C. buffers: output first, as the kernel's."""
        fn(*[ctypes.c_void_p(b.address) for b in buffers])

    def rand_uniform(self, dtype: int, out: int, n: int, seed: int, counter: int) -> int:
        name = {3: "rand_f32", 4: "rand_f64"}.get(dtype)
        if name is None:
            return -1
        fn = compile_c(HOST_SOURCE, name)
        fn(ctypes.c_void_p(out), ctypes.c_longlong(n), ctypes.c_uint64(seed), ctypes.c_uint64(counter))
        return 0

    def iota(self, out: int, n: int) -> int:
        compile_c(HOST_SOURCE, "iota")(ctypes.c_void_p(out), ctypes.c_longlong(n))
        return 0


host_kernels = HostKernels()
