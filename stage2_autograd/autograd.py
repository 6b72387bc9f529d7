"""Reverse-mode automatic differentiation: the tape, the backward pass and the derivative rules.

Every primitive op (the few places in tensor.py, elementwise.py, reduce.py, movement.py and
functional.py that call a kernel or build a view) ends with `record(out, op, parents, **saved)`.
When gradients are enabled and a parent requires grad, that hangs a Node on `out`: the op (a
member of ops.py's `Ops`, the one op table), its parents and whatever the rule needs. The rules
are keyed by the same enum, and `record` refuses an op that has none. Composites (layernorm,
conv2d, attention, the losses) record nothing themselves: their gradients come from the
primitives they are written on. softmax and log_softmax are the two composites promoted to
primitives with a rule of their own, for speed (reduce.py gives the measurement).

`backward()` orders the graph with an iterative depth-first search (no recursion limit, the same
order every run), then walks it from the output back, calling one rule per parent that needs a
gradient. Broadcasting needs no rule of its own: a binary op's operands are expanded views, and the
EXPAND rule sums the gradient back over the expanded dims.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Self

from .ckernels import ffi
from .device import check
from .dtype import dtypes
from .hooks import TensorCore
from .ops import Ops


class GradMode:
    enabled: bool = True


@dataclass(eq=False)
class Node:
    """How a tensor was made: the op, its inputs, and what the op's rule needs besides them."""

    op: Ops | str  # "freed" once backward has walked it
    parents: tuple
    saved: dict = field(default_factory=dict)


FREED = Node("freed", ())  # what a walked node keeps: nothing


def record(out, op: Ops, parents: tuple, **saved):
    """Attach the op to `out` when a float result depends on a tensor that requires grad."""
    if not GradMode.enabled or not out.dtype.is_float:
        return out
    if not any(p.requires_grad for p in parents) or any(p is out for p in parents):
        return out  # an op that returned its input unchanged (a no-op cast, a contiguous view) adds nothing
    if op not in RULES and op not in VARIADIC:
        raise RuntimeError(f"record: {op!r} has no derivative rule, so its result {out.shape} cannot require grad")
    out._ctx = Node(op, tuple(parents), saved)
    out.requires_grad = True
    return out


# ---- helpers the rules share ----


def _unexpand(g, shape: tuple):
    """Sum a gradient of an expanded view back to the shape it was expanded from."""
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape) if n == 1 and g.shape[lead + d] != 1)
    return (g.sum(axes) if axes else g).reshape(shape)


def _keep(g, x, axes: tuple):
    """A reduction's gradient with the reduced axes put back as size 1, ready to broadcast over x."""
    return g.reshape(tuple(1 if d in axes else n for d, n in enumerate(x.shape)))


def _extreme(g, out, x, axes):
    """max/min: the gradient goes to every element equal to the extreme, split evenly between ties."""
    hit = x == _keep(out, x, axes)
    return hit.where(_keep(g, x, axes), 0.0) / _keep(hit.sum(axes).cast(x.dtype), x, axes)


def _argsort(order: tuple) -> tuple:
    return tuple(sorted(range(len(order)), key=lambda d: order[d]))


def _scatter(g, x, key):
    """getitem's adjoint. Ints, slices, None and ... select a view that repeats no element, so the
    adjoint is a copy of g into the same view of zeros. Index arrays may repeat elements: replay the
    index on the positions 0..n-1 of x, then scatter-add g back there."""
    if g.dtype.is_half:  # summed in float32, rounded once
        return _scatter(g.cast(dtypes.float32), x, key).cast(g.dtype)
    out = g.zeros(x.shape, dtype=g.dtype, device=g.device)
    view, advanced = out._basic_index(key if isinstance(key, tuple) else (key,))
    if not advanced:  # one conv tap of (64, 6, 28, 28): 0.17 ms, against 0.56 ms for replay + scatter-add
        view._copy_into(g)
        return out
    if isinstance(key, TensorCore) and x.ndim >= 1:
        # Embedding lookups, weight[idx]: the rows' positions directly, without numbering all of x.
        # Measured for a (12, 64) batch of 128-wide rows: 2.3 ms at a 50k vocab (86 ms numbering all
        # of x; 1.3 s as one_hot(idx).T @ g), 0.4 ms at vocab 65 (one_hot + matmul: 1.0 ms).
        row = x.numel() // max(x.shape[0], 1)
        idx = key.cast(dtypes.int64).to(g.device)
        idx = (idx < 0).where(idx + x.shape[0], idx)
        positions = (idx.reshape(-1, 1) * row + g._iota(row, g.device).reshape(1, row)).contiguous()
    else:
        positions = g._iota(x.numel(), g.device).reshape(x.shape)[key].contiguous()
    g = g.contiguous()
    check(out._buf.kernels.scatter_add(g.dtype.code, out._ptr(), g._ptr(), ffi.cast("int64_t *", positions._ptr()),
                                       positions.numel()), "scatter_add", "getitem backward", g)
    return out


# ---- the derivative rules: op -> one function per parent, (grad, out, *parents, **saved) -> grad ----

LN2 = math.log(2.0)

RULES = {
    # unary
    Ops.NEG: (lambda g, out, x: -g,),
    Ops.RECIP: (lambda g, out, x: -g * out * out,),
    Ops.SQRT: (lambda g, out, x: g / (out * 2),),
    Ops.EXP: (lambda g, out, x: g * out,),
    Ops.EXP2: (lambda g, out, x: g * out * LN2,),
    Ops.LOG: (lambda g, out, x: g / x,),
    Ops.LOG2: (lambda g, out, x: g / (x * LN2),),
    Ops.SIN: (lambda g, out, x: g * x.cos(),),
    Ops.COS: (lambda g, out, x: -g * x.sin(),),
    Ops.TANH: (lambda g, out, x: g * (1 - out * out),),
    Ops.ERF: (lambda g, out, x: g * (2 / math.sqrt(math.pi)) * (-x * x).exp(),),
    Ops.GELU: (lambda g, out, x: x._binary(Ops.GELU_GRAD, "gelu_grad", g),),  # g * GELU'(x), one kernel
    Ops.ABS: (lambda g, out, x: g * x.sign(),),
    Ops.SIGN: (lambda g, out, x: g * 0,),
    Ops.CAST: (lambda g, out, x: g.cast(x.dtype),),
    Ops.CONTIGUOUS: (lambda g, out, x: g,),
    Ops.COPY: (lambda g, out, x: g.to(x.device),),
    # binary (operands already share one shape: broadcasting is an EXPAND before the op)
    Ops.ADD: (lambda g, out, a, b: g, lambda g, out, a, b: g),
    Ops.SUB: (lambda g, out, a, b: g, lambda g, out, a, b: -g),
    Ops.MUL: (lambda g, out, a, b: g * b, lambda g, out, a, b: g * a),
    Ops.DIV: (lambda g, out, a, b: g / b, lambda g, out, a, b: -g * out / b),
    Ops.POW: (lambda g, out, a, b: g * b * a.pow(b - 1),
            lambda g, out, a, b: (a == 0).where(0.0, g * out * a.log())),  # torch's convention at a = 0
    # ties split the gradient evenly, as torch's maximum/minimum do
    Ops.MAX: (lambda g, out, a, b: g * ((a > b).cast(g.dtype) + (a == b).cast(g.dtype) * 0.5),
                lambda g, out, a, b: g * ((b > a).cast(g.dtype) + (a == b).cast(g.dtype) * 0.5)),
    Ops.MIN: (lambda g, out, a, b: g * ((a < b).cast(g.dtype) + (a == b).cast(g.dtype) * 0.5),
                lambda g, out, a, b: g * ((b < a).cast(g.dtype) + (a == b).cast(g.dtype) * 0.5)),
    Ops.WHERE: (lambda g, out, a, b, cond: cond.where(g, 0.0), lambda g, out, a, b, cond: cond.where(0.0, g)),
    # reductions
    Ops.REDUCE_ADD: (lambda g, out, x, axes: _keep(g, x, axes).expand(x.shape),),
    Ops.REDUCE_MUL: (lambda g, out, x, axes: _keep(g * out, x, axes) / x,),  # needs x != 0, like tinygrad
    Ops.REDUCE_MAX: (lambda g, out, x, axes: _extreme(g, out, x, axes),),
    Ops.REDUCE_MIN: (lambda g, out, x, axes: _extreme(g, out, x, axes),),
    Ops.CUMSUM: (lambda g, out, x, axis: g.flip(axis).cumsum(axis).flip(axis),),
    # promoted composites (see reduce.py for why): the chain rule through max/exp/sum, fused
    Ops.SOFTMAX: (lambda g, out, x, axis: out * (g - (g * out).sum(axis, keepdim=True)),),
    Ops.LOG_SOFTMAX: (lambda g, out, x, axis: g - out.exp() * g.sum(axis, keepdim=True),),
    Ops.SIGMOID: (lambda g, out, x: g * out * (1 - out),),  # finite where e^-x overflows (elementwise.py)
    # movement
    Ops.RESHAPE: (lambda g, out, x: g.reshape(x.shape),),
    Ops.PERMUTE: (lambda g, out, x, order: g.permute(_argsort(order)),),
    Ops.EXPAND: (lambda g, out, x: _unexpand(g, x.shape),),
    Ops.SHRINK: (lambda g, out, x, arg: g.pad(tuple((0, 0) if b is None else (b[0], n - b[1])
                                                  for n, b in zip(x.shape, arg, strict=True))),),
    Ops.FLIP: (lambda g, out, x, axes: g.flip(axes),),
    Ops.PAD: (lambda g, out, x, pads: g.pad(tuple((-b, -a) for b, a in pads)),),
    Ops.INDEX: (lambda g, out, x, key: _scatter(g, x, key),),
    # linear algebra: batched (..., M, K) @ (..., K, N), operands already broadcast and contiguous
    Ops.MATMUL: (lambda g, out, a, b: g @ b.transpose(-1, -2), lambda g, out, a, b: a.transpose(-1, -2) @ g),
}


def _cat_rule(index: int):
    return lambda g, out, *parents, sizes, dim: g.split(list(sizes), dim)[index]


VARIADIC = {Ops.CAT: _cat_rule}  # ops of any number of parents: one rule per input, made for its index


def rules_for(node: Node) -> tuple:
    if node.op in VARIADIC:  # each input takes its slice of the gradient
        return tuple(VARIADIC[node.op](i) for i in range(len(node.parents)))
    return RULES[node.op]


# ---- the backward pass ----


def toposort(root) -> list:
    """Every tensor `root` depends on through recorded ops, parents before children.
    Iterative DFS with an explicit stack: a chain of any length works, and the order is fixed by
    the order of each op's parents, so the same graph always gives the same order."""
    order, seen = [], {id(root)}
    stack = [(root, iter(root._ctx.parents if root._ctx else ()))]
    while stack:
        t, it = stack[-1]
        for p in it:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                stack.append((p, iter(p._ctx.parents if p._ctx else ())))
                break
        else:
            stack.pop()
            order.append(t)
    return order


def backward(root, gradient=None, retain_graph: bool = False) -> None:
    """Accumulate d(root)/d(leaf) into every leaf's .grad. Unless retain_graph, the walked nodes
    then let go of their inputs (as in torch), so a kept loss tensor does not keep every activation."""
    if not root.requires_grad:
        raise RuntimeError(f"backward: the tensor of shape {root.shape} does not require grad "
                           "(nothing it depends on has requires_grad=True)")
    if gradient is None:
        if root.numel() != 1:
            raise RuntimeError(f"backward: gradient can be implicit only for a scalar output, got shape {root.shape}")
        gradient = root.ones_like()
    elif not isinstance(gradient, TensorCore):
        gradient = root._like(gradient, root.dtype)
    if gradient.shape != root.shape:
        raise ValueError(f"backward: gradient shape {gradient.shape} must match the output shape {root.shape}")
    grads = {id(root): gradient.cast(root.dtype)}
    order = toposort(root)
    with no_grad():
        for t in reversed(order):
            g = grads.pop(id(t), None)
            if g is None:
                continue
            if t._ctx is None:  # a leaf: accumulate into .grad, which owns its memory (g may be a view or shared)
                t.grad = g.clone() if t.grad is None else t.grad + g
                continue
            node = t._ctx
            if node.op == "freed":
                raise RuntimeError("backward: this part of the graph was already walked and freed; "
                                   "pass retain_graph=True to the first backward() to walk it twice")
            for p, rule in zip(node.parents, rules_for(node), strict=True):
                if not p.requires_grad:
                    continue
                pg = rule(g, t, *node.parents, **node.saved)
                if pg.dtype is not p.dtype:
                    pg = pg.cast(p.dtype)
                grads[id(p)] = pg if id(p) not in grads else grads[id(p)] + pg
    if not retain_graph:
        for t in order:
            if t._ctx is not None:
                t._ctx = FREED


@contextlib.contextmanager
def no_grad():
    before, GradMode.enabled = GradMode.enabled, False
    try:
        yield
    finally:
        GradMode.enabled = before


def check_requires_grad(op: str, dtype, flag) -> None:
    if flag and not dtype.is_float:
        raise TypeError(f"{op}: only float tensors can require grad, got {dtype.name}")


class AutogradMixin(TensorCore):
    _ctx: Node | None = None

    def backward(self, gradient=None, retain_graph: bool = False) -> Self:
        backward(self, gradient, retain_graph)
        return self

    def detach(self) -> Self:
        """The same data, cut off from the graph."""
        out = self._view(self, self.shape, self._strides, self._offset)
        out.requires_grad = False
        return out

    def requires_grad_(self, flag: bool = True) -> Self:
        check_requires_grad("requires_grad_", self.dtype, flag)
        self.requires_grad = flag
        return self

    @staticmethod
    def no_grad():
        """`with Tensor.no_grad():` records nothing (evaluation, optimizer steps)."""
        return no_grad()

    def assign(self, x) -> Self:
        """Write x's values into this tensor's memory (same shape and dtype): parameters keep their identity."""
        if tuple(x.shape) != self.shape:
            raise ValueError(f"assign: shape {tuple(x.shape)} does not match {self.shape}")
        self._copy_into(x.cast(self.dtype).to(self.device))  # a state dict loaded on another device lands here
        return self

