"""Reverse-mode automatic differentiation: the tape, the backward pass and the derivative rules.

Every primitive op (the few places in tensor.py, elementwise.py, reduce.py, movement.py and
functional.py that call a kernel or build a view) ends with `record(out, op, parents, **saved)`.
When gradients are enabled and a parent requires grad, that hangs a Node on `out`: the op (a
member of ops.py's `Ops`, the one op table), its parents and whatever the rule needs. The rules
are keyed by the same enum, and `record` refuses an op that has none. Composites (layernorm,
conv2d, attention, the losses) record nothing themselves: their gradients come from the
primitives they are written on. One exception: with the online pass (on unless PASSES=-online),
attention that wants a gradient is recorded as one op whose rule is FlashAttention's backward
(`attention_grads`). stage2 promoted softmax and log_softmax to primitives with a rule of their
own, for speed; here they are composites again, as the fusion does what that did.

The API's float ops that the IR lacks (exp, log, cos, tanh, erf, sigmoid, gelu, pow) are formulas of
transcendental.py on primitives, recorded as one op of their own (nothing recorded inside them), with
the same rules as stage2's ops of those names. Differentiating a formula op by op would be wrong and
slow. Wrong: a formula picks between branches with `where`, and the branch it discards still gets
0 * inf back where that branch overflows; tanh's e^t - 1 divides by log(e^t), which is 0 for tiny t,
so tanh'(1e-9) came out NaN (nanochat's soft-capped logits are that small after its zero-initialized
head, and its training stopped at NaN), and sigmoid'(-100) was inf / inf. Slow: gelu's erfc formula
differentiated op by op was a backward kernel of about 270 ops an element; its written-out derivative,
Phi(x) + x phi(x), is about as cheap as the forward (benchmarks/results/stage3_rule_measurements.md).

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

from . import transcendental as tm
from .dtype import rounds_once
from .engine import capture
from .graph.lazy import mark_recomputed
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
    for p in parents:  # read again by the backward: a rule that would leave them unstored must not (engine/online.py)
        p.lazydata.base.kept = True
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


def attention_scores(q, k, scale: float, causal: bool):
    """q @ k^T * scale; where causal, -inf at every key after the query's own position. The causal mask is
    a comparison of row and column indices, not a tril of ones: two ops the scores' kernel computes in
    its loop instead of a (T, S) buffer a kernel writes first."""
    s = q @ k.transpose(-2, -1) * scale
    if causal:
        T, S = s.shape[-2:]
        s = (q.arange(T, device=q.device).unsqueeze(-1) >= q.arange(S, device=q.device)).where(s, float("-inf"))
    return s


def attention_grads(g, out, q, k, v, lse, scale: float, causal: bool, memo: dict) -> tuple:
    """FlashAttention's backward (dq, dk, dv). The forward kept each row's log-sum-exp, not the
    (T, S) probabilities; they are recomputed, p = e^(s - lse). With dp = g @ v^T and
    D = rowsum(g * out), which equals rowsum(p * dp):
        dv = p^T @ g,   ds = p * (dp - D),   dq = ds @ k * scale,   dk = ds^T @ q * scale.
    s, p, dp, D and ds are marked recomputed: the scheduler computes them inside the kernels of dq
    and of dk and dv (s, dp and D as sums over the head nested in their loops) and stores none of
    them. dk and dv sum over the same queries and share one kernel (engine/schedule.py). The three
    rules share one graph (`memo`), so that kernel computes each p once for both."""
    if memo.get("g") is not g:
        s = attention_scores(q, k, scale, causal)
        p = (s - lse).exp()
        ds = p * (g @ v.transpose(-2, -1) - (g * out).sum(-1, keepdim=True))
        mark_recomputed([ds.lazydata, p.lazydata], [t.lazydata for t in (q, k, v, g, out, lse)])
        memo.update(g=g, grads=((ds @ k) * scale, (ds.transpose(-2, -1) @ q) * scale, p.transpose(-2, -1) @ g))
    return memo["grads"]


# ---- the derivative rules: op -> one function per parent, (grad, out, *parents, **saved) -> grad ----

LN2 = math.log(2.0)

RULES = {
    # unary
    Ops.NEG: (lambda g, out, x: -g,),
    Ops.RECIP: (lambda g, out, x: -g * out * out,),
    Ops.SQRT: (lambda g, out, x: g / (out * 2),),
    Ops.EXP2: (lambda g, out, x: g * out * LN2,),
    Ops.POW2: (lambda g, out, x: g * out * LN2,),  # exp2's (the formulas call it with autograd off)
    Ops.LOG2: (lambda g, out, x: g / (x * LN2),),
    Ops.SIN: (lambda g, out, x: g * x.cos(),),
    # the composites' own rules (see the docstring)
    Ops.EXP: (lambda g, out, x: g * out,),
    Ops.LOG: (lambda g, out, x: g / x,),
    Ops.COS: (lambda g, out, x: -g * x.sin(),),
    Ops.TANH: (lambda g, out, x: g * rounds_once(tm.tanh_grad)(x),),  # from x: 1 - out^2 loses out's rounding near +-1
    Ops.ERF: (lambda g, out, x: g * (2 / math.sqrt(math.pi)) * (-x * x).exp(),),
    Ops.SIGMOID: (lambda g, out, x: g * out * (1 - out),),
    Ops.GELU: (lambda g, out, x: g * rounds_once(tm.gelu_grad)(x),),
    Ops.SIGN: (lambda g, out, x: g * 0,),
    Ops.ATTENTION: tuple((lambda g, out, q, k, v, i=i, **saved: attention_grads(g, out, q, k, v, **saved)[i])
                         for i in range(3)),
    Ops.CAST: (lambda g, out, x: g.cast(x.dtype),),
    Ops.CONTIGUOUS: (lambda g, out, x: g,),
    Ops.COPY: (lambda g, out, x: g.to(x.device),),
    # binary (operands already share one shape: broadcasting is an EXPAND before the op)
    Ops.ADD: (lambda g, out, a, b: g, lambda g, out, a, b: g),
    Ops.MUL: (lambda g, out, a, b: g * b, lambda g, out, a, b: g * a),
    Ops.DIV: (lambda g, out, a, b: g / b, lambda g, out, a, b: -g * out / b),
    Ops.POW: (lambda g, out, a, b: g * b * a.pow(b - 1),
              lambda g, out, a, b: (a == 0).where(0.0, g * out * a.log())),  # torch's convention at a = 0
    # ties split the gradient evenly, as torch's maximum/minimum do
    Ops.MAX: (lambda g, out, a, b: g * ((a > b).cast(g.dtype) + (a == b).cast(g.dtype) * 0.5),
                lambda g, out, a, b: g * ((b > a).cast(g.dtype) + (a == b).cast(g.dtype) * 0.5)),
    Ops.WHERE: (lambda g, out, a, b, cond: cond.where(g, 0.0), lambda g, out, a, b, cond: cond.where(0.0, g)),
    # reductions
    Ops.REDUCE_ADD: (lambda g, out, x, axes: _keep(g, x, axes).expand(x.shape),),
    Ops.REDUCE_MUL: (lambda g, out, x, axes: _keep(g * out, x, axes) / x,),  # needs x != 0, like tinygrad
    Ops.REDUCE_MAX: (lambda g, out, x, axes: _extreme(g, out, x, axes),),
    # movement
    Ops.RESHAPE: (lambda g, out, x: g.reshape(x.shape),),
    Ops.PERMUTE: (lambda g, out, x, order: g.permute(_argsort(order)),),
    Ops.EXPAND: (lambda g, out, x: _unexpand(g, x.shape),),
    Ops.SHRINK: (lambda g, out, x, arg: g.pad(tuple((0, 0) if b is None else (b[0], n - b[1])
                                                  for n, b in zip(x.shape, arg, strict=True))),),
    Ops.FLIP: (lambda g, out, x, axes: g.flip(axes),),
    Ops.PAD: (lambda g, out, x, pads: g.pad(tuple((-b, -a) for b, a in pads)),),
}


VARIADIC: dict = {}  # ops of any number of parents (stage2's cat); in this stage cat is pads and adds


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
        return self._make(self.lazydata)

    def requires_grad_(self, flag: bool = True) -> Self:
        check_requires_grad("requires_grad_", self.dtype, flag)
        self.requires_grad = flag
        return self

    @staticmethod
    def no_grad():
        """`with Tensor.no_grad():` records nothing (evaluation, optimizer steps)."""
        return no_grad()

    def assign(self, x) -> Self:
        """Write x's values into this tensor (same shape; cast to its dtype), lazily: the next realize
        computes them. A tensor that is a whole realized buffer (a parameter, an optimizer's state)
        keeps that buffer and the values are written into it, as torch's `copy_` does: a tensor
        sharing the buffer (a view, a detach) sees them, and a jitted step (jit.py) finds its state
        where it left it. Any other tensor just points at x's values from now on."""
        if tuple(x.shape) != self.shape:
            raise ValueError(f"assign: shape {tuple(x.shape)} does not match {self.shape}")
        value = x.cast(self.dtype).to(self.device).lazydata  # a state dict loaded on another device lands here
        old = self.lazydata
        storage = None if not old.is_base else old if old.buffer is not None else old.target
        if storage is None:
            self.lazydata = value
            if capture.CAPTURING:  # a TinyJit realizes it at the end of the call, as a replay would
                capture.note_rebound(self)
        else:
            old.target = None  # an earlier assign not realized yet: this one writes the memory
            self.lazydata = value.copy(storage)
        return self

