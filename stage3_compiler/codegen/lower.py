"""Lowering: one kernel of the schedule becomes a linear list of low-level ops (UOps): its buffers,
its loops, the index arithmetic of every read, the loads, the ALU ops, an accumulator, the store.
The renderers (cpu/renderer.py, cuda/renderer.py) turn that list into C or CUDA C line by line.

The kernel loops over the shape of the base it writes (one loop per dim, `gidx0, gidx1, ...`).
A value is built from the kernel's output back to the loads: an elementwise base fused into the
kernel is computed from its sources at the same index; a view of a base turns the loop indices
into the base's flat index through the view's ShapeTracker (`expr_idxs`), and into a validity
condition where the view pads (outside it the value is 0); a realized base is a LOAD. A kernel
that holds a reduction runs an inner loop nest over the reduced axes (`ridx...`) that folds its
source into an accumulator, and the rest of the kernel uses the accumulator. Identical values are
computed once (a cache keyed by the base and its index expressions), as the rendered source shows.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ..dtype import DType, dtypes
from ..graph.lazy import LazyBuffer, holds_iota, numel
from ..graph.symbolic import Node, Num, Var, Variable, layout, render, vars
from ..ops import IR_ELEMENTWISE, IR_REDUCE, Ops
from ..passes import TABLE, Pass, on
from ..threads import get_num_threads
from .heuristics import heuristic_opts, nested_terms, selected_product
from .indexing import flat_index, unflatten
from .item import ScheduleItem
from .opts import Opt, apply_opts
from .ranges import TermRange, term_range
from .renderer import Renderer
from .uops import Kernel, Loop, LoopKind, UOp, UOps
from .vectorize import vectorize

IDENTITY = {Ops.REDUCE_ADD: 0, Ops.REDUCE_MUL: 1}
NEST_UNROLL = 64  # terms up to which a nested reduction is written out (Lowerer.nested)


def reduce_identity(op: Ops, dtype: DType):
    if op in IDENTITY:
        return IDENTITY[op] if dtype is not dtypes.bool else bool(IDENTITY[op])
    return float("-inf") if dtype.is_float else (0 if dtype is dtypes.bool else -(2 ** (8 * dtype.itemsize - 1)))


def loop_var(name: str, extent: int | Node) -> Node:
    """The index of a loop over `extent` steps (Num(0) for one step). A symbolic extent's loop stops
    at the bound value; its index is known to lie below the extent's maximum."""
    if not isinstance(extent, Node) and extent <= 1:
        return Num(0)
    return Var(name, 0, layout(extent) - 1)


def dim_name(n: int | Node) -> str:
    """A dim in a kernel's name: its size, or a symbolic size's variables."""
    return "_".join(sorted(v.name for v in vars(n))) if isinstance(n, Node) else str(n)


class Lowerer:
    def __init__(self, item: ScheduleItem, stored: set[int]):
        self.item, self.stored = item, stored  # stored: ids of bases a kernel writes (loads here)
        self.uops: list[UOp] = []
        self.outputs = {id(o) for o in item.outputs}
        self.buffers: list[LazyBuffer] = []  # the outputs first (global_of them in order), then the loads
        self.globals: dict[int, UOp] = {}
        self.cache: dict[tuple, UOp] = {}
        self.accs: dict[int, UOp] = {}  # after the reduction loop: each reduction's accumulator
        self.alu_count = 0
        self.shared: set[int] = set()  # ACCs that are no lane's own: a nested reduction's, a softmax row's
        self.nests = 0  # nested reductions so far (their loop variables' names)
        self.sums: list[tuple[UOp, list[UOp]]] = []  # a nested sum written out: (its result, its terms)
        self.folds: list[tuple[UOp, list[UOp], Ops]] = []  # a block's max and sum of exps: (result, leaves, op)
        # an online softmax (item.online): its rows' running max and sum, declared before the loop opens
        self.rows: dict[str, Row] = {}
        self.before_loop = 0  # where a row's accumulators go: before the reduction loop
        self.steps: list[tuple[UOp | None, Row]] = []  # (rescale or None, row) of each softmax term a value read
        self.block = 1  # an online softmax's keys a pass (UNROLL): their max, exps and rescale taken together
        self.gate: UOp | None = None  # while a computed base is read through a padded view: its validity
        self.changed: set[Pass] = set()  # the speed passes that changed this kernel (Kernel.passes)

    def emit(self, op: UOps, dtype: DType | None, srcs: tuple = (), arg: Any = None) -> UOp:
        u = UOp(op, dtype, tuple(srcs), arg, f"v{len(self.uops)}")
        self.uops.append(u)
        return u

    def loop(self, var: str, extent: int, kind: LoopKind) -> UOp:
        return self.emit(UOps.RANGE, dtypes.int64, arg=Loop(var, extent, kind))

    def cached(self, key: tuple, make) -> UOp:
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def global_of(self, base: LazyBuffer) -> UOp:
        if id(base) not in self.globals:
            self.buffers.append(base)
            self.globals[id(base)] = self.emit(UOps.GLOBAL, base.dtype, arg=len(self.buffers) - 1)
        return self.globals[id(base)]

    def const(self, value, dtype: DType) -> UOp:
        return self.cached(("const", value, dtype.name), lambda: self.emit(UOps.CONST, dtype, arg=value))

    # ---- values ----

    def view(self, v: LazyBuffer, idxs: list[Node]) -> UOp:
        """The value of view v at the indices idxs (one per dim of v.shape)."""
        if v.is_base:
            return self.base(v, idxs)
        base = v.base
        if 0 in base.shape:  # nothing to read: a view of an empty base is all padding (its value 0)
            return self.const(False if v.dtype is dtypes.bool else 0, v.dtype)
        flat, valid = v.st.expr_idxs(idxs)
        cond = None if valid is None else \
            self.cached(("cond", render(valid)), lambda: self.emit(UOps.COND, dtypes.bool, arg=valid))
        gate = None
        if valid is not None and not (base.op is Ops.CONST and base.buffer is None):
            # the index where the view is valid: simpler (a concatenation's piece at a plain offset, a padded
            # row without the division by its length), and read only there: the loads under it are gated
            narrow, _ = v.st.expr_idxs(idxs, where_valid=True)
            if narrow != flat:
                flat, gate = narrow, cond
        if base.op is Ops.CONST and base.buffer is None:
            value = self.const(base.arg, base.dtype)
        elif self.loads(base):
            value = self.load(base, flat, self.both(self.gate, gate))
        else:
            value = self.gated(gate, lambda: self.base(base, unflatten(flat, base.shape)))
        if valid is None or (gate is not None and self.loads(base)):
            return value  # (a gated load is already 0 where the view is not valid)
        zero = self.const(False if v.dtype is dtypes.bool else 0, v.dtype)
        return self.cached(("where", cond.name, value.name), lambda: self.alu(Ops.WHERE, v.dtype, cond, value, zero))

    def loads(self, base: LazyBuffer) -> bool:
        return id(base) not in self.outputs and (base.buffer is not None or id(base) in self.stored)

    def load(self, base: LazyBuffer, flat: Node, gate: UOp | None = None) -> UOp:
        """base at flat; with a gate (a padded view's validity), read only where it holds (0 elsewhere)."""
        buf = self.global_of(base)
        # A view that pads computes its index outside the padding too, where the WHERE after the load
        # throws the value away; such an index may fall outside the buffer (before its start, even),
        # so the load is clamped into it: reading past a buffer can fault, and is never ours to read.
        # A gated load needs no clamp: its index (simplified for where the view is valid, `view`) is read
        # only there, and a gated loop is one the C compiler vectorizes with masked loads.
        size = numel(base.shape)
        bound = None if gate is not None or 0 <= flat.min and flat.max < size else size - 1
        srcs = (buf,) if gate is None else (buf, gate)
        return self.cached(("load", id(base), render(flat), None if gate is None else gate.name),
                           lambda: self.emit(UOps.LOAD, base.dtype, srcs, (flat, bound)))

    def gated(self, gate: UOp | None, compute):
        """compute() with every load under it gated (a computed base read through a padded view at the
        index simplified for where the view is valid: its loads may fall outside their buffers elsewhere).
        Its values are cached apart (the same index read without the gate is another value), for this
        read alone (a cache kept longer would outlive the loop that computed its values)."""
        if gate is None:
            return compute()
        outside, before = self.cache, self.gate
        self.gate, self.cache = self.both(before, gate), {}
        try:
            return compute()
        finally:
            self.cache, self.gate = outside, before

    def both(self, a: UOp | None, b: UOp | None) -> UOp | None:
        """The gate of a load under two padded views (an inner view's index is right only where the outer
        one is valid too): their AND, or the one there is."""
        if a is None or b is None:
            return a or b
        return self.cached(("both", a.name, b.name), lambda: self.alu(Ops.AND, dtypes.bool, a, b))

    def alu(self, op: Ops, dtype: DType, *srcs: UOp) -> UOp:
        self.alu_count += 1
        return self.emit(UOps.ALU, dtype, srcs, op)

    def base(self, b: LazyBuffer, idxs: list[Node]) -> UOp:
        if id(b) in self.accs:
            return self.accs[id(b)]  # a reduction this kernel holds: its accumulator
        if self.loads(b):
            return self.load(b, flat_index(idxs, b.shape), self.gate)
        if b.op is Ops.CONST:
            return self.const(b.arg, b.dtype)
        if self.item.online is not None and b is self.item.online.probs:
            return self.softmax_term(idxs)
        key = ("base", id(b), tuple(render(i) for i in idxs))
        if key in self.cache:
            return self.cache[key]
        if b.op is Ops.CONTIGUOUS:
            out = self.view(b.srcs[0], idxs)
        elif b.op in IR_ELEMENTWISE:
            srcs = [self.view(s, idxs) for s in b.srcs]
            out = self.alu(b.op, b.dtype, *srcs) if b.op is not Ops.CAST else self.emit(UOps.CAST, b.dtype, (srcs[0],))
        elif b.op in IR_REDUCE:
            out = self.nested(b, idxs)
        else:
            raise NotImplementedError(f"lower: {b.op} cannot be computed inside a kernel")
        self.cache[key] = out
        return out

    def nested(self, r: LazyBuffer, idxs: list[Node]) -> UOp:
        """A reduction the schedule left to its reader (engine/schedule.nest_reductions): computed
        here, in a loop of its own nested where it is read; a short one (attention's scores over a
        head of 32) written out as a tree of pairwise ops instead, whose terms are independent: a
        loop's chain of adds waits on each add, and its loads and products are left scalar."""
        src, steps = r.srcs[0], [src_n for d, src_n in enumerate(r.srcs[0].shape) if d in r.arg]
        if on(Pass.TREE) and all(isinstance(n, int) for n in steps) and math.prod(steps) <= NEST_UNROLL:
            terms = []
            for flat in range(math.prod(steps)):
                inner, rest = list(idxs), flat
                for d in reversed(r.arg):
                    inner[d], rest = Num(rest % src.shape[d]), rest // src.shape[d]
                terms.append(self.view(src, inner))
            op, leaves = COMBINE[r.op][r.dtype is dtypes.bool], terms
            while len(terms) > 1:
                terms = [self.alu(op, r.dtype, *terms[i:i + 2]) if i + 1 < len(terms) else terms[i]
                         for i in range(0, len(terms), 2)]
            self.changed.add(Pass.TREE)
            if r.op is Ops.REDUCE_ADD and len(leaves) > 1:
                self.sums.append((terms[0], leaves))  # vectorize.py may sum them as vectors
            return terms[0] if terms else self.const(reduce_identity(r.op, r.dtype), r.dtype)
        acc = self.emit(UOps.ACC, r.dtype, arg=reduce_identity(r.op, r.dtype))
        self.shared.add(id(acc))
        inner, opened = list(idxs), 0
        for d in r.arg:
            inner[d] = loop_var(f"n{self.nests}_{d}", src.shape[d])
            if isinstance(inner[d], Var):
                self.loop(inner[d].name, src.shape[d], LoopKind.NESTED)
                opened += 1
        self.nests += 1
        outside = dict(self.cache)
        self.emit(UOps.UPDATE, r.dtype, (acc, self.view(src, inner)), r.op)
        self.alu_count += 1
        for _ in range(opened):
            self.emit(UOps.ENDRANGE, None)
        self.cache = outside  # values inside the loop belong to its scope
        return acc

    # ---- a lookup: a one-hot sum read as a load at the index (an embedding's rows) ----

    def picked(self, r: LazyBuffer, idxs: list[Node]) -> UOp | None:
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
        index = self.view(x, hit_idxs)

        def clamped() -> UOp:  # min(max(x, 0), n - 1) = -max(-max(x, 0), 1 - n), once for every lane reading it
            i64 = dtypes.int64
            low = self.alu(Ops.NEG, i64, self.alu(Ops.MAX, i64, index, self.const(0, i64)))
            return self.alu(Ops.NEG, i64, self.alu(Ops.MAX, i64, low, self.const(1 - n, i64)))
        inside = self.cached(("clamped", index.name, n), clamped)
        ok = self.cached(("inside", index.name, n), lambda: self.alu(Ops.CMPEQ, dtypes.bool, index, inside))
        found = self.view(value, [Var(inside.name, 0, n - 1) if d == axis else i for d, i in enumerate(idxs)])
        return self.alu(Ops.WHERE, r.dtype, ok, found, self.const(0, r.dtype))

    # ---- an online softmax (engine/online.py) ----

    def softmax_term(self, idxs: list[Node]) -> UOp:
        """probs at idxs, as the online loop has it: e^(x - m) for the row's running max m, the
        division by the row's sum left to the end (after the loop, in `lower`). The first read of a term
        moves its row on: the new max, the rescale e^(m_old - m_new) of what was summed, the sum."""
        soft = self.item.online
        key = ("softmax", tuple(render(i) for i in idxs))
        if key not in self.cache and self.block > 1:
            self.softmax_block(idxs)
        if key not in self.cache:
            dtype = soft.probs.dtype
            x = self.view(next(s for s in soft.shifted.srcs if s.base.op is not Ops.NEG), idxs)
            row = self.row(soft.probs.srcs[1], idxs, dtype)
            # One exp: where x raises the max, the term is e^0 = 1 and the rescale e^(m - x); else
            # the rescale is 1 and the term e^(x - m). Either way, e^-|x - m|.
            raises = self.alu(Ops.CMPLT, dtypes.bool, row.max, x)
            gap = self.alu(Ops.ADD, dtype, x, self.alu(Ops.NEG, dtype, row.max))
            below = self.alu(Ops.NEG, dtype, self.alu(Ops.MAX, dtype, gap, self.alu(Ops.NEG, dtype, gap)))
            # a row with nothing but -inf so far (masked): -inf - -inf is nan, and the term must be 0
            empty = self.alu(Ops.CMPEQ, dtypes.bool, x, self.const(float("-inf"), dtype))
            t = self.exp_of(self.alu(Ops.WHERE, dtype, empty, self.const(float("-inf"), dtype), below))
            one = self.const(1.0, dtype)
            rescale = self.alu(Ops.WHERE, dtype, raises, t, one)
            term = self.alu(Ops.WHERE, dtype, raises, one, t)
            self.emit(UOps.UPDATE, dtype, (row.total, rescale), Ops.REDUCE_MUL)
            self.emit(UOps.UPDATE, dtype, (row.total, term), Ops.REDUCE_ADD)
            self.emit(UOps.UPDATE, dtype, (row.max, x), Ops.REDUCE_MAX)
            self.cache[key] = (term, rescale, row)
        term, rescale, row = self.cache[key]
        self.steps.append((rescale, row))
        return term

    def softmax_block(self, idxs: list[Node]) -> None:
        """probs at idxs and at the block - 1 keys after it (a pass of the unrolled loop: `self.block` keys),
        as FlashAttention takes a block of keys: the block's max m_b of its scores, the row's new max
        m = max(m_old, m_b), the terms e^(x - m) and one rescale e^(m_old - m) of what was summed, and
        the row's sum moved on by the block's sum. The terms are one computation key by key, which the
        vectorizer packs into vectors (vectorize.pack_terms: 16 exps in one); the rescale is one exp a block
        instead of one a key."""
        soft = self.item.online
        dtype, axis = soft.probs.dtype, soft.total.arg[0]
        x_view = next(s for s in soft.shifted.srcs if s.base.op is not Ops.NEG)
        keys = [[i + k if d == axis else i for d, i in enumerate(idxs)] for k in range(self.block)]
        xs = [self.view(x_view, at) for at in keys]
        row = self.row(soft.probs.srcs[1], idxs, dtype)
        # The max only shifts the exps: a NaN score need not win it (its own term is NaN, and so the row), and
        # b < a ? a : b is one instruction where a NaN-aware max took five (a third of the kernel's time)
        top = self.tree(Ops.MAX, dtype, xs, lambda a, b: self.alu(Ops.WHERE, dtype, self.alu(
            Ops.CMPLT, dtypes.bool, b, a), a, b))
        self.folds.append((top, xs, Ops.MAX))  # (the vectorizer folds the 16 keys' vector: vectorize.fold_lanes)
        new = self.alu(Ops.MAX, dtype, row.max, top)
        ninf = self.const(float("-inf"), dtype)

        def shifted_exp(a: UOp) -> UOp:  # e^(a - m); 0 where a is -inf (-inf - -inf, a row masked so far, is nan)
            gap = self.alu(Ops.ADD, dtype, a, self.alu(Ops.NEG, dtype, new))
            return self.exp_of(self.alu(Ops.WHERE, dtype, self.alu(Ops.CMPEQ, dtypes.bool, a, ninf), ninf, gap))
        rescale = shifted_exp(row.max)
        terms = [shifted_exp(x) for x in xs]
        block_sum = self.tree(Ops.ADD, dtype, terms)
        self.folds.append((block_sum, terms, Ops.ADD))
        self.emit(UOps.UPDATE, dtype, (row.total, rescale), Ops.REDUCE_MUL)
        self.emit(UOps.UPDATE, dtype, (row.total, block_sum), Ops.REDUCE_ADD)
        self.emit(UOps.UPDATE, dtype, (row.max, top), Ops.REDUCE_MAX)
        for k, (at, term) in enumerate(zip(keys, terms, strict=True)):  # the rescale goes with the block's first
            self.cache[("softmax", tuple(render(i) for i in at))] = (term, rescale if k == 0 else None, row)

    def tree(self, op: Ops, dtype: DType, values: list[UOp], fold=None) -> UOp:
        """The values folded pairwise: (v0 op v1) op (v2 op v3)..., independent ops rather than a chain
        (`fold`: a function of two values in place of op)."""
        fold = fold or (lambda a, b: self.alu(op, dtype, a, b))
        while len(values) > 1:
            values = [fold(*values[i:i + 2]) if i + 1 < len(values) else values[i] for i in range(0, len(values), 2)]
        return values[0]

    def row(self, total: LazyBuffer, idxs: list[Node], dtype: DType) -> Row:
        """The running max and sum of the softmax row that `total` (the row's sum, viewed) reads at idxs."""
        flat, _ = total.st.expr_idxs(idxs)
        key = render(flat)
        if key not in self.rows:
            top = UOp(UOps.ACC, dtype, (), float("-inf"), f"m{len(self.rows)}")
            acc = UOp(UOps.ACC, dtype, (), 0, f"l{len(self.rows)}")
            self.uops[self.before_loop:self.before_loop] = [top, acc]
            self.before_loop += 2
            self.shared.update((id(top), id(acc)))
            self.rows[key] = Row(top, acc, flat)
        return self.rows[key]

    def exp_of(self, value: UOp) -> UOp:
        """The softmax's exp formula (its graph, between exp and its input) applied to value."""
        soft = self.item.online
        done: dict[int, UOp] = {id(soft.shifted): value}

        def walk(b: LazyBuffer) -> UOp:
            if id(b) not in done:
                if b.op is Ops.CONST:
                    done[id(b)] = self.const(b.arg, b.dtype)
                else:
                    srcs = [walk(s.base) for s in b.srcs]
                    done[id(b)] = self.emit(UOps.CAST, b.dtype, (srcs[0],)) if b.op is Ops.CAST else \
                        self.alu(b.op, b.dtype, *srcs)
            return done[id(b)]
        return walk(soft.exp)


class Row(NamedTuple):
    """An online softmax row's accumulators."""

    max: UOp
    total: UOp
    at: Node  # the row's index in its sum's base, where its statistics are written (engine/online.row_statistics)


COMBINE = {Ops.REDUCE_ADD: (Ops.ADD, Ops.OR), Ops.REDUCE_MUL: (Ops.MUL, Ops.AND), Ops.REDUCE_MAX: (Ops.MAX, Ops.OR)}


def combine(L: Lowerer, r: LazyBuffer, acc: UOp, n: int) -> UOp:
    """SPLIT's n partial accumulators of one reduction folded into one, pairwise: (p0+p1)+(p2+p3)..."""
    if n == 1:
        return acc
    op = COMBINE[r.op][r.dtype is dtypes.bool]
    parts = [L.emit(UOps.PART, r.dtype, (acc,), Num(i)) for i in range(n)]
    while len(parts) > 1:
        parts = [L.alu(op, r.dtype, *parts[i:i + 2]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return parts[0]


def lower(item: ScheduleItem, stored: set[int], renderer: Renderer, opts: tuple[Opt, ...] | None = None) -> Kernel:
    """The kernel's UOps for the renderer's target, its loops shaped by `opts` (opts.py; None: the
    heuristic ones, heuristics.py)."""
    root = item.root
    by_rule = opts is None
    if opts is None:
        opts = heuristic_opts(item, renderer, get_num_threads(), stored) if on(Pass.HEURISTICS) else ()
    plan = apply_opts(item, opts, renderer)
    L = Lowerer(item, stored)
    L.changed.update([Pass.HEURISTICS] * (by_rule and bool(opts)) + [Pass.ONLINE] * (item.online is not None)
                     + [Pass.MERGE] * bool(item.also))
    if item.online is not None and plan.unroll:
        L.block = next(iter(plan.unroll.values()))
    out_bufs = [L.global_of(o) for o in item.outputs]
    ups = plan.upcast
    loop_sizes = plan.loop_sizes(root.shape)
    # A blocked axis loops over its blocks outermost (bidx), then within a block (gidx).
    ranges = []
    blocks = {}
    for d in sorted(plan.block):
        blocks[d] = Var(f"bidx{d}", 0, loop_sizes[d] // plan.block[d] - 1)
        ranges.append(L.loop(blocks[d].name, loop_sizes[d] // plan.block[d], LoopKind.BLOCK))
    gidx: list[Node] = []
    for d, n in enumerate(loop_sizes):
        inner = plan.block.get(d, n)
        g: Node = loop_var(f"gidx{d}", inner)
        if isinstance(g, Var) and renderer.grid:  # a GPU thread's output index, from its place in the grid
            L.emit(UOps.SPECIAL, dtypes.int64, arg=Loop(g.name, inner, LoopKind.OUTPUT))
        elif isinstance(g, Var):
            ranges.append(L.loop(g.name, inner, LoopKind.OUTPUT))
        gidx.append(blocks[d] * inner + g if d in blocks else g)
    # the output indices of each entry one pass computes (one lane when not upcast)
    lanes = [list(gidx)]
    for axis, u in reversed(ups.items()):  # the first upcast axis varies fastest: its lanes sit side by side
        lanes = [[g * u + j if d == axis else g for d, g in enumerate(lane)] for lane in lanes for j in range(u)]
    upcast = len(lanes)
    reduce_shape: tuple[int, ...] = ()
    accs: list[dict[int, UOp]] = [{} for _ in lanes]  # per lane: reduction id -> its accumulator
    rows: dict[int, Row] = {}  # an online softmax: id of a lane's accumulator -> its row's
    lane_rows: dict[int, Row] = {}  # and id of a lane's final value (divided by the row's sum) -> its row
    lookup = item.reduce is not None and on(Pass.LOOKUP) and looked_up(L, item, plan, lanes, accs)
    if item.reduce is not None and not lookup:
        src_shape, axes = item.reduce.srcs[0].shape, item.reduce.arg  # every reduction here has these
        reduce_shape = src_shape
        split_axis, parts = next(iter(plan.split.items()), (None, 1))
        # SPLIT: each reduction's partial accumulators are one array, indexed by an innermost loop over
        # the partials that the C compiler vectorizes (loads side by side, one vector add)
        partials = [{id(r): L.emit(UOps.ACC, r.dtype, arg=reduce_identity(r.op, r.dtype)) if parts == 1 else
                     L.emit(UOps.ACCS, r.dtype, arg=(reduce_identity(r.op, r.dtype), parts)) for r in item.reduces}
                    for _ in lanes]
        if 0 in src_shape:  # an empty reduction: the identity, and no loop to write
            reduce_shape = ()
        else:
            inner_loops, rvars = [], {}
            ranged = reduce_ranges(item, plan, lanes, src_shape) if on(Pass.RANGES) else None
            L.changed.update([Pass.RANGES] * (ranged is not None))
            for d, n in enumerate(src_shape if ranged is None else ()):
                if d in axes and n != 1:
                    # UNROLL and SPLIT: the loop takes that many terms a pass
                    steps = n // (plan.unroll.get(d, 1) * plan.split.get(d, 1))
                    rvars[d] = loop_var(f"ridx{d}", steps)
                    if isinstance(rvars[d], Var):
                        inner_loops.append(L.loop(rvars[d].name, steps, LoopKind.REDUCE))
            L.before_loop = len(L.uops) - len(inner_loops)
            sidx = None
            if split_axis is not None:
                sidx = Var("sidx", 0, parts - 1)
                inner_loops.append(L.loop(sidx.name, parts, LoopKind.PARTIALS))
            unrolled = next(iter(plan.unroll.items()), None)
            out_shape = item.reduce.shape

            def terms(part: Node | None, j: int = 0, left_over: int | None = None, reduces=item.reduces) -> None:
                """Each lane's reductions (`reduces`) updated with one term a lane: `part` the partial it
                goes to (SPLIT), `left_over` where the terms whole passes leave start (the split axis's
                index is then part + left_over)."""
                every: list[list[Node]] = []  # each lane's index into the reductions' source
                for idx in lanes:
                    if out_shape != root.shape:  # the reader reads the reduction reshaped: same order, other dims
                        idx = unflatten(flat_index(idx, root.shape), out_shape)
                    idxs = [rvars.get(d, Num(0) if d in axes else idx[d]) for d in range(len(src_shape))]
                    if unrolled:
                        d, u = unrolled
                        idxs[d] = idxs[d] * u + j
                    if left_over is not None:
                        idxs[split_axis] = part + left_over
                    elif part is not None:  # SPLIT: term i of the axis goes to partial i mod parts
                        idxs[split_axis] = idxs[split_axis] * parts + part
                    every.append(idxs)
                outside = skip_unselected(L, item, every) if part is None and on(Pass.SKIP) else None
                for lane, idxs in zip(partials, every, strict=True):
                    for r in reduces:
                        acc = lane[id(r)] if part is None else L.emit(UOps.PART, r.dtype, (lane[id(r)],), part)
                        L.steps = []
                        value = L.view(r.srcs[0], idxs)
                        if item.online is not None and r is item.reduce:  # rescaled to the row's new max
                            rescale, rows[id(lane[id(r)])] = L.steps[0]
                            if rescale is not None:  # (a block of keys: once, before its first term)
                                L.emit(UOps.UPDATE, r.dtype, (acc, rescale), Ops.REDUCE_MUL)
                        L.emit(UOps.UPDATE, r.dtype, (acc, value), r.op)
                        L.alu_count += 1
                if outside is not None:
                    L.emit(UOps.ENDIF, None)
                    L.cache = outside  # values inside the IF belong to its scope

            if ranged is not None:  # a loop a term range: the reductions it bounds alike together (codegen/ranges.py)
                d, loop = next(iter(ranged.items()))
                rvars[d] = loop_var(f"ridx{d}", src_shape[d] // plan.unroll.get(d, 1))
                for span, group in loop:
                    L.emit(UOps.RANGE, dtypes.int64, arg=Loop(rvars[d].name, span.end, LoopKind.REDUCE, span.start))
                    for j in range(plan.unroll.get(d, 1)):
                        terms(None, j, reduces=group)
                    L.emit(UOps.ENDRANGE, None)
                    L.cache.clear()  # values inside the loop belong to its scope
            for j in range(0 if ranged is not None else unrolled[1] if unrolled else 1):
                terms(sidx, j)
            if sidx is not None and src_shape[split_axis] % parts:
                # the terms a whole pass of partials leaves over, one to a partial, in a loop of their own
                # (a vocabulary of 78 entries: its rows' sums and maxima had run as scalars)
                whole = src_shape[split_axis] - src_shape[split_axis] % parts
                L.changed.add(Pass.LEFTOVER)
                closing = 2 if isinstance(rvars[split_axis], Var) else 1  # the partials' loop and the axis's
                for _ in range(closing):
                    L.emit(UOps.ENDRANGE, None)
                L.cache.clear()  # values of the closed loops are out of scope
                tidx = Var("tidx", 0, src_shape[split_axis] % parts - 1)
                L.loop(tidx.name, src_shape[split_axis] % parts, LoopKind.PARTIALS)
                terms(tidx, left_over=whole)
                inner_loops = inner_loops[:len(inner_loops) - closing] + [tidx]
            for _ in inner_loops:
                L.emit(UOps.ENDRANGE, None)
        L.cache.clear()  # values inside the loop belong to its scope
        for lane, found in zip(accs, partials, strict=True):
            lane.update({id(r): combine(L, r, found[id(r)], parts) for r in item.reduces})
            for r in item.reduces:  # an online softmax's sum, divided by its row's sum of exps
                if id(found[id(r)]) in rows:
                    row = rows[id(found[id(r)])]
                    lane[id(r)] = L.alu(Ops.DIV, r.dtype, lane[id(r)], row.total)
                    # the row's max and sum, for its statistics (engine/online.row_statistics)
                    lane.update({id(item.online.max): row.max, id(item.online.total): row.total})
                    lane_rows[id(lane[id(r)])] = row
    written_rows: set[tuple[int, str]] = set()
    for lane, idx in zip(accs, lanes, strict=True):
        L.accs = lane
        for out, buf in zip(item.outputs, out_bufs, strict=True):  # (a merged output may add size-1 dims)
            if item.online is not None and out is not root:  # a row statistic: at its row, once a row
                flat = lane_rows[id(lane[id(item.reduce)])].at
                if (id(out), render(flat)) in written_rows:
                    continue
                written_rows.add((id(out), render(flat)))
                at = unflatten(flat, out.shape)
            else:
                at = idx if out.shape == root.shape else unflatten(flat_index(idx, root.shape), out.shape)
            value = lane[id(out)] if id(out) in lane else L.base(out, at)
            L.emit(UOps.STORE, out.dtype, (buf, value), flat_index(at, out.shape))
    for _ in ranges:
        L.emit(UOps.ENDRANGE, None)
    kind = "r" if item.reduce is not None else "E"
    name = "_".join([kind, *(dim_name(n) for n in root.shape)] + [f"R{dim_name(n)}" for n in reduce_shape])
    name += f"_U{'x'.join(str(u) for u in ups.values())}" if ups else ""
    name += "".join(f"_UR{u}" for u in plan.unroll.values())
    name += "".join(f"_S{n}" for n in plan.split.values())
    name += "".join(f"_B{b}" for b in plan.block.values())
    name += f"_T{plan.threads}" if plan.threads > 1 else ""
    name += f"_O{len(item.outputs)}" if item.also else ""  # several outputs (engine/schedule.merge_outputs)
    name += "_lookup" if lookup else ""
    L.changed.update([Pass.LOOKUP] * lookup)
    if item.reduce is not None and 0 in item.reduce.srcs[0].shape:
        name += "_empty"
    name += "_online" if item.online is not None else ""
    uops = L.uops
    # lanes as vectors (vectorize.py), the first upcast axis's together
    if renderer.vector_width and on(Pass.VECTORIZE) and (ups or L.sums):
        amounts = [*ups.values(), 1, 1]
        uops = vectorize(uops, upcast, amounts[0], renderer.vector_width, L.shared, L.sums, amounts[1],
                         bool(plan.unroll), L.folds)
        L.changed.update([Pass.VECTORIZE] * any(u.lanes > 1 for u in uops))
    return Kernel(name, root.shape, uops, L.buffers, L.alu_count // upcast, reduce_shape, upcast,
                  len(item.outputs), tuple(opts), plan.threads, kernel_variables(L.uops), item.online is not None,
                  nested_terms(item, stored), passes=tuple(p.value for p in TABLE if p in L.changed))


SKIP_CONDITIONS = 16  # a tile's distinct conditions up to which a one-hot product tests them before a term


def skip_unselected(L: Lowerer, item: ScheduleItem, every: list[list[Node]]) -> dict | None:
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
    L.changed.add(Pass.SKIP)
    L.emit(UOps.IF, None, (selected,))
    return dict(L.cache)


def iota_range(L: Lowerer, conds: list[UOp]) -> UOp | None:
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


def looked_up(L: Lowerer, item: ScheduleItem, plan, lanes: list[list[Node]], accs: list[dict]) -> bool:
    """A kernel's one reduction, a one-hot sum over one axis (Lowerer.picked), read at each lane's
    index: True, with each lane's value in `accs`, and no reduction loop to write. Options that cut
    the reduction's loop (SPLIT, UNROLL) keep the loop."""
    r = item.reduce
    if item.also_reduces or item.online is not None or plan.split or plan.unroll or len(r.arg) != 1 \
            or 0 in r.srcs[0].shape:
        return False
    for lane, idx in zip(accs, lanes, strict=True):
        if r.shape != item.root.shape:  # the reader reads the reduction reshaped: same order, other dims
            idx = unflatten(flat_index(idx, item.root.shape), r.shape)
        value = L.picked(r, [Var("pick", 0, layout(n) - 1) if d in r.arg else i
                             for d, (i, n) in enumerate(zip(idx, r.srcs[0].shape, strict=True))])
        if value is None:
            return False
        lane[id(r)] = value
    return True


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
    j = loop_var(f"ridx{axis}", n)
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


def kernel_variables(uops: list[UOp]) -> tuple[Variable, ...]:
    """The user's Variables the kernel reads (its extra arguments), unbound, in name order."""
    found: dict[str, Variable] = {}
    for u in uops:
        args = [u.arg[0]] if u.op is UOps.LOAD else [u.arg.start, u.arg.extent] if isinstance(u.arg, Loop) else [u.arg]
        for arg in args:
            if isinstance(arg, Node):
                found.update((v.name, Variable(v.name, v.min, v.max)) for v in vars(arg) if isinstance(v, Variable))
    return tuple(found[n] for n in sorted(found))
