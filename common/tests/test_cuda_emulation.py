"""The CUDA kernels *run* on the CPU, against numpy, so CI checks what they compute, not only that
they compile: every generated runtime kernel through a C++ shim that makes it one serial thread,
and every GEMM rung through a threaded emulator (a CUDA thread is an OS thread, __syncthreads a
barrier, cp.async a synchronous copy, and ldmatrix / mma.sync / wgmma twins written from the PTX
ISA's fragment and descriptor layouts). A GPU run (benchmarks/test_gemm_cuda.py) remains the judge
of the hardware's semantics and of the reading of the ISA these twins encode."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

CUDA_DIR = Path(__file__).resolve().parents[2] / "stage2_autograd" / "cuda"


def load(name: str):
    """A module of stage2_autograd/cuda/ by path: these tests must not depend on the stage's import."""
    spec = importlib.util.spec_from_file_location(f"sitp_emulation_{name}", CUDA_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gemm = load("gemm")
gen = load("elementwise_src")
CATALOGUE = gen.catalogue()


# ---- the generated kernels run on the CPU: a C++ shim makes each one serial thread ----

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
static inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
template <class T, class U> static inline T atomicAdd(T *p, U v) { T old = *p; *p = (T)(*p + (T)v); return old; }
"""
NP_DTYPES = {"bool": np.bool_, "int32": np.int32, "int64": np.int64, "float32": np.float32, "float64": np.float64}
SHAPES = {0: (), 1: (7,), 4: (2, 3, 1, 4)}


@pytest.fixture(scope="module")
def cpu_kernels(tmp_path_factory):
    """Every catalogue kernel compiled as C++ for one thread (grid-stride loops then walk every element)."""
    import ctypes
    import shutil

    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler for the CPU shim")
    build = tmp_path_factory.mktemp("cuda_shim")
    (build / "kernels.cpp").write_text(SHIM + "\n".join(gen.source(*entry)[1] for entry in CATALOGUE))
    subprocess.run([cxx, "-O0", "-shared", "-fPIC", "-std=c++17", "-w", "-o", str(build / "kernels.so"),
                    str(build / "kernels.cpp")], check=True)
    return ctypes.CDLL(str(build / "kernels.so"))


def call(lib, entry: tuple, *args) -> None:
    import ctypes

    scalar = {np.int32: ctypes.c_int32, np.int64: ctypes.c_int64, np.uint64: ctypes.c_uint64,
              np.float32: ctypes.c_float, np.float64: ctypes.c_double, np.bool_: ctypes.c_uint8}

    def convert(x):
        if isinstance(x, np.ndarray):
            return ctypes.c_void_p(x.ctypes.data)  # numpy's data pointer is element [0, ...], as the kernels expect
        if isinstance(x, int):
            return ctypes.c_int64(x)
        return scalar[type(x)](x)
    getattr(lib, gen.source(*entry)[0])(*map(convert, args))


def elems(x: np.ndarray) -> list[int]:
    return [s // x.itemsize for s in x.strides]


def sample(dtype: str, shape: tuple, seed: int, op: str | None = None) -> np.ndarray:
    """A strided view (first axis reversed, every other element of the last) of random values."""
    rng = np.random.default_rng(seed)
    big = tuple(2 * n if i == len(shape) - 1 else n for i, n in enumerate(shape))
    if dtype == "bool":
        base = np.asarray(rng.integers(0, 2, big)).astype(np.bool_)
    elif dtype in INTS_:
        info = np.iinfo(dtype)
        base = rng.integers(0, 6, big) if op == "pow" else rng.integers(info.min, info.max, big, endpoint=True)
        base = np.asarray(base).astype(dtype)
    else:
        base = np.asarray(rng.standard_normal(big) * 3).astype(dtype)
        if base.size > 2 and op != "cast":
            base.flat[1] = np.nan
    view = base[(slice(None, None, -1),) + (slice(None),) * (len(shape) - 2) + (slice(None, None, 2),)] \
        if len(shape) >= 2 else (base[::2] if shape else base)
    assert view.shape == shape
    return view


INTS_ = ("int32", "int64")


def erf(x):
    import math

    return np.vectorize(math.erf, otypes=[x.dtype])(x)


UNARY_REF = {"neg": np.negative, "recip": lambda x: np.divide(1, x, dtype=x.dtype), "sqrt": np.sqrt, "exp": np.exp,
             "log": np.log, "exp2": np.exp2, "log2": np.log2, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
             "erf": erf, "abs": np.abs, "sign": np.sign, "not": lambda x: ~x}
BINARY_REF = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
              "max": np.maximum, "min": np.minimum, "lt": np.less, "le": np.less_equal, "eq": np.equal,
              "ne": np.not_equal, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def assert_same(ours, expect, dtype):
    tol = {"float32": 1e-5, "float64": 1e-12}.get(dtype, 0)
    np.testing.assert_allclose(ours, expect.astype(ours.dtype), rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("entry", [e for e in CATALOGUE if e[0] in ("unary", "binary")], ids=str)
def test_cpu_shim_elementwise_matches_numpy(cpu_kernels, entry):
    kind, op, din, dout, ndim = entry
    shape = SHAPES[ndim]
    a = sample(din, shape, 0, op)
    out = np.empty(shape, NP_DTYPES[dout])
    with np.errstate(all="ignore"):
        if kind == "unary":
            call(cpu_kernels, entry, out, a, a.size, *shape, *elems(a))
            expect = UNARY_REF[op](a)
        else:
            b_shape = tuple(1 if i == 1 else n for i, n in enumerate(shape))  # broadcast along axis 1
            b = np.broadcast_to(sample(din, b_shape, 1, op), shape)
            call(cpu_kernels, entry, out, a, b, a.size, *shape, *elems(a), *elems(b))
            expect = BINARY_REF[op](a, b)
    assert_same(out, expect, dout)


@pytest.mark.parametrize("entry", [e for e in CATALOGUE if e[0] in ("cast", "where", "copy")], ids=str)
def test_cpu_shim_cast_where_copy_match_numpy(cpu_kernels, entry):
    kind, _, din, dout, ndim = entry
    shape = SHAPES[ndim]
    a = sample(din, shape, 2, "cast")
    if kind == "cast":
        if din in ("float32", "float64") and dout != "bool":
            a = np.asarray(np.trunc(a), dtype=din)  # out-of-range or fractional float -> int differs by platform
        out = np.empty(shape, NP_DTYPES[dout])
        call(cpu_kernels, entry, out, a, a.size, *shape, *elems(a))
        np.testing.assert_array_equal(out, a.astype(NP_DTYPES[dout]))
    elif kind == "where":
        cond, b = sample("bool", shape, 3), sample(din, shape, 4)
        out = np.empty(shape, NP_DTYPES[din])
        call(cpu_kernels, entry, out, cond, a, b, a.size, *shape, *elems(cond), *elems(a), *elems(b))
        np.testing.assert_array_equal(out, np.where(cond, a, b))
    else:
        out = np.zeros(shape[::-1], NP_DTYPES[din]).T  # write through a transposed view
        call(cpu_kernels, entry, out, a, a.size, *shape, *elems(out), *elems(a))
        np.testing.assert_array_equal(out, a)


@pytest.mark.parametrize("entry", [e for e in CATALOGUE if e[0] in ("reduce", "arg_reduce", "cumsum")], ids=str)
def test_cpu_shim_reductions_match_numpy(cpu_kernels, entry):
    kind, op, din, dout, _ = entry
    x = sample(din, (2, 5, 3), 5)  # reduced along the middle axis: (O, R, I)
    args = (*x.shape, *elems(x))
    with np.errstate(all="ignore"):
        if kind == "cumsum":
            out = np.empty(x.shape, NP_DTYPES[din])
            call(cpu_kernels, entry, out, x, *args)
            assert_same(out, np.cumsum(x, axis=1, dtype=x.dtype), din)
            return
        out = np.empty((2, 3), NP_DTYPES[dout])
        call(cpu_kernels, entry, out, x, *args)
        ref = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "argmax": np.argmax,
               "argmin": np.argmin}[op]
        expect = ref(x, axis=1) if kind == "arg_reduce" else ref(x, axis=1, dtype=x.dtype) if op in (
            "sum", "prod") else ref(x, axis=1)
    assert_same(out, expect, dout)


def test_cpu_shim_gather_scatter_fill_iota_rand(cpu_kernels):
    table = np.arange(20, dtype=np.float64).reshape(5, 4)
    rows = np.array([3, 0, 3], dtype=np.int64)
    offsets = rows * 4
    out = np.empty((3, 4))
    call(cpu_kernels, ("gather", None, "float64", "float64", 1), out, table, offsets, 3, 4, 4, 1)
    np.testing.assert_array_equal(out, table[rows])
    grad = np.zeros((5, 4))
    call(cpu_kernels, ("scatter_add", None, "float64", "float64", 1), grad, out, offsets, 3, 4, 4, 1)
    expect = np.zeros((5, 4))
    np.add.at(expect, rows, table[rows])
    np.testing.assert_array_equal(grad, expect)
    filled, idx = np.empty(7, np.int32), np.empty(9, np.int64)
    call(cpu_kernels, ("fill", None, "int32", "int32", 1), filled, 7, np.int32(-3))
    call(cpu_kernels, ("iota", None, "int64", "int64", 1), idx, 9)
    assert filled.tolist() == [-3] * 7 and idx.tolist() == list(range(9))
    uniform = np.empty(1000, np.float64)
    call(cpu_kernels, ("rand", "uniform", "float64", "float64", 1), uniform, 1000, np.uint64(5), np.uint64(0))
    assert 0.0 <= uniform.min() and uniform.max() < 1.0 and abs(uniform.mean() - 0.5) < 0.05


# ---- the SIMT GEMM rungs run on the CPU: each CUDA thread an OS thread, __syncthreads a barrier ----

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
extern "C" void sitp_launch(void *kernel, unsigned gx, unsigned gy, unsigned threads, float *C, const void *A,
                            const void *B, int M, int N, int K, float alpha, float beta) {
  blockDim = {threads, 1, 1};
  gridDim = {gx, gy, 1};
  for (unsigned by = 0; by < gy; by++)
    for (unsigned bx = 0; bx < gx; bx++) {
      blockIdx = {bx, by, 0};
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




@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    import ctypes
    import shutil

    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler for the CPU emulation")
    build, libs = tmp_path_factory.mktemp("gemm_emulation"), {}

    def load(name: str):
        if name not in libs:
            src = build / f"{name}.cpp"
            src.write_text(GEMM_SHIM + without_asm_helpers(gemm.get_variant(name).path.read_text()))
            subprocess.run([cxx, "-O1", "-std=c++20", "-pthread", "-shared", "-fPIC", "-w", "-o",
                            str(src.with_suffix(".so")), str(src)], check=True)
            libs[name] = ctypes.CDLL(str(src.with_suffix(".so")))
        return libs[name]
    return load


def to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even (finite values)."""
    u = x.astype(np.float32).view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


@pytest.mark.parametrize("M,N,K,shift,beta", [(70, 45, 33, 0, 0.0), (130, 136, 72, 1, 0.5), (129, 136, 128, 0, 0.0)])
@pytest.mark.parametrize("rung", list(gemm.variants()))
def test_rung_on_cpu_emulation(emulated, rung, M, N, K, shift, beta):
    """Edges on every side, C = NaN when beta == 0 (must not be read), A one element off 16-byte
    alignment (vector paths must fall back), and a shape whose loads all take the vector path.
    Tensor-core rungs run on the shim's twins of ldmatrix, mma.sync and wgmma, written from the PTX
    ISA's fragment and descriptor layouts: this checks the kernels' plumbing against that reading."""
    import ctypes

    v, lib = gemm.get_variant(rung), emulated(rung)
    rng = np.random.default_rng(M + K)
    A = rng.standard_normal(M * K + 8).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    if v.precision == "bf16":
        A, B = to_bf16(A), to_bf16(B)
    A = A[shift:shift + M * K].reshape(M, K)
    C0 = rng.standard_normal((M, N)).astype(np.float32)
    C = C0.copy() if beta else np.full((M, N), np.nan, np.float32)
    gx, gy, _ = v.grid(M, N)
    ptr = ctypes.c_void_p
    lib.sitp_launch(ctypes.cast(getattr(lib, rung), ptr), gx, gy, v.threads, C.ctypes.data_as(ptr),
                    A.ctypes.data_as(ptr), B.ctypes.data_as(ptr), M, N, K, ctypes.c_float(0.75), ctypes.c_float(beta))
    exact = (lambda x: (x.astype(np.uint32) << np.uint32(16)).view(np.float32)) if v.precision == "bf16" else np.asarray
    expect = 0.75 * (exact(A).astype(np.float64) @ exact(B)) + beta * C0
    np.testing.assert_allclose(C, expect, rtol=1e-5, atol=1e-5)
