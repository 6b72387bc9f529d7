"""Forward conformance against numpy, driven by the op catalogue.

- test_forward: every op x every dtype it supports x its cases (0-d, size-0 and size-1 dims,
  ordinary shapes, broadcasting pairs, and transposed / strided / negative-stride / expanded
  views: those in float32, in every dtype under --every-dtype-view), checking the result's
  shape, its dtype (from docs/api-contract.md, not numpy's rules)
  and its values within the op's stated tolerance.
- test_promotion: binary ops on every pair of input dtypes follow the contract's lattice.
- test_capability_table: every op the capability table names is one the catalogue tests.

Whether movement ops share storage is not checked here: the API exposes no storage and no
in-place write, so sharing is unobservable through it (each stage's own tests look inside).
"""

from __future__ import annotations

import numpy as np
import pytest

from conformance.cases import ANY, DTYPES, NONZERO, is_float, promote, to_float, view_marks
from conformance.catalogue import CATALOGUE, COMPOSITE, ELEMENTWISE
from conformance.checks import assert_tensor, run_case, seed
from conformance.stages import CAPABILITIES, STAGES

CASES = [pytest.param(op, dtype, case, id=f"{op.name}-{dtype}-{case.id}", marks=view_marks(case, dtype))
         for op in CATALOGUE for dtype in op.dtypes for case in op.cases(dtype)]


@pytest.mark.parametrize("op, dtype, case", CASES)
def test_forward(stage, op, dtype, case):
    run_case(stage, op, dtype, case)


# ---- promotion: (3, 4) of one dtype with (4,) of another ----

OPS = {op.name: op for op in CATALOGUE}
PROMOTION = {  # op -> (the result dtype rule, dtypes it accepts, right-hand domain)
    "add": (promote, DTYPES, ANY),
    "sub": (promote, DTYPES[1:], ANY),
    "mul": (promote, DTYPES, ANY),
    "div": (lambda *d: to_float(promote(*d)), DTYPES[1:], NONZERO),
    "maximum": (promote, DTYPES, ANY),
    "lt": (lambda *d: "bool", DTYPES, ANY),
    "eq": (lambda *d: "bool", DTYPES, ANY),
}
PAIRS = [pytest.param(OPS[name], a, b, id=f"{name}-{a}-{b}")
         for name, (_, dts, _) in PROMOTION.items() for a in dts for b in dts if a != b]


@pytest.mark.parametrize("op, left, right", PAIRS)
def test_promotion(stage, op, left, right):
    rule, _, right_domain = PROMOTION[op.name]
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    rng = np.random.default_rng(seed(op.name, left, right))
    a, b = ANY(rng, (3, 4), left), right_domain(rng, (4,), right)
    out = rule(left, right)
    compute = "float64" if is_float(out) or is_float(promote(left, right)) else promote(left, right)
    expected = op.ref(a.astype(compute), b.astype(compute)).astype(out)
    got = op.call(T, T(a, dtype=getattr(dtypes, left)), T(b, dtype=getattr(dtypes, right)))
    assert_tensor(got, expected, out, COMPOSITE if op.name == "div" else ELEMENTWISE)


def test_capability_table():
    """A misspelt key in stages.py would xfail nothing and hide nothing: refuse it."""
    known = {op.needs for op in CATALOGUE} | set(CAPABILITIES)
    for stage in STAGES:
        assert set(stage.missing) <= known, (stage.name, sorted(set(stage.missing) - known))


def test_surface_scalar_operands_beside_specials(stage):
    """A Python scalar operand of copysign, logaddexp and isclose is a constant, whatever self holds."""
    T = stage.module.Tensor
    a = np.array([np.inf, -np.inf, np.nan, 1.0, -0.0], dtype=np.float32)
    x = T(a)
    np.testing.assert_array_equal(x.copysign(-1.0).numpy(), np.copysign(a, np.float32(-1.0)))
    np.testing.assert_array_equal(x.logaddexp(0.0).numpy(), np.logaddexp(a, np.float32(0.0)))
    np.testing.assert_array_equal(x.isclose(1.0).numpy(), np.isclose(a, 1.0))


def test_c_dtype_names(stage):
    """dtypes.int, long, float and double are C's sizes, as in tinygrad and torch (torch.int is int32), and a
    dtype named by string means the same."""
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    names = {"int": dtypes.int32, "long": dtypes.int64, "float": dtypes.float32, "double": dtypes.float64}
    for name, dtype in names.items():
        assert getattr(dtypes, name) is dtype
        assert T([1, 2], dtype=name).dtype is dtype
