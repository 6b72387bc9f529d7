"""A realize's lazy graph as plain data, for VIZ's recording (record.py): every view and base it computed down
to the buffers realized before, each with its op, shape, dtype, the user's line that made it and the kernel
that computed it."""

from __future__ import annotations

import linecache

from ..engine.debug import fused_bases


def site_of(b) -> dict | None:
    """The user's line that made a node: file, line number and the line's text."""
    site = getattr(b, "site", None)
    if site is None:
        return None
    return {"file": site[0], "line": site[1], "code": linecache.getline(site[0], site[1]).strip()}


def describe_arg(b) -> str:
    if b.arg is None or b.op.name == "CAST":
        return ""
    text = str(b.arg)
    return text if len(text) <= 40 else text[:37] + "..."


def graph_of(outs: list, items: list) -> dict:
    """The realize's lazy graph (every view and base down to the buffers realized before) and each base's
    kernel: nodes by index, edges as [source, reader] index pairs."""
    kernel_of: dict[int, int] = {}
    for i, item in enumerate(items):
        for b in fused_bases(item.root, item.stored or frozenset()):
            kernel_of.setdefault(id(b), i)
    index: dict[int, int] = {}
    order, stack = [], list(outs)
    while stack:
        v = stack.pop()
        if id(v) in index:
            continue
        index[id(v)] = len(order)
        order.append(v)
        stack.extend(sources(v))
    nodes = [node_of(v, kernel_of) for v in order]
    edges = [[index[id(s)], i] for i, v in enumerate(order) for s in sources(v)]
    return {"nodes": nodes, "edges": edges}


def sources(v) -> list:
    """What a node of the drawn graph reads: a view its base, a base its sources (a buffer nothing)."""
    if not v.is_base:
        return [v.base]
    return [] if v.op.name == "BUFFER" else list(v.srcs)


def node_of(v, kernel_of: dict[int, int]) -> dict:
    node = {"op": "VIEW" if not v.is_base else v.op.name, "shape": [str(n) for n in v.shape], "dtype": v.dtype.name}
    if v.is_base:
        node.update(arg=describe_arg(v), site=site_of(v), before=v.op.name == "BUFFER", kernel=kernel_of.get(id(v)))
    return node
