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
    multiprocessors                       the GPU's SM count, to size the work of a launch

`CupyBackend` (backend.py) is the real one. Tests may install another with `use_backend` before
the first cuda tensor is made: the CPU emulator of common/cuda_emulation.py compiles the same
sources with g++ and runs them on host memory, which is how CI checks this device without a GPU.
"""

from __future__ import annotations

import numpy as np

from ..ckernels import ffi
from ..dtype import dtypes, half_bits
from ..ops import Ops
from . import elementwise_src as gen
from . import gemm

THREADS = 256  # per block for the grid-stride kernels; any grid is correct, this one is ordinary
MAX_BLOCKS = 65535  # enough blocks to fill any GPU; the grid-stride loops cover the rest
# "Enough blocks" to fill a GPU: as many as can be resident on every multiprocessor at once (a few per SM
# hide each other's memory waits). A reduce block is light (256 threads, 1 KB of shared memory); a GEMM
# rung's takes about half an SM's registers.
REDUCE_BLOCKS_PER_SM = 4
GEMM_BLOCKS_PER_SM = 2
SPLIT_REDUCE_MIN = 2048  # terms per block, at least, when one output's reduction is split across blocks
SPLIT_K_MIN = 256  # K per slice, at least, when a matmul's K is split across blocks
BY_ITEMSIZE = {1: "bool", 2: "uint16", 4: "int32", 8: "int64"}  # copies move bits: any dtype of the size will do


def dtype_name(code: int) -> str:
    """The generator's name of a dtype code; a TypeError for the dtypes the device does not compute yet."""
    name = next(dt.name for dt in dtypes.all if dt.code == code)
    if name not in gen.CTYPES:
        raise TypeError(f"cuda: no kernels for {name} tensors; expected one of {list(gen.CTYPES)}")
    return name


def by_itemsize(itemsize: int) -> str:
    if itemsize not in BY_ITEMSIZE:
        raise TypeError(f"cuda: no copy kernel for {itemsize}-byte elements; expected one of {list(BY_ITEMSIZE)}")
    return BY_ITEMSIZE[itemsize]


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
        self._functions: dict[object, object] = {}  # a kernel's key (or a rung's name) -> it
        fp32 = [v for v in gemm.variants().values() if v.precision == "fp32" and backend.runs(v)]
        bf16 = [v for v in gemm.variants().values() if v.precision == "bf16" and backend.runs(v)]
        # The top float32 rung for float32 (the bf16 rungs above it round the inputs, which float32 matmul
        # must not), and the top bf16 rung, on the tensor cores, for bfloat16 tensors.
        self.gemm_variant = fp32[-1] if fp32 else None
        self.gemm_bf16_variant = bf16[-1] if bf16 else None
        self.multiprocessors = backend.multiprocessors

    # ---- compiling and launching ----

    def _function(self, kind: str, op: str | None, dtype_in: str, dtype_out: str, ndim: int):
        key = (kind, op, dtype_in, dtype_out, ndim)
        fn = self._functions.get(key)  # looked up by key: rendering the source on every launch costs host time
        if fn is None:
            name, code = gen.source(kind, op, dtype_in, dtype_out, ndim)  # TypeError: no such kernel
            fn = self._functions[key] = self.backend.function(name, code)
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
        name = dtype_name(dtype)
        fn = self._try("unary", Ops(op).name.lower(), name, name, ndim)
        if fn is None:
            return -1
        n = _count(ndim, shape)
        self._launch(fn, n, [_ptr(out), _ptr(a), np.int64(n), *_ints(ndim, shape), *_ints(ndim, sa)])
        return 0

    def binary(self, op: int, dtype: int, out, a, b, ndim: int, shape, sa, sb) -> int:
        name, opname = dtype_name(dtype), Ops(op).name.lower()
        out_dtype = "bool" if opname in gen.COMPARE else name
        fn = self._try("binary", opname, name, out_dtype, ndim)
        if fn is None:
            return -1
        n = _count(ndim, shape)
        self._launch(fn, n, [_ptr(out), _ptr(a), _ptr(b), np.int64(n), *_ints(ndim, shape), *_ints(ndim, sa),
                             *_ints(ndim, sb)])
        return 0

    def where(self, itemsize: int, out, cond, a, b, ndim: int, shape, sc, sa, sb) -> int:
        name = by_itemsize(itemsize)
        fn = self._function("where", None, name, name, ndim)
        n = _count(ndim, shape)
        self._launch(fn, n, [_ptr(out), _ptr(cond), _ptr(a), _ptr(b), np.int64(n), *_ints(ndim, shape),
                             *_ints(ndim, sc), *_ints(ndim, sa), *_ints(ndim, sb)])
        return 0

    def cast(self, to: int, frm: int, out, a, ndim: int, shape, sa) -> int:
        fn = self._function("cast", None, dtype_name(frm), dtype_name(to), ndim)
        n = _count(ndim, shape)
        self._launch(fn, n, [_ptr(out), _ptr(a), np.int64(n), *_ints(ndim, shape), *_ints(ndim, sa)])
        return 0

    # ---- reduce.c: (O, R, I) views ----

    def reduce(self, op: int, dtype: int, out, a, O: int, R: int, I: int, so: int, sr: int, si: int) -> int:
        name = dtype_name(dtype)
        fn = self._try("reduce", Ops(op).name.lower(), name, name, 3)
        if fn is None:
            return -1
        slices = self._reduce_slices(O, R, I)
        if slices > 1:
            self._reduce_split(fn, getattr(dtypes, name).itemsize, out, a, R, I, sr, si, slices)
            return 0
        args = [_ptr(out), _ptr(a), *map(np.int64, (O, R, I, so, sr, si))]
        self._launch(fn, O * I * gen.REDUCE_THREADS, args, threads=gen.REDUCE_THREADS)  # a block per output
        return 0

    def _reduce_slices(self, O: int, R: int, I: int) -> int:
        """Into how many slices to cut R. The kernel gives each output one block, so a reduction to a few
        outputs (a gradient's norm: one output from a million terms) would run on a few multiprocessors
        and leave the rest of the GPU idle. Only O == 1 is cut (a whole tensor, or its leading axes):
        then the slices are one more outer axis of the same (O, R, I) view."""
        enough = REDUCE_BLOCKS_PER_SM * self.multiprocessors
        if O != 1 or not 0 < I < enough:  # (I == 0: no outputs, nothing to split)
            return 1
        return max(1, min(-(-enough // I), R // SPLIT_REDUCE_MIN))

    def _reduce_split(self, fn, itemsize: int, out, a, R: int, I: int, sr: int, si: int, slices: int) -> None:
        """Two passes of the same kernel: each of `slices` blocks per output folds R // slices terms
        (a last launch folds the R % slices left over), then one block per output folds those partial
        results. Sum, product, max and min all regroup this way; the float result differs from one
        pass only by rounding (another order of the same additions)."""
        chunk = R // slices
        rest = R - slices * chunk
        parts = slices + (rest > 0)
        partial = self.backend.alloc(parts * I * itemsize)
        a0 = int(_ptr(a))
        T = gen.REDUCE_THREADS
        self._launch(fn, slices * I * T, [np.uint64(partial.ptr), np.uint64(a0),
                                          *map(np.int64, (slices, chunk, I, chunk * sr, sr, si))], threads=T)
        if rest:
            self._launch(fn, I * T, [np.uint64(partial.ptr + slices * I * itemsize),
                                     np.uint64(a0 + slices * chunk * sr * itemsize),
                                     *map(np.int64, (1, rest, I, 0, sr, si))], threads=T)
        self._launch(fn, I * T, [_ptr(out), np.uint64(partial.ptr), *map(np.int64, (1, parts, I, 0, I, 1))], threads=T)

    def arg_reduce(self, op: int, dtype: int, out, a, O: int, R: int, I: int, so: int, sr: int, si: int) -> int:
        fn = self._function("arg_reduce", Ops(op).name.lower(), dtype_name(dtype), "int64", 3)
        args = [_ptr(out), _ptr(a), *map(np.int64, (O, R, I, so, sr, si))]
        self._launch(fn, O * I * gen.REDUCE_THREADS, args, threads=gen.REDUCE_THREADS)
        return 0

    def cumsum(self, dtype: int, out, a, O: int, R: int, I: int, so: int, sr: int, si: int) -> int:
        name = dtype_name(dtype)
        fn = self._function("cumsum", "sum", name, name, 3)
        self._launch(fn, O * I, [_ptr(out), _ptr(a), *map(np.int64, (O, R, I, so, sr, si))])
        return 0

    # ---- copy.c ----

    def copy_strided(self, itemsize: int, out, so, a, sa, ndim: int, shape) -> int:
        name = by_itemsize(itemsize)
        fn = self._function("copy", None, name, name, ndim)
        n = _count(ndim, shape)
        self._launch(fn, n, [_ptr(out), _ptr(a), np.int64(n), *_ints(ndim, shape), *_ints(ndim, so),
                             *_ints(ndim, sa)])
        return 0

    def gather(self, itemsize: int, out, a, offsets, nb: int, ndim: int, shape, sa) -> int:
        name = by_itemsize(itemsize)
        fn = self._function("gather", None, name, name, ndim)
        m = _count(ndim, shape)
        self._launch(fn, nb * m, [_ptr(out), _ptr(a), _ptr(offsets), np.int64(nb), np.int64(m),
                                  *_ints(ndim, shape), *_ints(ndim, sa)])
        return 0

    def fill(self, itemsize: int, out, n: int, pattern: int) -> int:
        """The bit pattern of one element, written n times (the C kernel's contract)."""
        name = by_itemsize(itemsize)
        value = np.array([pattern], dtype=np.uint64).view(np.uint8)[:itemsize].view(getattr(dtypes, name).np)[0]
        return self.fill_value(out, n, name, value)

    def fill_value(self, out, n: int, dtype: str, value) -> int:
        """n copies of value (a Python or numpy scalar) as dtype: what Buffer.fill asks for."""
        fn = self._function("fill", None, dtype, dtype, 1)
        dt = getattr(dtypes, dtype)
        if dt.is_half:  # the kernels hold its bits, rounded through float32 as the CPU's fill rounds them
            scalar = np.asarray(half_bits(float(value), dt), dtype=np.uint16)
        else:
            scalar = np.asarray(value, dtype=dt.np)
        if dtype == "bool":
            scalar = scalar.astype(np.uint8)  # the kernels' bool is an unsigned char
        self._launch(fn, n, [_ptr(out), np.int64(n), scalar[()]])
        return 0

    def iota(self, out, n: int) -> None:
        self._launch(self._function("iota", None, "int64", "int64", 1), n, [_ptr(out), np.int64(n)])

    # ---- random.c: the same stream as the CPU (elementwise_src's rand is random.c's twin) ----

    def rand_uniform(self, dtype: int, out, n: int, seed: int, counter: int) -> int:
        name = dtype_name(dtype)
        fn = self._try("rand", "uniform", name, name, 1)
        if fn is None:
            return -1
        self._launch(fn, n, [_ptr(out), np.int64(n), np.uint64(seed), np.uint64(counter)])
        return 0

    # ---- scatter.c ----

    def scatter_add(self, dtype: int, out, src, index, n: int) -> int:
        """out[index[i]] += src[i]: the generated kernel with one-element blocks (m = 1, 0-d).
        Atomic adds, so on a GPU repeated indices sum in no fixed order (the CPU's is fixed)."""
        name = dtype_name(dtype)
        fn = self._try("scatter_add", None, name, name, 0)
        if fn is None:
            return -1
        self._launch(fn, n, [_ptr(out), _ptr(src), _ptr(index), np.int64(n), np.int64(1)])
        return 0

    # ---- adam.c ----

    def adam_step(self, dtype: int, p, m, v, g, n: int, decay: float, l2: float, b1: float, b2: float,
                  step: float, inv_sqrt_bc2: float, eps: float) -> int:
        name = dtype_name(dtype)
        fn = self._try("adam", None, name, name, 1)
        if fn is None:
            return -1
        T = getattr(dtypes, name).np.type  # the scalars rounded to the dtype, as adam.c rounds them
        scalars = [T(x) for x in (decay, l2, b1, 1 - b1, b2, 1 - b2, step, inv_sqrt_bc2, eps)]
        self._launch(fn, n, [_ptr(p), _ptr(m), _ptr(v), _ptr(g), np.int64(n), *scalars])
        return 0

    # ---- gemm.c: float32 through the GEMM ladder, the other dtypes through a generated kernel ----

    def matmul(self, dtype: int, out, a, b, batch: int, M: int, N: int, K: int) -> int:
        name = dtype_name(dtype)
        if batch * M * N == 0:
            return 0
        if name == "bfloat16":
            return self._matmul_bf16(out, a, b, batch, M, N, K)
        v = self.gemm_variant
        if name != "float32" or v is None or K == 0 or max(M * K, K * N, M * N) >= gemm.INT_LIMIT:
            fn = self._try("matmul", None, name, name, 3)
            if fn is None:
                return -1
            self._launch(fn, batch * M * N, [_ptr(out), _ptr(a), _ptr(b), *map(np.int64, (batch, M, N, K))])
            return 0
        fn = self._rung(v)
        slices = self._k_slices(v, batch, M, N, K)
        if slices > 1:
            self._matmul_split_k(fn, v, out, a, b, M, N, K, slices)
            return 0
        self._launch_rung(v, int(_ptr(out)), int(_ptr(a)), int(_ptr(b)), batch, M, N, K)
        return 0

    def _rung(self, v: gemm.Variant):
        fn = self._functions.get(v.name)
        if fn is None:
            fn = self._functions[v.name] = self.backend.gemm_function(v)
        return fn

    def _launch_rung(self, v: gemm.Variant, c0: int, a0: int, b0: int, batch: int, M: int, N: int, K: int) -> None:
        """C (float32) = A @ B for `batch` row-major products lying one after another, in one launch (the grid's
        depth) up to gridDim.z's limit; A and B are float32 or bfloat16 bits, as the rung takes them."""
        item = 4 if v.precision == "fp32" else 2
        for z in range(0, batch, gemm.MAX_BATCH):
            args = [np.uint64(c0 + 4 * z * M * N), np.uint64(a0 + item * z * M * K), np.uint64(b0 + item * z * K * N),
                    np.int32(M), np.int32(N), np.int32(K), np.float32(1.0), np.float32(0.0)]
            self._rung(v)(v.grid(M, N, min(batch - z, gemm.MAX_BATCH)), (v.threads, 1, 1), args, shared_mem=v.smem)

    def _matmul_bf16(self, out, a, b, batch: int, M: int, N: int, K: int) -> int:
        """bfloat16 on the tensor cores: the top bf16 rung sums in float32 into a scratch C, which one cast
        rounds into out (as the CPU's bfloat16 rung rounds each sum once). -1 where no rung runs or a
        matrix is past the rungs' int indexing."""
        v = self.gemm_bf16_variant
        if v is None or max(M * K, K * N, M * N) >= gemm.INT_LIMIT:
            return -1
        n = batch * M * N
        if K == 0:
            return self.fill_value(out, n, "bfloat16", 0.0)
        product = self.backend.alloc(4 * n)
        self._launch_rung(v, product.ptr, int(_ptr(a)), int(_ptr(b)), batch, M, N, K)
        cast = self._function("cast", None, "float32", "bfloat16", 1)
        self._launch(cast, n, [_ptr(out), np.uint64(product.ptr), np.int64(n), np.int64(n), np.int64(1)])
        return 0

    def _k_slices(self, v: gemm.Variant, batch: int, M: int, N: int, K: int) -> int:
        """Into how many slices to cut K (a power of two that divides it). A rung gives each tile of C
        one block, so a C of few tiles with a long K (a weight's gradient: (384, 1152) summed over
        16384 rows is 27 tiles) keeps most multiprocessors idle however fast each block is."""
        tiles = batch * -(-M // v.bm) * -(-N // v.bn)
        slices = 1
        while batch == 1 and tiles * slices < GEMM_BLOCKS_PER_SM * self.multiprocessors and K % (2 * slices) == 0 \
                and K // (2 * slices) >= SPLIT_K_MIN:
            slices *= 2
        return slices

    def _matmul_split_k(self, fn, v: gemm.Variant, out, a, b, M: int, N: int, K: int, slices: int) -> None:
        """Split-K: C = sum over s of A[:, slice s] @ B[slice s, :], the slices multiplied side by side
        as one batched launch, then added up pairwise. B's slices already lie one after another; A's
        columns are copied into slice-major order first (one pass over A), since a rung reads row-major
        matrices of its own K."""
        k = K // slices
        a_sliced = self.backend.alloc(4 * slices * M * k)
        self.copy_strided(4, a_sliced.ptr, [M * k, k, 1], a, [k, K, 1], 3, [slices, M, k])
        partial = self.backend.alloc(4 * slices * M * N)
        args = [np.uint64(partial.ptr), np.uint64(a_sliced.ptr), np.uint64(int(_ptr(b))),
                np.int32(M), np.int32(N), np.int32(k), np.float32(1.0), np.float32(0.0)]
        fn(v.grid(M, N, slices), (v.threads, 1, 1), args, shared_mem=v.smem)
        add = self._function("binary", "add", "float32", "float32", 1)
        half = slices // 2
        while half >= 1:  # the first half of the partial products += the second half, the last sum into C
            n = half * M * N
            first, second = np.uint64(partial.ptr), np.uint64(partial.ptr + 4 * n)
            self._launch(add, n, [_ptr(out) if half == 1 else first, first, second, np.int64(n), np.int64(n),
                                  np.int64(1), np.int64(1)])
            half //= 2


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
