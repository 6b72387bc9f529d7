"""The online softmax's loop body (the online pass: engine/online.py finds the softmax and its sum, and
schedules them as one kernel; this writes what that kernel does a term at a time).

FlashAttention's forward computes out = softmax(s) @ v in one pass over the keys: each row keeps its
running max m and running sum l of e^(s - m); a term that raises the max rescales what was summed by
e^(m_old - m_new). Lowering calls `softmax_term` where the kernel reads the softmax's probabilities
(Lowerer.base), and divides each row's sum by l after the loop (lower.divide_by_rows). `L` is the
kernel's Lowerer (codegen/lower.py), whose cache, UOp list and row accumulators these extend.
"""

from __future__ import annotations

from typing import NamedTuple

from ..dtype import DType, dtypes
from ..graph.lazy import LazyBuffer
from ..graph.symbolic import Node, render
from ..ops import Ops
from .uops import UOp, UOps


class Row(NamedTuple):
    """An online softmax row's accumulators."""

    max: UOp
    total: UOp
    at: Node  # the row's index in its sum's base, where its statistics are written (engine/online.row_statistics)



def softmax_term(L, idxs: list[Node]) -> UOp:
    """probs at idxs, as the online loop has it: e^(x - m) for the row's running max m, the
    division by the row's sum left to the end (after the loop, in `lower`). The first read of a term
    moves its row on: the new max, the rescale e^(m_old - m_new) of what was summed, the sum."""
    soft = L.item.online
    key = ("softmax", tuple(render(i) for i in idxs))
    if key not in L.cache and L.block > 1:
        softmax_block(L, idxs)
    if key not in L.cache:
        dtype = soft.probs.dtype
        x = L.view(next(s for s in soft.shifted.srcs if s.base.op is not Ops.NEG), idxs)
        row = row_of(L, soft.probs.srcs[1], idxs, dtype)
        # One exp: where x raises the max, the term is e^0 = 1 and the rescale e^(m - x); else
        # the rescale is 1 and the term e^(x - m). Either way, e^-|x - m|.
        raises = L.alu(Ops.CMPLT, dtypes.bool, row.max, x)
        gap = L.alu(Ops.ADD, dtype, x, L.alu(Ops.NEG, dtype, row.max))
        below = L.alu(Ops.NEG, dtype, L.alu(Ops.MAX, dtype, gap, L.alu(Ops.NEG, dtype, gap)))
        # a row with nothing but -inf so far (masked): -inf - -inf is nan, and the term must be 0
        empty = L.alu(Ops.CMPEQ, dtypes.bool, x, L.const(float("-inf"), dtype))
        t = exp_of(L, L.alu(Ops.WHERE, dtype, empty, L.const(float("-inf"), dtype), below))
        one = L.const(1.0, dtype)
        rescale = L.alu(Ops.WHERE, dtype, raises, t, one)
        term = L.alu(Ops.WHERE, dtype, raises, one, t)
        L.emit(UOps.UPDATE, dtype, (row.total, rescale), Ops.REDUCE_MUL)
        L.emit(UOps.UPDATE, dtype, (row.total, term), Ops.REDUCE_ADD)
        L.emit(UOps.UPDATE, dtype, (row.max, x), Ops.REDUCE_MAX)
        L.cache[key] = (term, rescale, row)
    term, rescale, row = L.cache[key]
    L.steps.append((rescale, row))
    return term

def softmax_block(L, idxs: list[Node]) -> None:
    """probs at idxs and at the block - 1 keys after it (a pass of the unrolled loop: `L.block` keys),
    as FlashAttention takes a block of keys: the block's max m_b of its scores, the row's new max
    m = max(m_old, m_b), the terms e^(x - m) and one rescale e^(m_old - m) of what was summed, and
    the row's sum moved on by the block's sum. The terms are one computation key by key, which the
    vectorizer packs into vectors (vectorize.pack_terms: 16 exps in one); the rescale is one exp a block
    instead of one a key."""
    soft = L.item.online
    dtype, axis = soft.probs.dtype, soft.total.arg[0]
    x_view = next(s for s in soft.shifted.srcs if s.base.op is not Ops.NEG)
    keys = [[i + k if d == axis else i for d, i in enumerate(idxs)] for k in range(L.block)]
    xs = [L.view(x_view, at) for at in keys]
    row = row_of(L, soft.probs.srcs[1], idxs, dtype)
    # The max only shifts the exps: a NaN score need not win it (its own term is NaN, and so the row), and
    # b < a ? a : b is one instruction where a NaN-aware max took five (a third of the kernel's time)
    top = tree(L, Ops.MAX, dtype, xs, lambda a, b: L.alu(Ops.WHERE, dtype, L.alu(
        Ops.CMPLT, dtypes.bool, b, a), a, b))
    L.folds.append((top, xs, Ops.MAX))  # (the vectorizer folds the 16 keys' vector: vectorize.fold_lanes)
    new = L.alu(Ops.MAX, dtype, row.max, top)
    ninf = L.const(float("-inf"), dtype)

    def shifted_exp(a: UOp) -> UOp:  # e^(a - m); 0 where a is -inf (-inf - -inf, a row masked so far, is nan)
        gap = L.alu(Ops.ADD, dtype, a, L.alu(Ops.NEG, dtype, new))
        return exp_of(L, L.alu(Ops.WHERE, dtype, L.alu(Ops.CMPEQ, dtypes.bool, a, ninf), ninf, gap))
    rescale = shifted_exp(row.max)
    terms = [shifted_exp(x) for x in xs]
    block_sum = tree(L, Ops.ADD, dtype, terms)
    L.folds.append((block_sum, terms, Ops.ADD))
    L.emit(UOps.UPDATE, dtype, (row.total, rescale), Ops.REDUCE_MUL)
    L.emit(UOps.UPDATE, dtype, (row.total, block_sum), Ops.REDUCE_ADD)
    L.emit(UOps.UPDATE, dtype, (row.max, top), Ops.REDUCE_MAX)
    for k, (at, term) in enumerate(zip(keys, terms, strict=True)):  # the rescale goes with the block's first
        L.cache[("softmax", tuple(render(i) for i in at))] = (term, rescale if k == 0 else None, row)

def tree(L, op: Ops, dtype: DType, values: list[UOp], fold=None) -> UOp:
    """The values folded pairwise: (v0 op v1) op (v2 op v3)..., independent ops rather than a chain
    (`fold`: a function of two values in place of op)."""
    fold = fold or (lambda a, b: L.alu(op, dtype, a, b))
    while len(values) > 1:
        values = [fold(*values[i:i + 2]) if i + 1 < len(values) else values[i] for i in range(0, len(values), 2)]
    return values[0]

def row_of(L, total: LazyBuffer, idxs: list[Node], dtype: DType) -> Row:
    """The running max and sum of the softmax row that `total` (the row's sum, viewed) reads at idxs."""
    flat, _ = total.st.expr_idxs(idxs)
    key = render(flat)
    if key not in L.rows:
        top = UOp(UOps.ACC, dtype, (), float("-inf"), f"m{len(L.rows)}")
        acc = UOp(UOps.ACC, dtype, (), 0, f"l{len(L.rows)}")
        L.uops[L.before_loop:L.before_loop] = [top, acc]
        L.before_loop += 2
        L.shared.update((id(top), id(acc)))
        L.rows[key] = Row(top, acc, flat)
    return L.rows[key]

def exp_of(L, value: UOp) -> UOp:
    """The softmax's exp formula (its graph, between exp and its input) applied to value."""
    soft = L.item.online
    done: dict[int, UOp] = {id(soft.shifted): value}

    def walk(b: LazyBuffer) -> UOp:
        if id(b) not in done:
            if b.op is Ops.CONST:
                done[id(b)] = L.const(b.arg, b.dtype)
            else:
                srcs = [walk(s.base) for s in b.srcs]
                done[id(b)] = L.emit(UOps.CAST, b.dtype, (srcs[0],)) if b.op is Ops.CAST else \
                    L.alu(b.op, b.dtype, *srcs)
        return done[id(b)]
    return walk(soft.exp)


def divide_by_row(L, item, lane: dict[int, UOp], r: LazyBuffer, row: Row) -> UOp:
    """After the loop: the online softmax's weighted sum divided by its row's sum of exps; the row's max
    and sum become the lane's values of the softmax's statistics (engine/online.row_statistics)."""
    value = L.alu(Ops.DIV, r.dtype, lane[id(r)], row.total)
    lane.update({id(item.online.max): row.max, id(item.online.total): row.total})
    return value
