"""Which of stage3's files one realize of `(x @ w + b).relu()` walks through, in the order it first
enters each, and the calls between files: `python benchmarks/realize_walk.py [TREE]` (a tree of the
repository; default the current one). The first realize of a fresh process (every kernel lowered,
rendered, compiled or loaded) and a second realize of a new graph of the same structure (the
schedule cache and the Program cache answer) are traced with sys.setprofile; a call from a file to
a file that it does not import (directly or not) is a back-edge, an up-call."""

import sys
from pathlib import Path

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else ".")

import stage3_compiler  # noqa: E402  (from the tree named above)
from stage3_compiler import Tensor  # noqa: E402

ROOT = Path(stage3_compiler.__file__).resolve().parent


def rel(filename: str) -> str | None:
    path = Path(filename).resolve()
    if ROOT not in path.parents or "tests" in path.relative_to(ROOT).parts:
        return None
    return str(path.relative_to(ROOT))


def trace(fn) -> tuple[list[str], dict[tuple[str, str], int]]:
    order, edges = [], {}

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = rel(frame.f_code.co_filename)
        if callee is None:
            return
        if callee not in order:
            order.append(callee)
        caller = frame.f_back
        while caller is not None and rel(caller.f_code.co_filename) is None:
            caller = caller.f_back
        if caller is not None and rel(caller.f_code.co_filename) != callee:
            key = (rel(caller.f_code.co_filename), callee)
            edges[key] = edges.get(key, 0) + 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return order, edges


def imports_of() -> dict[str, set[str]]:
    """Each file's package imports, transitively (the README's order is one topological order)."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from test_imports import graph, module_name  # noqa: PLC0415  (only the new tree has it)
    except ImportError:
        return {}
    g = graph()
    files = {module_name(p): str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")}
    closure = {}
    for m in g:
        seen, stack = set(), [m]
        while stack:
            for t in g.get(stack.pop(), ()):
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        closure[files[m]] = {files[t] for t in seen if t in files}
    return closure


def graph():
    x, w, b = Tensor.randn(64, 128).realize(), Tensor.randn(128, 32).realize(), Tensor.randn(32).realize()
    return (x @ w + b).relu()


below = imports_of()
for label in ("first realize (cold process)", "second realize (warm)"):
    y = graph()
    order, edges = trace(y.realize)
    ups = {k: n for k, n in edges.items() if below and k[1] not in below.get(k[0], set())}
    print(f"{label}: {len(order)} files, {sum(edges.values())} calls between files over {len(edges)} edges")
    print("  files, in order of first entry: " + " -> ".join(order))
    if below:
        print(f"  up-calls (to a file the caller does not import): {sum(ups.values())}"
              + "".join(f"\n    {a} -> {b}: {n}" for (a, b), n in sorted(ups.items())))
