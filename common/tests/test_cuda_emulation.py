"""The CUDA kernels *run* on the CPU, against numpy, so CI checks what they compute, not only that
they compile: every generated runtime kernel through a C++ shim that makes it one serial thread,
and every GEMM rung through a threaded emulator (a CUDA thread is an OS thread, __syncthreads a
barrier, cp.async a synchronous copy, and ldmatrix / mma.sync / wgmma twins written from the PTX
ISA's fragment and descriptor layouts). A GPU run (benchmarks/test_gemm_cuda.py) remains the judge
of the hardware's semantics and of the reading of the ISA these twins encode."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from common.cuda_emulation import GEMM_SHIM, SHIM, without_asm_helpers

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


# ---- the generated kernels run on the CPU: a C++ shim (common/cuda_emulation.py) makes each one serial thread ----

NP_DTYPES = {"bool": np.bool_, "int32": np.int32, "int64": np.int64, "float32": np.float32, "float64": np.float64,
             "int8": np.int8, "int16": np.int16, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
             "uint64": np.uint64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}  # (numpy's float16 is IEEE's)
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
        base = rng.integers(0, 6, big) if op == "pow" else rng.integers(info.min, info.max, big, NP_DTYPES[dtype],
                                                                        endpoint=True)
        base = np.asarray(base).astype(dtype)
    else:
        base = np.asarray(rng.standard_normal(big) * 3).astype(NP_DTYPES[dtype])
        if base.size > 2 and op != "cast":
            base.flat[1] = np.nan
    view = base[(slice(None, None, -1),) + (slice(None),) * (len(shape) - 2) + (slice(None, None, 2),)] \
        if len(shape) >= 2 else (base[::2] if shape else base)
    assert view.shape == shape
    return view


INTS_ = ("int32", "int64", "int8", "int16", "uint8", "uint16", "uint32", "uint64")


def erf(x):
    import math

    return np.vectorize(math.erf, otypes=[x.dtype])(x)


def erfc(x):
    import math

    return np.vectorize(math.erfc, otypes=[x.dtype])(x)


def gelu(x):
    """x * Phi(x), computed in float64."""
    x64 = x.astype(np.float64)
    return (x64 * 0.5 * erfc(-x64 / np.sqrt(2))).astype(x.dtype)


def gelu_grad(x, g):
    """g * (Phi(x) + x * phi(x)), computed in float64."""
    x64 = x.astype(np.float64)
    slope = 0.5 * erfc(-x64 / np.sqrt(2)) + x64 * np.exp(-0.5 * x64 * x64) / np.sqrt(2 * np.pi)
    return (g * slope).astype(x.dtype)


UNARY_REF = {"neg": np.negative, "recip": lambda x: np.divide(1, x, dtype=x.dtype), "sqrt": np.sqrt, "exp": np.exp,
             "log": np.log, "exp2": np.exp2, "log2": np.log2, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
             "erf": erf, "abs": np.abs, "sign": np.sign, "not": lambda x: ~x, "gelu": gelu}
BINARY_REF = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
              "max": np.maximum, "min": np.minimum, "cmplt": np.less, "cmple": np.less_equal, "cmpeq": np.equal,
              "cmpne": np.not_equal, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
              "gelu_grad": gelu_grad}


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
        if din in ("float32", "float64") and dout != "bool" and not dout.startswith("float"):
            a = np.asarray(np.trunc(a), dtype=din)  # out-of-range or fractional float -> int differs by platform
            a = np.asarray(np.abs(a), dtype=din) if dout.startswith("uint") else a  # (and a negative one -> unsigned)
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
        ref = {"reduce_add": np.sum, "reduce_mul": np.prod, "reduce_max": np.max, "reduce_min": np.min,
               "argmax": np.argmax, "argmin": np.argmin}[op]
        expect = ref(x, axis=1) if kind == "arg_reduce" else ref(x, axis=1, dtype=x.dtype) if op in (
            "reduce_add", "reduce_mul") else ref(x, axis=1)
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


@pytest.mark.parametrize("entry", [e for e in CATALOGUE if e[0] == "matmul"], ids=str)
def test_cpu_shim_matmul_matches_numpy(cpu_kernels, entry):
    """The generated matmul (the dtypes the GEMM ladder does not take), with K = 0 among the shapes."""
    dtype = entry[2]
    for batch, M, N, K in ((2, 3, 5, 4), (1, 2, 3, 0)):
        a = sample(dtype, (batch, M, K), 6).copy()
        b = sample(dtype, (batch, K, N), 7).copy()
        if dtype in INTS_:
            a, b = a % 100, b % 100  # numpy's int matmul wraps as ours does, but keep the check readable
        a, b = np.nan_to_num(a), np.nan_to_num(b)
        out = np.empty((batch, M, N), NP_DTYPES[dtype])
        call(cpu_kernels, entry, out, a, b, batch, M, N, K)
        assert_same(out, np.matmul(a, b), dtype)


# ---- the SIMT GEMM rungs run on the CPU: each CUDA thread an OS thread, __syncthreads a barrier ----

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


@pytest.mark.parametrize("M,N,K,shift,beta,batch", [(70, 45, 33, 0, 0.0, 1), (130, 136, 72, 1, 0.5, 1),
                                                    (129, 136, 128, 0, 0.0, 1), (70, 45, 33, 1, 0.5, 3)])
@pytest.mark.parametrize("rung", list(gemm.variants()))
def test_rung_on_cpu_emulation(emulated, rung, M, N, K, shift, beta, batch):
    """Edges on every side, C = NaN when beta == 0 (must not be read), A one element off 16-byte
    alignment (vector paths must fall back), a shape whose loads all take the vector path, and a
    batch of matrices along the grid's depth (blockIdx.z). Tensor-core rungs run on the shim's twins
    of ldmatrix, mma.sync and wgmma, written from the PTX ISA's fragment and descriptor layouts:
    this checks the kernels' plumbing against that reading."""
    import ctypes

    v, lib = gemm.get_variant(rung), emulated(rung)
    rng = np.random.default_rng(M + K)
    A = rng.standard_normal(batch * M * K + 8).astype(np.float32)
    B = rng.standard_normal((batch, K, N)).astype(np.float32)
    if v.precision == "bf16":
        A, B = to_bf16(A), to_bf16(B)
    A = A[shift:shift + batch * M * K].reshape(batch, M, K)
    C0 = rng.standard_normal((batch, M, N)).astype(np.float32)
    C = C0.copy() if beta else np.full((batch, M, N), np.nan, np.float32)
    gx, gy, gz = v.grid(M, N, batch)
    ptr = ctypes.c_void_p
    lib.sitp_launch(ctypes.cast(getattr(lib, rung), ptr), gx, gy, gz, v.threads, C.ctypes.data_as(ptr),
                    A.ctypes.data_as(ptr), B.ctypes.data_as(ptr), M, N, K, ctypes.c_float(0.75), ctypes.c_float(beta))
    exact = (lambda x: (x.astype(np.uint32) << np.uint32(16)).view(np.float32)) if v.precision == "bf16" else np.asarray
    expect = 0.75 * (exact(A).astype(np.float64) @ exact(B)) + beta * C0
    np.testing.assert_allclose(C, expect, rtol=1e-5, atol=1e-5)
