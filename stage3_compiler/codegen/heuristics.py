"""The options a kernel gets without BEAM (`heuristic_opts`): hand-written rules, each with the
measurement that chose it, reading the renderer's capabilities (codegen/renderer.py) rather than
the device's name.

- A matmul (the sum of a product whose operands are each broadcast along one output axis, or of
  a select by a one-hot condition) gets a register tile (`matmul_tile`): UPCAST on both output axes.
- Another reduction computes 8 (or 4, 2) outputs a pass (`upcast_axes`), or, for a row reduction
  over contiguous memory, SPLIT into a vector register of partials (`split_axis`).
- An online softmax's sum (attention) computes all of a row's outputs a pass (`online_lanes`).
- A matmul whose B no longer fits in L2 gets BLOCK; a kernel with enough work gets THREAD.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..graph.lazy import LazyBuffer, numel
from ..graph.symbolic import Node, Num, layout, vars
from ..ops import IR_ELEMENTWISE, Ops
from ..passes import Pass, on
from .indexing import strides_of
from .item import ScheduleItem, nested_terms
from .opts import Opt, OptOps, apply_opts, outer_loop, reduce_axes
from .overlap import tile_lanes
from .renderer import Renderer

THREAD_MIN_WORK = 1 << 15  # output entries x reduction steps below which a kernel stays on one thread


UPCASTS = (8, 4, 2)  # outputs one pass of a reduction loop computes, the largest that divides an axis


def upcast_axes(item: ScheduleItem, renderer: Renderer) -> dict[int, int]:
    """Which output axes a reduce kernel computes several entries of at once, and how many of each.

    One accumulator is a chain of dependent adds: each waits for the one before (a few cycles), and
    the loop runs at that latency. Computing U outputs in one pass of the loop gives U independent
    chains the CPU overlaps (and the C compiler can pack into vector lanes), and a load that does
    not depend on that axis (a matmul's row of the left operand) is loaded once for the U of them.
    The last axis whose size U divides is taken: it is the output's contiguous one where it can be.
    A matmul gets a tile of outputs instead (matmul_tile; the item's `stored` tells it which operands
    are computed inside the kernel).
    """
    r, shape = item.reduce, item.root.shape
    if r is None or 0 in r.srcs[0].shape:
        return {}
    tile = matmul_tile(item, renderer)
    if tile:
        return tile
    first = next(((axis, u) for u in UPCASTS for axis in reversed(range(len(shape)))
                  if not isinstance(shape[axis], Node) and shape[axis] >= u and shape[axis] % u == 0), None)
    return dict([first]) if first else {}


def matmul_tile(item: ScheduleItem, renderer: Renderer) -> dict[int, int]:
    """A matmul's register tile: the sum of a product whose operands are each broadcast along one
    output axis (a along n, b along m). Each step of the reduction loop reads TN values of b and TM
    of a and does TM x TN multiply-adds with them: the more outputs a tile holds, the fewer loads
    per multiply-add. TN runs along the axis where b's values sit side by side in memory, so the C
    compiler packs them into one vector register and each accumulator row is a few vector
    registers: 8 x 32 (8 rows of two registers of 16 floats) where the CPU has 32 vector registers
    (AVX-512), 6 x 16 where it has 16 (AVX2), 4 x 8 on a GPU (registers per thread: renderer.tile). Rows
    the tile's do not divide take it with the overlap pass (overlap.py), else the largest power of two
    that divides them.
    {} when it is not a matmul, or when neither operand is contiguous along an output axis (the
    scheduler copies a weight read transposed so that one is: layouts.copy_transposed). The tile beat
    a narrower one, and a weight read along K ran slowest (benchmarks/results/stage3_rule_measurements.md).
    A symbolic axis takes no lanes (its length is known at launch): a matmul over a symbolic number of
    rows (a whole sequence of symbolic length) gets a tile of one row and rows x cols columns, as a
    product of one row does."""
    r = item.reduce
    src, shape = r.srcs[0], r.shape
    if not src.is_base or not (src.op is Ops.MUL or selected_product(src)):
        return {}
    rows, cols = renderer.tile
    x, y = src.srcs[:2]
    # Scalar lanes (a GPU thread's registers) need no operand side by side along a tile axis: there the
    # tile pays by loads alone (attention's q @ k.T, both operands contiguous along the head, 1 x 8
    # outputs a thread: 9 loads for 8 multiply-adds; 4 x 8: 12 for 32).
    pairs = ((x, y, True), (y, x, True)) + (((x, y, False), (y, x, False)) if not renderer.vector_width else ())
    for a, b, side_by_side in pairs:
        n = next((d for d in reversed(range(len(shape)))
                  if broadcast(a, d) and (contiguous_along(b, d) or not side_by_side)), None)
        m = next((d for d in reversed(range(len(shape))) if d != n and broadcast(b, d) and not broadcast(a, d)), None)
        one_row = m is None and all(size == 1 for d, size in enumerate(shape) if d != n)  # a matrix-vector product
        if n is None or (m is None and not one_row):
            continue
        # The kernel loops over the root's shape, which may be the reduction's reshaped (a residual
        # add after the product): a tile axis is the root's axis with the same stride.
        tile = {root_axis(item, n): cols} | ({} if one_row else {root_axis(item, m): rows})
        if None in tile:
            continue
        stored = item.stored
        if not one_row and stored is not None and renderer.narrow_tiles and computed(a, stored) and fixed(shape[n], 32):
            # a is computed in the loop (a cheap expression the scheduler recomputes: engine/schedule.CHEAP),
            # once per pass: all n columns in one pass compute each value once, one row a pass keeps the
            # accumulators in registers. With attention's probabilities computed in the loop, one row of 32
            # columns beat a 4 x 16 tile, which computed each of them once per 16 columns
            # (benchmarks/results/stage3_rule_measurements.md).
            # (the root's axis: a reduction read reshaped, (12, 24) as (2, 6, 24), has fewer along it)
            axis = root_axis(item, n)
            return {axis: item.root.shape[axis]} if axis is not None and item.root.shape[axis] > 1 else {}
        sizes, n_axis = item.root.shape, root_axis(item, n)
        tile = {d: lanes_of(sizes[d], t) for d, t in tile.items()}
        if not one_row and fixed(sizes[root_axis(item, m)]):  # a row tile that does not divide the rows
            m_axis = root_axis(item, m)
            tile[m_axis] = tile_lanes(item, sizes[m_axis], rows, tile[m_axis], renderer)
        if one_row or tile[root_axis(item, m)] == 1:
            # one row a pass: the tile's outputs all along the columns, a stream of rows x cols floats
            # of b a step: the more columns a pass, the longer the run of b's memory each step reads (a
            # matrix-vector product ran fastest at the widest: benchmarks/results/stage3_rule_measurements.md).
            tile = {n_axis: lanes_of(sizes[n_axis], rows * cols)}
        short = tile[n_axis] < min(WHOLE_ROW_BELOW, cols)  # (a tile of its own width is not short)
        if short and fixed(sizes[n_axis]) and WHOLE_ROW_BELOW <= sizes[n_axis] <= rows * cols:
            # no power of two from 16 up divides the columns (a vocabulary of 78): a pass takes all of them,
            # one row, where a narrow tile (2 x 8) ran nanoGPT's logits (768 x 78 x 128) far slower
            # (benchmarks/results/stage3_rule_measurements.md).
            return {n_axis: sizes[n_axis]}
        if all(u > 1 for u in tile.values()):
            return tile
    return {}


WHOLE_ROW_BELOW = 16  # a matmul's columns that a tile takes fewer of than this are all taken, one row a pass


def lanes_of(size: int | Node, most: int) -> int:
    """`most` where it divides a concrete size, else the largest power of two below it that does (1 for a
    symbolic size)."""
    if fixed(size) and size % most == 0:
        return most
    return next((u for u in (1 << p for p in reversed(range(most.bit_length())))
                 if fixed(size) and size % u == 0 and u <= most), 1)


def selected_product(b: LazyBuffer) -> bool:
    """Is b a select of a value or 0, where(cond, value, 0)? Summed, it is a matmul with a one-hot
    operand: an embedding's lookup, sum_r where(idx[t] == r, w[r, c], 0) (lowered as a load at idx[t]
    where r is arange's: Lowerer.picked, which takes the tile's lanes), and its gradient. Its
    condition is one for a whole row of the tile, so the tile's lanes select whole vectors."""
    zero = b.srcs[2].base if b.op is Ops.WHERE else None
    return zero is not None and zero.op is Ops.CONST and zero.buffer is None and zero.arg == 0


def computed(v: LazyBuffer, stored: set[int]) -> bool:
    """Is the view's base an expression this kernel computes (not a load, not a constant)?"""
    b = v.base
    return b.buffer is None and id(b) not in stored and b.op in IR_ELEMENTWISE


def root_axis(item: ScheduleItem, axis: int) -> int | None:
    """The axis of the kernel's root along which the reduction's output axis runs: the one with the
    same stride in its contiguous layout (the root is the reduction, or a same-order reshape of it)."""
    stride, shape = strides_of(item.reduce.shape)[axis], item.root.shape
    return next((d for d, s in enumerate(strides_of(shape)) if s == stride and layout(shape[d]) > 1), None)


def fixed(size: int | Node, most: int | None = None) -> bool:
    """Is the size concrete (and at most `most`)? Options take only axes of concrete size."""
    return not isinstance(size, Node) and (most is None or size <= most)


def contiguous_along(v: LazyBuffer, axis: int) -> bool:
    """Do the view's neighbouring entries along this axis sit side by side in memory?"""
    return v.is_base and axis == len(v.shape) - 1 or not v.is_base and v.st.views[-1].strides[axis] == 1


def broadcast(v: LazyBuffer, axis: int) -> bool:
    """Is the view's value the same all along this axis (an expand: stride 0)?"""
    return not v.is_base and v.st.views[-1].strides[axis] == 0


def heuristic_opts(item: ScheduleItem, renderer: Renderer, threads: int) -> tuple[Opt, ...]:
    """The options realize uses without BEAM (`heuristic_choice`)."""
    return heuristic_choice(item, renderer, threads).opts


@dataclass(frozen=True)
class Choice:
    """A kernel's options and, for each, the rule that chose it in words (what `sitp viz` shows)."""

    opts: tuple[Opt, ...]
    why: tuple[str, ...]


def heuristic_choice(item: ScheduleItem, renderer: Renderer, threads: int) -> Choice:
    """The options realize uses without BEAM: a matmul's register tile or a reduction's upcast
    (upcast_axes; the item's `stored`, the bases the schedule's kernels write, tells a matmul
    operand loaded from memory from one computed in the loop), SPLIT for a row reduction (split_axis), a
    cache block for a matmul whose B panel would not stay in cache, and THREAD for a kernel with
    enough work to pay for waking the other threads. A kernel whose loops run to a symbolic size
    takes them on its concrete axes only (opts.apply_opts)."""
    split = split_axis(item, renderer.split_parts) if renderer.split_reductions and item.reduce is not None \
        and not matmul_tile(item, renderer) and item.online is None else None
    if item.online is not None:
        opts = [Opt(OptOps.UPCAST, axis, u) for axis, u in online_lanes(item).items()]
        why = ["attention's fused kernel: a row of the output (the head's dims) as lanes"] * len(opts)
        opts += [Opt(OptOps.UNROLL, axis, PACK_TERMS) for axis in online_block(item, renderer)]
        why += [f"{PACK_TERMS} keys a pass of the online softmax, their exps one vector"] * (len(opts) - len(why))
    elif split is not None:  # a row reduction over memory side by side: a vector of partials (see SPLIT)
        opts, why = [Opt(OptOps.SPLIT, *split)], ["a row sum over memory side by side: a vector of partial sums"]
    elif item.reduce is None:
        transposed = transpose_axes(item)
        lanes = transposed or (across_axes(item) if renderer.vector_width else {})
        opts = [Opt(OptOps.UPCAST, axis, u) for axis, u in lanes.items()]
        why = [("a transpose: a tile read along one axis, written along the other" if transposed else
                "lanes along the axis memory runs along: one vector a pass")] * len(opts)
    elif packed := packed_terms(item, renderer):  # each pass: a whole row of outputs, 16 terms
        opts = [*(Opt(OptOps.UPCAST, axis, u) for axis, u in row_lanes(item).items()),
                *(Opt(OptOps.UNROLL, axis, PACK_TERMS) for axis in packed)]
        why = ["terms with sums of their own: a row of outputs shares each, 16 terms a pass"] * len(opts)
    else:
        opts = [Opt(OptOps.UPCAST, axis, u) for axis, u in upcast_axes(item, renderer).items()]
        why = ["a register tile of outputs: each loaded value used by a row or column of the tile"] * len(opts)
    plan = apply_opts(item, opts, renderer)
    sizes = plan.loop_sizes(item.root.shape)
    steps = numel(item.reduce.srcs[0].shape) // max(numel(item.reduce.shape), 1) if item.reduce is not None else 1
    # A matmul tile whose B is large (no longer in L2, barely in L3) reads it in column blocks, each a
    # K x block panel of at most 512 KiB that stays in L2 while every row uses it; read whole, B comes
    # from L3 again for every block of rows. (A small B stays in cache whole, and blocks only slow it.)
    # Every column block then reads all of A again: an A over 4 MiB is read in row blocks of at
    # most 4 MiB too, so what it reads again stays in L3 (which other programs share).
    # From 2 MiB of B on (PANELS_BYTES), not 4: a B of 2 or 3 MiB did not stay in a core's 2 MiB of L2
    # either while A streamed past it. A panel of B that alone fills half the budget (K = 4096) is a
    # block of one: BLOCK(axis, 1) moves the loop over the panels outermost. Each of these was measured
    # on the shapes it is for: benchmarks/results/stage3_rule_measurements.md.
    if len(plan.upcast) == 2 and len(sizes) >= 2 and renderer.loop_blocks:
        (cols_axis, cols), (rows_axis, rows) = plan.upcast.items()
        block = cache_block(sizes[cols_axis], 4 * steps * cols, PANEL_BYTES)
        if block is not None and steps * sizes[cols_axis] * cols * 4 >= PANELS_BYTES:
            opts.append(Opt(OptOps.BLOCK, cols_axis, block))
            why.append("column blocks of B, each panel small enough to stay in L2 while every row uses it")
            # Rows the tile does not divide (the overlap pass's) make a count of passes few powers of two
            # divide: any count of passes that leaves each thread as many blocks.
            passes = sizes[rows_axis]
            blocks = POWERS_OF_TWO if item.root.shape[rows_axis] % rows == 0 else \
                [b for b in range(64, 0, -1) if passes % b == 0 and passes // b % threads == 0]
            block = cache_block(passes, 4 * steps * rows, OPERAND_BYTES, blocks)
            if block is not None and steps * item.root.shape[rows_axis] * 4 > OPERAND_BYTES:
                opts.append(Opt(OptOps.BLOCK, rows_axis, block))
                why.append("row blocks of A, each small enough to stay in L3 while every column block reads it")
            plan = apply_opts(item, opts, renderer)
    if renderer.threads and threads > 1 and numel(item.root.shape) * steps >= THREAD_MIN_WORK \
            and outer_loop(plan, sizes) >= threads:
        opts.append(Opt(OptOps.THREAD, 0, threads))
        why.append(f"{threads} threads share the outer loop: work enough to pay for waking them")
    return Choice(tuple(opts), tuple(why))


PACK_TERMS = 16  # terms a pass of a reduce loop whose terms compute sums of their own (packed_terms)


def online_block(item: ScheduleItem, renderer: Renderer) -> list[int]:
    """[the keys' axis] where an online softmax takes PACK_TERMS keys a pass (Lowerer.softmax_block): their
    exps one vector where the renderer has vectors. [] elsewhere."""
    r = item.reduce
    n = r.srcs[0].shape[r.arg[0]] if len(r.arg) == 1 else 0
    return [r.arg[0]] if renderer.vector_width and fixed(n) and n % PACK_TERMS == 0 and n > PACK_TERMS else []


def packed_terms(item: ScheduleItem, renderer: Renderer) -> list[int]:
    """[the reduced axis] where a reduce kernel's terms compute nested sums (attention's backward: each
    pair's score and dp, sums over the head, then an exp), each a scalar its upcast lanes share: the loop
    takes PACK_TERMS terms a pass (UNROLL), and the vectorizer computes those scalars for the 16 terms as
    one vector (vectorize.pack_terms). Its lanes are a whole row of outputs (`row_lanes`: the head's
    dims), which share those scalars: a matmul's tile of 8 rows by 32 recomputed them for every
    32 dims (nanochat's head of 64: twice). [] elsewhere."""
    r = item.reduce
    if item.online is not None or not renderer.vector_width or len(r.arg) != 1:
        return []
    n = r.srcs[0].shape[r.arg[0]]
    return [r.arg[0]] if fixed(n) and n % PACK_TERMS == 0 and nested_terms(item) else []


PANEL_BYTES = 512 << 10  # a column block of B a matmul keeps in L2 (half of 1 MiB) while every row uses it
OPERAND_BYTES = 4 << 20  # a B this large, an A larger, is read in blocks (no longer in L2, barely in L3)
PANELS_BYTES = 2 << 20  # a B this large is read in column blocks (PANEL_BYTES each)


POWERS_OF_TWO = (64, 32, 16, 8, 4, 2, 1)


def cache_block(passes: int, pass_bytes: int, most: int, sizes=POWERS_OF_TWO) -> int | None:
    """The most passes of a loop (one of `sizes` that divides it, fewer than all of them) whose reads,
    pass_bytes each, fit in `most` bytes; None if no block fits. A block of one pass is the loop moved
    outermost: each pass's reads stay in cache while the loops inside it run."""
    return next((b for b in sizes if b * pass_bytes <= most and passes % b == 0 and b < passes), None)


ONLINE_LANES = (64, 32, 16, 8, 4, 2)  # outputs of one softmax row a pass of an online softmax computes


def row_lanes(item: ScheduleItem) -> dict[int, int]:
    """The last output axis of a kernel whose terms are packed (packed_terms), up to 64 lanes: a row of
    outputs a pass."""
    shape = item.root.shape
    for d in reversed(range(len(shape))):
        if fixed(shape[d]) and shape[d] > 1:
            lanes = next((u for u in ONLINE_LANES if shape[d] % u == 0), None)
            return {d: lanes} if lanes else {}
    return {}


def online_lanes(item: ScheduleItem) -> dict[int, int]:
    """An online softmax (engine/online.py): UPCAST the output axis its probabilities do not vary
    along (attention's head dims), up to 64 lanes. Every lane then shares the row's scores, its
    exps and its running max, which would otherwise be computed again for each output."""
    r = item.reduce
    if item.root.shape != r.shape:
        return {}
    view = next(s for s in r.srcs[0].base.srcs if s.base is item.online.probs)
    used = {v.name for v in vars(view.st.expr_idxs()[0])}  # the loop variables i0, i1, ... it reads
    for d in reversed(range(len(r.shape))):
        n = r.shape[d]
        if d not in r.arg and not isinstance(n, Node) and n > 1 and f"i{d}" not in used:
            lanes = next((u for u in ONLINE_LANES if n % u == 0), None)
            return {d: lanes} if lanes else {}
    return {}


TRANSPOSE_LANES = 16  # rows of the output a transposing copy writes a pass: one cache line of float32 read
TRANSPOSE_SHORT = 8  # or, where 16 does not divide the rows it writes, 8 (a packed panel's width)


def transpose_axes(item: ScheduleItem) -> dict[int, int]:
    """For a copy (a kernel that only moves data) that reads a buffer transposed (stride 1 along an
    outer axis of its output, a longer one along the last): UPCAST that axis, so that each pass
    reads a cache line's 16 values side by side and writes them to 16 rows, each row's run of
    memory filled in order. Row by row, each read lands a row of the source apart: in Muon's copy of a
    1024 x 256 matrix transposed, 4 KiB between reads, every load is a miss in one set of L1.
    (A kernel that computes keeps its loop, which the C compiler vectorizes; lanes would stop that.)"""
    shape = item.root.shape
    last = last_axis(shape)
    if last is None or any(not fixed(n) for n in shape):
        return {}
    views = []
    for out in item.outputs:
        found = copied_views(out, item.stored or frozenset())
        if found is None:
            return {}
        views += found
    for axis in range(last):
        if shape[axis] % TRANSPOSE_LANES == 0 and any(
                v.shape == shape and len(v.st.views) == 1 and v.st.views[0].strides[axis] == 1
                and abs(v.st.views[0].strides[last]) > 1 for v in views):
            # and 16 rows of the source where they divide and the copy writes one buffer: a 16 x 16 block
            # a pass, loaded as 16 vectors and stored as 16, transposed in registers (vectorize.py): its
            # stores whole vectors, not a scalar store an entry. Not with 4 outputs (weights merged into
            # one kernel): 256 lanes of 4 copies ran slower than 16 (benchmarks/results/stage3_rule_measurements.md)
            # (or a 16 x 8 block, into a matmul's panels 8 wide: 16 vectors of 8 stored)
            second = next((u for u in (TRANSPOSE_LANES, TRANSPOSE_SHORT) if shape[last] % u == 0), None)
            block = second is not None and len(item.outputs) == 1
            return {axis: TRANSPOSE_LANES, **({last: second} if block else {})}
    return {}


SHORT_LAST = 8  # an elementwise kernel's last axis this short or shorter is a poor loop to vectorize


def across_axes(item: ScheduleItem) -> dict[int, int]:
    """For an elementwise kernel whose last (innermost) axis is short (8 or fewer) and read across
    memory (loads that gather, a stride over 1), when as many loads lie side by side along another
    axis: UPCAST that axis by 16. The lanes are then vector loads (vectorize.py, where the renderer
    has a vector_width), and a value that does not vary along that axis (a layernorm's per-row scale,
    its square root and reciprocal) is computed once for the 16. Looping along the short axis, the C
    compiler gathers 8 values a pass at best and recomputes the per-row values at every entry. The
    layernorm gradients summed over the residual stream, written in a matmul operand's
    (rows / 8, cols, 8) layout (layouts.py), and the qkv gradient's concatenation ran that way until
    they took these lanes (benchmarks/results/stage3_rule_measurements.md)."""
    shape = item.root.shape
    last = last_axis(shape)
    if last is None or any(not fixed(n) for n in shape) or shape[last] > SHORT_LAST or 0 in shape:
        return {}
    root = item.root
    if root.op is not Ops.CONTIGUOUS:
        return {}
    src = root.srcs[0]  # the expression, or a view of it in the order the root is written
    if 0 in src.base.shape:  # a view that pads an empty expression: nothing is loaded
        return {}
    views = loaded_views(src.base, item.stored or frozenset())
    origin = [memory_index(src, v, [0] * len(shape)) for v in views]

    def steps(axis: int) -> list[int]:  # how far each load moves in memory when the root's axis steps by one
        unit = [0] * len(shape)
        unit[axis] = 1
        moved = zip((memory_index(src, v, unit) for v in views), origin, strict=True)
        return [a - b for a, b in moved if a is not None and b is not None]  # (None: a symbolic offset)

    across = sum(1 for d in steps(last) if abs(d) > 1)  # gathers, looping along the last axis
    if across == 0:
        return continuing_axes(shape, last, steps)
    along = {axis: steps(axis).count(1) for axis in range(last)}  # loads side by side along each axis
    best = max(along, key=along.get, default=None)
    if best is None or shape[best] % TRANSPOSE_LANES or along[best] < across:
        return {}
    # the short axis too, as the second: its stores side by side, the lanes transposed in registers.
    # Not where a load pads (a concatenation's pieces): such a load (gated) stays scalar in every lane,
    # and 128 such lanes a pass ran slower than 16 (nanoGPT's qkv gradient as panels:
    # benchmarks/results/stage3_rule_measurements.md)
    plain = all(v.is_base or all(view.mask is None for view in v.st.views) for v in views)
    return {best: TRANSPOSE_LANES, **({last: shape[last]} if shape[last] in PANEL_LANES and plain else {})}


PANEL_LANES = (4, 8)  # a short last axis upcast whole: a vector store of half or a quarter of a register
RUN_FLOATS = 64  # floats of one run of memory a pass reads, where a short axis continues along another


def continuing_axes(shape: tuple[int, ...], last: int, steps) -> dict[int, int]:
    """An elementwise kernel whose short last axis reads side by side, and whose run of memory
    continues along another axis (a row-major matrix written as panels of 8 columns, the A of x.T @ y:
    entry [p, k, r] of the copy is x[k, 8p + r]): UPCAST the short axis whole and the continuing one
    so that a pass reads RUN_FLOATS floats of a row. Panel by panel, each row is a new page for only
    8 floats; a visit of RUN_FLOATS floats reads 8 times as many for each new page
    (benchmarks/results/stage3_rule_measurements.md).
    `steps(axis)`: how far each load moves when the axis steps by one (across_axes)."""
    n = shape[last]
    if n not in PANEL_LANES or any(d != 1 for d in steps(last)):
        return {}
    runs = [a for a in range(last) if shape[a] > 1 and steps(a) and all(d == n for d in steps(a))]
    if not runs or shape[runs[-1]] % (RUN_FLOATS // n):
        return {}
    return {last: n, runs[-1]: RUN_FLOATS // n}


def memory_index(src: LazyBuffer, v: LazyBuffer, index: list[int]) -> int | None:
    """The element of memory that view v (read by the expression src is a view of) loads at the root's
    index `index`, concrete sizes only; None where a view's offset is symbolic (a Variable's)."""
    if src.is_base:
        flat = sum(i * s for i, s in zip(index, strides_of(src.shape), strict=True))
    else:
        node = src.st.expr_idxs([Num(i) for i in index])[0]
        if not isinstance(node, Num):
            return None
        flat = node.value
    node = v.st.expr_idxs([Num((flat // s) % n) for s, n in zip(strides_of(v.shape), v.shape, strict=True)])[0]
    return node.value if isinstance(node, Num) else None


def loaded_views(b: LazyBuffer, stored: set[int]) -> list[LazyBuffer]:
    """The views of buffers in memory (or written by an earlier kernel: `stored`) that the elementwise
    expression b reads, each of b's shape (an expression fused in through a view of its own is not
    followed); each shared subexpression walked once."""
    out, stack, seen = [], [b], set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if not x.is_base:
            if (x.base.buffer is not None or id(x.base) in stored) and x.shape == b.shape:
                out.append(x)
        elif x.buffer is not None or id(x) in stored:
            out.append(x)  # a base read as it is
        elif x.op in IR_ELEMENTWISE:
            stack.extend(x.srcs)
    return out


def copied_views(b: LazyBuffer, stored: set[int]) -> list[LazyBuffer] | None:
    """The views of buffers in memory (or written by an earlier kernel: `stored`) that a copy of b
    reads; None when computing b takes an ALU op (it is not a copy)."""
    out, stack = [], [b]
    while stack:
        x = stack.pop()
        if x.op is not Ops.CONTIGUOUS:
            return None
        s = x.srcs[0]
        if s.base.buffer is not None or id(s.base) in stored:
            out.append(s)
        elif s.is_base:
            stack.append(s)
        else:
            return None
    return out


def split_axis(item: ScheduleItem, parts: int = 8) -> tuple[int, int] | None:
    """The reduce axis SPLIT pays on and its partials: the innermost axis, when it holds at least 16
    terms and every value the reduction reads moves along it by one element of memory (or not at all);
    `parts` partials (a vector register's floats) where they leave each at least 4 terms, else 8 (the
    terms left over by whole passes go to a short loop of their own, so that nanoGPT's loss over a
    vocabulary of 78 is split too, not run 8 rows a pass with scalar exps). 16 partials paid on
    attention's softmax rows of 64 and cost on its dot products over a head of 32 (2 terms a partial).
    Split, a row max, softmax's sum of exps and a mean each ran faster than with 8 outputs a pass
    (UPCAST) instead (benchmarks/results/stage3_rule_measurements.md). (UPCAST and SPLIT together
    lose the loop vectorizer, which the upcast lanes turn off.)"""
    axes = reduce_axes(item)
    n = item.reduce.srcs[0].shape[axes[-1]] if axes else 0
    if not axes or not fixed(n) or n < 16:
        return None
    if not all(reads_along(r.srcs[0], axes[-1]) for r in item.reduces):
        return None
    count = parts if n >= 4 * parts else 8
    if n % count and not on(Pass.LEFTOVER):
        return None  # without the leftover loop a split takes only an axis its partials divide
    return axes[-1], count


def reads_along(v, axis: int) -> bool:
    """Does every value behind view v move by at most one element of memory when `axis` steps by one?
    A fused elementwise base is followed into its sources; a view must read along the axis with
    stride 1 (its base then along its own last axis) or 0; a base read as it is, along its last axis."""
    stack, seen = [(v, axis)], set()
    while stack:
        v, axis = stack.pop()
        if (id(v), axis) in seen:  # a shared subexpression (GELU reads x a dozen times): walked once
            continue
        seen.add((id(v), axis))
        if not v.is_base:
            views = v.st.views
            stride = views[-1].strides[axis]
            if stride == 0:
                continue
            if stride != 1 or len(views) > 1 or views[-1].mask is not None:
                return False
            v, axis = v.base, last_axis(v.base.shape)  # one step is one element of the base: its last axis
        fused = v.buffer is None and (v.op in IR_ELEMENTWISE or v.op is Ops.CONTIGUOUS)
        if fused:
            stack.extend((s, axis) for s in v.srcs)
        elif v.op is not Ops.CONST and axis != last_axis(v.shape):
            return False
    return True


def last_axis(shape: tuple[int, ...]) -> int | None:
    """The innermost axis of a contiguous layout that is longer than 1."""
    return next((d for d in reversed(range(len(shape))) if shape[d] != 1), None)
