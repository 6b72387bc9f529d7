"""Every float unary op and activation at extreme inputs: values and gradients against torch.

The catalogue's random cases stay inside each op's comfortable domain (|x| <= 4 or so); training
does not. One pre-activation of -100 must not turn a model into NaN: a derivative written by the
chain rule through 1 / (1 + e^-x) is inf / inf there, and a branch that `where` discards still
sends 0 * inf back through the ops that computed it. So each op is evaluated on one tensor of the
points below (the tails, where functions saturate, overflow or underflow, and tiny values, where
e^x - 1 and friends round), in float32 and float64:

- values: where torch's float64 answer is finite in the dtype, ours is finite and close to it;
- gradients (stage2+): wherever torch's gradient, computed in the test dtype, is finite, ours is
  finite, and close to torch's float64 gradient.

Points outside an op's domain (torch answers NaN: log of a negative) are left out of that op, and
0 is left out of the gradients: relu, abs, clip and the other kinks take a value there by
convention (torch's relu'(0) = 0, our maximum splits ties), which test_grad.py's cases avoid too.
Tolerances: the op's own forward tolerance with ELEMENTWISE as the floor, as test_grad.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from conformance.cases import FLOATS
from conformance.catalogue import CATALOGUE, ELEMENTWISE, TORCH

TAILS = [1e4, 200.0, 100.0, 89.0, 50.0, 20.0]
TINY = [1e-30, 1e-20, 1e-9, 1e-6]
# Floor division and remainder are steps: at a tiny divisor 7 // x is a huge number that rounds by
# whole units, and its gradient is a convention; the catalogue's cases check them.
STEPS = ("floordiv", "rfloordiv", "mod", "rmod")
POINTS = np.array(sorted({s * v for v in TAILS + TINY for s in (1.0, -1.0)} | {0.0}))


def _unary_float_ops():
    out = []
    for op in CATALOGUE:
        if op.section != "elementwise" or op.kind != "tensor" or op.name not in TORCH:
            continue
        first = op.cases(FLOATS[0])
        if not first or len(first[0].args) != 1 or first[0].args[0].dtype is not None:
            continue
        params = first[0].params
        if op.name.startswith(STEPS):
            continue
        for dtype in (d for d in op.dtypes if d in FLOATS):
            if op.out(dtype, **params) not in FLOATS:
                continue
            out.append(pytest.param(op, dtype, params, id=f"{op.name}-{dtype}"))
    return out


CASES = _unary_float_ops()


def _torch(op, points: np.ndarray, dtype: str, params: dict):
    """torch's values and gradients at the points, computed in `dtype`."""
    torch = pytest.importorskip("torch", reason="the oracle needs torch (pip install -e '.[torch]')")
    x = torch.tensor(points.astype(dtype), requires_grad=True)
    y = TORCH[op.name](torch, x, **params)
    (g,) = torch.autograd.grad(y.sum(), [x], allow_unused=True)
    g = torch.zeros_like(x) if g is None else g
    return y.detach().double().numpy(), g.double().numpy()


def _inside(op, dtype: str, params: dict) -> np.ndarray:
    """The points inside the op's domain: torch's float64 value there is not NaN."""
    values, _ = _torch(op, POINTS.astype(dtype).astype(np.float64), "float64", params)
    return POINTS[~np.isnan(values)].astype(dtype)


def _tolerance(op, dtype: str) -> tuple[float, float]:
    floor, own = getattr(ELEMENTWISE, dtype), getattr(op.tol, dtype)
    return max(floor[0], own[0]), max(floor[1], own[1])


def _compare(what: str, points: np.ndarray, got: np.ndarray, finite_ref: np.ndarray, exact: np.ndarray,
             dtype: str, op) -> None:
    rtol, atol = _tolerance(op, dtype)
    bad = []
    for x, g, f, e in zip(points, got, finite_ref, exact, strict=True):
        if not np.isfinite(f):
            continue  # torch itself overflows or is undefined there: a convention, not conformance
        if not np.isfinite(g):
            bad.append(f"x={x!r}: {g} where torch gives {f}")
        elif np.isfinite(e) and abs(g - e) > atol + rtol * abs(e):
            bad.append(f"x={x!r}: {g}, torch {e}")
    if bad:
        pytest.fail(f"{op.name} {dtype} {what} at extreme inputs:\n  " + "\n  ".join(bad))


@pytest.mark.parametrize("op, dtype, params", CASES)
def test_extreme_values(stage, op, dtype, params):
    points = _inside(op, dtype, params)
    T = stage.module.Tensor
    got = op.call(T, T(points, dtype=getattr(stage.module.dtypes, dtype)), **params).numpy().astype(np.float64)
    ref32, _ = _torch(op, points, dtype, params)
    ref64, _ = _torch(op, points.astype(np.float64), "float64", params)
    ref64 = ref64.astype(dtype).astype(np.float64)  # the answer correctly rounded to the dtype
    _compare("values", points, got, np.where(np.isfinite(ref64), ref32, ref64), ref64, dtype, op)


@pytest.mark.needs("backward")
@pytest.mark.parametrize("op, dtype, params", CASES)
def test_extreme_gradients(stage, op, dtype, params):
    stage.module.Tensor.backward  # noqa: B018  (a stage without autograd fails here, before any work)
    points = _inside(op, dtype, params)
    points = points[points != 0]
    T = stage.module.Tensor
    x = T(points, dtype=getattr(stage.module.dtypes, dtype), requires_grad=True)
    op.call(T, x, **params).sum().backward()
    got = np.zeros(points.shape) if x.grad is None else x.grad.numpy().astype(np.float64)
    _, ref32 = _torch(op, points, dtype, params)
    _, ref64 = _torch(op, points.astype(np.float64), "float64", params)
    _compare("gradients", points, got, ref32, ref64, dtype, op)


@pytest.mark.parametrize("op, dtype, params", CASES)
def test_nan_passes_where_torch_passes_it(stage, op, dtype, params):
    """A NaN input gives NaN exactly where torch's op gives NaN: a select written as `x > 0 ? x : 0`
    (relu once) turns NaN into a number, silently; and where torch gives a number (sign(NaN) is 0,
    numpy's NaN), so do we."""
    torch = pytest.importorskip("torch", reason="the oracle needs torch (pip install -e '.[torch]')")
    points = np.array([np.nan, 1.0, -1.0], dtype)
    want = np.isnan(TORCH[op.name](torch, torch.tensor(points), **params).double().numpy())
    T = stage.module.Tensor
    got = np.isnan(op.call(T, T(points, dtype=getattr(stage.module.dtypes, dtype)), **params).numpy())
    assert list(got) == list(want), f"{op.name} {dtype} at (NaN, 1, -1): NaN at {list(got)}, torch {list(want)}"
