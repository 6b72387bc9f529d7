"""A kernel's share of the lazy graph, as the scheduler (engine/schedule.py) hands it to codegen:
the bases it writes, the reductions whose loop it holds, and the softmax that loop may fold in one
pass (attention, with the online pass). Everything in codegen reads these; the kernel's other bases
are found by walking from its outputs down to the bases it loads."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..graph.lazy import LazyBuffer
from ..graph.shapetracker import is_symbolic
from ..ops import IR_REDUCE, Ops


@dataclass(frozen=True, eq=False)
class OnlineSoftmax:
    """A reduction over a row's softmax, folded in one pass (engine/online.py finds it): the kernel's
    reduction sums `probs` = `exp` / `total` times something, where `exp` is e^(`shifted`), `shifted`
    is x - `max` and `max` and `total` reduce x and `exp` over the row. None of them is stored: the
    loop keeps a running max and sum per row and rescales its sums when the max grows (codegen/lower.py)."""

    probs: LazyBuffer  # exp / total (a DIV)
    exp: LazyBuffer  # e^shifted: the last node of the exp formula (LazyBuffer.formula names it)
    shifted: LazyBuffer  # x - max (an ADD of x and the max negated)
    max: LazyBuffer  # the row's max of x (a REDUCE_MAX)
    total: LazyBuffer  # the row's sum of exp (a REDUCE_ADD)

    @property
    def bases(self) -> tuple[LazyBuffer, ...]:
        return (self.probs, self.exp, self.shifted, self.max, self.total)


@dataclass(eq=False)
class ScheduleItem:
    """One kernel: the bases it writes (its loops run over the first's shape, the root) and the
    reductions whose loop it holds, all over the same axes (none: an elementwise kernel). The merge
    pass (engine/merge.py) gives a kernel more than one of each."""

    outputs: list[LazyBuffer]
    reduces: list[LazyBuffer] = field(default_factory=list)
    online: OnlineSoftmax | None = None  # the reduction folds a softmax in one pass (see OnlineSoftmax)
    # the ids of the bases the schedule's kernels write (engine/schedule.py sets it): this kernel loads
    # them, and computes every other base it reaches; None for an item outside a schedule
    stored: frozenset[int] | None = None

    @property
    def root(self) -> LazyBuffer:
        return self.outputs[0]

    @property
    def reduce(self) -> LazyBuffer | None:
        """The reduction whose loop the kernel runs (the first), or None."""
        return self.reduces[0] if self.reduces else None

    @property
    def merged(self) -> bool:
        """Does it write more than one base (the merge pass)?"""
        return len(self.outputs) > 1

    @property
    def in_place(self) -> bool:
        """Does it write an assign's target, memory it may also read?"""
        return any(o.target is not None for o in self.outputs)

    @property
    def symbolic(self) -> bool:
        """Does a loop of the kernel run to a symbolic size (graph/shapetracker.py)?"""
        return is_symbolic(self.root.shape) or (self.reduce is not None and is_symbolic(self.reduce.srcs[0].shape))


def nested_terms(item: ScheduleItem) -> bool:
    """Does the kernel's reduction compute sums of its own in its terms (nested reductions: FlashAttention's
    scores, dp and D, the only ones the scheduler nests: engine/schedule.nest_reductions, and the bases
    autograd.attention_grads marks recomputed)?"""
    r, stored = item.reduce, item.stored or frozenset()
    stack, seen = [r.srcs[0].base] if r is not None else [], set()
    while stack:
        b = stack.pop()
        if id(b) in seen or b.buffer is not None or id(b) in stored or b.op is Ops.CONST:
            continue
        seen.add(id(b))
        if b.op in IR_REDUCE:
            return True
        stack.extend(s.base for s in b.srcs)
    return False
