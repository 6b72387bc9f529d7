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

from typing import Any

from ..dtype import DType, dtypes
from ..graph.lazy import LazyBuffer, numel
from ..graph.symbolic import Node, Num, Var, Variable, layout, render, vars
from ..ops import IR_ELEMENTWISE, IR_REDUCE, Ops
from ..passes import TABLE, Pass, on
from ..threads import get_num_threads
from .fma import fused_multiply_adds, fused_products
from .heuristics import heuristic_opts
from .indexing import flat_index, unflatten
from .item import ScheduleItem, nested_terms
from .lookup import looked_up
from .opts import LoopPlan, Opt, apply_opts
from .overlap import pass_start
from .ranges import reduce_ranges
from .renderer import Renderer
from .skipping import skip_unselected
from .softmax import Row, divide_by_row, softmax_term
from .tiles import lower_tiles, tiled_item
from .tree import written_out
from .uops import COMBINE, Kernel, Loop, LoopKind, UOp, UOps, reduce_identity
from .vectorize import vectorize


def loop_var(name: str, extent: int | Node) -> Node:
    """The index of a loop over `extent` steps (Num(0) for one step). A symbolic extent's loop stops
    at the bound value; its index is known to lie below the extent's maximum."""
    if not isinstance(extent, Node) and extent <= 1:
        return Num(0)
    return Var(name, 0, layout(extent) - 1)


def dim_name(n: int | Node) -> str:
    """A dim in a kernel's name: its size, or a symbolic size's variables."""
    return "_".join(sorted(v.name for v in vars(n))) if isinstance(n, Node) else str(n)


# An op on a half type computes in float32 and its result is rounded into the type, in a kernel as stage2
# rounds each op's output when it stores it: a fused kernel computes the values stage2 (and torch) compute,
# and a forward and a backward that recomputes a value agree on it (max_pool2d's gradient finds its max
# again by equality). A reduction accumulates in float32 and its result is rounded once. Selections and
# negation give a value the type already holds: nothing to round.
EXACT_IN_HALF = (Ops.WHERE, Ops.MAX, Ops.NEG)

class Lowerer:
    def __init__(self, item: ScheduleItem):
        self.item, self.stored = item, item.stored or frozenset()  # the bases a kernel writes: loaded here
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

    def mark(self, p: Pass, applies: bool = True) -> None:
        """Note that pass p changed this kernel (Kernel.passes), where it applies."""
        if applies:
            self.changed.add(p)

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
        if id(b) in self.accs:  # a reduction this kernel holds: its accumulator (rounded, if a half type's)
            acc = self.accs[id(b)]
            return self.cached(("rounded", acc.name), lambda: self.emit(UOps.CAST, b.dtype, (acc,))) \
                if b.dtype.is_half else acc
        if self.loads(b):
            return self.load(b, flat_index(idxs, b.shape), self.gate)
        if b.op is Ops.CONST:
            return self.const(b.arg, b.dtype)
        if self.item.online is not None and b is self.item.online.probs:
            return softmax_term(self, idxs)
        key = ("base", id(b), tuple(render(i) for i in idxs))
        if key in self.cache:
            return self.cache[key]
        if b.op is Ops.CONTIGUOUS:
            out = self.view(b.srcs[0], idxs)
        elif b.op in IR_ELEMENTWISE:
            srcs = [self.view(s, idxs) for s in b.srcs]
            if b.op is Ops.CAST:
                out = self.emit(UOps.CAST, b.dtype, (srcs[0],))
            elif b.dtype.is_half and b.op not in EXACT_IN_HALF:  # in float32, rounded into the half type
                out = self.emit(UOps.CAST, b.dtype, (self.alu(b.op, dtypes.float32, *srcs),))
            else:
                out = self.alu(b.op, b.dtype, *srcs)
        elif b.op in IR_REDUCE:
            out = self.nested(b, idxs)
            out = self.emit(UOps.CAST, b.dtype, (out,)) if b.dtype.is_half else out
        else:
            raise NotImplementedError(f"lower: {b.op} cannot be computed inside a kernel")
        self.cache[key] = out
        return out

    def nested(self, r: LazyBuffer, idxs: list[Node]) -> UOp:
        """A reduction the schedule left to its reader (engine/schedule.nest_reductions): computed
        here, in a loop of its own nested where it is read (or written out: the tree pass)."""
        tree = written_out(self, r, idxs) if on(Pass.TREE) else None
        if tree is not None:
            return tree
        src = r.srcs[0]
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


def lower(item: ScheduleItem, renderer: Renderer, opts: tuple[Opt, ...] | None = None) -> Kernel:
    """The kernel's UOps for the renderer's target, its loops shaped by `opts` (opts.py; None: the
    heuristic ones, heuristics.py, when that pass is on)."""
    if on(Pass.TILES) and tiled_item(item):  # the tiles pass: the kernel's loops are its own (codegen/tiles.py)
        return lower_tiles(item, renderer, get_num_threads() if renderer.threads else 1)
    by_rule = opts is None
    if opts is None:
        opts = heuristic_opts(item, renderer, get_num_threads()) if on(Pass.HEURISTICS) else ()
    plan = apply_opts(item, opts, renderer)
    L = Lowerer(item)
    L.mark(Pass.HEURISTICS, by_rule and bool(opts))
    L.mark(Pass.ONLINE, item.online is not None)
    L.mark(Pass.MERGE, item.merged)
    if item.online is not None and plan.unroll:
        L.block = next(iter(plan.unroll.values()))
    out_bufs = [L.global_of(o) for o in item.outputs]
    ranges, gidx = output_loops(L, plan, item.root.shape, renderer)
    lanes = lane_indices(gidx, plan.upcast, item.root.shape)
    L.mark(Pass.OVERLAP, any(item.root.shape[d] % u for d, u in plan.upcast.items()))
    accs: list[dict[int, UOp]] = [{} for _ in lanes]  # per lane: reduction id -> its accumulator (or value)
    lookup = item.reduce is not None and on(Pass.LOOKUP) and looked_up(L, item, plan, lanes, accs)
    L.mark(Pass.LOOKUP, lookup)
    loop = None
    if item.reduce is not None and not lookup:
        loop = ReduceLoop(L, item, plan, lanes)
        loop.run()
        loop.fold_into(accs)
    store_outputs(L, item, lanes, accs, out_bufs, {} if loop is None else loop.lane_rows)
    for _ in ranges:
        L.emit(UOps.ENDRANGE, None)
    uops, upcast = L.uops, len(lanes)
    if renderer.vector_width and on(Pass.VECTORIZE) and (plan.upcast or L.sums):
        amounts = [*plan.upcast.values(), 1, 1]  # lanes as vectors, the first upcast axis's side by side
        uops = vectorize(uops, upcast, amounts[0], renderer.vector_width, L.shared, L.sums, amounts[1],
                         bool(plan.unroll), L.folds)
        L.mark(Pass.VECTORIZE, any(u.lanes > 1 for u in uops))
    reduce_shape = () if loop is None else loop.shape
    kernel = Kernel(kernel_name(item, plan, reduce_shape, lookup), item.root.shape, uops, L.buffers,
                    ops=L.alu_count // upcast, reduce_shape=reduce_shape, upcast=upcast, outputs=len(item.outputs),
                    opts=tuple(opts), threads=plan.threads, variables=kernel_variables(L.uops),
                    online=item.online is not None, nested=on(Pass.FMA) and nested_terms(item))
    if on(Pass.FMA):  # what the renderer fuses (it asks Kernel.passes)
        L.mark(Pass.FMA, bool(fused_products(kernel) if renderer.grid else fused_multiply_adds(kernel)))
    L.mark(Pass.LAYOUTS, any(b.operand_copy for b in L.buffers))  # it writes an operand's copy, or reads one
    kernel.passes = tuple(p.value for p in TABLE if p in L.changed)
    return kernel


def output_loops(L: Lowerer, plan: LoopPlan, shape: tuple, renderer: Renderer) -> tuple[list[UOp], list[Node]]:
    """The loops over the output's axes (a blocked axis: over its blocks outermost, bidx, then within
    a block, gidx; on a GPU an axis is the thread's place in the grid) and each axis's index."""
    loop_sizes = plan.loop_sizes(shape)
    ranges, blocks = [], {}
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
    return ranges, gidx


def lane_indices(gidx: list[Node], upcast: dict[int, int], shape: tuple) -> list[list[Node]]:
    """The output indices of each entry one pass computes (one lane when nothing is upcast); the first
    upcast axis varies fastest, so its lanes sit side by side. A pass over an axis its lanes do not
    divide starts where the overlap pass puts it."""
    lanes = [list(gidx)]
    for axis, u in reversed(upcast.items()):
        start = gidx[axis] * u if shape[axis] % u == 0 else pass_start(gidx[axis], shape[axis], u)
        lanes = [[start + j if d == axis else g for d, g in enumerate(lane)] for lane in lanes for j in range(u)]
    return lanes


class ReduceLoop:
    """A reduce kernel's loop nest over the reduced axes (ridx), in which every lane folds one term a
    step into each reduction's accumulator. UNROLL writes several steps a pass; SPLIT folds term i into
    partial i mod n (an array indexed by an innermost loop, sidx), and what whole passes leave over in
    a loop of its own (tidx); a term range (the ranges pass) bounds the loop instead."""

    def __init__(self, L: Lowerer, item: ScheduleItem, plan: LoopPlan, lanes: list[list[Node]]):
        self.L, self.item, self.plan, self.lanes = L, item, plan, lanes
        self.src_shape, self.axes = item.reduce.srcs[0].shape, item.reduce.arg  # every reduction here has these
        self.shape = () if 0 in self.src_shape else self.src_shape  # an empty reduction: no loop to write
        self.split_axis, self.parts = next(iter(plan.split.items()), (None, 1))
        self.unrolled = next(iter(plan.unroll.items()), None)
        self.rvars: dict[int, Node] = {}
        self.rows: dict[int, Row] = {}  # an online softmax: id of a lane's accumulator -> its row's
        self.lane_rows: dict[int, Row] = {}  # and id of a lane's final value (divided by the row's sum) -> its row
        self.partials = [{id(r): L.emit(UOps.ACC, r.dtype, arg=reduce_identity(r.op, r.dtype)) if self.parts == 1
                          else L.emit(UOps.ACCS, r.dtype, arg=(reduce_identity(r.op, r.dtype), self.parts))
                          for r in item.reduces} for _ in lanes]

    def run(self) -> None:
        L, plan = self.L, self.plan
        if not self.shape:
            return
        ranged = reduce_ranges(self.item, plan, self.lanes, self.src_shape) if on(Pass.RANGES) else None
        L.mark(Pass.RANGES, ranged is not None)
        inner_loops = self.open_loops() if ranged is None else []
        L.before_loop = len(L.uops) - len(inner_loops)
        sidx = None
        if self.split_axis is not None:
            sidx = Var("sidx", 0, self.parts - 1)
            inner_loops.append(L.loop(sidx.name, self.parts, LoopKind.PARTIALS))
        if ranged is not None:
            self.ranged_loops(ranged)
        for j in range(0 if ranged is not None else self.unrolled[1] if self.unrolled else 1):
            self.terms(sidx, j)
        if sidx is not None and self.src_shape[self.split_axis] % self.parts:
            inner_loops = self.leftover(inner_loops)
        for _ in inner_loops:
            L.emit(UOps.ENDRANGE, None)

    def open_loops(self) -> list:
        """A loop over each reduced axis (UNROLL and SPLIT: the loop takes that many terms a pass)."""
        loops = []
        for d, n in enumerate(self.src_shape):
            if d in self.axes and n != 1:
                steps = n // (self.plan.unroll.get(d, 1) * self.plan.split.get(d, 1))
                self.rvars[d] = loop_var(f"ridx{d}", steps)
                if isinstance(self.rvars[d], Var):
                    loops.append(self.L.loop(self.rvars[d].name, steps, LoopKind.REDUCE))
        return loops

    def ranged_loops(self, ranged: dict) -> None:
        """A loop over a term range for each group of the reductions it bounds alike (codegen/ranges.py)."""
        L = self.L
        d, loop = next(iter(ranged.items()))
        self.rvars[d] = loop_var(f"ridx{d}", self.src_shape[d] // self.plan.unroll.get(d, 1))
        for span, group in loop:
            L.emit(UOps.RANGE, dtypes.int64, arg=Loop(self.rvars[d].name, span.end, LoopKind.REDUCE, span.start))
            for j in range(self.plan.unroll.get(d, 1)):
                self.terms(None, j, reduces=group)
            L.emit(UOps.ENDRANGE, None)
            L.cache.clear()  # values inside the loop belong to its scope

    def leftover(self, inner_loops: list) -> list:
        """The terms a whole pass of partials leaves over, one to a partial, in a loop of their own."""
        L, n = self.L, self.src_shape[self.split_axis]
        closing = 2 if isinstance(self.rvars[self.split_axis], Var) else 1  # the partials' loop and the axis's
        for _ in range(closing):
            L.emit(UOps.ENDRANGE, None)
        L.cache.clear()  # values of the closed loops are out of scope
        L.mark(Pass.LEFTOVER)
        tidx = Var("tidx", 0, n % self.parts - 1)
        L.loop(tidx.name, n % self.parts, LoopKind.PARTIALS)
        self.terms(tidx, left_over=n - n % self.parts)
        return inner_loops[:len(inner_loops) - closing] + [tidx]

    def term_indices(self, part: Node | None, j: int, left_over: int | None) -> list[list[Node]]:
        """Each lane's index into the reductions' source for this step: `part` the partial it goes to
        (SPLIT), `left_over` where the terms whole passes leave start (the index is then part + left_over)."""
        out_shape, root_shape, every = self.item.reduce.shape, self.item.root.shape, []
        for idx in self.lanes:
            if out_shape != root_shape:  # the reader reads the reduction reshaped: same order, other dims
                idx = unflatten(flat_index(idx, root_shape), out_shape)
            idxs = [self.rvars.get(d, Num(0) if d in self.axes else idx[d]) for d in range(len(self.src_shape))]
            if self.unrolled:
                d, u = self.unrolled
                idxs[d] = idxs[d] * u + j
            if left_over is not None:
                idxs[self.split_axis] = part + left_over
            elif part is not None:  # SPLIT: term i of the axis goes to partial i mod parts
                idxs[self.split_axis] = idxs[self.split_axis] * self.parts + part
            every.append(idxs)
        return every

    def terms(self, part: Node | None, j: int = 0, left_over: int | None = None, reduces=None) -> None:
        """Each lane's reductions (`reduces`, all by default) updated with one term a lane."""
        L, item = self.L, self.item
        every = self.term_indices(part, j, left_over)
        outside = skip_unselected(L, item, every) if part is None and on(Pass.SKIP) else None
        for lane, idxs in zip(self.partials, every, strict=True):
            for r in item.reduces if reduces is None else reduces:
                acc = lane[id(r)] if part is None else L.emit(UOps.PART, r.dtype, (lane[id(r)],), part)
                L.steps = []
                value = L.view(r.srcs[0], idxs)
                if item.online is not None and r is item.reduce:  # rescaled to the row's new max
                    rescale, self.rows[id(lane[id(r)])] = L.steps[0]
                    if rescale is not None:  # (a block of keys: once, before its first term)
                        L.emit(UOps.UPDATE, r.dtype, (acc, rescale), Ops.REDUCE_MUL)
                L.emit(UOps.UPDATE, r.dtype, (acc, value), r.op)
                L.alu_count += 1
        if outside is not None:
            L.emit(UOps.ENDIF, None)
            L.cache = outside  # values inside the IF belong to its scope

    def fold_into(self, accs: list[dict[int, UOp]]) -> None:
        """After the loop: each lane's partials combined into its reductions' values (an online softmax's
        sum divided by its row's sum of exps)."""
        L = self.L
        L.cache.clear()  # values inside the loop belong to its scope
        for lane, found in zip(accs, self.partials, strict=True):
            lane.update({id(r): combine(L, r, found[id(r)], self.parts) for r in self.item.reduces})
            for r in self.item.reduces:
                if id(found[id(r)]) in self.rows:
                    row = self.rows[id(found[id(r)])]
                    lane[id(r)] = divide_by_row(L, self.item, lane, r, row)
                    self.lane_rows[id(lane[id(r)])] = row


def store_outputs(L: Lowerer, item: ScheduleItem, lanes: list[list[Node]], accs: list[dict[int, UOp]],
                  out_bufs: list[UOp], lane_rows: dict[int, Row]) -> None:
    """Each lane's value of each output, stored at its index (an online softmax's row statistics once
    a row, at the row's index)."""
    written_rows: set[tuple[int, str]] = set()
    root = item.root
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


def kernel_name(item: ScheduleItem, plan: LoopPlan, reduce_shape: tuple, lookup: bool) -> str:
    """E_ (elementwise) or r_ (a reduction), the output's dims, R and the reduced dims, then one mark
    per option (U upcast lanes, UR unroll, S split, B block, T threads) and what else shaped it."""
    kind = "r" if item.reduce is not None else "E"
    name = "_".join([kind, *(dim_name(n) for n in item.root.shape)] + [f"R{dim_name(n)}" for n in reduce_shape])
    name += f"_U{'x'.join(str(u) for u in plan.upcast.values())}" if plan.upcast else ""
    name += "".join(f"_UR{u}" for u in plan.unroll.values())
    name += "".join(f"_S{n}" for n in plan.split.values())
    name += "".join(f"_B{b}" for b in plan.block.values())
    name += f"_T{plan.threads}" if plan.threads > 1 else ""
    name += f"_O{len(item.outputs)}" if item.merged else ""  # several outputs (engine/merge.merge_outputs)
    name += "_lookup" if lookup else ""
    if item.reduce is not None and 0 in item.reduce.srcs[0].shape:
        name += "_empty"
    return name + ("_online" if item.online is not None else "")


def kernel_variables(uops: list[UOp]) -> tuple[Variable, ...]:
    """The user's Variables the kernel reads (its extra arguments), unbound, in name order."""
    found: dict[str, Variable] = {}
    for u in uops:
        args = [u.arg[0]] if u.op is UOps.LOAD else [u.arg.start, u.arg.extent] if isinstance(u.arg, Loop) else [u.arg]
        for arg in args:
            if isinstance(arg, Node):
                found.update((v.name, Variable(v.name, v.min, v.max)) for v in vars(arg) if isinstance(v, Variable))
    return tuple(found[n] for n in sorted(found))
