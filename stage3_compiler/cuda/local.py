"""LOCAL: a matmul's operands staged through shared memory, so that a block of threads reads each value
from global memory once instead of once per thread that needs it.

A matmul kernel from the heuristics gives each thread a register tile (4 x 8 outputs: UPCAST on two
output axes) and a loop over K in which the thread loads its 4 values of A and 8 of B and does 32
multiply-adds. Neighbouring threads load overlapping rows and columns, and the loads go to global
memory (through the caches) each time. Here a block of LOCAL_SIDE x LOCAL_SIDE threads takes as many
neighbouring tiles; for every LOCAL_K steps of the loop its threads first copy the block's slice of A
(LOCAL_K x rows) and of B (LOCAL_K x columns) into shared memory together, meet at a barrier, and then
each runs its LOCAL_K steps reading the copies. The copy is written from the kernel's own LOADs: each
LOAD of the loop is one lane of A (its index depends on the tile's row axis, not its column axis) or
of B, and the copy evaluates that LOAD's index at the row (or column) it fetches and at the step k.

A kernel qualifies (`local_plan`) when its loop is one reduce loop of a concrete length that LOCAL_K
divides, every load in it is a lane of A or of B, and the last two output axes are tile counts that
LOCAL_SIDE divides. The renderer keeps the plain grid-stride kernel beside it: a launch whose block is
not LOCAL_THREADS threads (the CPU emulator's one thread) runs that one. `PASSES=-local` turns LOCAL
off, so that one GPU run can time a step with and without it (gpu_run.sh's `nanogpt_stage3_nolocal`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ..codegen.uops import Kernel, Loop, LoopKind, UOp, UOps
from ..graph.symbolic import Node, layout, vars
from ..passes import Pass, on

LOCAL_SIDE = 16  # tiles a block takes along each of the two tile axes ...
LOCAL_THREADS = LOCAL_SIDE * LOCAL_SIDE  # ... one thread each
LOCAL_K = 16  # steps of the loop a block stages at a time: LOCAL_K x LOCAL_SIDE values a lane, one a thread


class LocalPlan(NamedTuple):
    rows: Loop  # the output axis whose index A's loads follow (the tile's rows)
    cols: Loop  # the one B's loads follow
    loop: Loop  # the reduce loop
    a: tuple[UOp, ...]  # A's loads, one per lane of the thread's tile rows
    b: tuple[UOp, ...]  # B's loads


def _names(index: Node | int) -> set[str]:
    return {v.name for v in vars(index)} if isinstance(index, Node) else set()


def local_plan(kernel: Kernel) -> LocalPlan | None:
    """The tiling LOCAL gives a matmul kernel, or None where it does not apply (or the local pass is off)."""
    if not on(Pass.LOCAL):
        return None
    specials = [u.arg for u in kernel.uops if u.op is UOps.SPECIAL]
    tiled = [loop for loop in specials if layout(loop.extent) > 1]
    ranges = [u for u in kernel.uops if u.op is UOps.RANGE]
    if len(tiled) < 2 or len(ranges) != 1 or ranges[0].arg.kind is not LoopKind.REDUCE:
        return None
    if any(u.op is UOps.IF for u in kernel.uops):
        return None  # a term skipped by some threads: no __syncthreads() may sit under it
    rows, cols, loop = tiled[-2], tiled[-1], ranges[0].arg
    if any(isinstance(x.extent, Node) for x in specials + [loop]) or loop.start != 0:
        return None
    if rows.extent % LOCAL_SIDE or cols.extent % LOCAL_SIDE or loop.extent % LOCAL_K:
        return None
    start = kernel.uops.index(ranges[0])
    end = next(i for i, u in enumerate(kernel.uops) if u.op is UOps.ENDRANGE and i > start)
    a, b = [], []
    for u in kernel.uops[start:end]:
        if u.op is not UOps.LOAD:
            continue
        if len(u.srcs) > 1:
            return None  # a gated load (a padded view): the copy would read where the gate does not hold
        names = _names(u.arg[0])
        if loop.var not in names:
            return None
        if rows.var in names and cols.var not in names:
            a.append(u)
        elif cols.var in names and rows.var not in names:
            b.append(u)
        else:
            return None
    if not a or not b or len({u.dtype for u in a}) != 1 or len({u.dtype for u in b}) != 1:
        return None
    return LocalPlan(rows, cols, loop, tuple(a), tuple(b))


def blocks(kernel: Kernel, plan: LocalPlan) -> int:
    """Blocks of LOCAL_THREADS the grid walks: the batch (every output axis but the two tile axes) times
    the block tiles of LOCAL_SIDE x LOCAL_SIDE."""
    specials = [u.arg for u in kernel.uops if u.op is UOps.SPECIAL]
    batch = math.prod(loop.extent for loop in specials if loop not in (plan.rows, plan.cols))
    return batch * (plan.rows.extent // LOCAL_SIDE) * (plan.cols.extent // LOCAL_SIDE)
