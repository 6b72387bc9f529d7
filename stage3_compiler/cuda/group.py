"""The group pass: a GPU block's threads share out a reduction's terms.

The core gives each GPU thread one output (a grid-stride loop over the outputs), which leaves a large
GPU idle when a reduction has few outputs and many terms (a weight's gradient, a loss's sum): a few
thousand threads, each folding a long loop alone. GROUP gives each output (or a few side by side) a
block of threads instead: thread t folds terms t, t + blockDim.x, ..., and the block folds its
threads' partial values in shared memory at the end. The CUDA renderer writes the kernel so where
`group_shape` returns a shape.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ..codegen.uops import Kernel, Loop, LoopKind, UOps
from ..graph.symbolic import Node, Variable, evaluate, layout, lo_hi, vars
from ..passes import Pass, on

GROUP = 128  # threads of a block that fold one output together (a power of two: the tree halves it)
GROUP_OUTPUTS_BELOW = 16384  # fewer outputs than this (~ one per core of a large GPU) leave it idle ...
GROUP_TERMS_FROM = 1024  # ... when each has at least this many terms to fold (8 a thread)
WARP = 32  # a row's GROUP: a warp folds each output of a mid-sized reduction ...
ROW_OUTPUTS_BELOW = 262144  # ... of fewer outputs than this (a thread each: a few warps an SM) ...
ROW_TERMS_FROM = 256  # ... and at least this many terms side by side (layernorm's mean over a row) ...
ROW_UPCAST = 4  # ... a thread holding a few rows at most (not a matmul's register tile)
WIDE_LANES = 32  # wide GROUP: outputs a block takes side by side (a warp's loads lie along them) ...
WIDE_THREADS = 256  # ... and its threads: 8 share out each output's terms


class GroupShape(NamedTuple):
    loop: Loop  # the reduce loop the block's threads share out
    lanes: int  # outputs a block takes side by side (1: a block folds one output)
    threads: int  # threads a block


def output_loops(kernel: Kernel) -> list[Loop]:
    """The kernel's output indices (its SPECIALs), outermost first."""
    return [u.arg for u in kernel.uops if u.op is UOps.SPECIAL]


def output_size(kernel: Kernel) -> int:
    """How many flat output indices the grid-stride loop walks at most (1 for a one-element output;
    a symbolic size at its maximum); the launch sizes its grid by it."""
    return math.prod(layout(loop.extent) for loop in output_loops(kernel))


def step(index: Node | int, var: str) -> int:
    """How far a load's index moves when loop `var` steps from 0 to 1, the other loops at 0 (a user's
    Variable at its largest): 1 where its terms lie side by side along that loop."""
    if not isinstance(index, Node):
        return 0
    env = {v.name: (lo_hi(v)[1] if isinstance(v, Variable) else 0) for v in vars(index)}
    return int(evaluate(index, {**env, var: 1})) - int(evaluate(index, env))


def group_shape(kernel: Kernel) -> GroupShape | None:
    """GROUP: how a block's threads share out a reduction's terms; None where one thread per output
    fills the GPU. The shared loop is the innermost, whose terms usually lie side by side in memory,
    unless it is shorter than a warp: then the longest. Then, by where the loads lie:
    - few outputs, many terms, some load along the loop (a weight's sum of squares): GROUP threads an
      output, thread t taking terms t, t + GROUP, ... (a warp's loads side by side);
    - up to ROW_OUTPUTS_BELOW outputs, many terms, no load along the loop (a weight's gradient x.T @ g,
      a bias's gradient): WIDE_LANES outputs side by side a block (their loads are), WIDE_THREADS threads;
    - more outputs, a row of terms side by side each and at most a few rows a thread, not a matmul's
      register tile (layernorm's statistics): a warp an output."""
    loops = [u.arg for u in kernel.uops if u.op is UOps.RANGE and u.arg.kind is LoopKind.REDUCE]
    if not loops or kernel.online or not on(Pass.GROUP):  # an online softmax's running max is one thread's
        return None
    if any(loop.start != 0 or isinstance(loop.extent, Node) and
           any(not isinstance(v, Variable) for v in vars(loop.extent)) for loop in loops):
        return None  # a loop over a term range (codegen/ranges.py): its length differs from thread to thread
    outputs, terms = output_size(kernel), math.prod(layout(loop.extent) for loop in loops)
    loop = loops[-1] if layout(loops[-1].extent) >= WARP else max(reversed(loops), key=lambda lp: layout(lp.extent))
    along = any(u.op is UOps.LOAD and step(u.arg[0], loop.var) == 1 for u in kernel.uops)
    if outputs < GROUP_OUTPUTS_BELOW and terms >= GROUP_TERMS_FROM and (along or outputs < WIDE_LANES):
        return GroupShape(loop, 1, GROUP)
    if outputs < ROW_OUTPUTS_BELOW and terms >= GROUP_TERMS_FROM and not along and outputs >= WIDE_LANES:
        return GroupShape(loop, WIDE_LANES, WIDE_THREADS)
    if outputs < ROW_OUTPUTS_BELOW and terms >= ROW_TERMS_FROM and along and kernel.upcast <= ROW_UPCAST:
        return GroupShape(loop, 1, WARP)
    return None
