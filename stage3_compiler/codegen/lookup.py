"""The lookup pass: a one-hot sum read as one load at the index.

Integer-array indexing and an embedding's rows are written on the primitives as a sum over j of
where(x == j, value[j], 0) (movement._gather): a loop over every row of the table for every index.
Where the sum has that shape, the kernel loads value[x] instead (clamped into the table, and thrown
away where x was outside it, which the sum would have made 0). `L` is the kernel's Lowerer
(codegen/lower.py).
"""

from __future__ import annotations

from ..dtype import dtypes
from ..graph.lazy import LazyBuffer, holds_iota
from ..graph.symbolic import Node, Var, layout, render, vars
from ..ops import Ops
from .indexing import flat_index, unflatten
from .item import ScheduleItem
from .uops import UOp


def looked_up(L, item: ScheduleItem, plan, lanes: list[list[Node]], accs: list[dict]) -> bool:
    """A kernel's one reduction, a one-hot sum over one axis (lookup.picked), read at each lane's
    index: True, with each lane's value in `accs`, and no reduction loop to write. Options that cut
    the reduction's loop (SPLIT, UNROLL) keep the loop."""
    r = item.reduce
    if len(item.reduces) > 1 or item.online is not None or plan.split or plan.unroll or len(r.arg) != 1 \
            or 0 in r.srcs[0].shape:
        return False
    for lane, idx in zip(accs, lanes, strict=True):
        if r.shape != item.root.shape:  # the reader reads the reduction reshaped: same order, other dims
            idx = unflatten(flat_index(idx, item.root.shape), r.shape)
        value = picked(L, r, [Var("pick", 0, layout(n) - 1) if d in r.arg else i
                             for d, (i, n) in enumerate(zip(idx, r.srcs[0].shape, strict=True))])
        if value is None:
            return False
        lane[id(r)] = value
    return True


def picked(L, r: LazyBuffer, idxs: list[Node]) -> UOp | None:
    """The sum r over j of where(x == j, value, 0) at idxs (idxs[j] a placeholder), for an x that does
    not vary along j and a j read from arange's buffer: integer-array indexing and an embedding's
    lookup (movement._gather). That is the value at j = x where 0 <= x < n, else 0, read with one
    load at the index x instead of a loop over every j (nanochat's token embedding was a loop over
    4096 rows for each of 2048 tokens' 256 columns). None where r is not such a sum. The loaded
    index names the UOp that holds it (a Var of its name), so the load's index is a C expression
    of it; the index is clamped into [0, n), and a value picked where x was outside is thrown away."""
    (axis,), src = r.arg, r.srcs[0]
    n = src.shape[axis]
    if isinstance(n, Node) or r.dtype is dtypes.bool or not src.is_base or src.op is not Ops.WHERE:
        return None
    cond, value, zero = src.srcs
    if not (zero.base.op is Ops.CONST and zero.base.buffer is None and zero.base.arg == 0):
        return None
    hit = cond.base
    if hit.op is not Ops.CMPEQ or not all(s.dtype.is_int for s in hit.srcs):
        return None
    j = idxs[axis]
    at, valid = cond.st.expr_idxs(idxs) if not cond.is_base else (flat_index(idxs, cond.shape), None)
    if valid is not None:
        return None
    hit_idxs = unflatten(at, hit.shape)
    for x, iota in (hit.srcs, hit.srcs[::-1]):
        if iota.is_base or not holds_iota(iota.base) or x.dtype is not dtypes.int64:
            continue
        where, valid = iota.st.expr_idxs(hit_idxs)
        xs, x_valid = x.st.expr_idxs(hit_idxs) if not x.is_base else (flat_index(hit_idxs, x.shape), None)
        if valid is None and x_valid is None and render(where) == render(j) and \
                j.name not in {v.name for v in vars(xs)}:
            break
    else:
        return None
    index = L.view(x, hit_idxs)

    def clamped() -> UOp:  # min(max(x, 0), n - 1) = -max(-max(x, 0), 1 - n), once for every lane reading it
        i64 = dtypes.int64
        low = L.alu(Ops.NEG, i64, L.alu(Ops.MAX, i64, index, L.const(0, i64)))
        return L.alu(Ops.NEG, i64, L.alu(Ops.MAX, i64, low, L.const(1 - n, i64)))
    inside = L.cached(("clamped", index.name, n), clamped)
    ok = L.cached(("inside", index.name, n), lambda: L.alu(Ops.CMPEQ, dtypes.bool, index, inside))
    found = L.view(value, [Var(inside.name, 0, n - 1) if d == axis else i for d, i in enumerate(idxs)])
    return L.alu(Ops.WHERE, r.dtype, ok, found, L.const(0, r.dtype))
