"""Gradient conformance, driven by the same catalogue and cases as the forward tests (stage2+).

- test_grad: every differentiable op x float dtype x its cases (broadcasting pairs, size-0 and
  size-1 dims, transposed / strided / flipped / expanded views; the views in float32, and in
  float64 too under --every-dtype-view). The inputs are leaves that
  require grad; the case's view of each leaf is what the op sees, so a gradient must flow back
  through the view too. The output is contracted with a fixed random cotangent w, sum(out * w),
  and backward() runs. Movement ops are checked against the adjoint of their index map (numpy
  replays the op on the positions of the inputs); every other op against torch's autograd on the
  same values in float64.
- test_input_used_twice: binary ops with one tensor as both operands, and unary ops applied twice
  to one tensor: gradients from two paths must add up.
- test_grad_coverage: every float op of the catalogue is either checked here or listed in
  NO_GRADIENT with a reason.

Tolerances: an op's gradient is held to the op's own forward tolerance from the catalogue (its
backward is the same kind of computation: a chain of the same length, sums of the same length;
cumsum's gradient is a cumsum), with ELEMENTWISE as the floor, float32 (1e-5, 1e-6) and
float64 (1e-12, 1e-12), because even a movement op's gradient computes: it sums the cotangents of
repeated elements (expand, repeat, pooling windows) where the forward only copied them, and those
float32 sums round like any add. The reference is float64 throughout, so the float32 bounds measure
our rounding alone.
Special-value cases (inf/nan) are forward-only: their gradients are conventions, not conformance.
Inputs drawn from COARSE (the forward tests' grid of halves, made for ties) are drawn from ANY
here, so that max, clip and maximum are evaluated where they are differentiable.
"""

from __future__ import annotations

import numpy as np
import pytest

from conformance.cases import (
    ANY,
    COARSE,
    FLOATS,
    HALVES,
    LAYOUTS,
    NONZERO,
    POSITIVE,
    Arg,
    Case,
    D,
    Index,
    case,
    new_dtypes_here,
    sample_marks,
    view_marks,
)
from conformance.catalogue import CATALOGUE, ELEMENTWISE, NO_GRADIENT, grad_ref, torch_ref
from conformance.checks import expect, resolve, seed, tolerance

# Points where the op is not differentiable and torch picks a value by convention; strict xfails. (std of a
# constant row was one: torch defines its gradient as 0, and our std now does too.)
CONVENTIONS: dict[str, str] = {}


def _params_numpy(params: dict) -> dict:
    return {k: str(v) if isinstance(v, D) else v for k, v in params.items()}


def _float_out(op, dtype: str, c: Case) -> bool:
    try:
        out = op.out(dtype, **_params_numpy(c.params))
    except TypeError:
        return True
    return out is None or out in FLOATS


def _grad_cases():
    out = []
    for op in CATALOGUE:
        if grad_ref(op) is None or op.section == "autograd" or op.kind == "random":
            continue
        for dtype in (d for d in op.dtypes if d in FLOATS):
            for c in op.cases(dtype):
                if "|special" in c.id or not _float_out(op, dtype, c):
                    continue
                if not any(a.dtype is None or a.dtype in FLOATS for a in c.args):
                    continue
                tid = f"{op.name}-{dtype}-{c.id}"
                marks = [pytest.mark.xfail(reason=CONVENTIONS[tid], strict=True)] if tid in CONVENTIONS else []
                marks += view_marks(c, dtype)
                out.append(pytest.param(op, dtype, c, id=tid, marks=marks))
    return out


GRAD_CASES = _grad_cases()
# The half types' gradients, on the float32 cases without a view (test_half.py's rule). Not max's
# windows in bfloat16: rounded to 8 bits, a window's inputs tie often, and which of equal inputs takes
# the gradient is a convention (torch's and ours differ), not arithmetic.
TIES = {"max_pool2d", "cummax"}


def _half_grad_cases() -> list:
    by_op = {}  # (op name, half type) -> [(op, case)], in the catalogue's order
    for p in GRAD_CASES:
        op, dtype, c = p.values
        if dtype != "float32" or any(a.layout != "C" for a in c.args):
            continue
        for half in HALVES:
            if not (half == "bfloat16" and op.name in TIES):
                by_op.setdefault((op.name, half), []).append((op, c))
    return [pytest.param(op, half, c, id=f"{op.name}-{half}-{c.id}", marks=sample_marks(i, len(runs), half))
            for (_, half), runs in by_op.items() for i, (op, c) in enumerate(runs)]


HALF_GRAD_CASES = _half_grad_cases()


def _domain(op, arg: Arg):
    d = arg.domain or op.domain
    return ANY if d is COARSE else d


class Inputs:
    """Each Arg as a leaf base tensor, the case's view of it, and the positions 1..n of its base
    (position 0 stands for "no input element", e.g. padding)."""

    def __init__(self, stage, op, dtype: str, c: Case):
        rng = np.random.default_rng(seed("grad", op.name, dtype, c.id))
        T, dtypes = stage.module.Tensor, stage.module.dtypes
        self.leaves, self.views, self.bases, self.positions, self.args = [], [], [], [], c.args
        start = 1
        for arg in c.args:
            dt = arg.dtype or dtype
            layout = LAYOUTS[arg.layout]
            base = _domain(op, arg)(rng, layout.base(arg.shape), dt)
            differentiable = dt in FLOATS or dt in HALVES
            leaf = T(base, dtype=getattr(dtypes, dt), requires_grad=True if differentiable else None)
            self.leaves.append(leaf if differentiable else None)
            self.views.append(layout.ours(leaf, arg.shape))
            self.bases.append(base)
            pos = np.arange(start, start + base.size, dtype=np.int64).reshape(base.shape)
            self.positions.append(layout.ref(pos, arg.shape))
            start += base.size
        self.total = start
        self.rng = rng

    def to_base(self, i: int, grad_view: np.ndarray) -> np.ndarray:
        """Add a gradient with respect to view i back onto its base (the adjoint of the layout)."""
        flat = np.bincount(self.positions[i].ravel(), weights=grad_view.ravel(), minlength=self.total)
        start = int(self.positions[i].min()) if self.positions[i].size else 0
        base = self.bases[i]
        lo = 1 + sum(b.size for b in self.bases[:i])
        assert not self.positions[i].size or start >= lo
        return flat[lo:lo + base.size].reshape(base.shape)


def _ours(stage, op, inputs: Inputs, params: dict, dtype: str):
    T = stage.module.Tensor
    out = op.call(T, *inputs.views, **params)
    outs = list(out) if op.kind == "tensors" else [out]
    ws = [inputs.rng.standard_normal(tuple(o.shape)).astype(dtype).astype(np.float64) for o in outs]
    loss = None
    for o, w in zip(outs, ws, strict=True):
        term = (o * T(w, dtype=o.dtype)).sum()
        loss = term if loss is None else loss + term
    loss.backward()
    # a leaf the output does not depend on (copysign's sign source) has no grad: zeros of its dtype
    grads = [None if leaf is None else (leaf.grad.numpy() if leaf.grad is not None
                                        else np.zeros(leaf.shape, leaf.dtype.np)) for leaf in inputs.leaves]
    return grads, ws


def _by_index(op, inputs: Inputs, params: dict, ws: list[np.ndarray]) -> list[np.ndarray | None]:
    moved = op.ref(*inputs.positions, **params)
    moved = list(moved) if op.kind == "tensors" else [moved]
    flat = np.zeros(inputs.total)
    for m, w in zip(moved, ws, strict=True):
        flat += np.bincount(np.asarray(m).ravel(), weights=w.ravel(), minlength=inputs.total)
    out, lo = [], 1
    for leaf, base in zip(inputs.leaves, inputs.bases, strict=True):
        out.append(None if leaf is None else flat[lo:lo + base.size].reshape(base.shape))
        lo += base.size
    return out


def _torch_value(torch, v):
    if isinstance(v, Index):
        return torch.tensor(list(v), dtype=torch.int64)
    if isinstance(v, D):
        return str(v)
    if isinstance(v, tuple):
        return tuple(_torch_value(torch, x) for x in v)
    return v


def _by_torch(op, inputs: Inputs, params: dict, ws: list[np.ndarray]) -> list[np.ndarray | None]:
    torch = pytest.importorskip("torch", reason="the gradient oracle needs torch (pip install -e '.[torch]')")
    leaves = []
    for arg, base, leaf in zip(inputs.args, inputs.bases, inputs.leaves, strict=True):
        view = np.ascontiguousarray(LAYOUTS[arg.layout].ref(base, arg.shape))
        if leaf is None:
            leaves.append(torch.from_numpy(view.copy()))
        else:
            leaves.append(torch.tensor(view.astype(np.float64), requires_grad=True))
    ref = torch_ref(op)
    out = ref(torch, *leaves, **{k: _torch_value(torch, v) for k, v in params.items()})
    if isinstance(out, torch.Tensor) and out.dtype != torch.float64:
        out = out.double()
    outs = list(out) if op.kind == "tensors" else [out]
    loss = sum((o * torch.from_numpy(w)).sum() for o, w in zip(outs, ws, strict=True))
    grads = torch.autograd.grad(loss, [t for t, leaf in zip(leaves, inputs.leaves, strict=True) if leaf is not None],
                                allow_unused=True)
    it = iter(grads)
    out = []
    for i, leaf in enumerate(inputs.leaves):
        if leaf is None:
            out.append(None)
            continue
        g = next(it)
        g = np.zeros(inputs.args[i].shape) if g is None else g.numpy()
        out.append(inputs.to_base(i, g))
    return out


def _compare(got, expected, dtype: str, op) -> None:
    floor, forward = tolerance(ELEMENTWISE, dtype), tolerance(op.tol, dtype)
    rtol, atol = max(floor[0], forward[0]), max(floor[1], forward[1])
    if dtype in HALVES:  # a backward runs about twice the forward's ops, each rounding in the half type
        rtol, atol = 2 * rtol, 2 * atol
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        if e is None:
            continue
        expect(g.shape == e.shape, f"grad {i}: shape {g.shape}, expected {e.shape}")
        expect(g.dtype == np.dtype(dtype), f"grad {i}: dtype {g.dtype}, expected {dtype}")
        np.testing.assert_allclose(g.astype(np.float64), e, rtol=rtol, atol=atol, err_msg=f"grad of input {i}")


@pytest.mark.needs("backward")
@pytest.mark.parametrize("op, dtype, case", GRAD_CASES)
def test_grad(stage, op, dtype, case):
    _check_grad(stage, op, dtype, case)


@pytest.mark.needs("backward")
@pytest.mark.parametrize("op, dtype, case", HALF_GRAD_CASES)
def test_half_grad(stage, op, dtype, case):
    new_dtypes_here(stage)
    _check_grad(stage, op, dtype, case)


def _check_grad(stage, op, dtype, case):
    stage.module.Tensor.backward  # noqa: B018  (a stage without autograd fails here, before any work)
    inputs = Inputs(stage, op, dtype, case)
    got, ws = _ours(stage, op, inputs, {k: resolve(v, stage, ours=True) for k, v in case.params.items()}, dtype)
    if grad_ref(op) == "index":
        expected = _by_index(op, inputs, {k: resolve(v, stage, ours=False) for k, v in case.params.items()}, ws)
    else:
        expected = _by_torch(op, inputs, case.params, ws)
    _compare(got, expected, dtype, op)


# ---- one tensor reaching an op twice ----

_BINARY = {"add": ANY, "sub": ANY, "mul": ANY, "div": NONZERO, "pow": POSITIVE, "maximum": ANY, "minimum": ANY,
           "matmul": ANY}
_UNARY = {"exp": ANY, "log": POSITIVE, "sqrt": POSITIVE, "tanh": ANY, "sigmoid": ANY, "gelu": ANY, "abs": ANY,
          "square": ANY, "reciprocal": NONZERO}
_OPS = {op.name: op for op in CATALOGUE}
TWICE = [pytest.param(_OPS[name], dtype, "binary", id=f"{name}(x,x)-{dtype}") for name in _BINARY for dtype in FLOATS]
TWICE += [pytest.param(_OPS[name], dtype, "unary", id=f"{name}(x)+{name}(x/2)-{dtype}") for name in _UNARY
          for dtype in FLOATS]


@pytest.mark.needs("backward")
@pytest.mark.parametrize("op, dtype, how", TWICE)
def test_input_used_twice(stage, op, dtype, how):
    stage.module.Tensor.backward  # noqa: B018
    domain = {**_BINARY, **_UNARY}[op.name]
    c = case(Arg((4, 4), "T", domain=domain))
    inputs = Inputs(stage, op, dtype, c)
    T = stage.module.Tensor
    x = inputs.views[0]
    out = op.call(T, x, x) if how == "binary" else op.call(T, x) + op.call(T, x * 0.5)
    w = inputs.rng.standard_normal(tuple(out.shape)).astype(dtype).astype(np.float64)
    (out * T(w, dtype=out.dtype)).sum().backward()
    torch = pytest.importorskip("torch", reason="the gradient oracle needs torch (pip install -e '.[torch]')")
    xt = torch.tensor(np.ascontiguousarray(LAYOUTS["T"].ref(inputs.bases[0], (4, 4))).astype(np.float64),
                      requires_grad=True)
    ref = torch_ref(op)
    out_t = ref(torch, xt, xt) if how == "binary" else ref(torch, xt) + ref(torch, xt * 0.5)
    (out_t * torch.from_numpy(w)).sum().backward()
    _compare([inputs.leaves[0].grad.numpy()], [inputs.to_base(0, xt.grad.numpy())], dtype, op)


def test_grad_coverage():
    """Every op that returns floats from float inputs has a gradient check or a stated reason."""
    forward_only = {"creation", "properties", "autograd"}
    unchecked = [op.name for op in CATALOGUE
                 if op.section not in forward_only and op.kind in ("tensor", "tensors")
                 and any(d in FLOATS for d in op.dtypes) and grad_ref(op) is None and op.name not in NO_GRADIENT
                 and op.out(FLOATS[0], **_params_numpy(op.cases(FLOATS[0])[0].params if op.cases(FLOATS[0]) else {}))
                 in FLOATS]
    assert unchecked == [], unchecked
