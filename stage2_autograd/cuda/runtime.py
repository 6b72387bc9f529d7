"""The cuda runtime: the C kernels' interface (csrc/api.h), answered by launches of our CUDA kernels.

`Runtime` has the same kernel names and signatures as the cffi `lib`, so an op calls
`x._buf.kernels.unary(...)` without asking which device x is on. Each call names one kernel of
elementwise_src.py (kind, op, dtypes, ndim), compiles it the first time it is asked for, caches it
by name, and launches it; float32 matmul runs the best float32 rung of the GEMM ladder (gemm.py).
The arguments arrive as the C kernels take them: pointers (ints here, device addresses; or cffi
pointers the ops cast for the C side) and cffi int64 arrays of shapes and strides.

A Runtime drives a backend, which owns memory, compilation and launches:

    alloc(nbytes) -> object with .ptr     upload(ptr, array)        download(ptr, nbytes) -> uint8 array
    function(name, source) -> f           f(grid, block, args)      args: numpy scalars, pointers as uint64
    gemm_function(variant) -> f           f(grid, block, args, shared_mem=...)
    runs(variant) -> bool                 whether the device can run a GEMM rung

`CupyBackend` (backend.py) is the real one. Tests may install another with `use_backend` before
the first cuda tensor is made: the CPU emulator of common/cuda_emulation.py compiles the same
sources with g++ and runs them on host memory, which is how CI checks this device without a GPU.
"""

from __future__ import annotations

import numpy as np

from ..ckernels import ffi
from ..dtype import dtypes
from ..ops import Ops
from . import elementwise_src as gen
from . import gemm

THREADS = 256  # per block for the grid-stride kernels; any grid is correct, this one is ordinary
MAX_BLOCKS = 65535  # enough blocks to fill any GPU; the grid-stride loops cover the rest
DTYPE_NAMES = {dt.code: dt.name for dt in dtypes.all}
BY_ITEMSIZE = {1: "bool", 4: "int32", 8: "int64"}  # copies move bits: any dtype of the size will do


def _ptr(p) -> np.uint64:
    """A kernel's pointer argument: an address (int), or a cffi pointer an op cast for the C side."""
    return np.uint64(p if isinstance(p, int) else int(ffi.cast("uintptr_t", p)))


def _ints(ndim: int, values) -> list[np.int64]:
    """The first ndim entries of a cffi int64 array (ckernels.int64s) as kernel arguments."""
    return [np.int64(values[d]) for d in range(ndim)]


def _count(ndim: int, shape) -> int:
    n = 1
    for d in range(ndim):
        n *= shape[d]
    return n


class Runtime:
    def __init__(self, backend):
        self.backend = backend
        self._functions: dict[str, object] = {}
        fp32 = [v for v in gemm.variants().values() if v.precision == "fp32" and backend.runs(v)]
        # The top float32 rung; the bf16 rungs above it round the inputs, which float32 matmul must not.
        self.gemm_variant = fp32[-1] if fp32 else None

    # ---- compiling and launching ----

    def _function(self, kind: str, op: str | None, dtype_in: str, dtype_out: str, ndim: int):
        name, code = gen.source(kind, op, dtype_in, dtype_out, ndim)  # TypeError: no such kernel
        fn = self._functions.get(name)
        if fn is None:
            fn = self._functions[name] = self.backend.function(name, code)
        return fn

    def _launch(self, fn, n: int, args: list, threads: int = THREADS) -> None:
        if n > 0:  # a grid of zero blocks is an error in CUDA; nothing to do anyway
            fn((min(-(-n // threads), MAX_BLOCKS), 1, 1), (threads, 1, 1), args)

    def _try(self, kind: str, op: str | None, dtype_in: str, dtype_out: str, ndim: int):
        """The kernel, or None where the generator has none (the C kernels return -1 there)."""
        try:
            return self._function(kind, op, dtype_in, dtype_out, ndim)
        except TypeError:
            return None

    # ---- elementwise.c ----

    def unary(self, op: int, dtype: int, out, a, ndim: int, shape, sa) -> int:
        name = DTYPE_NAMES[dtype]
        fn = self._try("unary", Ops(op).name.lower(), name, name, ndim)
        if fn is None:
            return -1
        n = _count(ndim, shape)
        self._launch(fn, n, [_ptr(out), _ptr(a), np.int64(n), *_ints(ndim, shape), *_ints(ndim, sa)])
        return 0

    def binary(self, op: int, dtype: int, out, a, b, ndim: int, shape, sa, sb) -> int:
        name, opname = DTYPE_NAMES[dtype], Ops(op).name.lower()
        out_dtype = "bool" if opname in gen.COMPARE else name
        fn = self._try("binary", opname, name, out_dtype, ndim)
        if fn is None:
            return -1
        n = _count(ndim, shape)
        self._launch(fn, n, [_ptr(out), _ptr(a), _ptr(b), np.int64(n), *_ints(ndim, shape), *_ints(ndim, sa),
                             *_ints(ndim, sb)])
        return 0

    def where(self, itemsize: int, out, cond, a, b, ndim: int, shape, sc, sa, sb) -> int:
        name = BY_ITEMSIZE[itemsize]
        fn = self._function("where", None, name, name, ndim)
        n = _count(ndim, shape)
        self._launch(fn, n, [_ptr(out), _ptr(cond), _ptr(a), _ptr(b), np.int64(n), *_ints(ndim, shape),
                             *_ints(ndim, sc), *_ints(ndim, sa), *_ints(ndim, sb)])
        return 0

    def cast(self, to: int, frm: int, out, a, ndim: int, shape, sa) -> int:
        fn = self._function("cast", None, DTYPE_NAMES[frm], DTYPE_NAMES[to], ndim)
        n = _count(ndim, shape)
        self._launch(fn, n, [_ptr(out), _ptr(a), np.int64(n), *_ints(ndim, shape), *_ints(ndim, sa)])
        return 0

    # ---- reduce.c: (O, R, I) views ----

    def reduce(self, op: int, dtype: int, out, a, O: int, R: int, I: int, so: int, sr: int, si: int) -> int:
        name = DTYPE_NAMES[dtype]
        fn = self._try("reduce", Ops(op).name.lower(), name, name, 3)
        if fn is None:
            return -1
        args = [_ptr(out), _ptr(a), *map(np.int64, (O, R, I, so, sr, si))]
        self._launch(fn, O * I * gen.REDUCE_THREADS, args, threads=gen.REDUCE_THREADS)  # a block per output
        return 0

    def arg_reduce(self, op: int, dtype: int, out, a, O: int, R: int, I: int, so: int, sr: int, si: int) -> int:
        fn = self._function("arg_reduce", Ops(op).name.lower(), DTYPE_NAMES[dtype], "int64", 3)
        args = [_ptr(out), _ptr(a), *map(np.int64, (O, R, I, so, sr, si))]
        self._launch(fn, O * I * gen.REDUCE_THREADS, args, threads=gen.REDUCE_THREADS)
        return 0

    def cumsum(self, dtype: int, out, a, O: int, R: int, I: int, so: int, sr: int, si: int) -> int:
        name = DTYPE_NAMES[dtype]
        fn = self._function("cumsum", "sum", name, name, 3)
        self._launch(fn, O * I, [_ptr(out), _ptr(a), *map(np.int64, (O, R, I, so, sr, si))])
        return 0

    # ---- copy.c ----

    def copy_strided(self, itemsize: int, out, so, a, sa, ndim: int, shape) -> int:
        name = BY_ITEMSIZE[itemsize]
        fn = self._function("copy", None, name, name, ndim)
        n = _count(ndim, shape)
        self._launch(fn, n, [_ptr(out), _ptr(a), np.int64(n), *_ints(ndim, shape), *_ints(ndim, so),
                             *_ints(ndim, sa)])
        return 0

    def gather(self, itemsize: int, out, a, offsets, nb: int, ndim: int, shape, sa) -> int:
        name = BY_ITEMSIZE[itemsize]
        fn = self._function("gather", None, name, name, ndim)
        m = _count(ndim, shape)
        self._launch(fn, nb * m, [_ptr(out), _ptr(a), _ptr(offsets), np.int64(nb), np.int64(m),
                                  *_ints(ndim, shape), *_ints(ndim, sa)])
        return 0

    def fill(self, itemsize: int, out, n: int, pattern: int) -> int:
        """The bit pattern of one element, written n times (the C kernel's contract)."""
        name = BY_ITEMSIZE[itemsize]
        value = np.array([pattern], dtype=np.uint64).view(np.uint8)[:itemsize].view(getattr(dtypes, name).np)[0]
        return self.fill_value(out, n, name, value)

    def fill_value(self, out, n: int, dtype: str, value) -> int:
        """n copies of value (a Python or numpy scalar) as dtype: what Buffer.fill asks for."""
        fn = self._function("fill", None, dtype, dtype, 1)
        scalar = np.asarray(value, dtype=getattr(dtypes, dtype).np)
        if dtype == "bool":
            scalar = scalar.astype(np.uint8)  # the kernels' bool is an unsigned char
        self._launch(fn, n, [_ptr(out), np.int64(n), scalar[()]])
        return 0

    def iota(self, out, n: int) -> None:
        self._launch(self._function("iota", None, "int64", "int64", 1), n, [_ptr(out), np.int64(n)])

    # ---- random.c: the same stream as the CPU (elementwise_src's rand is random.c's twin) ----

    def rand_uniform(self, dtype: int, out, n: int, seed: int, counter: int) -> int:
        name = DTYPE_NAMES[dtype]
        fn = self._try("rand", "uniform", name, name, 1)
        if fn is None:
            return -1
        self._launch(fn, n, [_ptr(out), np.int64(n), np.uint64(seed), np.uint64(counter)])
        return 0

    # ---- scatter.c ----

    def scatter_add(self, dtype: int, out, src, index, n: int) -> int:
        """out[index[i]] += src[i]: the generated kernel with one-element blocks (m = 1, 0-d).
        Atomic adds, so on a GPU repeated indices sum in no fixed order (the CPU's is fixed)."""
        name = DTYPE_NAMES[dtype]
        fn = self._try("scatter_add", None, name, name, 0)
        if fn is None:
            return -1
        self._launch(fn, n, [_ptr(out), _ptr(src), _ptr(index), np.int64(n), np.int64(1)])
        return 0

    # ---- adam.c ----

    def adam_step(self, dtype: int, p, m, v, g, n: int, decay: float, l2: float, b1: float, b2: float,
                  step: float, inv_sqrt_bc2: float, eps: float) -> int:
        name = DTYPE_NAMES[dtype]
        fn = self._try("adam", None, name, name, 1)
        if fn is None:
            return -1
        T = getattr(dtypes, name).np.type  # the scalars rounded to the dtype, as adam.c rounds them
        scalars = [T(x) for x in (decay, l2, b1, 1 - b1, b2, 1 - b2, step, inv_sqrt_bc2, eps)]
        self._launch(fn, n, [_ptr(p), _ptr(m), _ptr(v), _ptr(g), np.int64(n), *scalars])
        return 0

    # ---- gemm.c: float32 through the GEMM ladder, the other dtypes through a generated kernel ----

    def matmul(self, dtype: int, out, a, b, batch: int, M: int, N: int, K: int) -> int:
        name = DTYPE_NAMES[dtype]
        if batch * M * N == 0:
            return 0
        v = self.gemm_variant
        if name != "float32" or v is None or K == 0 or max(M * K, K * N, M * N) >= gemm.INT_LIMIT:
            fn = self._try("matmul", None, name, name, 3)
            if fn is None:
                return -1
            self._launch(fn, batch * M * N, [_ptr(out), _ptr(a), _ptr(b), *map(np.int64, (batch, M, N, K))])
            return 0
        fn = self._functions.get(v.name)
        if fn is None:
            fn = self._functions[v.name] = self.backend.gemm_function(v)
        c0, a0, b0 = (int(_ptr(p)) for p in (out, a, b))
        for z in range(0, batch, gemm.MAX_BATCH):  # the whole batch in one launch (grid depth), up to gridDim.z's limit
            args = [np.uint64(c0 + 4 * z * M * N), np.uint64(a0 + 4 * z * M * K), np.uint64(b0 + 4 * z * K * N),
                    np.int32(M), np.int32(N), np.int32(K), np.float32(1.0), np.float32(0.0)]
            fn(v.grid(M, N, min(batch - z, gemm.MAX_BATCH)), (v.threads, 1, 1), args, shared_mem=v.smem)
        return 0


_state: dict = {"runtime": None, "backend": None}


def use_backend(backend) -> None:
    """Run the cuda device on `backend` (tests install the CPU emulator this way). Only before the
    first cuda tensor: tensors made on one backend's memory mean nothing to another. Asking again
    for the kind of backend already running (the same .name) keeps the running one."""
    current = _state["runtime"]
    if current is not None:
        if current.backend.name != backend.name:
            raise RuntimeError(f"cuda: the {current.backend.name} backend is already in use; "
                               "choose one before the first cuda tensor")
        return
    _state["backend"] = backend


def runtime(op: str = "cuda") -> Runtime:
    """The process's Runtime, started on first use (CupyBackend unless use_backend chose another)."""
    rt = _state["runtime"]
    if rt is None:
        backend = _state["backend"]
        if backend is None:
            from .backend import CupyBackend

            backend = CupyBackend(op)
        rt = _state["runtime"] = Runtime(backend)
    return rt
