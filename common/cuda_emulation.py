"""The CUDA kernels run on the CPU: a C++ shim compiles the very CUDA source a GPU would run with
g++, so CI checks what the kernels compute and the cuda device's plumbing without a GPU.

Two shims. SHIM makes a generated runtime kernel (stage2_autograd/cuda/elementwise_src.py) one
serial thread: a grid of one block of one thread, whose grid-stride loop then walks every element
(a reduction's shared-memory tree has one leaf). GEMM_SHIM runs a GEMM rung (cuda/gemm/*.cu) with
every CUDA thread an OS thread, __syncthreads a barrier, cp.async a synchronous copy, and
ldmatrix / mma.sync / wgmma twins written from the PTX ISA's fragment and descriptor layouts.

EmulatedBackend is a backend for stage2_autograd/cuda/runtime.py (and, built with no catalogue,
for stage3_compiler/cuda/runtime.py) on them: "device" memory is host memory, a launch is a call
into a g++-built library. The test setup installs it when
SITP_CUDA_BACKEND=emulate (conformance/conftest.py); nothing selects it by default, and the stage
never imports this file. A GPU run remains the judge of the hardware's semantics (atomics, warp
scheduling) and of the reading of the ISA these twins encode.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

SHIM = """#include <cmath>
#include <cstring>
struct sitp_dim3 { unsigned x, y, z; };
static const sitp_dim3 blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __syncthreads() ((void)0)
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
template <class T, class U> static inline T atomicAdd(T *p, U v) { T old = *p; *p = (T)(*p + (T)v); return old; }
"""


GEMM_SHIM = """#include <barrier>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>
struct sitp_dim3 { unsigned x, y, z; };
static thread_local sitp_dim3 threadIdx;
static sitp_dim3 blockIdx, blockDim, gridDim;
static std::barrier<> *sitp_barrier;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static
#define __syncthreads() sitp_barrier->arrive_and_wait()
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
static inline float2 make_float2(float a, float b) { return {a, b}; }
/* cp.async done synchronously: copy src_bytes, zero-fill the rest (what the hardware guarantees). */
static inline void cp_async16(void *dst, const void *src, int src_bytes = 16) {
  std::memset(dst, 0, 16);
  std::memcpy(dst, src, src_bytes);
}
static inline void cp_async4(void *dst, const void *src, int src_bytes) {
  std::memset(dst, 0, 4);
  std::memcpy(dst, src, src_bytes);
}
static inline void cp_async_commit() {}
template <int PENDING> static inline void cp_async_wait() {}
/* Dynamic shared memory: one 1 KiB-aligned window; a "shared address" is an offset into it. */
alignas(1024) static unsigned char sitp_smem[1 << 17];
static inline unsigned smem_addr(const void *p) { return (unsigned)((const unsigned char *)p - sitp_smem); }
static inline void cp_async16(unsigned dst, const void *src) { std::memcpy(sitp_smem + dst, src, 16); }
/* Warp collectives: lanes publish their operands, meet at the warp's barrier, read each other's. */
static std::barrier<> *sitp_warp_barrier[32];
static const void *sitp_rows[1024];
static unsigned sitp_a[1024][4], sitp_b[1024][2];
static inline void sitp_warp_sync() { sitp_warp_barrier[threadIdx.x / 32]->arrive_and_wait(); }
static inline float sitp_bf16(unsigned bits) {
  unsigned u = (bits & 0xFFFF) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
/* PTX ISA: lanes 8i..8i+7 address the rows of matrix i; lane l gets row l/4, columns 2(l%4), +1
   (with .trans: column l/4, rows 2(l%4), +1), two 16-bit values per register, low half first. */
static inline void sitp_ldmatrix(unsigned *r, const void *p, bool trans) {
  const int lane = threadIdx.x % 32, warp0 = threadIdx.x - lane;
  sitp_rows[threadIdx.x] = p;
  sitp_warp_sync();
  for (int i = 0; i < 4; i++) {
    unsigned word = 0;
    for (int h = 0; h < 2; h++) {
      const int row = trans ? 2 * (lane % 4) + h : lane / 4, col = trans ? lane / 4 : 2 * (lane % 4) + h;
      word |= (unsigned)((const unsigned short *)sitp_rows[warp0 + 8 * i + row])[col] << (16 * h);
    }
    r[i] = word;
  }
  sitp_warp_sync();
}
static inline void ldmatrix_x4(unsigned *r, const void *p) { sitp_ldmatrix(r, p, false); }
static inline void ldmatrix_x4_trans(unsigned *r, const void *p) { sitp_ldmatrix(r, p, true); }
/* mma.m16n8k16 row.col: a0 (g, 2t..), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..);
   b0 (k = 2t.., n = g), b1 (k = 2t+8.., n = g); d: rows g, g+8, columns 2t, 2t+1. */
static inline void mma_bf16(float *d, const unsigned *a, const unsigned *b) {
  const int lane = threadIdx.x % 32, warp0 = threadIdx.x - lane, g = lane / 4, t = lane % 4;
  std::memcpy(sitp_a[threadIdx.x], a, 16);
  std::memcpy(sitp_b[threadIdx.x], b, 8);
  sitp_warp_sync();
  for (int h = 0; h < 2; h++)
    for (int c = 0; c < 2; c++) {
      const int row = g + 8 * h, col = 2 * t + c;
      float acc = d[2 * h + c];
      for (int k = 0; k < 16; k++) {
        const unsigned aw = sitp_a[warp0 + (row % 8) * 4 + (k % 8) / 2][row / 8 + 2 * (k / 8)];
        const unsigned bw = sitp_b[warp0 + col * 4 + (k % 8) / 2][k / 8];
        acc += sitp_bf16(aw >> (16 * (k % 2))) * sitp_bf16(bw >> (16 * (k % 2)));
      }
      d[2 * h + c] = acc;
    }
  sitp_warp_sync();
}
/* wgmma m64n128k16, A K-major and B N-major, both 128-byte swizzled (bits 4-6 ^= bits 7-9):
   A (m, k) at start + (m/8) SBO + (m%8) 128 + (k/8) 16 + (k%8) 2;
   B (k, n) at start + (n/64) LBO + (k/8) SBO + (k%8) 128 + ((n%64)/8) 16 + (n%8) 2.
   Each thread computes its own accumulators straight from shared memory. */
static inline float sitp_desc_read(unsigned long long desc, unsigned offset) {
  unsigned addr = (unsigned)(desc & 0x3FFF) * 16 + offset;
  addr ^= ((addr >> 7) & 7) << 4;
  return sitp_bf16(*(const unsigned short *)(sitp_smem + addr));
}
static inline void wgmma_m64n128k16(float *d, unsigned long long a, unsigned long long b) {
  const unsigned a_sbo = (unsigned)((a >> 32) & 0x3FFF) * 16;
  const unsigned b_lbo = (unsigned)((b >> 16) & 0x3FFF) * 16, b_sbo = (unsigned)((b >> 32) & 0x3FFF) * 16;
  const int tid = threadIdx.x % 128, w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
  for (int j = 0; j < 16; j++)
    for (int h = 0; h < 2; h++)
      for (int c = 0; c < 2; c++) {
        const int m = 16 * w + g + 8 * h, n = 8 * j + 2 * t + c;
        float acc = d[4 * j + 2 * h + c];
        for (int k = 0; k < 16; k++)
          acc += sitp_desc_read(a, (m / 8) * a_sbo + (m % 8) * 128 + (k / 8) * 16 + (k % 8) * 2) *
                 sitp_desc_read(b, (n / 64) * b_lbo + (k / 8) * b_sbo + (k % 8) * 128 + ((n % 64) / 8) * 16 +
                                       (n % 8) * 2);
        d[4 * j + 2 * h + c] = acc;
      }
}
typedef void (*sitp_gemm)(float *, const void *, const void *, int, int, int, float, float);
/* Blocks one after another; a block's threads are OS threads meeting at a std::barrier. */
extern "C" void sitp_launch(void *kernel, unsigned gx, unsigned gy, unsigned gz, unsigned threads, float *C,
                            const void *A, const void *B, int M, int N, int K, float alpha, float beta) {
  blockDim = {threads, 1, 1};
  gridDim = {gx, gy, gz};
  for (unsigned bz = 0; bz < gz; bz++)
  for (unsigned by = 0; by < gy; by++)
    for (unsigned bx = 0; bx < gx; bx++) {
      blockIdx = {bx, by, bz};
      std::barrier<> barrier(threads);
      sitp_barrier = &barrier;
      std::vector<std::unique_ptr<std::barrier<>>> warps;
      for (unsigned w = 0; w < threads / 32; w++) {
        warps.push_back(std::make_unique<std::barrier<>>(32));
        sitp_warp_barrier[w] = warps.back().get();
      }
      std::vector<std::thread> team;
      for (unsigned t = 0; t < threads; t++)
        team.emplace_back([=] { threadIdx = {t, 0, 0}; ((sitp_gemm)kernel)(C, A, B, M, N, K, alpha, beta); });
      for (auto &th : team) th.join();
    }
}
"""
ASM_HELPERS = ("smem_addr", "cp_async16", "cp_async4", "cp_async_commit", "cp_async_wait", "ldmatrix_x4",
               "ldmatrix_x4_trans", "mma_bf16", "wgmma_m64n128k16")


def without_asm_helpers(text: str) -> str:
    """The rung with its inline-asm helpers cut out (the shim defines plain-C++ twins), its fences
    dropped (the twins are synchronous) and its dynamic shared memory pointed at the shim's window."""
    text = re.sub(r'asm volatile\("(fence|wgmma)\.[^"]*"[^;]*;', ";", text)
    text = text.replace("extern __shared__ unsigned char smem_raw[];", "unsigned char *smem_raw = sitp_smem;")
    for name in ASM_HELPERS:
        found = re.search(rf"(template <int \w+>\s*)?__device__ __forceinline__ \w+ {name}\(", text)
        if found is None:
            continue
        depth, end = 0, text.index("{", found.end())
        while True:
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
            end += 1
        text = text[:found.start()] + text[end + 1:]
    return text


# ---- building: one shared library per source, cached on disk by a hash of what shapes it ----


def compiler() -> str | None:
    return shutil.which("g++") or shutil.which("c++")


def _cache_dir() -> Path:
    return Path(os.environ.get("SITP_CACHE", Path.home() / ".cache" / "sitp")) / "cuda_emulation"


def _version(cxx: str) -> str:
    return subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout


def precompiled(header: str, flags: tuple[str, ...]) -> Path:
    """`header` written to the cache beside its precompiled twin (.gch), which g++ reads instead of
    the text when a source is built with `-include` of it under the same flags. The shim's <cmath>
    is most of a small kernel's build: measured here, 0.40 s a kernel with the text, 0.06 s with it."""
    cxx = compiler()
    key = hashlib.sha256("\0".join((header, *flags, _version(cxx))).encode()).hexdigest()[:20]
    path = _cache_dir() / f"shim-{key}.h"
    if not path.with_suffix(".h.gch").exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            text, gch = Path(tmp) / "shim.h", Path(tmp) / "shim.h.gch"
            text.write_text(header)
            subprocess.run([cxx, *flags, "-fPIC", "-w", "-x", "c++-header", "-o", str(gch), str(text)], check=True)
            os.replace(text, path)
            os.replace(gch, path.with_suffix(".h.gch"))
    return path


@functools.cache
def link_alone(cxx: str) -> tuple[str, ...] | None:
    """`ld` and the libraries a serial kernel calls (libgcc's helpers and libm: the shim's C++ is inline
    functions and constants), when the compiler names them all: `ld` alone links a kernel's object in a
    fraction of the driver's time (its start files, libstdc++ and libc's linker scripts), as stage3's CPU
    compiler does (cpu/compiler.direct_link)."""
    found = [subprocess.run([cxx, query], capture_output=True, text=True).stdout.strip()
             for query in ("-print-prog-name=ld", "-print-file-name=libgcc.a", "-print-file-name=libm.so.6")]
    found[0] = shutil.which(found[0]) or found[0]
    return tuple(found) if all(os.path.isabs(f) and os.path.exists(f) for f in found) else None


def build(source: str, flags: tuple[str, ...], header: str = "") -> ctypes.CDLL:
    """Compile C++ `source` into a shared library (or find it in the cache) and load it. A `header`
    (a shim) is compiled once, precompiled, and included before the source. A serial kernel's object is
    linked by `ld` alone (link_alone); the threaded GEMM shim's, by the driver."""
    cxx = compiler()
    if cxx is None:
        raise RuntimeError("cuda emulation: no C++ compiler (g++) on PATH")
    link = link_alone(cxx) if flags == SERIAL_FLAGS else None
    key = hashlib.sha256("\0".join((header, source, *flags, _version(cxx), repr(link))).encode()).hexdigest()[:20]
    target = _cache_dir() / f"{key}.so"
    if not target.exists():
        include = ["-include", str(precompiled(header, flags))] if header else []
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:  # rename into place: no half files
            src, obj, lib = Path(tmp) / "kernels.cpp", Path(tmp) / "kernels.o", Path(tmp) / "kernels.so"
            src.write_text(source)
            if link is None:
                subprocess.run([cxx, *flags, *include, "-shared", "-fPIC", "-w", "-o", str(lib), str(src)], check=True)
            else:
                subprocess.run([cxx, *flags, *include, "-c", "-fPIC", "-w", "-o", str(obj), str(src)], check=True)
                subprocess.run([link[0], "-shared", "-o", str(lib), str(obj), *link[1:]], check=True)
            os.replace(lib, target)
    return ctypes.CDLL(str(target))


SERIAL_FLAGS = ("-O1", "-std=c++17")
GEMM_FLAGS = ("-O1", "-std=c++20", "-pthread")
_CTYPES = {np.uint64: ctypes.c_uint64, np.int64: ctypes.c_int64, np.int32: ctypes.c_int32,
           np.float32: ctypes.c_float, np.float64: ctypes.c_double, np.uint8: ctypes.c_uint8,
           np.bool_: ctypes.c_uint8, np.int8: ctypes.c_int8, np.int16: ctypes.c_int16, np.uint16: ctypes.c_uint16,
           np.uint32: ctypes.c_uint32}


def _arg(x):
    """A kernel argument as the runtime passes it (numpy scalars; pointers as uint64) -> ctypes."""
    return _CTYPES[type(x)](x)


class HostMemory:
    """'Device' memory for the emulator: host bytes, with the address a kernel reads through."""

    __slots__ = ("array", "ptr")

    def __init__(self, nbytes: int):
        self.array = np.empty(nbytes, np.uint8)
        self.ptr = self.array.ctypes.data


class EmulatedBackend:
    """The cuda runtime's backend (see stage2_autograd/cuda/runtime.py) on the CPU.

    `gen` is the stage's elementwise_src module. Kernels are compiled a group at a time: asking
    for one kernel of n dims builds every catalogue kernel of n dims (and every fixed-size kernel
    together), one g++ run each instead of hundreds. With `gen=None` (a stage that generates each
    kernel from its graph, so has no catalogue: stage3) every source is built on its own, with the
    shim precompiled; two sources may then share a kernel name, so a library is found by both."""

    name = "emulate"
    # The GPU this pretends to be, as the runtime sizes work for it: a small one, so that tests with
    # small tensors reach the paths that split a reduction or a matmul's K across blocks.
    multiprocessors = 2

    def __init__(self, gen=None):
        self.gen = gen
        self._libs: dict[tuple[str, str], ctypes.CDLL] = {}  # (kernel name, source) -> the library

    # ---- memory ----

    def alloc(self, nbytes: int) -> HostMemory:
        return HostMemory(max(nbytes, 1))

    def upload(self, ptr: int, host: np.ndarray) -> None:
        if host.nbytes:
            ctypes.memmove(ptr, host.ctypes.data, host.nbytes)

    def download(self, ptr: int, nbytes: int) -> np.ndarray:
        out = np.empty(nbytes, np.uint8)
        if nbytes:
            ctypes.memmove(out.ctypes.data, ptr, nbytes)
        return out

    def synchronize(self) -> None:
        """Nothing to wait for: an emulated kernel has run when its launch returns."""

    # ---- kernels ----

    def _group(self, name: str) -> list[tuple[str, str]]:
        """(name, source) of every catalogue kernel compiled together with `name`."""
        gen = self.gen
        found = re.search(r"_nd(\d+)$", name)
        if found:
            ndim = int(found.group(1))
            entries = [e for e in gen.catalogue((ndim,)) if e[0] not in gen.FIXED_NDIM]
        else:
            entries = [e for e in gen.catalogue((0,)) if e[0] in gen.FIXED_NDIM]
        return [gen.source(*e) for e in entries]

    def function(self, name: str, source: str):
        if (name, source) not in self._libs:
            if self.gen is None:
                self._libs[name, source] = build(source, SERIAL_FLAGS, header=SHIM)
            else:
                group = dict(self._group(name))
                if name not in group or group[name] != source:
                    group = {name: source}
                # every source repeats the guarded prelude; the shim comes first, once
                lib = build(SHIM + "\n".join(group.values()), SERIAL_FLAGS)
                self._libs.update({(n, s): lib for n, s in group.items()})
        entry = getattr(self._libs[name, source], name)

        def launch(grid, block, args, shared_mem: int = 0) -> None:
            entry(*map(_arg, args))  # one thread: the grid-stride loop covers the whole grid
        return launch

    def gemm_function(self, variant):
        lib = build(GEMM_SHIM + without_asm_helpers(variant.path.read_text()), GEMM_FLAGS)
        entry = ctypes.cast(getattr(lib, variant.name), ctypes.c_void_p)

        def launch(grid, block, args, shared_mem: int = 0) -> None:
            lib.sitp_launch(entry, *(ctypes.c_uint(g) for g in grid), ctypes.c_uint(block[0]), *map(_arg, args))
        return launch

    def runs(self, variant) -> bool:
        """Every rung runs here (the tensor-core twins included); the runtime takes the top fp32 one."""
        return True


def use_emulator(stage_name: str) -> None:
    """Run the cuda device of stage `stage_name` (if it has one) on EmulatedBackend, before its first
    cuda tensor: SITP_CUDA_BACKEND=emulate (the tests' setup; the CLI's load_stage)."""
    import importlib

    try:
        runtime = importlib.import_module(f"{stage_name}.cuda.runtime")
    except ModuleNotFoundError:
        return  # a stage without a cuda device (stage1), or one built differently
    try:
        gen = importlib.import_module(f"{stage_name}.cuda.elementwise_src")
    except ModuleNotFoundError:
        gen = None  # no kernel catalogue: the stage renders each kernel from its graph (stage3)
    runtime.use_backend(EmulatedBackend(gen))
    from .nccl_emulation import EmulatedNccl
    from .train.collectives import use_nccl

    use_nccl(EmulatedNccl())  # data-parallel on the emulated device: NCCL's calls over MPI
