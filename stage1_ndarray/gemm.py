"""The float32 GEMM ladder: finds the rungs in csrc/, runs one, and lets a learner pick which.

Each rung is one file ``csrc/gemm_NN_idea.c`` whose entry point is named like the file and has
the one signature in ``csrc/gemm_ladder.h``: C = alpha * A @ B + beta * C with strided A and B.
The file's header comment is the registry's record (``idea:``, ``fixes:``, ``measured:``), so
adding a rung means adding one file. ``Tensor.matmul`` on float32 uses the current rung:

    the one named by ``use(...)``, else ``$SITP_GEMM``, else the top of the ladder (the fastest);

with the one thread setting of threads.py (``Tensor.set_num_threads``, else ``$OMP_NUM_THREADS``,
else every core) as the thread count; ``use(threads=...)`` changes that setting. ``use`` sets both
for the process and, as a context manager, restores them on exit::

    gemm = stage.gemm                  # stage: this package (stage1_ndarray, or a later stage)
    with gemm.use("03_blocked", threads=1):
        y = x @ w                      # runs csrc/gemm_03_blocked.c on one thread
    gemm.gemm(a, b, c, alpha=2.0, beta=1.0, variant="05_packed")   # the BLAS form, c in place

A bfloat16 ``Tensor.matmul`` on the CPU runs the bfloat16 rung, ``csrc/gemm_bf16.c`` (AMX tiles where the
CPU, the build and Linux allow them; ``bf16_uses_amx()`` says whether they do). Shapes, dtypes and strides are
checked here, before any C call.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .ckernels import CSRC, ffi, gemm_variants, int64s, lib
from .device import check
from .dtype import dtypes
from .errors import ArgumentError
from .hooks import TensorCore
from .threads import available, check_threads, get_num_threads, set_num_threads

HEADER_FIELDS = ("idea", "fixes", "measured")


@dataclass(frozen=True)
class Variant:
    name: str  # "07_tuned": the file name without "gemm_" and ".c"
    entry: str  # the C entry point, "gemm_07_tuned"
    path: Path
    title: str  # the header's first line: what the rung adds
    fields: dict  # idea, fixes, measured, as written in the header
    threaded: bool  # whether it uses the thread count (it has an OpenMP pragma)


def parse_header(text: str, entry: str) -> dict:
    """The header comment's title and its ``field: value`` entries (each runs to the next field or a blank line)."""
    match = re.match(r"\s*/\*(.*?)\*/", text, re.S)
    if match is None:
        raise ArgumentError(f"gemm variant {entry}: the file must open with a /* header comment */")
    body = match.group(1)
    fields = {"title": body.strip().splitlines()[0].removeprefix(f"{entry}:").strip()}
    for key in HEADER_FIELDS:
        found = re.search(rf"^\s*{key}:\s*(.*?)(?=^\s*\w+:|\n\s*\n|\Z)", body, re.S | re.M)
        if found is None:
            raise ArgumentError(f"gemm variant {entry}: the header has no '{key}:' entry")
        fields[key] = " ".join(found.group(1).split())
    return fields


@cache
def variants() -> dict[str, Variant]:
    """Every rung, in ladder order, keyed by short name ("01_naive", ...)."""
    table = {}
    for entry in gemm_variants():
        path = CSRC / f"{entry}.c"
        text = path.read_text()
        fields = parse_header(text, entry)
        table[entry.removeprefix("gemm_")] = Variant(name=entry.removeprefix("gemm_"), entry=entry, path=path,
                                                     title=fields.pop("title"), fields=fields,
                                                     threaded="#pragma omp" in text)
    return table


def best() -> str:
    """The top of the ladder: the last rung is the fastest one (the leaderboard checks that claim)."""
    return list(variants())[-1]


def get_variant(name: str) -> Variant:
    """A rung by its short name ("03_blocked") or its entry point ("gemm_03_blocked")."""
    table = variants()
    short = name.removeprefix("gemm_") if isinstance(name, str) else name
    if short not in table:
        raise ArgumentError(f"gemm: unknown variant {name!r}; expected one of {list(table)}")
    return table[short]


def available_threads() -> int:
    """The cores this process may run on (1 when built without OpenMP: the threaded rungs run serially)."""
    return available()


_chosen: dict = {"variant": None}  # set by use(); None falls back to the environment


def current() -> Variant:
    """The rung Tensor.matmul runs now: use(...), else $SITP_GEMM, else best()."""
    return get_variant(_chosen["variant"] or os.environ.get("SITP_GEMM") or best())


def thread_count() -> int:
    """The thread count the threaded rungs get now: the one setting of threads.py."""
    return get_num_threads()


class use:
    """Pick the rung and/or the thread count for this process; as a context manager, only inside the block."""

    def __init__(self, variant: str | None = None, threads: int | None = None):
        if variant is not None:
            get_variant(variant)
        if threads is not None:
            check_threads(threads, "threads")
        self._saved, self._saved_threads = dict(_chosen), get_num_threads()
        if variant is not None:
            _chosen["variant"] = variant
        if threads is not None:
            set_num_threads(threads)

    def __enter__(self) -> use:
        return self

    def __exit__(self, *exc) -> None:
        _chosen.update(self._saved)
        set_num_threads(self._saved_threads)


def _call(v: Variant, c, ldc: int, a, rsa: int, csa: int, b, rsb: int, csb: int,
          M: int, N: int, K: int, alpha: float, beta: float, nthreads: int) -> None:
    """One rung on raw float pointers; the caller has checked every shape and stride."""
    fp = ffi.cast
    status = getattr(lib, v.entry)(fp("float *", c), ldc, fp("float *", a), rsa, csa, fp("float *", b), rsb, csb,
                                   M, N, K, alpha, beta, nthreads)
    if status != 0:
        raise MemoryError(f"gemm {v.name}: could not allocate packing buffers for M={M}, N={N}, K={K}")


def _check_operands(op: str, a, b, c) -> tuple[int, int, int]:
    for label, x in (("A", a), ("B", b), ("C", c)):
        if x is None:
            continue
        if not isinstance(x, TensorCore):
            raise TypeError(f"{op}: {label} must be a Tensor, got {type(x).__name__}")
        if x.ndim != 2:
            raise ArgumentError(f"{op}: {label} must be 2-D, got shape {x.shape}")
        if x.dtype is not dtypes.float32:
            raise TypeError(f"{op}: {label} must be float32, got {x.dtype} (shape {x.shape})")
        if x.device != "CPU":
            raise RuntimeError(f"{op}: the CPU GEMM ladder takes CPU tensors, {label} {x.shape} is on {x.device}")
    (M, K), (K2, N) = a.shape, b.shape
    if K != K2:
        raise ArgumentError(f"{op}: A {a.shape} @ B {b.shape} are not aligned: expected A.shape[1] ({K}) == "
                            f"B.shape[0] ({K2})")
    if c is not None:
        if c.shape != (M, N):
            raise ArgumentError(f"{op}: C must have shape ({M}, {N}) for A {a.shape} @ B {b.shape}, got {c.shape}")
        if any(s == 0 and n > 1 for s, n in zip(c._strides, c.shape, strict=True)):
            raise ArgumentError(f"{op}: C {c.shape} is a broadcast view (a stride is 0): it cannot be written")
        if c._buf is a._buf or c._buf is b._buf:
            raise ArgumentError(f"{op}: C {c.shape} must not share memory with A {a.shape} or B {b.shape}")
    return M, N, K


def gemm(a, b, c=None, alpha: float = 1.0, beta: float = 0.0, variant: str | None = None,
         threads: int | None = None):
    """C = alpha * A @ B + beta * C, BLAS sgemm on float32 Tensors. A (M, K) and B (K, N) may be any
    views (transposed, sliced with steps, broadcast). With c given, it is updated in place and
    returned (beta == 0 never reads it); without, a fresh (M, N) tensor is returned and beta is ignored."""
    op = "gemm"
    M, N, K = _check_operands(op, a, b, c)
    v = get_variant(variant) if variant is not None else current()
    nthreads = check_threads(threads, "threads") if threads is not None else thread_count()
    out = c if c is not None and c._strides[1] == 1 else a._alloc((M, N), dtypes.float32)
    if c is not None and out is not c:
        out._copy_into(c)  # a strided C: work on a row-major copy, then write it back
    if c is None:
        beta = 0.0
    _call(v, out._ptr(), out._strides[0], a._ptr(), *a._strides, b._ptr(), *b._strides, M, N, K,
          float(alpha), float(beta), nthreads)
    if c is not None and out is not c:
        c._copy_into(out)
    return c if c is not None else out


# Below this many multiply-adds a product runs on one thread: waking the second core costs more
# than it saves (the leaderboard's 2-thread rows fall behind the 1-thread ones below n=256).
SERIAL_BELOW = 256**3


def batched_matmul(dtype, out, a3, b3, count: int, M: int, N: int, K: int) -> None:
    """out (count, M, N) = a3 (count, M, K) @ b3 (count, K, N), of one dtype (Tensor.matmul has
    checked them); out is contiguous, a3 and b3 may carry any batch dims. float32 runs the current
    rung and bfloat16 the bfloat16 rung, both reading a3 and b3 through their strides (a transposed
    or sliced operand is not copied); the other dtypes run csrc/gemm.c on contiguous operands."""
    if dtype is dtypes.bfloat16:
        _bf16_matmul(out, a3, b3, count, M, N, K)
        return
    if dtype is not dtypes.float32:
        check(lib.matmul(dtype.code, out._ptr(), a3._ptr(), b3._ptr(), count, M, N, K), "matmul", "matmul", a3, b3)
        return
    v, threads = current(), thread_count()
    small = M * N * K < SERIAL_BELOW
    if a3.ndim == 2:
        _call(v, out._ptr(), N, a3._ptr(), *a3._strides, b3._ptr(), *b3._strides, M, N, K, 1.0, 0.0,
              1 if small else threads)
        return
    if count == 0:
        return
    # Small products (attention's, one per head) run one per core; large ones take every core each.
    outer, inner = (threads, 1) if small or count >= 4 * threads else (1, threads)
    _call_batched(v, count, out._ptr(), a3._ptr(), _batch_offsets(a3), *a3._strides[-2:], b3._ptr(),
                  _batch_offsets(b3), *b3._strides[-2:], M, N, K, outer, inner)


def _call_batched(v: Variant, count: int, c, a, a_offsets: list[int], rsa: int, csa: int, b, b_offsets: list[int],
                  rsb: int, csb: int, M: int, N: int, K: int, outer: int, inner: int) -> None:
    """One rung over count products (csrc/gemm_ladder.c's gemm_batched); the caller has checked them."""
    fp = ffi.cast
    status = lib.gemm_batched(ffi.addressof(lib, v.entry), count, fp("float *", c), fp("float *", a),
                              int64s(a_offsets), rsa, csa, fp("float *", b), int64s(b_offsets), rsb, csb,
                              M, N, K, outer, inner)
    if status != 0:
        raise MemoryError(f"gemm {v.name}: could not allocate packing buffers for {count} x M={M}, N={N}, K={K}")


def bf16_uses_amx() -> bool:
    """Does the bfloat16 rung run on AMX tiles here (csrc/gemm_bf16.c), or on the float32 ladder?"""
    return bool(lib.gemm_bf16_uses_amx())


def _bf16_matmul(out, a3, b3, count: int, M: int, N: int, K: int) -> None:
    """batched_matmul for bfloat16: csrc/gemm_bf16.c, the products summed in float32 and rounded once."""
    threads = thread_count()
    small = M * N * K < SERIAL_BELOW
    fp = ffi.cast
    if a3.ndim == 2:
        status = lib.gemm_bf16(fp("uint16_t *", out._ptr()), N, fp("uint16_t *", a3._ptr()), *a3._strides,
                               fp("uint16_t *", b3._ptr()), *b3._strides, M, N, K, 1 if small else threads)
    elif count == 0:
        return
    else:
        outer, inner = (threads, 1) if small or count >= 4 * threads else (1, threads)
        status = lib.gemm_bf16_batched(count, fp("uint16_t *", out._ptr()), fp("uint16_t *", a3._ptr()),
                                       int64s(_batch_offsets(a3)), *a3._strides[-2:], fp("uint16_t *", b3._ptr()),
                                       int64s(_batch_offsets(b3)), *b3._strides[-2:], M, N, K, outer, inner)
    if status != 0:
        raise MemoryError(f"matmul bfloat16: could not allocate packing buffers for {count} x M={M}, N={N}, K={K}")


def _batch_offsets(x) -> list[int]:
    """Where each matrix of x (..., R, C) starts, in elements from x's first: row-major over the batch."""
    offsets = [0]
    for n, stride in zip(x.shape[:-2], x._strides[:-2], strict=True):
        offsets = [o + i * stride for o in offsets for i in range(n)]
    return offsets
