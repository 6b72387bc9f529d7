"""GRAPH=1: each realize writes two Graphviz files to `$GRAPH_DIR` (default: a temp directory, printed):
the lazy graph it computed (bases, views, ops, shapes, dtypes; buffers realized before filled grey,
bases a kernel wrote drawn double) and the kernel graph (buffers -> kernels, each kernel with its name
and the ops fused into it). With `dot` on PATH each is rendered to SVG. (VIZ=1's page draws both
without Graphviz: viz/record.py.)
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..engine.debug import fused_bases, fused_ops
from ..engine.realize import Ran
from ..settings import enabled, where

_graph_dir: Path | None = None
_realizes = itertools.count(1)


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


def kernel_dot(items: list, names: dict[int, str]) -> str:
    """Kernels as boxes, the buffers they read and write as ellipses, edges in the direction data flows."""
    lines = ["digraph kernels {", "  node [fontname=monospace];"]
    buffers: dict[int, object] = {}
    for i, item in enumerate(items):
        root, stored = item.root, item.stored or frozenset()
        name = names.get(id(root), "(empty)")
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


def write_graphs(outs: list, items: list, ran: list[Ran]) -> list[Path]:
    """Both graphs of this realize as .dot (and .svg when Graphviz is installed), where GRAPH is set."""
    if not enabled("GRAPH"):
        return []
    n = next(_realizes)
    names = {id(r.item.root): r.program.kernel.name for r in ran}
    paths = []
    stored = items[0].stored if items else frozenset()  # (one schedule: every item shares it)
    for kind, text in (("lazy", lazy_dot(outs, stored)), ("kernels", kernel_dot(items, names))):
        path = graph_dir() / f"realize{n:04d}_{kind}.dot"
        path.write_text(text)
        paths.append(path)
        if shutil.which("dot"):
            subprocess.run(["dot", "-Tsvg", str(path), "-o", str(path.with_suffix(".svg"))], check=False)
    print(f"GRAPH: realize {n}: {', '.join(str(p) for p in paths)}")
    return paths
