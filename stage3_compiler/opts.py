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
  accumulators, term i into partial i mod n, which are combined (pairwise) after the loop. A row
  reduction over contiguous memory (softmax's max and sum, layernorm's mean) then loads n
  neighbouring values a step into n independent chains: one vector load, one vector add. A max
  gives the same bits in any order; a float sum is a reordered sum, equal to the last few bits.
- BLOCK(axis, n): the output loop over `axis` is cut into blocks of n passes and the loop over the
  blocks moves outermost, so what one block reads (a matmul's panel of B) stays in cache while
  every row uses it. On a GPU, LOCAL plays this part with shared memory.
- THREAD(0, n): the outermost output loop is split across n threads (OpenMP), n being the stage's
  thread setting (threads.py) when the heuristics or BEAM pick it.
- LOCAL and GROUP (GPU block tiles in shared memory, split reductions) are named here but not built:
  the GPU kernels keep their one grid-stride loop (cuda/renderer.py).

`heuristic_opts` picks options by hand-written rules (what `realize` uses unless BEAM is set);
`search.py` measures candidates instead. `apply_opts` checks a list and turns it into the loop plan
`lower.lower` follows, raising OptError for an option that does not fit the kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .lazy import numel
from .ops import IR_ELEMENTWISE, Ops
from .schedule import ScheduleItem

OPT_NAMES = ("UPCAST", "UNROLL", "BLOCK", "THREAD", "SPLIT", "LOCAL", "GROUP")
MAX_LANES = 256  # outputs one pass of the loops may compute (UPCAST amounts multiplied)
MAX_UNROLL = 32
THREAD_MIN_WORK = 1 << 15  # output entries x reduction steps below which a kernel stays on one thread


class OptError(ValueError):
    pass


@dataclass(frozen=True)
class Opt:
    op: str
    axis: int
    amount: int

    def __post_init__(self):
        if self.op not in OPT_NAMES:
            raise OptError(f"Opt: unknown option {self.op!r}, expected one of {', '.join(OPT_NAMES)}")

    def __str__(self) -> str:
        return f"{self.op}({self.axis},{self.amount})"


@dataclass
class LoopPlan:
    """What lower.lower does with a kernel's loops."""

    upcast: dict[int, int] = field(default_factory=dict)  # output axis -> lanes (first listed varies fastest)
    unroll: dict[int, int] = field(default_factory=dict)  # reduce source axis -> steps a pass
    block: dict[int, int] = field(default_factory=dict)  # output axis -> passes of its loop a block holds
    threads: int = 1
    split: dict[int, int] = field(default_factory=dict)  # innermost reduce axis -> partial accumulators

    def loop_sizes(self, shape: tuple[int, ...]) -> list[int]:
        """Each output axis's loop length (in passes) once the upcast lanes are taken out."""
        return [n // self.upcast.get(d, 1) for d, n in enumerate(shape)]


def reduce_axes(item: ScheduleItem) -> tuple[int, ...]:
    """The reduction's axes of its source that the inner loops run over (size > 1)."""
    r = item.reduce
    if r is None:
        return ()
    src = r.srcs[0].shape
    return tuple(d for d in r.arg if src[d] > 1)


def apply_opts(item: ScheduleItem, opts: tuple[Opt, ...] | list[Opt], device: str = "CPU") -> LoopPlan:
    plan = LoopPlan()
    shape = item.root.shape
    where = f"kernel of shape {shape}"
    for opt in opts:
        if opt.op in ("LOCAL", "GROUP"):
            raise OptError(f"{opt}: LOCAL and GROUP (GPU shared-memory tiles, split reductions) are not built")
        if opt.amount < 2:
            raise OptError(f"{opt}: the amount must be at least 2 ({where})")
        if opt.op == "THREAD":
            if device != "CPU":
                raise OptError(f"{opt}: THREAD splits a CPU kernel's loops; a {device} kernel has its grid")
            if plan.threads > 1:
                raise OptError(f"{opt}: the kernel is threaded already ({where})")
            plan.threads = opt.amount
        elif opt.op in ("UNROLL", "SPLIT"):
            src = item.reduce.srcs[0].shape if item.reduce is not None else ()
            # the innermost reduce loop only: UNROLL then folds each sum's terms in the same order
            if not reduce_axes(item) or opt.axis != reduce_axes(item)[-1]:
                raise OptError(f"{opt}: axis {opt.axis} is not the innermost reduced axis of "
                               f"{src or 'this kernel'} ({where})")
            if opt.op == "UNROLL":
                steps = plan.unroll.get(opt.axis, 1) * opt.amount
                if steps > MAX_UNROLL:
                    raise OptError(f"{opt}: {steps} steps a pass exceed {MAX_UNROLL} ({where})")
                plan.unroll[opt.axis] = steps
            else:
                if opt.axis in plan.split:
                    raise OptError(f"{opt}: axis {opt.axis} is split already ({where})")
                plan.split[opt.axis] = opt.amount
            terms = plan.unroll.get(opt.axis, 1) * plan.split.get(opt.axis, 1)
            if src[opt.axis] % terms:
                raise OptError(f"{opt}: {terms} terms a pass do not divide the reduce axis of {src[opt.axis]} "
                               f"({where})")
        else:
            if not 0 <= opt.axis < len(shape):
                raise OptError(f"{opt}: axis {opt.axis} is outside the output's {len(shape)} axes ({where})")
            if opt.op == "UPCAST":
                lanes = plan.upcast.get(opt.axis, 1) * opt.amount
                if shape[opt.axis] % lanes or math.prod(plan.upcast.values()) * opt.amount > MAX_LANES:
                    raise OptError(f"{opt}: {lanes} lanes do not divide axis {opt.axis} of {shape} "
                                   f"or exceed {MAX_LANES} in all ({where})")
                plan.upcast[opt.axis] = lanes
            else:  # BLOCK
                if device != "CPU":
                    raise OptError(f"{opt}: BLOCK reorders a CPU kernel's loops; a {device} kernel has one")
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


def outer_loop(plan: LoopPlan, sizes: list[int]) -> int:
    """Passes of the outermost loop (the one THREAD slices): the first blocked axis's blocks, else
    the first axis with more than one pass."""
    if plan.block:
        d = min(plan.block)
        return sizes[d] // plan.block[d]
    return next((n for n in sizes if n > 1), 1)


def heuristic_opts(item: ScheduleItem, device: str, threads: int, stored: set[int] | None = None) -> tuple[Opt, ...]:
    """The options realize uses without BEAM: a matmul's register tile or a reduction's upcast
    (lower.upcast_axes; `stored`, the bases the schedule's kernels write, tells a matmul operand
    loaded from memory from one computed in the loop), SPLIT for a row reduction (split_axis), a
    cache block for a matmul whose B panel would not stay in cache, and THREAD for a kernel with
    enough work to pay for waking the other threads."""
    from .lower import matmul_tile, upcast_axes  # lower.py imports this module

    split = split_axis(item) if device == "CPU" and item.reduce is not None and not matmul_tile(item) else None
    if split is not None:  # a row reduction over memory side by side: 8 partials a vector (see SPLIT)
        opts = [Opt("SPLIT", split, SPLIT_PARTS)]
    else:
        opts = [Opt("UPCAST", axis, u) for axis, u in upcast_axes(item, stored).items()]
    plan = apply_opts(item, opts, device)
    if device != "CPU":
        return tuple(opts)
    sizes = plan.loop_sizes(item.root.shape)
    steps = numel(item.reduce.srcs[0].shape) // max(numel(item.reduce.shape), 1) if item.reduce is not None else 1
    # A matmul tile whose B is over 4 MiB (no longer in L2, barely in L3) reads it in column blocks,
    # each a K x block panel near 256 KiB that stays in L2 while every row uses it. Measured on
    # Zen 4 at n=2048: 74 GFLOP/s without, 160 with (2 threads); at n=512 and 1024 it was slower.
    if len(plan.upcast) == 2 and len(sizes) >= 2:
        cols_axis = next(iter(plan.upcast))
        lanes = plan.upcast[cols_axis]
        fit = max(1, (256 << 10) // (4 * steps * lanes))
        block = next((b for b in (64, 32, 16, 8, 4, 2)
                      if b <= fit and sizes[cols_axis] % b == 0 and b < sizes[cols_axis]), None)
        if block is not None and steps * sizes[cols_axis] * lanes * 4 > (4 << 20):
            opts.append(Opt("BLOCK", cols_axis, block))
            plan = apply_opts(item, opts, device)
    if threads > 1 and numel(item.root.shape) * steps >= THREAD_MIN_WORK and outer_loop(plan, sizes) >= threads:
        opts.append(Opt("THREAD", 0, threads))
    return tuple(opts)


SPLIT_PARTS = 8  # partial sums of a SPLIT row reduction: one AVX2 vector of float32


def split_axis(item: ScheduleItem) -> int | None:
    """The reduce axis SPLIT pays on: the innermost one, when it holds a multiple of 8 of at least 16
    terms and every value the reduction reads moves along it by one element of memory (or not at
    all). Measured on one Zen 3 core over 12x4x64 rows of 64: a row max 218 us with 8 outputs a
    pass (UPCAST), 44 us split; softmax's sum of exps 3.3 ms, 0.8 ms; a mean 36, 19 us. (UPCAST and
    SPLIT together lose the loop vectorizer, which the upcast lanes turn off.)"""
    axes = reduce_axes(item)
    if not axes or item.reduce.srcs[0].shape[axes[-1]] % SPLIT_PARTS or item.reduce.srcs[0].shape[axes[-1]] < 16:
        return None
    return axes[-1] if all(reads_along(r.srcs[0], axes[-1]) for r in item.reduces) else None


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
