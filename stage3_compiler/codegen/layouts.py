"""Operand layouts: a matmul (the sum of a product of two expanded views) may read an operand from a
copy laid out for its register tile instead of the operand itself. The scheduler asks for them
(`copy_operands`, from engine/schedule.rewrite_graph) before it fuses; each copy is a CONTIGUOUS
base put into the graph, so it is one more kernel, and the product's values stay bit for bit the
same (every sum keeps its order).

- transposed (`copy_transposed`): x @ w.T reads w along the summed axis; a copy with the output
  axis innermost lets the tile hold its outputs in vector registers.
- padded (`copy_padded`): rows a multiple of 4 KiB apart all fall in one set of the L1 cache;
  a copy with longer rows spreads them.
- packed (`copy_packed`, where the renderer says `packed_operands`: the CPU): panels of the tile's
  width, each one run of memory the prefetcher streams.
"""

from __future__ import annotations

from ..graph.lazy import LazyBuffer, numel
from ..ops import Ops
from .heuristics import broadcast, matmul_tile
from .item import ScheduleItem
from .renderer import Renderer


def matmul_product(b: LazyBuffer) -> LazyBuffer | None:
    """The product a matmul sums: for a sum over one axis of the product of two views (each operand
    read through a view of a base, expanded along the output axis it does not have), the MUL base."""
    if b.op is not Ops.REDUCE_ADD or len(b.arg) != 1 or not b.srcs[0].is_base or b.srcs[0].op is not Ops.MUL:
        return None
    mul = b.srcs[0]
    return None if mul.buffer is not None or any(s.is_base for s in mul.srcs) else mul


def reads_recomputed(b: LazyBuffer) -> bool:
    """Is the matmul b a product of recomputed bases (FlashAttention's), or recomputed itself? It reads
    no copied operand: its kernel takes one row a pass (heuristics.matmul_tile), which no panel helps.
    Two of them over one loop share a kernel, which computes what both recompute once (dk and dv: p)."""
    return b.recomputed or any(s.base.recomputed for s in b.srcs[0].srcs)


def concrete(v: LazyBuffer) -> bool:
    """Is the view's base of a concrete shape? A base of any kind may be copied: a weight in memory, or
    an expression or a product of this schedule (an activation, a gradient), copied as it is computed."""
    return all(isinstance(n, int) for n in v.base.shape) and all(isinstance(n, int) for n in v.shape)


def copy_operands(b: LazyBuffer, renderer: Renderer, batched: bool = True) -> bool:
    """Put the copies the matmul b should read into the graph; True when there were any. `batched`:
    whether a batch of products (attention's q @ k.T) may have its operand copied transposed (where
    the renderer packs lanes into vectors: the CPU)."""
    changed = False
    for packed in packed_operands(b, renderer):
        copy_packed(b.srcs[0], *packed)
        changed = True
    # (a GPU thread's tile needs no operand side by side: heuristics.matmul_tile)
    found = transposed_operand(b, batched and renderer.vector_width > 0)
    if found is not None:
        copy_transposed(b.srcs[0], *found)
        changed = True
    for w in padded_operands(b):
        copy_padded(b.srcs[0], w)
        changed = True
    return changed


MIN_ROWS = 16  # rows that must read a weight for its transposed copy to pay


def transposed_operand(b: LazyBuffer, batched: bool = True) -> tuple[LazyBuffer, int] | None:
    """For a matmul (a sum over one axis of the product of two views, each expanded along an output
    axis the other is not) that reads a weight by rows, its operand: (the view of the weight, its
    output axis N).

    x @ w.T (a Linear layer's forward) reads w along the summed axis K: no output axis reads w's
    neighbouring floats, so the kernel cannot hold its outputs in vector registers. A copy of w
    with N innermost costs N*K reads and writes, and the product then reuses each copied value for
    every row, several times faster (heuristics.matmul_tile). Only for an operand whose only axes
    are N and K (a weight, or an expression such as Muon's X in X @ X.T, copied as it is computed)
    read by at least MIN_ROWS rows (when both operands are, the one read by more). A batch of such
    products (attention's q @ k.T, a product a head) is copied too, the batch axes kept in front: each
    head's dot products over 32 floats had run as 8 partial sums an output, far below a register
    tile's speed. Muon's X @ X.T (256 x 1024), read from X itself, had been a large share of
    nanochat's CPU step (benchmarks/results/stage3_rule_measurements.md)."""
    mul = matmul_product(b)
    if mul is None:
        return None
    k = b.arg[0]
    x, y = (s.st.views[-1].strides for s in mul.srcs)  # the last view holds a broadcast's 0 strides
    if any(p[d] == 0 and q[d] == 1 for p, q in ((x, y), (y, x)) for d in range(len(b.shape)) if d != k):
        return None  # one operand already runs along an output axis the other is broadcast on
    best, reuse = None, MIN_ROWS - 1
    for x, w in (mul.srcs, mul.srcs[::-1]):  # x @ w.T reads both along K: copy the one reused most
        if len(w.st.views) != 1 or not concrete(w):
            continue  # a plain view of a concrete base: a weight, or an expression (Muon's X) copied as computed
        xs, ws = x.st.views[-1].strides, w.st.views[0].strides
        own = [d for d, n in enumerate(w.shape) if n != 1 and ws[d] != 0]  # the weight's own axes
        rows = numel(tuple(n for d, n in enumerate(w.shape) if n != 1 and ws[d] == 0 and xs[d] != 0))
        outs = [d for d in own if d != k and xs[d] == 0]  # N: x is the same all along it
        if k in own and ws[k] == 1 and len(outs) == 1 and rows > reuse and w.shape[outs[0]] >= 8 \
                and (batched or len(own) == 2):
            best, reuse = (w, outs[0]), rows  # the other own axes (a batch's) x reads too
    return best



def copy_transposed(mul: LazyBuffer, w: LazyBuffer, n: int) -> None:
    """Replace the matmul's operand view w by the same values read from a copy whose innermost axis
    is the output axis n (the graph changes, its values do not)."""
    strides = w.st.views[0].strides
    own = [d for d, size in enumerate(w.shape) if size != 1 and strides[d] != 0]
    weight = w.shrink(tuple((0, size) if d in own else (0, 1) for d, size in enumerate(w.shape)))
    order = tuple(d for d in range(len(w.shape)) if d != n) + (n,)
    copy = weight.permute(order).contiguous()
    copy.operand_copy = True
    view = copy.permute(tuple(order.index(d) for d in range(len(order)))).expand(w.shape)
    mul.srcs = tuple(view if s is w else s for s in mul.srcs)


SET_PERIOD = 4096  # bytes: addresses this far apart share a set of a 32 KiB 8-way L1 cache
PAD = 16  # elements added to each row of a padded copy (one cache line of float32)
MIN_PADDED = 1 << 16  # elements an operand must have for its padded copy to pay


def padded_operands(b: LazyBuffer) -> list[LazyBuffer]:
    """For a matmul, its operands read from a base (in memory, or computed) whose rows lie a multiple of 4 KiB
    apart (a 1024- or 2048-wide float32 matrix). A register tile reads several rows at once (the 8
    rows of A) or a new row each step of K (B): all of them fall in one set of the L1 cache, whose 8
    ways cannot hold them, and every load misses. A copy with each row PAD elements longer spreads
    them over the sets (the packing a hand-written GEMM does; measured:
    benchmarks/results/stage3_rule_measurements.md). Only for an operand read by at least MIN_ROWS
    rows: a product with one row (a decoding step's x @ w, a matrix-vector product) reads each value
    once, and the copy would move twice the bytes the product reads."""
    mul = matmul_product(b)
    if mul is None:
        return []
    out = []
    for w in mul.srcs:
        if len(w.st.views) != 1 or not concrete(w) or numel(w.base.shape) < MIN_PADDED:
            continue
        strides = w.st.views[0].strides
        own = [d for d, n in enumerate(w.shape) if n != 1 and strides[d] != 0]
        reuse = numel(tuple(n for d, n in enumerate(w.shape) if strides[d] == 0 and d != b.arg[0]))
        if len(own) == 2 and any(strides[d] == 1 for d in own) and reuse >= MIN_ROWS:
            row = max(strides[d] for d in own)
            if (row * w.dtype.itemsize) % SET_PERIOD == 0:
                out.append(w)
    return out


def copy_padded(mul: LazyBuffer, w: LazyBuffer) -> None:
    """Replace the matmul's operand view w by the same values read from a copy with longer rows."""
    strides = w.st.views[0].strides
    own = [d for d, n in enumerate(w.shape) if n != 1 and strides[d] != 0]
    weight = w.shrink(tuple((0, size) if d in own else (0, 1) for d, size in enumerate(w.shape)))
    # the copy keeps the memory order (rows outer, the stride-1 axis innermost), its rows longer
    order = tuple(d for d in range(len(w.shape)) if d not in own) + tuple(sorted(own, key=lambda d: -strides[d]))
    rows = weight.permute(order)
    copy = rows.pad(tuple((0, PAD if i == len(order) - 1 else 0) for i in range(len(order)))).contiguous()
    copy.operand_copy = True
    back = copy.shrink(tuple((0, size) for size in rows.shape))
    view = back.permute(tuple(order.index(d) for d in range(len(order)))).expand(w.shape)
    mul.srcs = tuple(view if s is w else s for s in mul.srcs)


MIN_PANEL = 16  # columns a tile must take for its B to be packed in panels of them (one vector register or two)
MIN_PACKED = 1 << 12  # elements a matmul operand must have for its packed copy to pay


def packed_operands(b: LazyBuffer, renderer: Renderer) -> list[tuple[LazyBuffer, int, int, int]]:
    """For a CPU matmul with a register tile, its operands worth a packed copy: each read along its
    tile axis (B along the tile's columns, A along its rows), when its base (a weight, or a
    gradient or activation this schedule computes) has only the axes K and that one: (its view, K's
    axis, the tile axis, the tile's width along it). Computed operands too, not only weights:
    nanochat's weight gradients read their operands' K = 2048 rows 16 KiB apart, and its CPU step
    ran faster once those were packed as well.

    The tile reads B's `cols` values of one row of K each step, then the next row: K rows a row length
    apart, a new cache line each step, and the same panel again for every block of rows of A (and A
    likewise for every block of columns). From a copy packed panel by panel, (N / cols, K, cols), a
    panel is one run of memory the prefetcher streams (what stage1's packed GEMM rung does by hand).
    A weight gradient x.T @ dy and a product x @ w each ran faster from packed copies, and x.T @ dy
    with x's rows 2 KiB apart faster again with both operands packed
    (benchmarks/results/stage3_rule_measurements.md)."""
    mul = matmul_product(b)
    if mul is None or not renderer.packed_operands:
        return []
    tile = matmul_tile(ScheduleItem([b], [b]), renderer)
    if len(tile) != 2 or next(iter(tile.values())) < MIN_PANEL:
        return []
    k, out = b.arg[0], []
    for axis, width in tile.items():  # (the columns, the tile's columns), then (the rows, the tile's rows)
        found = [v for v in mul.srcs if not broadcast(v, axis)]
        if len(found) != 1 or len(found[0].st.views) != 1 or not concrete(found[0]):
            continue
        w = found[0]
        strides = w.st.views[0].strides
        own = {d for d, size in enumerate(w.shape) if size != 1 and strides[d] != 0}
        reuse = numel(tuple(size for d, size in enumerate(w.shape) if strides[d] == 0 and d != k))
        if own == {k, axis} and w.shape[axis] % width == 0 and w.shape[axis] > width \
                and w.shape[k] * w.shape[axis] >= MIN_PACKED and reuse >= MIN_ROWS:  # (one panel: its own layout)
            out.append((w, k, axis, width))
    return out


def copy_packed(mul: LazyBuffer, w: LazyBuffer, k: int, axis: int, width: int) -> None:
    """Replace the matmul's operand view w (own axes k and `axis`) by the same values read from a copy
    packed in panels of `width` along `axis`: panel j holds entries j*width.. of every row of K."""
    size_k, size = w.shape[k], w.shape[axis]
    weight = w.shrink(tuple((0, n) if d in (k, axis) else (0, 1) for d, n in enumerate(w.shape)))
    order = tuple(d for d in range(len(w.shape)) if d not in (k, axis)) + (k, axis)
    rows = weight.permute(order)  # (1, ..., K, size)
    packed = rows.reshape((size_k, size // width, width)).permute((1, 0, 2)).contiguous()  # (size/width, K, width)
    packed.operand_copy = True
    back = packed.permute((1, 0, 2)).reshape(rows.shape)
    view = back.permute(tuple(order.index(d) for d in range(len(order)))).expand(w.shape)
    mul.srcs = tuple(view if s is w else s for s in mul.srcs)
