"""Seeing inside the compiler, and errors that point back at the user's code.

- **Call sites.** Every base of the lazy graph remembers the line of the user's Python that made it
  (settings.callsite): the first frame outside this package. A kernel runs long after that line,
  so its errors name it.
- **NANCHECK=1.** After each kernel a small compiled C function scans its float output for NaN;
  the first kernel that wrote one raises FloatingPointError naming it, its fused ops and the line
  that built it.
- **Compile errors** of a generated kernel are re-raised with its UOps and that line.

The views of whole realizes, GRAPH=1's Graphviz files and VIZ=1's page, watch from outside the compiler
(viz/, told of each realize by realize.WATCHERS).
"""

from __future__ import annotations

import ctypes
import math

from ..buffer import Buffer
from ..codegen.program import CompileError
from ..cpu.compiler import compile_c
from ..settings import enabled, where


def fused_bases(root, stored: set[int]) -> list:
    """The bases a kernel computes (sources first): its root and everything it fuses, up to the
    bases it loads (those already holding a buffer or written by another kernel of the schedule)."""
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        b, done = stack.pop()
        if done:
            order.append(b)
            continue
        if id(b) in seen or (b is not root and (b.buffer is not None or id(b) in stored)):
            continue
        seen.add(id(b))
        stack.append((b, True))
        stack.extend((s.base, False) for s in reversed(b.srcs))
    return order


def fused_ops(root, stored: set[int]) -> str:
    names = [b.op.name for b in fused_bases(root, stored) if b.op.name not in ("CONST", "BUFFER")]
    return " ".join(names) or "COPY"


def fused_sites(root, stored: set[int]) -> str:
    """Each line of user code that built an op of the kernel, with the ops it built, sources first."""
    by_line: dict[str, list[str]] = {}
    for b in fused_bases(root, stored):
        if b.op.name not in ("CONST", "BUFFER"):
            by_line.setdefault(where(b), []).append(b.op.name)
    return "; ".join(f"{line} ({' '.join(ops)})" for line, ops in by_line.items())


# ---- compile errors ----

def compile_error(err: CompileError, kernel, item) -> CompileError:
    """The compiler's complaint, with what the user can act on first: the kernel's IR and their line."""
    uops = "\n".join(repr(u) for u in kernel.uops)
    root, stored = item.root, item.stored or frozenset()
    return CompileError(f"kernel {kernel.name} ({fused_ops(root, stored)}), built at {where(root)}, "
                        f"did not compile; its UOps:\n{uops}\n{err}")


# ---- NANCHECK ----

NAN_SOURCE = r"""
long long first_nan_f32(const float *x, long long n) {
  for (long long i = 0; i < n; i++) if (x[i] != x[i]) return i;
  return -1;
}
long long first_nan_f64(const double *x, long long n) {
  for (long long i = 0; i < n; i++) if (x[i] != x[i]) return i;
  return -1;
}
"""


def first_nan(base) -> int:
    """Index of the first NaN in a realized float base, or -1 (and -1 for other dtypes)."""
    name = {"float32": "first_nan_f32", "float64": "first_nan_f64"}.get(base.dtype.name)
    n = math.prod(base.shape)
    if name is None or n == 0:
        return -1
    buf = base.buffer
    if base.device != "CPU":  # a device's memory: scan a host copy, brought through the buffers' door
        buf = Buffer.from_numpy(buf.to_numpy(0, n, base.dtype))
    fn = compile_c(NAN_SOURCE, name)
    fn.restype = ctypes.c_longlong
    return fn(ctypes.c_void_p(buf.address), ctypes.c_longlong(n))


def check_nan(kernel, root, stored: set[int]) -> None:
    """Raise at the kernel that wrote a NaN, saying whether it made it or read it."""
    at = first_nan(root)
    if at < 0:
        return
    tainted = [b for b in kernel.buffers[kernel.outputs:] if first_nan(b) >= 0]
    cause = (f"it read NaN from {len(tainted)} of its inputs (first: {tainted[0]!r}, built at {where(tainted[0])})"
             if tainted else "its inputs hold no NaN: this kernel made it")
    raise FloatingPointError(f"NANCHECK: kernel {kernel.name} ({fused_ops(root, stored)}) wrote NaN at element {at} "
                             f"of its {root.shape} {root.dtype.name} output, built at {where(root)}; {cause}. "
                             f"Its ops came from: {fused_sites(root, stored)}")


# ---- the hooks realize.py calls ----

def kernel_ran(kernel, root, stored: set[int]) -> None:
    """After each kernel: NANCHECK's scan."""
    if enabled("NANCHECK"):
        check_nan(kernel, root, stored)
