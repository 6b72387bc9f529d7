"""The skip pass: a one-hot product tests its conditions once a pass and skips the terms no lane selects.

An embedding's gradient is a sum over tokens t of where(idx[t] == r, g[t], 0): for each row r of the
table almost every term adds 0. The kernel opens an IF on any lane's condition before the terms, so a
term no lane selects costs its conditions and a branch. `L` is the kernel's Lowerer (codegen/lower.py).
"""

from __future__ import annotations

from ..dtype import dtypes
from ..graph.lazy import holds_iota
from ..graph.symbolic import Node, render
from ..ops import Ops
from ..passes import Pass
from .heuristics import selected_product
from .item import ScheduleItem
from .uops import UOp, UOps

SKIP_CONDITIONS = 16  # a tile's distinct conditions up to which a one-hot product tests them before a term


def skip_unselected(L, item: ScheduleItem, every: list[list[Node]]) -> dict | None:
    """A sum of where(a == b, value, 0), a one-hot product (an embedding's gradient: sum_t where(idx[t] ==
    r, g[t, c], 0)), adds 0 for almost every term: open an IF on any lane's condition, so that a term no
    lane selects costs its conditions and a branch. A one-hot product's condition is one for a whole
    row of its tile (selected_product), which tells it from an elementwise mask. Adding 0 leaves a
    sum's bits as they were (the sum starts at +0 and is never -0), so the skipped terms change
    nothing. Returns the cache to restore at its ENDIF, or None where the reduction is no such sum."""
    r = item.reduce
    src = r.srcs[0]
    if item.online is not None or len(item.reduces) != 1 or r.op is not Ops.REDUCE_ADD or not src.is_base \
            or not selected_product(src) or src.srcs[0].base.op is not Ops.CMPEQ:
        return None
    conds = list({c.name: c for c in (L.view(src.srcs[0], idxs) for idxs in every)}.values())
    if len(conds) == len(every) or len(conds) > SKIP_CONDITIONS:
        # a condition of each lane's own (an elementwise mask, mostly true), or too many to test: no IF (the
        # conditions are computed already, and the selects below read them from the cache)
        return None
    selected = iota_range(L, conds) if len(conds) > 1 else None
    for c in conds if selected is None else ():
        selected = c if selected is None else L.alu(Ops.OR, dtypes.bool, selected, c)
    L.mark(Pass.SKIP)
    L.emit(UOps.IF, None, (selected,))
    return dict(L.cache)


def iota_range(L, conds: list[UOp]) -> UOp | None:
    """Any of x == iota[i], x == iota[i + 1] ... x == iota[i + n - 1] is iota[i] <= x <= iota[i + n - 1]:
    two comparisons for the n (arange's buffer holds consecutive integers while its version is 0).
    None unless the conditions are such loads, each compared with one x."""
    if any(c.op is not UOps.ALU or c.arg is not Ops.CMPEQ for c in conds):
        return None
    x = next((s for s in conds[0].srcs if all(s in c.srcs for c in conds)), None)
    if x is None or x.dtype is not dtypes.int64 or any(c.srcs[0] is c.srcs[1] for c in conds):
        return None
    loads = [c.srcs[1] if c.srcs[0] is x else c.srcs[0] for c in conds]
    if any(u.op is not UOps.LOAD or len(u.srcs) != 1 or u.arg[1] is not None
           or not holds_iota(L.buffers[u.srcs[0].arg]) or u.srcs[0] is not loads[0].srcs[0] for u in loads):
        return None
    at = {render(u.arg[0] - loads[0].arg[0]): u for u in loads}  # each load's offset from the first's index
    if set(at) != {str(k) for k in range(len(loads))}:
        return None
    i64 = dtypes.int64
    low = L.alu(Ops.CMPLT, dtypes.bool, L.alu(Ops.ADD, i64, at["0"], L.const(-1, i64)), x)
    high = L.alu(Ops.CMPLT, dtypes.bool, x, L.alu(Ops.ADD, i64, at[str(len(loads) - 1)], L.const(1, i64)))
    return L.alu(Ops.AND, dtypes.bool, low, high)
