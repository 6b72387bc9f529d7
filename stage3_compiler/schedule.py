"""The scheduler: from the lazy graph of the tensors being realized, the list of kernels to run, in
dependency order. This is where fusion is decided.

Every base of the graph is either *realized* (a kernel writes it to memory) or *fused* (it is
computed inside the kernel that reads it, as an expression, and never stored). The rules:
- the bases asked for, the ones marked `forced` (contiguous()), and every reduction are realized;
- an elementwise base is fused into every kernel that reads it (recomputed there), unless one of
  them reads it through an expanding view and it costs more than a few ops (reading through a view
  that pads or through stacked views counts too: see view_cost): a matmul operand
  expanded N times would be recomputed N times, so it is realized once instead (a cheap one, like
  layernorm's rsqrt of the variance, is recomputed);
- a reduction whose only reader is an elementwise op of the same shape, reading it as it is (no
  expand: softmax's max is read expanded, so it stays realized), is fused the other way round:
  that reader becomes the kernel, with the reduction's loop inside it (`relu(x @ w + b)`: the
  matmul's sum and the bias and the relu in one kernel).
- a chain of more than MAX_DEPTH fused ops is cut by realizing the base at the cut: a kernel of
  ten thousand chained adds would take long to compile, and lowering it recurses that deep.
A kernel therefore writes one base and holds at most one reduction loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .lazy import LazyBuffer, numel
from .ops import IR_ELEMENTWISE, IR_REDUCE, Ops


@dataclass(eq=False)
class ScheduleItem:
    """One kernel: the base it writes, and the reduction whose loop it holds (or None)."""

    root: LazyBuffer
    reduce: LazyBuffer | None
    inputs: list[LazyBuffer] = field(default_factory=list)  # realized bases it reads (filled by lower.py)


def graph(outs: list[LazyBuffer]) -> list[LazyBuffer]:
    """Every unrealized base the outputs depend on, sources before users (iterative DFS, fixed order)."""
    order, seen = [], set()
    stack = [(o.base, False) for o in reversed(outs)]
    while stack:
        b, expanded = stack.pop()
        if b.buffer is not None or (id(b) in seen and not expanded):
            continue
        if expanded:
            order.append(b)
            continue
        seen.add(id(b))
        stack.append((b, True))
        stack.extend((s.base, False) for s in reversed(b.srcs))
    return order


def _readers(bases: list[LazyBuffer]) -> dict[int, list[tuple[LazyBuffer, LazyBuffer]]]:
    """base id -> [(the base reading it, the view it reads through)]."""
    readers: dict[int, list] = {}
    for b in bases:
        for s in b.srcs:
            readers.setdefault(id(s.base), []).append((b, s))
    return readers


CHEAP = 4  # ALU ops an expanded elementwise base may cost and still be recomputed where it is read
MAX_DEPTH = 96  # fused ops in a chain before the chain is cut by a realized base


def view_cost(v: LazyBuffer) -> int:
    """What reading through a view adds to a kernel: a padded view a bounds check and a select, a
    view stacked on another (reshape of a permute) div and mod in its index. Counted like ALU ops,
    so a concatenation (pads and adds) read expanded by a matmul is realized, not recomputed."""
    if v.is_base:
        return 0
    return 2 * sum(view.mask is not None for view in v.st.views) + 2 * (len(v.st.views) - 1)


def create_schedule(outs: list[LazyBuffer]) -> list[ScheduleItem]:
    bases = graph(outs)
    readers = _readers(bases)
    wanted = {id(o.base) for o in outs}
    realize = {id(b) for b in bases if id(b) in wanted or b.forced or b.op in IR_REDUCE}
    fused_into: dict[int, LazyBuffer] = {}  # reader base id -> the reduction it holds
    for b in bases:
        if b.op not in IR_REDUCE or id(b) in wanted or b.forced:
            continue
        found = readers.get(id(b), [])
        if len(found) != 1:
            continue
        reader, view = found[0]
        if reader.op in IR_ELEMENTWISE and view is b and reader.shape == b.shape and id(reader) not in fused_into:
            fused_into[id(reader)] = b
            realize.discard(id(b))
            realize.add(id(reader))
    cost: dict[int, int] = {}  # ALU ops to compute a base inside a kernel, up to realized bases
    depth: dict[int, int] = {}  # the longest chain of fused ops behind a base
    for b in bases:  # sources come first
        fused = [s.base for s in b.srcs if id(s.base) not in realize]
        cost[id(b)] = (sum(cost.get(id(s), 0) for s in fused) + (1 if b.op in IR_ELEMENTWISE else 0)
                       + sum(view_cost(s) for s in b.srcs))
        depth[id(b)] = 1 + max((depth.get(id(s), 0) for s in fused), default=0)
        if depth[id(b)] > MAX_DEPTH:
            realize.add(id(b))
            cost[id(b)] = depth[id(b)] = 0
        expanded = any(numel(view.shape) > numel(b.shape) for _, view in readers.get(id(b), ()))
        if b.op in IR_ELEMENTWISE and expanded and cost[id(b)] > CHEAP:
            realize.add(id(b))
    items = []
    for b in bases:
        if id(b) not in realize or b.op is Ops.BUFFER:
            continue
        items.append(ScheduleItem(b, b if b.op in IR_REDUCE else fused_into.get(id(b))))
    return items
