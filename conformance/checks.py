"""Running one catalogue case on one stage and comparing it with numpy.

`run_case` builds the inputs (seeded per test id, so a failure reproduces alone), calls our op and
the numpy reference, and checks the result's shape, dtype and values against the contract. The
checks raise through `expect`, not `assert`: the suite also runs under `python -O` (which drops
asserts), to prove that no stage does its work inside one.
"""

from __future__ import annotations

import zlib
from collections import Counter
from typing import Any

import numpy as np

from .cases import HALVES, LAYOUTS, SMALL_INTS, Case, D, Device, Index, expect, is_float, np_dtype, promote
from .catalogue import EXACT, Op, Tol
from .stages import Stage

# Examples run per hypothesis test, printed by conftest at the end of the session.
EXAMPLES: Counter[str] = Counter()


def seed(*parts: Any) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode())


def resolve(value: Any, stage: Stage, ours: bool) -> Any:
    """Turn the markers in a case's params into our objects (ours=True) or numpy's."""
    if isinstance(value, D):
        return getattr(stage.module.dtypes, str(value)) if ours else str(value)
    if isinstance(value, Device):
        return stage.devices[0]
    if isinstance(value, Index):
        arr = np.array(list(value), dtype=np.int64)
        return stage.module.Tensor(arr) if ours else arr
    if isinstance(value, tuple):
        return tuple(resolve(v, stage, ours) for v in value)
    if isinstance(value, list):
        return [resolve(v, stage, ours) for v in value]
    return value


def make_inputs(stage: Stage, op: Op, dtype: str, case: Case) -> tuple[list[Any], list[np.ndarray]]:
    """Each Arg as our Tensor (a view in its layout) and as the matching numpy array."""
    rng = np.random.default_rng(seed(op.name, dtype, case.id))
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    ours, refs = [], []
    for arg in case.args:
        dt = arg.dtype or dtype
        layout = LAYOUTS[arg.layout]
        base = (arg.domain or op.domain)(rng, layout.base(arg.shape), dt)
        t = T(base, dtype=getattr(dtypes, dt))
        ours.append(layout.ours(t, arg.shape))
        refs.append(layout.ref(base, arg.shape))
    return ours, refs


def compute_dtype(dtype: str, out: str | None) -> str:
    """Floats compute in float64; ints in the result's int dtype (sum(int32) in int64); ops
    that return bool or indices compute in the input's own dtype."""
    if is_float(dtype) or (out is not None and is_float(out)):
        return "float64"
    if out in (None, "bool"):
        return dtype
    if dtype in SMALL_INTS:  # they compute in the result's dtype, wrapping where it is theirs
        return out
    return promote(dtype, out)


def reference(op: Op, dtype: str, case: Case, arrays: list[np.ndarray], params: dict, out: str | None) -> Any:
    if op.compute == "auto":
        cdt = compute_dtype(dtype, out)
        arrays = [a if arg.dtype else a.astype(cdt) for a, arg in zip(arrays, case.args, strict=True)]
    with np.errstate(all="ignore"):
        return op.ref(*arrays, **params)


UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8}


def tolerance(tol: Tol, dtype: str) -> tuple[float, float]:
    if dtype in UNIT_ROUNDOFF:
        return tol.half[0] * UNIT_ROUNDOFF[dtype], tol.half[1] * UNIT_ROUNDOFF[dtype]
    return tol.float32 if dtype == "float32" else tol.float64


def assert_tensor(got: Any, expected: Any, out: str, tol: Tol, what: str = "result") -> None:
    """`got` is our Tensor: same shape, the contract's dtype, and values within tolerance."""
    expect(hasattr(got, "numpy"), f"{what}: expected a Tensor, got {type(got).__name__}")
    with np.errstate(over="ignore"):  # float64 answers beyond float32's range become inf, as ours do
        expected = np.asarray(expected).astype(np_dtype(out))
    expect(tuple(got.shape) == expected.shape, f"{what}: shape {tuple(got.shape)}, expected {expected.shape}")
    expect(got.dtype.name == out, f"{what}: dtype {got.dtype.name}, expected {out}")
    assert_array(got.numpy(), expected, out, tol, what)


def assert_array(got: np.ndarray, expected: np.ndarray, out: str, tol: Tol, what: str = "result") -> None:
    expect(isinstance(got, np.ndarray), f"{what}: expected a numpy array, got {type(got).__name__}")
    expect(got.dtype == np_dtype(out), f"{what}: numpy dtype {got.dtype}, expected {out}")
    expect(got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}")
    rtol, atol = tolerance(tol, out)
    if out in HALVES:  # compared as the float64 values they hold
        got, expected = got.astype(np.float64), expected.astype(np.float64)
    if is_float(out) and tol is not EXACT:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, expected, err_msg=what, strict=True)


def assert_value(got: Any, expected: Any) -> None:
    """Python values: equal, and of the same types all the way down (1 is not True, 1.0 is not 1)."""
    expect(got == expected, f"got {got!r}, expected {expected!r}")
    expect(_types(got) == _types(expected), f"types {_types(got)}, expected {_types(expected)}")


def _types(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return type(v).__name__, [_types(x) for x in v]
    return type(v).__name__


def run_case(stage: Stage, op: Op, dtype: str, case: Case) -> None:
    T = stage.module.Tensor
    tensors, arrays = make_inputs(stage, op, dtype, case)
    ours = {k: resolve(v, stage, ours=True) for k, v in case.params.items()}
    refs = {k: resolve(v, stage, ours=False) for k, v in case.params.items()}
    out = op.out(dtype, **refs)
    got = op.call(T, *tensors, **ours)
    if op.kind == "random":
        if hasattr(got, "numpy"):
            if "shape" in refs:
                expect(tuple(got.shape) == tuple(refs["shape"]), (tuple(got.shape), refs["shape"]))
            if out is not None:
                expect(got.dtype.name == out, (got.dtype.name, out))
            got = got.numpy()
            if out in HALVES:  # numpy would sum the half types in their own precision
                got = got.astype(np.float64)
        op.check(got, **refs)
        return
    expected = reference(op, dtype, case, arrays, refs, out)
    if op.kind == "tensor":
        assert_tensor(got, expected, out, op.tol)
    elif op.kind == "meta":
        expect(tuple(got.shape) == np.shape(expected) and got.dtype.name == out,
               f"shape {tuple(got.shape)} and dtype {got.dtype.name}, expected {np.shape(expected)} and {out}")
    elif op.kind == "tensors":
        expect(len(got) == len(expected), f"{len(got)} pieces, expected {len(expected)}")
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            assert_tensor(g, e, out, op.tol, what=f"piece {i}")
    elif op.kind == "array":
        assert_array(got, np.asarray(expected), out, op.tol)
    else:
        assert_value(got, expected)
