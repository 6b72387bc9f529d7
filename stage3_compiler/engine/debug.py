"""Seeing inside the compiler, and errors that point back at the user's code.

- **Call sites.** Every base of the lazy graph remembers the line of the user's Python that made it
  (settings.callsite): the first frame outside this package. A kernel runs long after that line,
  so its errors name it.
- **GRAPH=1.** Each realize writes two Graphviz files to `$GRAPH_DIR` (default: a temp directory,
  printed): the lazy graph it computed (bases, views, ops, shapes, dtypes; buffers realized before
  filled grey, bases a kernel wrote drawn double) and the kernel graph (buffers -> kernels, each
  kernel with its name and the ops fused into it). With `dot` on PATH each is rendered to SVG.
- **NANCHECK=1.** After each kernel a small compiled C function scans its float output for NaN;
  the first kernel that wrote one raises FloatingPointError naming it, its fused ops and the line
  that built it.
- **Compile errors** of a generated kernel are re-raised with its UOps and that line.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

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
    """After each kernel: NANCHECK's scan, and its name for GRAPH's kernel graph."""
    if enabled("GRAPH"):
        kernel_names[id(root)] = kernel.name
    if enabled("NANCHECK"):
        check_nan(kernel, root, stored)


# ---- GRAPH ----

_graph_dir: Path | None = None
_realizes = itertools.count(1)
kernel_names: dict[int, str] = {}  # id(root) -> kernel name, filled as kernels run while GRAPH is set


def graph_dir() -> Path:
    global _graph_dir
    if _graph_dir is None:
        _graph_dir = Path(os.environ.get("GRAPH_DIR") or tempfile.mkdtemp(prefix="sitp-graph-"))
        _graph_dir.mkdir(parents=True, exist_ok=True)
    return _graph_dir


def _node(name: str, label: str, **attrs: str) -> str:
    extra = "".join(f", {k}={v}" for k, v in attrs.items())
    return f'  {name} [label="{label}"{extra}];'


def _describe(b) -> str:
    return f"{b.shape} {b.dtype.name}"


def lazy_dot(outs: list, roots: set[int]) -> str:
    """The lazy graph behind outs, down to buffers realized before: one node per base and per view."""
    lines, seen = ["digraph lazy {", "  node [shape=box, fontname=monospace];"], set()
    stack = list(outs)
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if not v.is_base:
            lines.append(_node(f"n{id(v)}", f"view {v.shape}", style="dashed"))
            lines.append(f"  n{id(v.base)} -> n{id(v)} [style=dashed];")
            stack.append(v.base)
            continue
        if v.op.name == "BUFFER":
            lines.append(_node(f"n{id(v)}", f"BUFFER {_describe(v)}\\nrealized", style="filled", fillcolor="lightgrey"))
            continue
        arg = f" {v.arg}" if v.arg is not None and v.op.name != "CAST" else ""
        label = f"{v.op.name}{arg}\\n{_describe(v)}\\n{where(v, short=True)}"
        lines.append(_node(f"n{id(v)}", label, peripheries="2") if id(v) in roots else _node(f"n{id(v)}", label))
        for s in v.srcs:
            lines.append(f"  n{id(s)} -> n{id(v)};")
            stack.append(s)
    return "\n".join(lines + ["}", ""])


def kernel_dot(items: list) -> str:
    """Kernels as boxes, the buffers they read and write as ellipses, edges in the direction data flows."""
    lines = ["digraph kernels {", "  node [fontname=monospace];"]
    buffers: dict[int, object] = {}
    for i, item in enumerate(items):
        root, stored = item.root, item.stored or frozenset()
        name = kernel_names.get(id(root), "(empty)")
        label = f"{name}\\n{fused_ops(root, stored)}\\n{where(root, short=True)}"
        lines.append(_node(f"k{i}", label, shape="box", style="filled", fillcolor="lightblue"))
        loads = {id(s.base): s.base for b in fused_bases(root, stored) for s in b.srcs
                 if s.base is not root and (s.base.buffer is not None or id(s.base) in stored)
                 and s.base.op.name != "CONST"}
        for src in loads.values():
            buffers[id(src)] = src
            lines.append(f"  b{id(src)} -> k{i};")
        for out in item.outputs:  # a kernel may write several bases of one shape (merge.merge_outputs)
            buffers[id(out)] = out
            lines.append(f"  k{i} -> b{id(out)};")
    for key, b in buffers.items():
        lines.append(_node(f"b{key}", _describe(b), shape="ellipse"))
    return "\n".join(lines + ["}", ""])


def write_graphs(outs: list, items: list) -> list[Path]:
    """GRAPH=1: both graphs of this realize as .dot (and .svg when Graphviz is installed)."""
    n = next(_realizes)
    paths = []
    stored = items[0].stored if items else frozenset()  # (one schedule: every item shares it)
    for kind, text in (("lazy", lazy_dot(outs, stored)), ("kernels", kernel_dot(items))):
        path = graph_dir() / f"realize{n:04d}_{kind}.dot"
        path.write_text(text)
        paths.append(path)
        if shutil.which("dot"):
            subprocess.run(["dot", "-Tsvg", str(path), "-o", str(path.with_suffix(".svg"))], check=False)
    kernel_names.clear()
    print(f"GRAPH: realize {n}: {', '.join(str(p) for p in paths)}")
    return paths
