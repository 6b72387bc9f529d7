"""The catalogue in the half types: every op that runs in float32 runs its contiguous cases in
float16 and bfloat16, against numpy's float64 answer on the same (half-rounded) inputs, within the
op's half tolerance (catalogue.Tol: counted in the type's unit roundoff).

View cases are left out: a view changes which elements a kernel reads, not how it computes them,
and test_forward runs every view in float32. Gradients in the half types: test_grad.py's HALF_GRAD_CASES.
"""

from __future__ import annotations

import pytest

from conformance.cases import HALVES, new_dtypes_here, sample_marks
from conformance.catalogue import CATALOGUE
from conformance.checks import run_case

# Ops with no half-type form, and why.
NO_HALF = {
    "solve": "a linear solve in 8 or 11 bits of mantissa is not useful; torch's CPU solve refuses half types",
}



def _runs_in(case, dtype: str, op) -> bool:
    """A case without a view; a random op's only where it names the dtype (its other cases draw float32)."""
    return all(a.layout == "C" for a in case.args) and (op.kind != "random" or "dtype" in case.params)


def _cases() -> list:
    out = []
    for op in CATALOGUE:
        if "float32" not in op.dtypes or op.name in NO_HALF:
            continue
        for dtype in HALVES:
            runs = [c for c in op.cases(dtype) if _runs_in(c, dtype, op)]
            out += [pytest.param(op, dtype, case, id=f"{op.name}-{dtype}-{case.id}",
                                 marks=sample_marks(i, len(runs), dtype)) for i, case in enumerate(runs)]
    return out


CASES = _cases()


@pytest.mark.parametrize("op, dtype, case", CASES)
def test_half(stage, op, dtype, case):
    new_dtypes_here(stage)
    run_case(stage, op, dtype, case)
