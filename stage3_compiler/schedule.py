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
- a reduction whose only reader is an elementwise op reading it as it is (or reshaped, in the same
  order; not expanded: softmax's max is read expanded, so it stays realized), is fused the other way round:
  that reader becomes the kernel, with the reduction's loop inside it (`relu(x @ w + b)`: the
  matmul's sum and the bias and the relu in one kernel), unless the reduction is a matmul and the
  reader costs more than EPILOGUE ops: GELU's derivative (about 140 ops) inside the product's
  register tile made nanoGPT's backward kernel 25 ms where the product and a separate elementwise
  kernel take 1.4 + 1.9;
- a matmul that reads a 2-D weight along the summed axis (x @ w.T) reads a transposed copy of it
  instead, which the scheduler adds (copy_transposed): the copy is small, and the product then
  runs from vector registers (lower.matmul_tile); on the CPU, an operand read along the tile's
  columns or rows reads a copy packed in panels of the tile's width (copy_packed), each panel one
  run of memory; one read from a matrix whose rows are a multiple of 4 KiB apart reads a copy with
  longer rows (copy_padded), so its rows do not fight over one set of the L1 cache;
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
    """One kernel: the base it writes, and the reduction whose loop it holds (or None). A kernel may
    write more bases of the root's shape in the same loops (`also`), and fold more reductions over
    the same axes in its reduction loop (`also_reduces`): see merge_outputs."""

    root: LazyBuffer
    reduce: LazyBuffer | None
    also: list[LazyBuffer] = field(default_factory=list)
    also_reduces: list[LazyBuffer] = field(default_factory=list)  # more reductions over the same loop

    @property
    def outputs(self) -> list[LazyBuffer]:
        return [self.root, *self.also]

    @property
    def reduces(self) -> list[LazyBuffer]:
        return [] if self.reduce is None else [self.reduce, *self.also_reduces]


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
EPILOGUE = 24  # ALU ops after a matmul that may still run inside its kernel (bias, relu, a residual add)
MAX_DEPTH = 96  # fused ops in a chain before the chain is cut by a realized base


def same_order(view: LazyBuffer, b: LazyBuffer) -> bool:
    """Is the view b itself, or a reshape of it that keeps every element in its place (keepdim's 1s
    dropped or added)? A reader of such a view reads the reduction at its own flat index."""
    return view is b or (view.st.contiguous and numel(view.shape) == numel(b.shape))


def view_cost(v: LazyBuffer) -> int:
    """What reading through a view adds to a kernel: a padded view a bounds check and a select, a
    view stacked on another (reshape of a permute) div and mod in its index. Counted like ALU ops,
    so a concatenation (pads and adds) read expanded by a matmul is realized, not recomputed."""
    if v.is_base:
        return 0
    return 2 * sum(view.mask is not None for view in v.st.views) + 2 * (len(v.st.views) - 1)


MIN_ROWS = 16  # rows that must read a weight for its transposed copy to pay


def matmul_product(b: LazyBuffer) -> LazyBuffer | None:
    """The product a matmul sums: for a sum over one axis of the product of two views (each operand
    read through a view of a base, expanded along the output axis it does not have), the MUL base."""
    if b.op is not Ops.REDUCE_ADD or len(b.arg) != 1 or not b.srcs[0].is_base or b.srcs[0].op is not Ops.MUL:
        return None
    mul = b.srcs[0]
    return None if mul.buffer is not None or any(s.is_base for s in mul.srcs) else mul


def transposed_operand(b: LazyBuffer) -> LazyBuffer | None:
    """For a matmul (a sum over one axis of the product of two views, each expanded along an output
    axis the other is not) that reads a 2-D weight by rows, its operand: the view of the weight.

    x @ w.T (a Linear layer's forward) reads w along the summed axis K: no output axis reads w's
    neighbouring floats, so the kernel cannot hold its outputs in vector registers. A copy of w
    with N innermost costs N*K reads and writes, and the product then reuses each copied value for
    every row, several times faster (lower.matmul_tile). Only for a weight (a buffer in memory
    whose only axes are N and K) read by at least MIN_ROWS rows (when both operands are, the one
    read by more): a batch of small products (attention's q @ k.T) would pay a copy kernel for
    little, and at batch 1 (sampling) the activations are the bigger operand, but copying one
    computes its expression in a kernel that writes across its rows."""
    mul = matmul_product(b)
    if mul is None:
        return None
    k = b.arg[0]
    x, y = (s.st.views[-1].strides for s in mul.srcs)  # the last view holds a broadcast's 0 strides
    if any(p[d] == 0 and q[d] == 1 for p, q in ((x, y), (y, x)) for d in range(len(b.shape)) if d != k):
        return None  # one operand already runs along an output axis the other is broadcast on
    best, reuse = None, MIN_ROWS - 1
    for x, w in (mul.srcs, mul.srcs[::-1]):  # x @ w.T reads both along K: copy the one reused most
        if len(w.st.views) != 1 or w.base.buffer is None:
            continue  # only a weight in memory: a copy of an expression (a GELU) computes it in a transposing kernel
        xs, ws = x.st.views[-1].strides, w.st.views[0].strides
        own = [d for d, n in enumerate(w.shape) if n != 1 and ws[d] != 0]  # the weight's own axes
        rows = numel(tuple(n for d, n in enumerate(w.shape) if n != 1 and ws[d] == 0 and xs[d] != 0))
        if len(own) == 2 and k in own and ws[k] == 1 and rows > reuse:
            n = next(d for d in own if d != k)
            if xs[n] == 0 and w.shape[n] >= 8:
                best, reuse = w, rows
    return best



def copy_transposed(mul: LazyBuffer, w: LazyBuffer) -> None:
    """Replace the matmul's operand view w by the same values read from a copy whose innermost axis
    is the output axis N (the graph changes, its values do not)."""
    strides = w.st.views[0].strides
    own = [d for d, n in enumerate(w.shape) if n != 1 and strides[d] != 0]
    n = next(d for d in own if strides[d] != 1)
    weight = w.shrink(tuple((0, size) if d in own else (0, 1) for d, size in enumerate(w.shape)))
    order = tuple(d for d in range(len(w.shape)) if d != n) + (n,)
    copy = weight.permute(order).contiguous()
    view = copy.permute(tuple(order.index(d) for d in range(len(order)))).expand(w.shape)
    mul.srcs = tuple(view if s is w else s for s in mul.srcs)


SET_PERIOD = 4096  # bytes: addresses this far apart share a set of a 32 KiB 8-way L1 cache
PAD = 16  # elements added to each row of a padded copy (one cache line of float32)
MIN_PADDED = 1 << 16  # elements an operand must have for its padded copy to pay


def padded_operands(b: LazyBuffer) -> list[LazyBuffer]:
    """For a matmul, its operands read from a buffer in memory whose rows lie a multiple of 4 KiB
    apart (a 1024- or 2048-wide float32 matrix). A register tile reads several rows at once (the 8
    rows of A) or a new row each step of K (B): all of them fall in one set of the L1 cache, whose 8
    ways cannot hold them, and every load misses. A copy with each row PAD elements longer spreads
    them over the sets (the packing a hand-written GEMM does): measured on a Zen 4 core at n=2048,
    43 GFLOP/s without, 84 with."""
    mul = matmul_product(b)
    if mul is None:
        return []
    out = []
    for w in mul.srcs:
        if len(w.st.views) != 1 or w.base.buffer is None or numel(w.base.shape) < MIN_PADDED:
            continue
        strides = w.st.views[0].strides
        own = [d for d, n in enumerate(w.shape) if n != 1 and strides[d] != 0]
        if len(own) == 2 and any(strides[d] == 1 for d in own):
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
    back = copy.shrink(tuple((0, size) for size in rows.shape))
    view = back.permute(tuple(order.index(d) for d in range(len(order)))).expand(w.shape)
    mul.srcs = tuple(view if s is w else s for s in mul.srcs)


PACK = 16  # columns of a packed panel: the CPU tile's (lower.matmul_tile)
MIN_PACKED = 1 << 12  # elements a matmul operand must have for its packed copy to pay


def packed_operands(b: LazyBuffer) -> list[tuple[LazyBuffer, int, int, int]]:
    """For a CPU matmul with a register tile, its operands worth a packed copy: each read along its
    tile axis (B along the tile's PACK columns, A along its rows), when it is a buffer in memory with
    only the axes K and that one: (its view, K's axis, the tile axis, the tile's width along it).

    The tile reads B's PACK values of one row of K each step, then the next row: K rows a row length
    apart, a new cache line each step, and the same panel again for every block of rows of A (and A
    likewise for every block of columns). From a copy packed panel by panel, (N / PACK, K, PACK), a
    panel is one run of memory the prefetcher streams (what stage1's packed GEMM rung does by hand).
    Measured on one Zen 3 core, the weight gradient x.T @ dy (768x128, 768x512): 21 GFLOP/s from dy,
    42 from its packed copy; x @ w (768x128 @ 128x512): 31-39, 53; x.T @ dy with x 768x512 (its rows
    2 KiB apart, read 4 at a time): 24 with dy packed, 44 with both."""
    from .lower import broadcast, matmul_tile  # lower.py imports this module

    mul = matmul_product(b)
    if mul is None or b.device != "CPU":
        return []
    tile = matmul_tile(ScheduleItem(b, b))
    if len(tile) != 2 or next(iter(tile.values())) != PACK:
        return []
    k, out = b.arg[0], []
    for axis, width in tile.items():  # (the columns, PACK), then (the rows, the tile's rows)
        found = [v for v in mul.srcs if not broadcast(v, axis)]
        if len(found) != 1 or len(found[0].st.views) != 1 or found[0].base.buffer is None:
            continue
        w = found[0]
        strides = w.st.views[0].strides
        own = {d for d, size in enumerate(w.shape) if size != 1 and strides[d] != 0}
        reuse = numel(tuple(size for d, size in enumerate(w.shape) if strides[d] == 0 and d != k))
        if own == {k, axis} and w.shape[axis] % width == 0 and w.shape[k] * w.shape[axis] >= MIN_PACKED \
                and reuse >= MIN_ROWS:
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
    back = packed.permute((1, 0, 2)).reshape(rows.shape)
    view = back.permute(tuple(order.index(d) for d in range(len(order)))).expand(w.shape)
    mul.srcs = tuple(view if s is w else s for s in mul.srcs)


NARROW = 32  # columns of a matmul whose operand is recomputed rather than stored (two tiles of 16)


def narrow_matmul_operand(b: LazyBuffer, readers: dict) -> bool:
    """Is b read only as an operand of matmuls with at most NARROW columns, expanded along them?
    Such a kernel computes 16 columns a pass and each pass shares b's value between them, so b is
    computed at most twice per element: cheaper than a kernel storing it and a second reading it
    back. Attention's softmax weights, multiplied by v (the head size, 8 to 32 columns here), are the
    case: softmax(q @ k.T) @ v is 4 kernels instead of 5. Only for one reading product: the
    backward's gradient of the scores (~50 ops an element) is read by two, and recomputing it
    inside both made them the two slowest kernels of a nanoGPT step."""
    found = readers.get(id(b), [])
    if len(found) != 1:
        return False  # read by two products (a gradient, dS @ k and dS.T @ q): computed once and stored
    for reader, view in found:
        users = readers.get(id(reader), [])
        if reader.op is not Ops.MUL or numel(view.shape) > NARROW * numel(b.shape) or not users:
            return False
        for user, _ in users:  # each a sum whose summed axes b is not expanded along
            if user.op is not Ops.REDUCE_ADD or any(view.st.views[-1].strides[d] == 0 for d in user.arg):
                return False
    return bool(found)


def check_versions(bases: list[LazyBuffer]) -> None:
    """Every realized buffer a node reads still holds what it held when the node was made."""
    for b in bases:
        if any(buf.version != version for buf, version in b.seen):
            where = f" made at {b.site[0]}:{b.site[1]}" if b.site else ""
            raise RuntimeError(f"realize: the {b.op.name} {b.shape}{where} reads a tensor that assign() has "
                               "since overwritten in place; realize it before the assign (or clone() the "
                               "tensor and realize the clone)")


def create_schedule(outs: list[LazyBuffer]) -> list[ScheduleItem]:
    return fuse(outs, rewrite_graph(outs))


def rewrite_graph(outs: list[LazyBuffer]) -> list[LazyBuffer]:
    """The graph's bases (sources first), after the matmul operands' copies are put in (copy_packed,
    copy_transposed, copy_padded); every buffer they read checked for in-place writes since they were made."""
    bases = graph(outs)
    check_versions(bases)
    changed = False
    for b in bases:
        for packed in packed_operands(b):
            copy_packed(b.srcs[0], *packed)
            changed = True
        w = transposed_operand(b)
        if w is not None:
            copy_transposed(b.srcs[0], w)
            changed = True
        for w in padded_operands(b):
            copy_padded(b.srcs[0], w)
            changed = True
    return graph(outs) if changed else bases


def fuse(outs: list[LazyBuffer], bases: list[LazyBuffer]) -> list[ScheduleItem]:
    """The kernels that compute `outs` from the graph's bases: which are realized, which fused, merged
    and placed in memory (the rules in the module's docstring)."""
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
        fusable = reader.op in IR_ELEMENTWISE or reader.op is Ops.CONTIGUOUS  # (an assign of a sum)
        if fusable and same_order(view, b) and id(reader) not in fused_into:
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
        if b.op in IR_ELEMENTWISE and expanded and cost[id(b)] > CHEAP and not narrow_matmul_operand(b, readers):
            realize.add(id(b))
        held = fused_into.get(id(b))
        if held is not None and cost[id(b)] > EPILOGUE and matmul_product(held) is not None:
            del fused_into[id(b)]  # a long expression after a matmul's tile runs apart from it
            realize.add(id(held))
    items = []
    for b in bases:
        if id(b) not in realize or b.op is Ops.BUFFER:
            continue
        items.append(ScheduleItem(b, b if b.op in IR_REDUCE else fused_into.get(id(b))))
    return place_in_memory(merge_outputs(items))


def reads(root: LazyBuffer, produced: set[int]) -> list[tuple[LazyBuffer, bool]]:
    """(base, read at the kernel's own index after its reduction loop?) for every base the output
    `root` of a kernel loads or that is another output. The walk stops at realized bases and at the
    ones this schedule produces. A read is at the kernel's own index when every step on the way is a
    base, not a view, and none is a reduction (what a reduction reads, it reads inside its loop)."""
    out, seen, stack = [], set(), [(root, True)]
    while stack:
        b, direct = stack.pop()
        for v in b.srcs:
            s, here = v.base, direct and v.is_base and b.op not in IR_REDUCE
            if s.buffer is not None or id(s) in produced:
                out.append((s, here))
            elif (id(s), here) not in seen:
                seen.add((id(s), here))
                stack.append((s, here))
    return out


def merge_outputs(items: list[ScheduleItem]) -> list[ScheduleItem]:
    """Kernels of one shape (size-1 dims aside) become one kernel with several outputs: AdamW's new parameter, m and v
    are computed in one loop that reads the gradient once, and the parameter's update uses m and v
    as they are computed instead of loading them back; the updates of same-shaped parameters are
    one kernel too (fewer, larger kernels: each call costs the same fixed overhead). Reduce kernels
    join when they reduce the same shape over the same axes: one loop folds every accumulator
    (cross_entropy's row max and its picked logit). The merged kernel runs where its first part
    was, so a part joins only if everything else it reads was written before that; an output it
    reads at another index, or inside its reduction loop, would race with the loop writing it, so
    that part stays out. Matmuls do not merge: each computes a register tile, and n tiles in one loop
    need n times the registers (on AVX2's 16, the four weight gradients of one shape ran 2.6x
    slower merged than as four kernels: the tiles spilled)."""
    produced = {id(it.root) for it in items}
    position = {id(it.root): i for i, it in enumerate(items)}
    kept: list[ScheduleItem] = []
    for item in items:
        item_reads = reads(item.root, produced)
        group = next((g for g in kept if _joins(g, item, item_reads, position)), None)
        if group is None:
            kept.append(item)
        else:
            group.also.append(item.root)
            group.also_reduces.extend(item.reduces)
            position[id(item.root)] = position[id(group.root)]  # written when the group runs
    return kept


def squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape without its size-1 dims: shapes equal so walk their elements in the same loops
    (a loss's mean, shape (), and a count of the same rows, shape (1,))."""
    return tuple(n for n in shape if n != 1)


def _joins(group: ScheduleItem, item: ScheduleItem, item_reads, position) -> bool:
    if squeezed(group.root.shape) != squeezed(item.root.shape) or group.root.device != item.root.device \
            or numel(item.root.shape) == 0 or (group.reduce is None) != (item.reduce is None):
        return False
    if group.reduce is not None and (group.reduce.srcs[0].shape != item.reduce.srcs[0].shape
                                     or group.reduce.arg != item.reduce.arg):
        return False  # one reduction loop: the same reduced shape and axes
    if group.reduce is not None and any(matmul_product(r) is not None for r in (*group.reduces, *item.reduces)):
        return False  # a register tile each: merged, they would not fit the registers
    start = position[id(group.root)]
    outs = {id(o) for o in group.outputs}
    for s, direct in item_reads:
        if id(s) in outs and not direct:
            return False  # read at another index: a race with the loop that writes it
        if id(s) not in outs and position.get(id(s), -1) >= start:
            return False  # written after the group's kernel runs
    return True


def drop_target(o: LazyBuffer) -> None:
    """An assign that cannot write its target in place writes a new buffer instead; once the kernels
    that read the target's old values have run, realize copies the values into the target, so the
    tensor keeps its buffer (a parameter that a TinyJit captured stays the buffer it captured)."""
    if o.target is not None and o.target.buffer is not None:
        o.copy_back = o.target
    o.target = None


def place_in_memory(items: list[ScheduleItem]) -> list[ScheduleItem]:
    """Where an assign writes: into its target's memory (an update in place, so a parameter keeps
    its buffer) when that is safe, else into a new buffer, copied into the target after the schedule
    (drop_target). It is safe when
    - only the output's own expression reads the target, and only at the output's own index (the
      kernel then loads each element before it stores that element: no race, even though the C
      declares its pointers `restrict`), and
    - no kernel after it reads the old values: a kernel that does (the backward of x @ w reads w) is
      run first, by moving the writer after it, unless a kernel between them needs the writer's
      outputs."""
    produced = {id(o) for item in items for o in item.outputs}
    walked: dict[int, list] = {}  # each output's reads, walked once (every target asks about every kernel)

    def reads_of(o: LazyBuffer) -> list:
        if id(o) not in walked:
            walked[id(o)] = reads(o, produced)
        return walked[id(o)]

    def readers_of(target: LazyBuffer, start: int) -> list[int]:
        return [j for j in range(start, len(items))
                if any(s is target for o in items[j].outputs for s, _ in reads_of(o))]

    for item in [it for it in items if any(o.target is not None for o in it.outputs)]:
        for o in item.outputs:
            target = o.target
            if target is None:
                continue
            others = [s for p in item.outputs if p is not o for s, _ in reads_of(p)]
            own = [direct for s, direct in reads_of(o) if s is target]
            if target.buffer is None or not all(own) or any(s is target for s in others):
                drop_target(o)
                continue
            i = items.index(item)
            later = readers_of(target, i + 1)
            if later:
                outs = {id(p) for p in item.outputs}
                if any(id(s) in outs for j in range(i + 1, later[-1] + 1) for p in items[j].outputs
                       for s, _ in reads_of(p)):
                    drop_target(o)
                    continue
                items.insert(later[-1], items.pop(i))
    for i, item in enumerate(items):  # one writer moved past another's reader: that one writes a new buffer
        for o in item.outputs:
            if o.target is not None and readers_of(o.target, i + 1):
                drop_target(o)
    return items
