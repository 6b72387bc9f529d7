"""Online softmax: a softmax and the sum that weighs a row by it, in one kernel. This is
FlashAttention's recurrence, found in the graph by a rule rather than written as a kernel.

Attention's output row is sum_j p_j v_j with p_j = e_j / l, e_j = e^(x_j - m), m = max_j x_j and
l = sum_j e_j. Scheduled as written, that is a kernel for the max, one for the sum, one for the
probabilities and one for the product (and one more for the scores x). But the sum needs no final
max. A loop over j can keep a running max m, and whenever m grows, multiply what it has summed so
far by e^(m_old - m_new). When the loop ends, it holds sum_j e^(x_j - m) v_j and l for the true max,
after one pass. Dividing by l, which is the same for the whole row, moves after the loop. The
scores x_j, a sum over the head's dims, are computed inside that loop too: codegen/lower.py runs a
reduction it meets while lowering as a loop nested where it is read. One kernel then reads q, k
and v and writes the output, with no (T, T) array in memory.

The rule (`find_online`) matches a REDUCE_ADD over j whose source is a product with probs, where:
- probs = e / l, with l = the REDUCE_ADD of e over the row;
- e is exp's formula of x - m (LazyBuffer.formula), and m = the REDUCE_MAX of x over the row;
- the product reads probs along j one to one: each output visits every entry of one row once.
The max, the sum, e, its formula and probs must be read by nothing else, and none of them may be
asked for or forced; the max and the sum may also be read by their row statistics (`row_statistics`:
m + log l, FlashAttention's log-sum-exp), which the kernel writes beside its output once its loop
ends. Where autograd keeps the probabilities for the backward (LazyBuffer.kept: the softmax
differentiated op by op), the rule does not apply and the unfused kernels run. With the online pass
(on unless PASSES=-online) attention is recorded as one op instead, whose rule recomputes them from the log-sum-exp
(autograd.attention_grads: FlashAttention's backward).

Key by key, each term takes one exp: where x_j raises the max, its own factor is e^0 = 1 and the
rescale is e^(m_old - x_j); otherwise the rescale is 1 and the factor e^(x_j - m_old). Either way it is
e^-|x_j - m_old| (codegen/softmax.softmax_term). On the CPU the loop takes 16 keys a pass
instead (softmax.softmax_block, heuristics.online_block): their max, the row's new max, one rescale for
the block and 16 terms e^(x_j - m), which the vectorizer computes as one vector (vectorize.pack_terms).
Under a causal mask the loop stops at the query's own key (codegen/ranges.py).

The rule is on unless PASSES turns it off (passes.py: PASSES=-online). With the blocks, the forward on the
CPU is faster than the kernels it replaces at nanoGPT's sizes, and a training step with FlashAttention's
backward about as fast (benchmarks/results/stage3_online_softmax.md); the key-by-key loop, one scalar exp a
key, had been far slower.

The rescale e^(m_old - m_new) relies on e^(a + b) = e^a e^b. That holds for exp and for nothing the
scheduler can check by itself, so it relies on exp's label rather than on the formula's shape.
"""

from __future__ import annotations

from ..codegen.indexing import unflatten
from ..codegen.item import OnlineSoftmax
from ..graph.lazy import LazyBuffer
from ..graph.shapetracker import index_vars
from ..graph.symbolic import Node, Var, render, vars
from ..ops import IR_ELEMENTWISE, Ops


def find_online(bases: list[LazyBuffer], readers: dict, keep: set[int]) -> dict[int, OnlineSoftmax]:
    """id of each reduction the rule applies to -> its softmax. `readers`: schedule._readers; `keep`:
    the bases asked for or forced, which must stay in memory."""
    found = {}
    for b in bases:
        if b.op is Ops.REDUCE_ADD and len(b.arg) == 1 and b.dtype.is_float:
            online = match(b, readers, keep)
            if online is not None:
                found[id(b)] = online
    return found


def reader_bases(b: LazyBuffer, readers: dict) -> set[int]:
    return {id(r) for r, _ in readers.get(id(b), ())}


def match(out: LazyBuffer, readers: dict, keep: set[int]) -> OnlineSoftmax | None:
    w = out.srcs[0]
    if not w.is_base or w.op is not Ops.MUL or reader_bases(w, readers) != {id(out)}:
        return None
    probs_view = next((s for s in w.srcs if s.base.op is Ops.DIV), None)
    if probs_view is None:
        return None
    probs = probs_view.base
    if probs.kept:
        return None  # autograd reads the probabilities in the backward: they are stored
    exp_view, total_view = probs.srcs
    e, total = exp_view, total_view.base
    if not e.is_base or e.formula is None or e.formula[0] is not Ops.EXP:
        return None
    if total.op is not Ops.REDUCE_ADD or total.srcs[0] is not e or len(total.arg) != 1:
        return None
    row = total.arg[0]  # the softmax's axis
    shifted = e.formula[1]
    if not shifted.is_base or shifted.op is not Ops.ADD or shifted.shape != e.shape:
        return None
    x, negated = shifted.srcs if shifted.srcs[1].base.op is Ops.NEG else shifted.srcs[::-1]
    if not negated.is_base or negated.op is not Ops.NEG:
        return None
    top = negated.srcs[0].base
    if top.op is not Ops.REDUCE_MAX or top.arg != (row,) or top.srcs[0] is not x:
        return None
    n = e.shape[row]
    if not isinstance(n, Node) and n < 1 or isinstance(n, Node) and n.min < 1:
        return None  # an empty row: the running max never starts
    formula = formula_bases(e, shifted)
    if not formula:
        return None
    inside = {id(b) for b in (*formula, total, probs, top, negated, shifted)}
    if inside & keep:
        return None
    # read by nothing else: probs by the product alone, the rest by each other, the max and the sum also
    # by their row statistics, which the kernel writes beside its output (row_statistics)
    stats = {id(b) for b in row_statistics(top, total, readers)}
    if reader_bases(probs, readers) != {id(w)} or \
            any(not reader_bases(b, readers) <= inside for b in (*formula, negated, shifted)) or \
            any(not reader_bases(b, readers) <= inside | stats for b in (top, total)):
        return None
    # the product walks each row of probs along j once; the row's max and sum are the same along it
    if not along(probs_view, out.arg[0], row) or not constant_along(total_view, row) \
            or not constant_along(negated.srcs[0], row):
        return None
    return OnlineSoftmax(probs, e, shifted, top, total)


def row_statistics(top: LazyBuffer, total: LazyBuffer, readers: dict) -> list[LazyBuffer]:
    """The elementwise bases computed from a softmax row's max and sum alone (and constants), one
    value a row: FlashAttention's log-sum-exp, m + log l, which its backward recomputes the
    probabilities from. The online kernel has both when its loop ends and writes what is read
    elsewhere beside its output (engine/schedule.fuse)."""
    found: dict[int, LazyBuffer] = {}
    known, stack = {id(top), id(total)}, [top, total]
    while stack:
        for r, _ in readers.get(id(stack.pop()), ()):
            if id(r) in found or r.op not in IR_ELEMENTWISE or r.buffer is not None or r.shape != total.shape:
                continue
            if all(s.base.op is Ops.CONST or id(s.base) in known and s.shape == s.base.shape for s in r.srcs):
                found[id(r)] = r
                known.add(id(r))
                stack.append(r)
    return list(found.values())


def formula_bases(e: LazyBuffer, shifted: LazyBuffer) -> list[LazyBuffer]:
    """The bases of e's formula between e and its input (e included), or [] if it reads anything but
    its input and constants."""
    order, seen, stack = [], set(), [e]
    while stack:
        b = stack.pop()
        if id(b) in seen or b is shifted:
            continue
        seen.add(id(b))
        if b.op is Ops.CONST:
            continue
        if b.op not in IR_ELEMENTWISE or b.buffer is not None:
            return []
        order.append(b)
        stack.extend(s.base for s in b.srcs)
    return order


def base_index(view: LazyBuffer) -> tuple[list[Node], list[Node]]:
    """The view's loop indices and, at them, its base's index per dim (None where it pads)."""
    idxs = index_vars(view.shape)
    flat, valid = view.st.expr_idxs(idxs)
    return idxs, (None if valid is not None else unflatten(flat, view.base.shape))


def along(view: LazyBuffer, axis: int, row: int) -> bool:
    """Does the view read its base's `row` axis as its own `axis`, and every other axis of the base
    independent of `axis`?"""
    if view.shape[axis] != view.base.shape[row]:
        return False
    idxs, at = base_index(view)
    if at is None:
        return False
    j = idxs[axis].name
    return render(at[row]) == j and all(j not in {v.name for v in vars(a)} for d, a in enumerate(at)
                                         if d != row and isinstance(a, Node))


def constant_along(view: LazyBuffer, axis: int) -> bool:
    """Is the view (of a row statistic) the same for every index along `axis`?"""
    idxs, at = base_index(view)
    name = idxs[axis].name if isinstance(idxs[axis], Var) else None
    return at is not None and all(name not in {v.name for v in vars(a)} for a in at if isinstance(a, Node))
