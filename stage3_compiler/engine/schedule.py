"""The scheduler: from the lazy graph of the tensors being realized, the list of kernels to run, in
dependency order. This is where fusion is decided.

Every base of the graph is either *realized* (a kernel writes it to memory) or *fused* (it is
computed inside the kernel that reads it, as an expression, and never stored). The rules:
- the bases asked for, the ones marked `forced` (contiguous()), and every reduction are realized;
- an elementwise base is fused into every kernel that reads it (recomputed there), unless one of
  them reads it through an expanding view and it costs more than a few ops (reading through a view
  that pads or through stacked views counts too: see view_cost): a matmul operand
  expanded N times would be recomputed N times, so it is realized once instead (a cheap one, like
  layernorm's rsqrt of the variance, is recomputed). That holds for attention's probabilities too,
  read by the product with v: recomputed in that kernel's loop, one row a pass shares each exp
  between the 32 columns, but the exps run one at a time there, where a kernel that stores them
  runs them 16 to a vector (nanoGPT's CPU step is faster with them stored:
  benchmarks/results/stage3_cpu_step.md);
- an elementwise base whose work (`work`: each op once) is more than EXPENSIVE is realized when
  more than one kernel would compute it: nanochat's soft-capped logits (a tanh) were recomputed in
  the loss's row max, its sum of exps, its picked logit and the backward, four passes of 8M tanhs
  (benchmarks/results/stage3_nanochat_step.md);
- a reduction whose only reader is an elementwise op reading it as it is (or reshaped, in the same
  order; not expanded: softmax's max is read expanded, so it stays realized), is fused the other way round:
  that reader becomes the kernel, with the reduction's loop inside it (`relu(x @ w + b)`: the
  matmul's sum and the bias and the relu in one kernel), unless the reduction is a matmul that the
  heuristics pass gives a register tile and the reader costs more than EPILOGUE ops: GELU's
  derivative (about 140 ops) inside the product's register tile made nanoGPT's backward kernel far
  slower than the product and a separate elementwise kernel together (benchmarks/results/stage3_log.md);
- a matmul that reads a 2-D weight along the summed axis (x @ w.T) reads a transposed copy of it
  instead, which the scheduler adds (codegen/layouts.py): the copy is small, and the product then
  runs from vector registers (codegen/heuristics.matmul_tile); on the CPU, an operand read along the tile's
  columns or rows reads a copy packed in panels of the tile's width (copy_packed), each panel one
  run of memory; one read from a matrix whose rows are a multiple of 4 KiB apart reads a copy with
  longer rows (copy_padded), so its rows do not fight over one set of the L1 cache;
- a chain of more than MAX_DEPTH fused ops is cut by realizing the base at the cut: a kernel of
  ten thousand chained adds would take long to compile, and lowering it recurses that deep.
- with the online pass (passes.py), a softmax whose only reader is a sum weighted by it (attention's probabilities @ v)
  is folded into that sum's loop, with the scores' reduction nested in it, and the kernel also
  writes the rows' log-sum-exp where it is asked for (engine/online.py): causal attention's
  forward is one kernel;
- a base marked recomputed (LazyBuffer.recomputed: FlashAttention's backward marks its scores,
  probabilities and their gradients, autograd.attention_grads) is computed inside every kernel
  that reads it, a reduction in a loop nested there, and never stored.
A kernel therefore writes one base (or several of one shape, merged) and holds one reduction loop,
plus the reductions nested in it: an online softmax's scores, and recomputed sums.
"""

from __future__ import annotations

from ..codegen.item import ScheduleItem
from ..codegen.layouts import copy_operands, matmul_product, reads_recomputed
from ..codegen.tiles import rounds_tiles, tile_operands
from ..device import runtime_of
from ..graph.lazy import LazyBuffer, numel
from ..ops import IR_ELEMENTWISE, IR_REDUCE, Ops
from ..passes import Pass, on
from .memory import place_in_memory
from .merge import merge_outputs
from .online import find_online, formula_bases, row_statistics


def graph(outs: list[LazyBuffer]) -> list[LazyBuffer]:
    """Every unrealized base the outputs depend on, sources before users (iterative DFS, fixed order),
    and the bases realized along with one of them (LazyBuffer.along)."""
    order, seen = [], set()
    stack = [(o.base, False) for o in reversed(outs)]
    while stack:
        b, expanded = stack.pop()
        if b.buffer is not None or (id(b) in seen and not expanded):
            continue
        if expanded:
            order.append(b)
            stack.extend((a.base, False) for a in b.along)
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
EXPENSIVE = 64  # ALU ops an elementwise base may cost and still be recomputed in every kernel that reads it
WEIGHTY = 16  # ALU ops an exp2, log2 or sine counts as
ROUNDING = 8  # ALU ops a cast into a half type counts as: integer arithmetic on the bits (cpu/half_vectors.py)
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


def check_versions(bases: list[LazyBuffer]) -> None:
    """Every realized buffer a node reads still holds what it held when the node was made."""
    for b in bases:
        if any(buf.version != version for buf, version in b.seen):
            where = f" made at {b.site[0]}:{b.site[1]}" if b.site else ""
            raise RuntimeError(f"realize: the {b.op.name} {b.shape}{where} reads a tensor that assign() has "
                               "since overwritten in place; realize it before the assign (or clone() the "
                               "tensor and realize the clone)")


def create_schedule(outs: list[LazyBuffer]) -> list[ScheduleItem]:
    return with_stored(fuse(outs, rewrite_graph(outs)))


def with_stored(items: list[ScheduleItem]) -> list[ScheduleItem]:
    """Each kernel told which bases the schedule's kernels write (ScheduleItem.stored)."""
    stored = frozenset(id(out) for item in items for out in item.outputs)
    for item in items:
        item.stored = stored
    return items


def rewrite_graph(outs: list[LazyBuffer]) -> list[LazyBuffer]:
    """The graph's bases (sources first), after the matmul operands' copies are put in
    (codegen/layouts.py, as the device's renderer wants them); every buffer they read checked for
    in-place writes since they were made."""
    bases = graph(outs)
    check_versions(bases)
    if not on(Pass.LAYOUTS) and not on(Pass.TILES):
        return bases
    changed = False
    # with the online pass attention's scores are computed in the online softmax's kernel (engine/online.py),
    # where a copy of k transposed would only be one more kernel
    batched = not on(Pass.ONLINE)
    for b in bases:
        if matmul_product(b) is None or reads_recomputed(b) or b.tiles is not None:
            continue
        renderer = runtime_of("realize", b.device).renderer
        if on(Pass.TILES) and tile_operands(b, renderer):  # (a bfloat16 matmul on the matrix unit)
            changed = True
        elif on(Pass.LAYOUTS):
            changed |= copy_operands(b, renderer, batched)
    return graph(outs) if changed else bases


def fuse(outs: list[LazyBuffer], bases: list[LazyBuffer]) -> list[ScheduleItem]:
    """The kernels that compute `outs` from the graph's bases: which are realized, which fused, merged
    and placed in memory (the rules in the module's docstring)."""
    readers = _readers(bases)
    wanted = {id(o.base) for o in outs}
    # computed in every kernel that reads them (LazyBuffer.recomputed), never realized or held
    recomputed = {id(b) for b in bases if b.recomputed and id(b) not in wanted and not b.forced}
    realize = {id(b) for b in bases if id(b) in wanted or b.forced or b.op in IR_REDUCE} - recomputed
    fused_into: dict[int, LazyBuffer] = {}  # reader base id -> the reduction it holds
    for b in bases:
        if b.op not in IR_REDUCE or id(b) in wanted or b.forced or id(b) in recomputed:
            continue
        found = readers.get(id(b), [])
        if len(found) != 1:
            continue
        reader, view = found[0]
        if id(reader) in recomputed or (b.tiles is not None and not rounds_tiles(reader, view)):
            continue  # (a tiled matmul's kernel rounds its sums as it stores them, and does nothing else)
        fusable = reader.op in IR_ELEMENTWISE or reader.op is Ops.CONTIGUOUS  # (an assign of a sum)
        if fusable and same_order(view, b) and id(reader) not in fused_into:
            fused_into[id(reader)] = b
            realize.discard(id(b))
            realize.add(id(reader))
    cost: dict[int, int] = {}  # ALU ops to compute a base inside a kernel, up to realized bases
    depth: dict[int, int] = {}  # the longest chain of fused ops behind a base
    for b in bases:  # sources come first
        fused = [s.base for s in b.srcs if id(s.base) not in realize]
        cost[id(b)] = sum(cost.get(id(s), 0) for s in fused) + op_cost(b) + sum(view_cost(s) for s in b.srcs)
        depth[id(b)] = 1 + max((depth.get(id(s), 0) for s in fused), default=0)
        if id(b) in recomputed:  # its work is the loop of each kernel that reads it, not an epilogue's
            cost[id(b)] = 0
            continue
        if depth[id(b)] > MAX_DEPTH:
            realize.add(id(b))
            cost[id(b)] = depth[id(b)] = 0
        expanded = any(numel(view.shape) > numel(b.shape) for _, view in readers.get(id(b), ()))
        if b.op in IR_ELEMENTWISE and expanded and cost[id(b)] > CHEAP:
            realize.add(id(b))
        held = fused_into.get(id(b))
        if held is not None and on(Pass.HEURISTICS) and cost[id(b)] > EPILOGUE and matmul_product(held) is not None:
            del fused_into[id(b)]  # a long expression after a matmul's register tile runs apart from it
            realize.add(id(held))
    store_shared(bases, readers, realize, recomputed)
    keep = {id(b) for b in bases if id(b) in wanted or b.forced}
    online = find_online(bases, readers, keep) if on(Pass.ONLINE) else {}
    for softmax in online.values():  # computed in the loop of the sum that reads them
        inside = {id(b) for b in (*softmax.bases, *formula_bases(softmax.exp, softmax.shifted))}
        realize.difference_update(inside)
        nest_reductions(softmax, inside, readers, realize, fused_into, keep)
    written = {key: row_outputs(softmax, readers, realize) for key, softmax in online.items()}
    order = {id(b): i for i, b in enumerate(bases)}
    placed = []  # (position in the graph, the kernel): after every base it writes
    for b in bases:
        if id(b) not in realize or b.op is Ops.BUFFER:
            continue
        held = b if b.op in IR_REDUCE else fused_into.get(id(b))
        also = [] if held is None else written.get(id(held), [])
        item = ScheduleItem([b, *also], [] if held is None else [held],
                            online=None if held is None else online.get(id(held)))
        placed.append((max(order[id(o)] for o in item.outputs), item))
    items = [item for _, item in sorted(placed, key=lambda p: p[0])]
    return place_in_memory(merge_outputs(items) if on(Pass.MERGE) else items)


def row_outputs(softmax, readers: dict, realize: set[int]) -> list[LazyBuffer]:
    """The online softmax's row statistics (online.row_statistics) its kernel writes: those realized,
    and those read by something they do not compute (which could not compute them: the max and the
    sum live in the online kernel only). No longer kernels of their own."""
    stats = row_statistics(softmax.max, softmax.total, readers)
    ids = {id(b) for b in stats}
    outs = [b for b in stats if id(b) in realize or not {id(r) for r, _ in readers.get(id(b), ())} <= ids]
    realize.difference_update(id(b) for b in outs)
    return outs


def nest_reductions(softmax, inside: set[int], readers: dict, realize: set[int], fused_into: dict,
                    keep: set[int]) -> None:
    """The reductions behind the softmax's x (attention's scores) that only the online kernel reads:
    no longer realized, so the kernel computes each in a loop nested in its own (codegen/lower.py).
    x's fused bases count as the kernel's own only if nothing outside it reads them."""
    x = next(s for s in softmax.shifted.srcs if s.base.op is not Ops.NEG).base
    fused, stack, frontier = {}, [x], []
    while stack:
        b = stack.pop()
        if id(b) in fused or b.buffer is not None or id(b) in inside:
            continue
        if id(b) in realize:
            frontier.append(b)
            continue
        if b.op in IR_ELEMENTWISE:
            fused[id(b)] = b
            stack.extend(s.base for s in b.srcs)
    body = inside | set(fused)
    while True:  # drop a fused base that something outside the kernel reads, and what only it reached
        outside = [i for i, b in fused.items() if not {id(r) for r, _ in readers.get(i, ())} <= body]
        if not outside:
            break
        for i in outside:
            del fused[i]
        body = inside | set(fused)
    for b in frontier:
        held = fused_into.get(id(b))
        if id(b) in keep or not {id(r) for r, _ in readers.get(id(b), ())} <= body:
            continue
        if b.op in IR_REDUCE or held is not None:
            realize.discard(id(b))
            fused_into.pop(id(b), None)


def store_shared(bases: list[LazyBuffer], readers: dict, realize: set[int], recomputed: set[int]) -> None:
    """Realize every elementwise base that costs more than EXPENSIVE and that more than one kernel
    would compute. Users come before their sources here, so a base's kernels are known when it is
    decided: the realized readers, and the kernels of the fused ones. Of an expensive chain read
    by two kernels, its last base is stored, and the chain behind it is then computed once."""
    kernels: dict[int, set[int]] = {}  # base id -> the kernels (realized base ids) that compute it
    for b in reversed(bases):
        found = set()
        for reader, _ in readers.get(id(b), ()):
            found |= {id(reader)} if id(reader) in realize else kernels.get(id(reader), set())
        if id(b) not in realize and id(b) not in recomputed and b.op in IR_ELEMENTWISE and len(found) > 1 \
                and work(b, realize) > EXPENSIVE:
            realize.add(id(b))
        kernels[id(b)] = {id(b)} if id(b) in realize else found


def op_cost(b: LazyBuffer) -> int:
    """ALU ops an elementwise base's own op counts as: an exp2, log2 or sine (a polynomial, or a call into libm)
    WEIGHTY, a rounding into a half type ROUNDING (so autocast's copy of a weight, read by every row of a
    matmul, is stored once, not rounded again for each row), any other one; a reduction 0."""
    if b.op not in IR_ELEMENTWISE:
        return 0
    return WEIGHTY if b.op in (Ops.EXP2, Ops.LOG2, Ops.SIN) else ROUNDING if b.op is Ops.CAST and b.dtype.is_half else 1


def work(b: LazyBuffer, realize: set[int]) -> int:
    """The ALU work of computing b inside a kernel, up to realized bases: each op once, however many
    times the expression reads it (the kernel computes a shared value once), as op_cost counts it."""
    total, seen, stack = 0, set(), [b]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        total += op_cost(x) + sum(view_cost(s) for s in x.srcs)
        stack.extend(s.base for s in x.srcs if s.base.op in IR_ELEMENTWISE and id(s.base) not in realize)
    return total
