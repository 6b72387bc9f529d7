"""The kernel-level vocabulary: the ops a lowered kernel is a list of (UOps), its loops, and the
lowered kernel itself. `codegen/lower.py` writes these lists, a renderer (cpu/renderer.py,
cuda/renderer.py) turns each UOp into a line of source.

The graph's ops (ops.Ops) say *what* is computed; a UOp says how one kernel computes it, one step
at a time: a LOAD from a buffer at an index expression, an ALU op (its `arg` an Ops member), a
loop (RANGE ... ENDRANGE), an accumulator and its UPDATE, a STORE.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any

from ..dtype import DType, dtypes
from ..graph.lazy import LazyBuffer
from ..graph.symbolic import Node, render
from ..ops import Ops


class UOps(Enum):
    GLOBAL = auto()  # a buffer argument of the kernel; arg: its position
    SPECIAL = auto()  # an output index a GPU thread takes from its place in the grid; arg: a Loop
    RANGE = auto()  # a loop opens; arg: a Loop
    ENDRANGE = auto()  # the innermost open loop closes
    IF = auto()  # what follows runs only where srcs[0] holds (a one-hot sum's term that adds nothing is skipped)
    ENDIF = auto()  # the innermost IF closes
    CONST = auto()  # a constant; arg: its Python value
    COND = auto()  # a padded view's validity condition; arg: a symbolic Node
    LOAD = auto()  # srcs: (GLOBAL,), or (GLOBAL, gate): read where the gate holds, else 0; arg: (index, clamp bound)
    ALU = auto()  # arg: the Ops member; srcs: its operands
    CAST = auto()  # srcs: (value,); dtype: the target
    ACC = auto()  # an accumulator; arg: its identity
    ACCS = auto()  # SPLIT's partial accumulators, an array; arg: (identity, count)
    PART = auto()  # one partial of an ACCS; arg: its index Node
    UPDATE = auto()  # srcs: (accumulator, value); arg: the reduce op (Ops.REDUCE_*)
    STORE = auto()  # srcs: (GLOBAL, value); arg: the index Node
    VEC = auto()  # a vector of lanes: each the scalar srcs[0], or lane k srcs[k] (codegen/vectorize.py)
    GEP = auto()  # one lane of the vector srcs[0]; arg: the lane
    SHUFFLE = auto()  # some lanes of the vector srcs[0], a vector of its own; arg: their indices
    # a matrix unit's tiles (codegen/tiles.py): arg (tile,); (tile, index Node, row stride in bytes), srcs (GLOBAL,);
    # (C, A, B): C += A . B over pairs of K; (tile, first row Node, first column Node, rows, columns), srcs (GLOBAL,)
    TILE_ZERO = auto()
    TILE_LOAD = auto()
    TILE_DOT = auto()
    TILE_STORE = auto()


IDENTITY = {Ops.REDUCE_ADD: 0, Ops.REDUCE_MUL: 1}
# the binary op that folds two of a reduction's values (a bool's sum is an OR, its product an AND)
COMBINE = {Ops.REDUCE_ADD: (Ops.ADD, Ops.OR), Ops.REDUCE_MUL: (Ops.MUL, Ops.AND), Ops.REDUCE_MAX: (Ops.MAX, Ops.OR)}


def reduce_identity(op: Ops, dtype: DType):
    """The value a reduction starts from: what folding it in changes nothing."""
    if op in IDENTITY:
        return IDENTITY[op] if dtype is not dtypes.bool else bool(IDENTITY[op])
    if dtype.is_float:
        return float("-inf")
    return 0 if dtype is dtypes.bool or dtype.is_unsigned else -(2 ** (8 * dtype.itemsize - 1))


class LoopKind(Enum):
    OUTPUT = auto()  # over an output axis (gidx): a SPECIAL where the renderer has a grid
    BLOCK = auto()  # over the blocks of a BLOCK option (bidx), outside the output loops
    REDUCE = auto()  # over a reduced axis (ridx)
    NESTED = auto()  # over a reduced axis of a reduction computed where the kernel reads it (nidx)
    PARTIALS = auto()  # over SPLIT's partial accumulators (sidx), innermost


@dataclass(frozen=True)
class Loop:
    var: str
    extent: int | Node  # where the loop stops; a symbolic size (a user's Variable in it) is an argument of the kernel
    kind: LoopKind
    start: int | Node = 0  # where it starts: a reduce loop over a term range (codegen/ranges.py) may start later


@dataclass(eq=False)
class UOp:
    op: UOps
    dtype: DType | None
    srcs: tuple[UOp, ...] = ()
    arg: Any = None
    name: str = ""
    lanes: int = 1  # > 1: a vector, that many values of dtype side by side (a LOAD or STORE: at consecutive indices)

    def __repr__(self) -> str:
        arg = self.arg[0] if self.op is UOps.LOAD else self.arg  # a LOAD's arg: (index, clamp bound or None)
        arg = render(arg) if isinstance(arg, Node) else arg.name if isinstance(arg, Ops) else arg
        srcs = ", ".join(s.name for s in self.srcs)
        dtype = (self.dtype.name + (f"x{self.lanes}" if self.lanes > 1 else "")) if self.dtype else ""
        return f"{self.name:>6} = {self.op.name:<8} {dtype:<10} [{srcs}] {arg}"


@dataclass(eq=False)
class Kernel:
    """One kernel, lowered: its UOps and the buffers they read and write. (Compiled, it is a Program:
    codegen/program.py.)"""

    name: str
    shape: tuple[int, ...]
    uops: list[UOp]
    buffers: list[LazyBuffer]  # argument order: the output first, then every base it loads
    ops: int = 0  # ALU ops per output entry and reduction step (for GlobalCounters' global_ops)
    reduce_shape: tuple[int, ...] = field(default=())
    upcast: int = 1  # output entries one pass of the loops computes (see heuristics.upcast_axes)
    outputs: int = 1  # buffers the kernel writes: the first ones of `buffers`
    opts: tuple = ()  # the options (opts.py) its loops were shaped by
    threads: int = 1  # THREAD: OpenMP threads, each running a slice of the outermost loop
    variables: tuple = ()  # the user's Variables it takes as arguments after the buffers, in name order
    online: bool = False  # its reduction folds a softmax in one pass (engine/online.py): one thread a row
    nested: bool = False  # its terms compute sums of their own (heuristics.nested_terms: FlashAttention's kernels)
    passes: tuple[str, ...] = ()  # the speed passes (passes.py) that changed it, in the table's order
