"""The CPU's compiler driver: rendered C goes through the system C compiler into a shared library,
which is loaded and whose function is called. Libraries are cached on disk (under
``$SITP_CACHE/stage3``) by a hash of the source, the flags, the compiler and the CPU's features
(`source_key`, `machine_key`), so a second run of the same model compiles nothing, and in memory
by their source, so a kernel seen before in this process costs one dict lookup. The compiler's
predefined macros also tell what the CPU has (`vector_registers`), which the C renderer
turns into its capabilities.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..codegen.program import CompileError
from ..isa import march_flags
from ..settings import cache_dir
from ..threads import available

# -O3 and -fno-trapping-math let gcc vectorize loops with selects in them (a WHERE, a NaN-aware
# max): we never read the floating-point exception flags. -ffp-contract=off keeps a*b+c two
# roundings, as numpy computes it.
FLAGS = ["-O3", "-std=c11", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off"]


def compiler() -> str:
    return os.environ.get("CC") or (sysconfig.get_config_var("CC") or "cc").split()[0]


def accepts(*flag: str) -> bool:
    """Does the compiler take these flags?"""
    return subprocess.run([compiler(), *flag, "-x", "c", "-c", "-o", os.devnull, "-"],
                          input=b"int x;", capture_output=True).returncode == 0


# Where a kernel lets gcc fuse a*b + c into one FMA (codegen/fma.fused_multiply_adds), it must fuse every
# such pair, whatever the CPU: gcc's tuning for AMD's Zen cores otherwise keeps the multiply and the
# add apart where the add is a loop's accumulator in vectors of up to 256 bits (an FMA's latency is
# longer than an add's), but not in wider vectors nor in unrolled scalar code. Then the same matmul
# summed another way (one kernel vectorized by gcc's loop vectorizer, its tiled twin by hand) gave
# other bits on AVX2 alone. Setting the limit to 0 makes gcc fuse them all.
ALWAYS_FMA = ["--param", "avoid-fma-max-bits=0"]


@functools.cache
def flags() -> list[str]:
    native = accepts("-march=native")
    # -mprefer-vector-width=512: gcc tunes Intel's AVX-512 cores for vectors of 256 bits; its loop
    # vectorizer then leaves half of every register unused. On a CPU without AVX-512 the flag changes
    # nothing. The instruction set is the machine's, or a lower one by SITP_ISA (isa.py).
    return FLAGS + march_flags(native) + (["-mprefer-vector-width=512"] if native else []) \
        + (ALWAYS_FMA if accepts(*ALWAYS_FMA) else []) + openmp_flags() + sanitize_flags()


def openmp_flags() -> list[str]:
    """-fopenmp where the compiler has OpenMP: THREAD (codegen/opts.py) splits a kernel's loops with it.
    Without it the pragmas are ignored and every kernel runs on one thread, still correct."""
    probe = subprocess.run([compiler(), "-fopenmp", "-x", "c", "-shared", "-fPIC", "-o", os.devnull, "-"],
                           input=b"int x;", capture_output=True)
    return ["-fopenmp"] if probe.returncode == 0 else []


def sanitize_flags() -> list[str]:
    """SITP_SANITIZE=address builds every kernel with AddressSanitizer (Python must run with libasan
    preloaded, as `nox -s asan` does); the flags key the disk cache, so both builds live side by side."""
    if os.environ.get("SITP_SANITIZE") == "address":
        return ["-fsanitize=address", "-fno-omit-frame-pointer", "-g"]
    return []


# gcc's driver links a shared library through collect2, with the C runtime's start files and libc's
# linker scripts: a third of a small kernel's build (benchmarks/results/stage3_compile_cost.md). A
# kernel needs none of that. Its object file calls only libm, libgomp (OpenMP's threads), libgcc's
# helpers (a 128-bit division, a half-float conversion) and the libc every process already has, so
# `ld` links it against those alone. Where that fails (another compiler or system), the driver links.
@dataclass(frozen=True)
class DirectLink:
    ld: str
    libraries: tuple[str, ...]  # after the object: an archive (libgcc.a) serves what is undefined before it

    def command(self, obj: Path, lib: Path) -> list[str]:
        return [self.ld, "-shared", "-o", str(lib), str(obj), *self.libraries]


@functools.cache
def direct_link() -> DirectLink | None:
    """How `ld` alone makes a kernel's object a shared library, or None: the driver links."""
    if sanitize_flags():  # AddressSanitizer's runtime is the driver's to link
        return None
    names = ["libgcc.a", "libm.so.6"] + (["libgomp.so"] if openmp_flags() else [])
    libraries = [tool_path("-print-file-name=" + name) for name in names]
    ld = tool_path("-print-prog-name=ld")
    if ld is None or None in libraries:
        return None
    link = DirectLink(ld, tuple(libraries))
    with tempfile.TemporaryDirectory() as tmp:
        try:
            build_with(link, PROBE, Path(tmp) / "probe.so")
            probe = ctypes.CDLL(str(Path(tmp) / "probe.so")).probe
        except (CompileError, OSError):
            return None
    probe.restype = ctypes.c_float
    return link if probe(ctypes.c_float(0.0)) == 4.0 else None


# a libm call, an OpenMP loop and a libgcc helper (a 128-bit division): what kernels link against
PROBE = """float expf(float);
float probe(float x) {
  float sum = 0.0f;
  #pragma omp parallel for reduction(+:sum)
  for (int i = 0; i < 4; i++) sum += expf(x) * (float)((__int128)(i + 8) / (__int128)(i + 8));
  return sum;
}
"""


def tool_path(query: str) -> str | None:
    """What `cc -print-file-name=...` or `-print-prog-name=...` names, when it names a file that exists
    (the compiler echoes the bare name back when it knows no path)."""
    found = subprocess.run([compiler(), query], capture_output=True, text=True).stdout.strip()
    if query.startswith("-print-prog-name"):
        return found if os.path.isabs(found) and os.path.exists(found) else shutil.which(found)
    return found if os.path.isabs(found) and os.path.exists(found) else None


@functools.cache
def macros() -> bytes:
    """Every macro the compiler predefines under our flags (the CPU's ISA among them)."""
    return subprocess.run([compiler(), *[f for f in flags() if f != "-shared"], "-dM", "-E", "-x", "c", "-"],
                          input=b"", capture_output=True).stdout


@functools.cache
def machine_key() -> str:
    """The compiler's version and its predefined macros."""
    version = subprocess.run([compiler(), "--version"], capture_output=True).stdout
    linking = repr(direct_link()).encode()
    return hashlib.sha256(version + macros() + linking + sys.version.encode()).hexdigest()[:16]


@functools.cache
def vector_registers() -> tuple[int, int]:
    """The vector registers of the instruction set the compiler targets: (float32 lanes in one, how many).
    AVX-512: 32 of 16 floats; AVX and AVX2: 16 of 8; SSE2 (x86-64's baseline) 16 of 4, NEON 32 of 4.
    They size an upcast kernel's vectors and a matmul's register tile (cpu/renderer.py)."""
    found = macros()
    if b"__AVX512F__" in found:
        return 16, 32
    if b"__AVX__" in found:
        return 8, 16
    return 4, 32 if b"__aarch64__" in found else 16


_programs: dict[tuple[str, str], ctypes._CFuncPtr] = {}
RUNS = [0]  # builds this process ran (benchmarks read it: python -m common.chat.engine)


def source_key(source: str) -> str:
    return hashlib.sha256((source + " ".join(flags()) + machine_key()).encode()).hexdigest()[:24]


def build(sources: list[str], out: Path) -> None:
    """Compile C sources, concatenated into one file, to the shared library `out` (atomically)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    RUNS[0] += 1
    build_with(direct_link(), "\n".join(sources), out)


def build_with(link: DirectLink | None, source: str, out: Path) -> None:
    """The compiler makes an object and `link` (direct_link) a library of it, or the driver does both."""
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        src, obj, lib = Path(tmp) / "kernel.c", Path(tmp) / "kernel.o", Path(tmp) / "kernel.so"
        src.write_text(source)
        if link is None:
            run_tool([compiler(), *flags(), "-o", str(lib), str(src), "-lm"])
        else:
            run_tool([compiler(), *[f for f in flags() if f != "-shared"], "-c", "-o", str(obj), str(src)])
            run_tool(link.command(obj, lib))
        os.replace(lib, out)  # whole or absent: two processes never see half a library


def run_tool(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise CompileError(done.stderr)


def load(path: Path, symbol: str, cache_as: tuple[str, str]) -> ctypes._CFuncPtr:
    fn = getattr(ctypes.CDLL(str(path)), symbol)
    fn.restype = None
    _programs[cache_as] = fn
    return fn


def compile_c(source: str, name: str) -> ctypes._CFuncPtr:
    """The function `name` of a C source, compiled once per machine and loaded once per process."""
    fn = _programs.get((source, name))
    if fn is not None:
        return fn
    path = cache_dir() / f"{name[:40]}-{source_key(source)}.so"
    if not path.exists():
        try:
            build([source], path)
        except CompileError as err:
            raise CompileError(f"compile of kernel {name} failed:\n{err}\n--- source ---\n{source}") from None
    return load(path, name, (source, name))


def compile_jobs() -> int:
    """Compiler processes run at once: one per core this process may use, at most 8."""
    return min(available(), 8)


def compile_kernels(kernels: list[tuple[str, str]]) -> list[ctypes._CFuncPtr]:
    """Many kernels' functions at once: (source, name) each. The ones compiled before (this process,
    or on disk) load; the rest compile together, as one C file per core built in parallel, so a
    cold model step pays a few compiler starts instead of one per kernel. In a shared file each
    function is renamed `name_<hash of its source>` (kernels of one name differ in their ops), and
    every kernel's own cache entry is a link to the shared library."""
    fns: list = [_programs.get(k) for k in kernels]
    missing: dict[str, tuple[str, str]] = {}  # source key -> (source, name)
    for (source, name), fn in zip(kernels, fns, strict=True):
        if fn is None:
            key = source_key(source)
            if not (cache_dir() / f"{name[:40]}-{key}.so").exists():
                missing.setdefault(key, (source, name))
    if missing:
        todo = list(missing.items())
        jobs = min(compile_jobs(), len(todo))
        chunks = [todo[i::jobs] for i in range(jobs)]
        with ThreadPoolExecutor(jobs) as pool:  # each thread waits on its compiler process
            errors = list(pool.map(build_chunk, chunks))
        for err in errors:
            if err is not None:
                raise err
    for i, ((source, name), fn) in enumerate(zip(kernels, fns, strict=True)):
        if fn is None:
            key = source_key(source)
            fns[i] = load(cache_dir() / f"{name[:40]}-{key}.so", symbol(name, key), (source, name))
    return fns


def symbol(name: str, key: str) -> str:
    return f"{name}_{key[:12]}"


def renamed(source: str, name: str, key: str) -> str:
    """The kernel's source with its functions named after `symbol(name, key)` by the C preprocessor: the
    kernel `name` and, under THREAD, its part function `name_part` (two kernels of one name in a file
    would clash); the macros are undefined after the kernel, so the next one in the file is untouched."""
    new = symbol(name, key)
    return (f"#define {name} {new}\n#define {name}_part {new}_part\n{source}\n"
            f"#undef {name}\n#undef {name}_part\n")


def build_chunk(chunk: list[tuple[str, tuple[str, str]]]) -> CompileError | None:
    """One shared library for a chunk of kernels, and a link to it under each kernel's own name. A
    chunk that fails (or holds one kernel) compiles its kernels one by one, so an error names the
    kernel at fault."""
    if len(chunk) > 1:
        lib = cache_dir() / f"batch-{hashlib.sha256(''.join(k for k, _ in chunk).encode()).hexdigest()[:24]}.so"
        try:
            build([renamed(source, name, key) for key, (source, name) in chunk], lib)
        except CompileError:
            pass
        else:
            for key, (_, name) in chunk:
                link = cache_dir() / f"{name[:40]}-{key}.so"
                tmp = link.with_name(f"{link.name}.{os.getpid()}.tmp")
                os.symlink(lib.name, tmp)
                os.replace(tmp, link)
            return None
    for key, (source, name) in chunk:
        try:
            build([renamed(source, name, key)], cache_dir() / f"{name[:40]}-{key}.so")
        except CompileError as err:
            failed = CompileError(f"compile of kernel {name} failed:\n{err}\n--- source ---\n{source}")
            failed.source = source  # realize names the kernel (and the user's line that built it) from it
            return failed
    return None
