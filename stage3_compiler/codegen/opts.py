"""Kernel optimizations: named options that reshape a kernel's loops before it is lowered.

A kernel (one ScheduleItem) loops over its output's shape, and a reduce kernel runs an inner loop
nest over the reduced axes. No option changes what is computed, and all but SPLIT keep the order
in which each output's sum is folded, so they give the same bits as no options; they change which
values sit in registers, which loop runs on which thread, and what stays in cache:

- UPCAST(axis, n): one pass of the loops computes n neighbouring outputs along an output axis.
  Each has its own accumulator (n independent add chains the CPU overlaps, and the C compiler packs
  into vector lanes), and a load that does not vary along that axis is made once for all n. UPCAST
  on both output axes of a matmul is its register tile: the GEMM microkernel.
- UNROLL(axis, n): the reduce loop over `axis` takes n steps a pass, written out one after another
  (fewer loop branches, and loads the compiler can schedule ahead).
- SPLIT(axis, n): the reduce loop over the innermost reduced axis folds into n partial
  accumulators, term i into partial i mod n, which are combined (pairwise) after the loop (the
  terms a whole pass of n leaves over go one to a partial, in a short loop after it). A row
  reduction over contiguous memory (softmax's max and sum, layernorm's mean) then loads n
  neighbouring values a step into n independent chains: one vector load, one vector add. A max
  gives the same bits in any order; a float sum is a reordered sum, equal to the last few bits.
- BLOCK(axis, n): the output loop over `axis` is cut into blocks of n passes and the loop over the
  blocks moves outermost, so what one block reads (a matmul's panel of B) stays in cache while
  every row uses it. BLOCK(axis, 1) moves the loop itself outermost (a panel that fills the cache
  alone). On a GPU, LOCAL plays this part with shared memory.
- THREAD(0, n): the outermost output loop is split across n threads (OpenMP), n being the stage's
  thread setting (threads.py) when the heuristics or BEAM pick it.
- On a kernel whose loops run to a symbolic size (graph/symbolic.Variable), UPCAST, BLOCK, UNROLL
  and SPLIT take only axes of concrete size; THREAD slices a symbolic outer loop at launch.
- LOCAL and GROUP (GPU block tiles in shared memory, split reductions) are named here but are not
  options: the CUDA renderer applies each by a rule of its own, the group and local passes
  (cuda/group.py, cuda/local.py).

`heuristics.py` picks options by hand-written rules (what realize uses unless BEAM is set);
engine/search.py measures candidates instead. `apply_opts` checks a list against the kernel and
the renderer's capabilities and turns it into the loop plan `lower.lower` follows, raising
OptError for an option that does not fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum, auto

from ..graph.symbolic import Node, layout
from ..passes import Pass, on
from .indexing import passes_of
from .item import ScheduleItem
from .overlap import overlaps
from .renderer import Renderer


class OptOps(Enum):
    UPCAST = auto()
    UNROLL = auto()
    BLOCK = auto()
    THREAD = auto()
    SPLIT = auto()
    LOCAL = auto()
    GROUP = auto()


MAX_LANES = 256  # outputs one pass of the loops may compute (UPCAST amounts multiplied)
MAX_UNROLL = 32


class OptError(ValueError):
    pass


@dataclass(frozen=True)
class Opt:
    op: OptOps
    axis: int
    amount: int

    def __post_init__(self):
        if not isinstance(self.op, OptOps):
            raise OptError(f"Opt: unknown option {self.op!r}, expected an OptOps member "
                           f"({', '.join(o.name for o in OptOps)})")

    def __str__(self) -> str:
        return f"{self.op.name}({self.axis},{self.amount})"


@dataclass
class LoopPlan:
    """What lower.lower does with a kernel's loops."""

    upcast: dict[int, int] = field(default_factory=dict)  # output axis -> lanes (first listed varies fastest)
    unroll: dict[int, int] = field(default_factory=dict)  # reduce source axis -> steps a pass
    block: dict[int, int] = field(default_factory=dict)  # output axis -> passes of its loop a block holds
    threads: int = 1
    split: dict[int, int] = field(default_factory=dict)  # innermost reduce axis -> partial accumulators

    def loop_sizes(self, shape: tuple[int, ...]) -> list[int]:
        """Each output axis's loop length (in passes) once the upcast lanes are taken out (lanes that do
        not divide their axis: whole passes, the last shifted back, codegen/overlap.py)."""
        return [passes_of(n, self.upcast.get(d, 1)) for d, n in enumerate(shape)]


def reduce_axes(item: ScheduleItem) -> tuple[int, ...]:
    """The reduction's axes of its source that the inner loops run over (size > 1)."""
    r = item.reduce
    if r is None:
        return ()
    src = r.srcs[0].shape
    return tuple(d for d in r.arg if src[d] != 1)  # (a symbolic size is a loop)


def apply_opts(item: ScheduleItem, opts: tuple[Opt, ...] | list[Opt], renderer: Renderer) -> LoopPlan:
    plan = LoopPlan()
    shape = item.root.shape
    where = f"kernel of shape {shape}"
    target = type(renderer).__name__
    for opt in opts:
        if opt.op in (OptOps.LOCAL, OptOps.GROUP):
            raise OptError(f"{opt}: LOCAL and GROUP (GPU shared-memory tiles, split reductions) are not options: "
                           "the CUDA renderer applies them by rule (the local and group passes)")
        least = 1 if opt.op is OptOps.BLOCK else 2  # BLOCK(axis, 1): the loop moves outermost
        if opt.amount < least:
            raise OptError(f"{opt}: the amount must be at least {least} ({where})")
        if opt.op is OptOps.THREAD:
            if not renderer.threads:
                raise OptError(f"{opt}: THREAD splits a CPU kernel's loops; {target} has no threads (a GPU: its grid)")
            if plan.threads > 1:
                raise OptError(f"{opt}: the kernel is threaded already ({where})")
            plan.threads = opt.amount
        elif opt.op in (OptOps.UNROLL, OptOps.SPLIT):
            src = item.reduce.srcs[0].shape if item.reduce is not None else ()
            # the innermost reduce loop only: UNROLL then folds each sum's terms in the same order
            if not reduce_axes(item) or opt.axis != reduce_axes(item)[-1]:
                raise OptError(f"{opt}: axis {opt.axis} is not the innermost reduced axis of "
                               f"{src or 'this kernel'} ({where})")
            if opt.op is OptOps.SPLIT and item.online is not None:
                raise OptError(f"{opt}: an online softmax keeps one running max a row, not partials ({where})")
            if opt.op is OptOps.UNROLL:
                steps = plan.unroll.get(opt.axis, 1) * opt.amount
                if steps > MAX_UNROLL:
                    raise OptError(f"{opt}: {steps} steps a pass exceed {MAX_UNROLL} ({where})")
                plan.unroll[opt.axis] = steps
            else:
                if opt.axis in plan.split:
                    raise OptError(f"{opt}: axis {opt.axis} is split already ({where})")
                plan.split[opt.axis] = opt.amount
            terms = plan.unroll.get(opt.axis, 1) * plan.split.get(opt.axis, 1)
            if isinstance(src[opt.axis], Node):
                raise OptError(f"{opt}: the reduce axis {opt.axis} of {src} has a symbolic size ({where})")
            if src[opt.axis] < terms:
                raise OptError(f"{opt}: {terms} terms a pass exceed the reduce axis of {src[opt.axis]} ({where})")
            # SPLIT alone takes what is left over, in a loop of its own (the leftover pass)
            if src[opt.axis] % terms and (opt.axis in plan.unroll or not on(Pass.LEFTOVER)):
                raise OptError(f"{opt}: {terms} terms a pass do not divide the reduce axis of {src[opt.axis]} "
                               f"({where})")
        else:
            if not 0 <= opt.axis < len(shape):
                raise OptError(f"{opt}: axis {opt.axis} is outside the output's {len(shape)} axes ({where})")
            if isinstance(shape[opt.axis], Node):  # lanes and blocks of a loop whose length the launch tells
                raise OptError(f"{opt}: axis {opt.axis} of {shape} has a symbolic size ({where})")
            if opt.op is OptOps.UPCAST:
                lanes = plan.upcast.get(opt.axis, 1) * opt.amount
                divides = shape[opt.axis] % lanes == 0 or overlaps(item, shape[opt.axis], lanes, renderer)
                if not divides or math.prod(plan.upcast.values()) * opt.amount > MAX_LANES:
                    raise OptError(f"{opt}: {lanes} lanes do not divide axis {opt.axis} of {shape} "
                                   f"or exceed {MAX_LANES} in all ({where})")
                plan.upcast[opt.axis] = lanes
            else:  # BLOCK
                if not renderer.loop_blocks:
                    raise OptError(f"{opt}: BLOCK reorders a CPU kernel's loops; {target} has one loop (its grid)")
                if opt.axis in plan.block:
                    raise OptError(f"{opt}: axis {opt.axis} is blocked already ({where})")
                plan.block[opt.axis] = opt.amount
    if math.prod(plan.upcast.values()) * math.prod(plan.split.values()) > MAX_LANES:
        raise OptError(f"{', '.join(map(str, opts))}: more than {MAX_LANES} accumulators a pass ({where})")
    sizes = plan.loop_sizes(shape)
    for axis, b in plan.block.items():
        if sizes[axis] % b or b >= sizes[axis]:
            raise OptError(f"BLOCK({axis},{b}): a block of {b} passes must divide the loop of {sizes[axis]} "
                           f"passes and be shorter ({where})")
    if plan.threads > 1 and outer_loop(plan, sizes) < plan.threads:
        raise OptError(f"THREAD(0,{plan.threads}): the outermost loop makes {outer_loop(plan, sizes)} passes, "
                       f"fewer than its threads ({where})")
    return plan


def outer_loop(plan: LoopPlan, sizes: list[int | Node]) -> int:
    """Passes of the outermost loop (the one THREAD slices): the first blocked axis's blocks, else
    the first axis with more than one pass (a symbolic one counted at its maximum: a launch with
    fewer passes than threads leaves a thread idle)."""
    if plan.block:
        d = min(plan.block)
        return sizes[d] // plan.block[d]
    return next((layout(n) for n in sizes if isinstance(n, Node) or n > 1), 1)
