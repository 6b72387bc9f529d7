"""The lazy graph. An op on a tensor runs nothing: it makes a LazyBuffer, a node that remembers the
op and its inputs. Nothing is computed until a result is needed (`realize()`, `numpy()`), and
then the scheduler turns the graph into kernels.

A LazyBuffer is one of two things:
- a **base**: an op of the IR (BUFFER, CONST, an elementwise op, a reduction, CONTIGUOUS) over
  source LazyBuffers, whose result is a contiguous array of its shape;
- a **view** of a base: the base and a ShapeTracker. Movement ops (reshape, permute, expand, pad,
  shrink, flip) make views and never copy: they only compose the view's ShapeTracker.
So `x.T.reshape(...)[1:].expand(...)` is one view of x's base, and the kernel that reads it turns
the view into index arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..dtype import DType, dtypes, python_type
from ..ops import IR_ELEMENTWISE, IR_REDUCE, Ops
from ..settings import callsite
from .shapetracker import ShapeTracker
from .symbolic import layout

COMPARES = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})

# Called with each assign node as it is made: a capturing TinyJit listens here (engine/capture.py)
# to realize, at the end of the call, the assigns nothing else asked for. The graph knows nothing
# of who listens.
assign_watchers: list[Callable[[LazyBuffer], None]] = []


class LazyBuffer:
    def __init__(self, device: str, st: ShapeTracker, dtype: DType, op: Ops | None = None, arg: Any = None,
                 srcs: tuple[LazyBuffer, ...] = (), base: LazyBuffer | None = None):
        self.device, self.st, self.dtype = device, st, dtype
        self.shape: tuple[int, ...] = st.shape
        self._base = base
        if base is None:  # a base: the op and its inputs; `buffer` once a kernel (or the user) filled it
            self.op, self.arg, self.srcs = op, arg, srcs
            self.buffer = None
            self.forced = False  # realize this node even when it could be fused (contiguous, assign)
            self.target = None  # a realized base whose memory this one is written into (assign; see copy)
            self.copy_back = None  # a target it could not write in place: realize copies the values there after
            self.site = callsite()  # (file, line) of the user's code that made it, for errors (settings.py)
            # the realized buffers it reads and their versions now: an assign that writes one of them
            # in place before this node is computed would change what it reads (the scheduler raises)
            self.seen = tuple((s.base.buffer, s.base.buffer.version) for s in srcs if s.base.buffer is not None)
            # (API op, its input) on the last node of a formula the API wrote for that op (exp's, say):
            # a label for rules that rely on what the formula computes (engine/online.py), not part of
            # the graph's structure
            self.formula: tuple[Ops, LazyBuffer] | None = None
            self.kept = False  # autograd holds it for a backward, which will read it after this realize
            # computed again inside every kernel that reads it, a reduction in a loop nested there, and
            # never stored: FlashAttention's scores and probabilities (autograd.attention_grads)
            self.recomputed = False
            # realized whenever this base is (each forced): FlashAttention's log-sum-exp with its output,
            # which the online kernel writes from the row statistics only it holds (engine/online.py)
            self.along: tuple[LazyBuffer, ...] = ()
            self.iota = False  # a buffer filled with 0, 1, 2...: arange's (holds while its buffer's version is 0)
            self.operand_copy = False  # a copy of a matmul operand the layouts pass put in (Kernel.passes names it)
            self.tiles = None  # a matmul the tiles pass runs on a matrix unit: its codegen/tiles.TileMatmul

    # ---- what it is ----

    @property
    def base(self) -> LazyBuffer:
        return self if self._base is None else self._base

    @property
    def is_base(self) -> bool:
        return self._base is None

    @property
    def realized(self):
        """The base's Buffer, once computed; None before."""
        return self.base.buffer

    def __repr__(self) -> str:
        if self.is_base:
            return f"<LB {self.op.name} {self.shape} {self.dtype.name}{' realized' if self.buffer else ''}>"
        return f"<LB view {self.shape} of {self.base!r}>"

    # ---- sources: a buffer that holds data, and a constant ----

    @staticmethod
    def from_buffer(buffer, shape: tuple[int, ...], dtype: DType, device: str) -> LazyBuffer:
        out = LazyBuffer(device, ShapeTracker.from_shape(shape), dtype, Ops.BUFFER)
        out.buffer = buffer
        return out

    @staticmethod
    def const(value, dtype: DType, device: str, shape: tuple[int, ...] = ()) -> LazyBuffer:
        """One number, viewed as any shape: a 0-d CONST base reshaped and expanded (no memory per element)."""
        base = LazyBuffer(device, ShapeTracker.from_shape(()), dtype, Ops.CONST, python_type(dtype)(value))
        return base.reshape((1,) * len(shape)).expand(shape) if shape else base

    # ---- compute ----

    def alu(self, op: Ops, *others: LazyBuffer, arg: Any = None) -> LazyBuffer:
        """An elementwise op of the IR over operands of one shape (the Tensor has broadcast them)."""
        assert op in IR_ELEMENTWISE, op
        srcs = (self, *others)
        assert all(s.shape == self.shape for s in srcs), [s.shape for s in srcs]
        dtype = dtypes.bool if op in COMPARES else arg if op is Ops.CAST else srcs[-1].dtype
        return LazyBuffer(self.device, ShapeTracker.from_shape(self.shape), dtype, op, arg, srcs)

    def reduce(self, op: Ops, axes: tuple[int, ...]) -> LazyBuffer:
        """A reduction over axes, keeping them as size 1 (the Tensor reshapes them away)."""
        assert op in IR_REDUCE, op
        if not axes:
            return self
        shape = tuple(1 if d in axes else n for d, n in enumerate(self.shape))
        return LazyBuffer(self.device, ShapeTracker.from_shape(shape), self.dtype, op, tuple(sorted(axes)), (self,))

    def contiguous(self) -> LazyBuffer:
        """This view as a base of its own: a copy kernel, unless it already is a whole base."""
        if (self.is_base and self.op is not Ops.CONST) or (not self.is_base and self.st.contiguous):
            return self  # a base, or a reshape of one: its buffer already holds these elements in order
        out = LazyBuffer(self.device, ShapeTracker.from_shape(self.shape), self.dtype, Ops.CONTIGUOUS, None, (self,))
        out.forced = True
        return out

    def copy(self, target: LazyBuffer | None = None) -> LazyBuffer:
        """A base of its own holding this view's values, always realized (clone, assign). With a target
        (a realized base of the same shape and dtype) the kernel writes into the target's memory
        instead of a new buffer: an update in place, which the scheduler orders after every kernel
        that reads the old values, or turns back into a new buffer when it cannot (see
        engine/memory.py)."""
        out = LazyBuffer(self.device, ShapeTracker.from_shape(self.shape), self.dtype, Ops.CONTIGUOUS, None, (self,))
        out.forced, out.target = True, target
        if target is not None:
            for watch in assign_watchers:
                watch(out)
        return out

    # ---- movement: views, composed in the ShapeTracker ----

    def _view(self, st: ShapeTracker) -> LazyBuffer:
        base = self.base
        if st.contiguous and st.shape == base.shape:
            return base  # the identity view of a base is the base
        return LazyBuffer(self.device, st, self.dtype, base=base)

    def reshape(self, shape: tuple[int, ...]) -> LazyBuffer:
        return self if shape == self.shape else self._view(self.st.reshape(shape))

    def permute(self, order: tuple[int, ...]) -> LazyBuffer:
        return self if order == tuple(range(len(order))) else self._view(self.st.permute(order))

    def expand(self, shape: tuple[int, ...]) -> LazyBuffer:
        return self if shape == self.shape else self._view(self.st.expand(shape))

    def pad(self, arg: tuple[tuple[int, int], ...]) -> LazyBuffer:
        return self if all(p == (0, 0) for p in arg) else self._view(self.st.pad(arg))

    def shrink(self, arg: tuple[tuple[int, int], ...]) -> LazyBuffer:
        same = all(b == (0, n) for b, n in zip(arg, self.shape, strict=True))
        return self if same else self._view(self.st.shrink(arg))

    def flip(self, axes: tuple[int, ...]) -> LazyBuffer:
        return self if not axes else self._view(self.st.flip(axes))


def holds_iota(b: LazyBuffer) -> bool:
    """Does b's buffer hold 0, 1, 2... (arange's), unwritten since?"""
    return b.iota and b.buffer is not None and b.buffer.version == 0


def mark_recomputed(tops: list[LazyBuffer], inputs: list[LazyBuffer]) -> None:
    """Mark every unrealized base from the tops' bases down to the inputs' (not included) as
    recomputed: the scheduler computes each inside the kernels that read it and stores none."""
    stop = {id(i.base) for i in inputs}
    stack, seen = [t.base for t in tops], set()
    while stack:
        b = stack.pop()
        if id(b) in seen or id(b) in stop or b.buffer is not None or b.op is Ops.CONST:
            continue
        seen.add(id(b))
        b.recomputed = True
        stack.extend(s.base for s in b.srcs)


def numel(shape: tuple[int, ...]) -> int:
    """The elements a buffer of this shape holds: a symbolic dim counts at its layout size, its
    maximum (graph/shapetracker.py)."""
    return math.prod(layout(s) for s in shape)
