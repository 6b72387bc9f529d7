"""Term ranges: the stretch of a reduce loop outside which a reduction's terms change nothing.

Causal attention masks its scores by comparing positions, where(i >= j, s, -inf) (autograd.attention_scores).
A kernel that computes the scores in its loop (FlashAttention's forward, engine/online.py, and its
backward's, autograd.attention_grads) then folds terms that are exactly nothing at every key after
the query: e^-inf is 0, and 0 times a finite number is 0. Half of each (T, T) square of pairs adds
nothing. Where the condition compares the loop's position with one the output loops fix (arange's
buffer holds its index, so a load from it is the index), the loop runs over the positions the
condition lets through instead of all of them: `for (j = 0; j < i + 1; j++)`, or `for (j = i; j < T;
j++)` on the keys' side (dk and dv sum over the queries at or after their key). A term the loop skips
would have added 0 (or, to a max, -inf): every sum keeps its bits.

Which terms are nothing, from a reduction's source down (`outside`):
- where(c, x, 0) is 0 where c is false, where(c, x, -inf) is -inf;
- a product is 0 where either factor is 0, a quotient where its numerator is;
- a sum is -inf where either operand is -inf, and e^x is 0 where x is -inf (exp's formula, by its label:
  LazyBuffer.formula).
A value read from memory is opaque: a stored probability of 0 skips nothing.

These are the rules of finite numbers. Where an operand is inf or NaN at a masked position (0 * inf
is NaN, and so is -inf + inf) the loop that skips it gives a finite sum where folding every term gives
NaN; PyTorch's math kernels give the NaN, its flash kernels skip the position as this does. A range
is only taken where it is never empty (a row whose every term is skipped would sum to 0 where its
terms give NaN: a quotient by a row's sum of 0).
"""

from __future__ import annotations

from typing import NamedTuple

from ..graph.lazy import LazyBuffer, holds_iota
from ..graph.symbolic import Node, Num, Var, render, vars
from ..ops import Ops
from .indexing import flat_index, unflatten
from .item import ScheduleItem

NOTHING = {Ops.REDUCE_ADD: 0.0, Ops.REDUCE_MAX: float("-inf")}  # a term that changes such a reduction nothing


class TermRange(NamedTuple):
    """The terms at start <= j < end of a reduce loop over j (end a bound, start a position); the
    others are nothing to the reduction."""

    start: Node | int
    end: Node | int


def term_range(r: LazyBuffer, idxs: list[Node], axis: int) -> TermRange | None:
    """The range of r's loop over `axis` (idxs[axis], a Var) outside which r's terms at idxs are nothing;
    None where no condition of a compared position bounds them."""
    j = idxs[axis]
    if r.op not in NOTHING or not r.dtype.is_float or not isinstance(j, Var):
        return None
    n = r.srcs[0].shape[axis]
    if isinstance(n, Node):
        return None
    for cond, at in outside(r.srcs[0], idxs, NOTHING[r.op]):
        found = position_range(cond, at, j, n)
        if found is not None:
            return found
    return None


def at_base(v: LazyBuffer, idxs: list[Node]) -> tuple[LazyBuffer, list[Node]] | None:
    """The base of view v and its index per dim at idxs; None where the view pads."""
    if v.is_base:
        return v, idxs
    flat, valid = v.st.expr_idxs(idxs)
    return None if valid is not None else (v.base, unflatten(flat, v.base.shape))


def is_const(v: LazyBuffer, value: float) -> bool:
    b = v.base
    return b.op is Ops.CONST and b.buffer is None and b.arg == value


def outside(v: LazyBuffer, idxs: list[Node], value: float) -> list[tuple[LazyBuffer, list[Node]]]:
    """Conditions (a bool view and its indices) where false the value of v at idxs is `value` (0 or -inf)."""
    found = at_base(v, idxs)
    if found is None:
        return []
    b, at = found
    if b.buffer is not None or b.op is Ops.CONST:
        return []
    if b.op is Ops.WHERE:
        cond, _, otherwise = b.srcs
        return [(cond, at)] if is_const(otherwise, value) else []
    if value == 0 and b.formula is not None and b.formula[0] is Ops.EXP:  # (its last op is a product of its own)
        return outside(b.formula[1], at, float("-inf"))
    if value == 0 and b.op is Ops.MUL:
        return outside(b.srcs[0], at, 0.0) + outside(b.srcs[1], at, 0.0)
    if value == 0 and b.op is Ops.DIV:
        return outside(b.srcs[0], at, 0.0)
    if value == float("-inf") and b.op is Ops.ADD:
        return outside(b.srcs[0], at, value) + outside(b.srcs[1], at, value)
    return []


def position(v: LazyBuffer, idxs: list[Node]) -> Node | None:
    """The value of v at idxs where v reads arange's buffer (which holds its index): the index."""
    if v.is_base or not holds_iota(v.base) or len(v.base.shape) != 1:
        return None
    flat, valid = v.st.expr_idxs(idxs)
    return flat if valid is None else None


def comparison(cond: LazyBuffer, idxs: list[Node]) -> tuple[Node, Node, int] | None:
    """(a, b, k) where the condition at idxs is a + k <= b, for a and b positions: a < b (k = 1), or
    a < b | a == b (k = 0: `>=` and `<=` are written so)."""
    found = at_base(cond, idxs)
    if found is None:
        return None
    c, at = found
    if c.op is Ops.CMPLT:
        a, b = (position(s, at) for s in c.srcs)
        return None if a is None or b is None else (a, b, 1)
    if c.op is not Ops.OR:
        return None
    parts = [at_base(s, at) for s in c.srcs]
    if any(p is None for p in parts):
        return None
    (lt, lt_at), (eq, eq_at) = sorted(parts, key=lambda p: p[0].op is Ops.CMPEQ)
    if lt.op is not Ops.CMPLT or eq.op is not Ops.CMPEQ:
        return None
    a, b = (position(s, lt_at) for s in lt.srcs)
    same = [position(s, eq_at) for s in eq.srcs]
    if a is None or b is None or None in same or {render(x) for x in same} != {render(a), render(b)}:
        return None
    return a, b, 0


def position_range(cond: LazyBuffer, idxs: list[Node], j: Var, n: int) -> TermRange | None:
    """The range of j in [0, n) where the condition can hold: j + k <= b gives [0, b - k + 1), and
    a + k <= j gives [a + k, n), for a and b that j is not part of; None where the range could be empty."""
    found = comparison(cond, idxs)
    if found is None:
        return None
    a, b, k = found
    if render(a) == j.name and j.name not in {v.name for v in vars(b)}:
        end = b - k + 1
        return TermRange(0, end) if end.min >= 1 and end.max <= n else None
    if render(b) == j.name and j.name not in {v.name for v in vars(a)}:
        start = a + k
        return TermRange(start, n) if start.min >= 0 and start.max <= n - 1 else None
    return None


def reduce_ranges(item: ScheduleItem, plan, lanes: list[list[Node]], src_shape: tuple) -> \
        dict[int, list[tuple[TermRange, list[LazyBuffer]]]] | None:
    """{axis: [(range, reductions)]}: a reduce loop over one axis a range of its terms (codegen/ranges.py)
    for each group of the kernel's reductions that share one, in every lane (the lanes share the loop);
    None where no reduction's terms have a range, or SPLIT cuts the loop. Under UNROLL the range is of
    whole passes, each pass's terms masked as before: those a pass takes beyond the range add nothing."""
    r = item.reduce
    axes = [d for d in r.arg if src_shape[d] != 1]
    if plan.split or len(axes) != 1 or isinstance(src_shape[axes[0]], Node) or set(plan.unroll) - set(axes):
        return None
    axis, n = axes[0], src_shape[axes[0]]
    u = plan.unroll.get(axis, 1)
    if n // u == 1:
        return None  # one pass: no loop to bound
    j = Var(f"ridx{axis}", 0, n - 1)
    groups: dict[tuple[str, str], tuple[TermRange, list[LazyBuffer]]] = {}
    for red in item.reduces:
        spans = set()
        for idx in lanes:
            if r.shape != item.root.shape:
                idx = unflatten(flat_index(idx, item.root.shape), r.shape)
            span = term_range(red, [j if d == axis else Num(0) if d in r.arg else i for d, i in enumerate(idx)], axis)
            span = span or TermRange(0, n)
            spans.add((render(Num(0) + span.start), render(Num(0) + span.end)))
        if len(spans) != 1:
            span, key = TermRange(0, n), ("0", str(n))  # lanes that differ: the whole loop
        else:
            key = spans.pop()
        groups.setdefault(key, (span, []))[1].append(red)
    if set(groups) == {("0", str(n))}:
        return None
    return {axis: [(TermRange(span.start // u, (span.end + u - 1) // u), group) for span, group in groups.values()]}
