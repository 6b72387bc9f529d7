"""The tree pass: a short nested sum written out as a tree of independent ops.

A reduction the schedule leaves to its reader (engine/schedule.nest_reductions: attention's scores
inside the online softmax's loop) is computed where it is read, in a loop nested there. A loop's
chain of adds waits on each add, and leaves its loads and products scalar; a short one (a head of 32)
written out term by term is a pairwise tree, (t0 + t1) + (t2 + t3) ..., whose terms are independent
and which the vectorizer sums as vectors. `L` is the kernel's Lowerer (codegen/lower.py).
"""

from __future__ import annotations

import math

from ..dtype import dtypes
from ..graph.lazy import LazyBuffer
from ..graph.symbolic import Node, Num
from ..ops import Ops
from ..passes import Pass
from .uops import COMBINE, UOp, reduce_identity

NEST_UNROLL = 64  # terms up to which a nested reduction is written out


def written_out(L, r: LazyBuffer, idxs: list[Node]) -> UOp | None:
    """The nested reduction r at idxs as a tree of its terms; None where it is longer than NEST_UNROLL
    terms or runs to a symbolic size (then it is a loop)."""
    src, steps = r.srcs[0], [n for d, n in enumerate(r.srcs[0].shape) if d in r.arg]
    if not all(isinstance(n, int) for n in steps) or math.prod(steps) > NEST_UNROLL:
        return None
    terms = []
    for flat in range(math.prod(steps)):
        inner, rest = list(idxs), flat
        for d in reversed(r.arg):
            inner[d], rest = Num(rest % src.shape[d]), rest // src.shape[d]
        terms.append(L.view(src, inner))
    op, leaves = COMBINE[r.op][r.dtype is dtypes.bool], terms
    while len(terms) > 1:
        terms = [L.alu(op, r.dtype, *terms[i:i + 2]) if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    L.mark(Pass.TREE)
    if r.op is Ops.REDUCE_ADD and len(leaves) > 1:
        L.sums.append((terms[0], leaves))  # vectorize.py may sum them as vectors
    return terms[0] if terms else L.const(reduce_identity(r.op, r.dtype), r.dtype)
