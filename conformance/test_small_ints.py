"""The small and unsigned ints (int8, int16, uint8, uint16, uint32, uint64) through the ops where they
make sense: arithmetic that wraps, shifts, comparisons, bitwise ops, casts, indexing, reductions
and movement, on contiguous cases, against numpy computing in the same type (numpy wraps as we do).

Left out: ops whose result is a float (exp, /, mean: the cast to float32 is covered by `cast`), and
the views (test_forward runs them in float32; a view reads elements, whatever their type).
"""

from __future__ import annotations

import pytest

from conformance.cases import SMALL_INTS, new_dtypes_here, sample_marks
from conformance.catalogue import CATALOGUE
from conformance.checks import run_case

OPS = ("add", "sub", "mul", "add_scalar", "radd", "sub_scalar", "rsub", "mul_scalar", "rmul", "neg", "abs",
       "maximum", "minimum", "lt", "le", "gt", "ge", "eq", "ne", "lt_scalar", "eq_scalar", "gt_rscalar", "where",
       "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "lshift", "rshift", "floordiv", "mod",
       "sum", "prod", "max", "min", "argmax", "argmin", "cumsum", "__matmul__",
       "cast", "getitem", "gather", "cat", "reshape", "permute", "flip", "pad", "full", "zeros")
# torch has no integer division for uint64 and neither do we (docs/api-contract.md)
NOT_FOR = {"uint64": ("floordiv", "mod", "rshift")}



def _runs(case, dtype: str) -> bool:
    """A case without a view. Not a negative Python scalar beside an unsigned type: numpy 2 refuses
    to combine them, so it cannot be the reference (torch wraps the scalar, and so do we)."""
    params = case.params.values()
    negative = any(isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0 for v in params)
    return all(a.layout == "C" for a in case.args) and not (negative and dtype.startswith("uint"))


def _cases() -> list:
    """Every case in every small int it runs in; the default sample turns through those dtypes op by op."""
    out = []
    for position, op in enumerate(op for op in CATALOGUE if op.name in OPS):
        dtypes = [dtype for dtype in SMALL_INTS if op.name not in NOT_FOR.get(dtype, ())]
        turn = dtypes[position % len(dtypes)]
        for dtype in dtypes:
            runs = [c for c in op.cases(dtype) if _runs(c, dtype)]
            out += [pytest.param(op, dtype, case, id=f"{op.name}-{dtype}-{case.id}",
                                 marks=sample_marks(i, len(runs), dtype, turn)) for i, case in enumerate(runs)]
    return out


CASES = _cases()


def test_every_named_op_is_in_the_catalogue():
    missing = set(OPS) - {op.name for op in CATALOGUE}
    if missing:
        raise AssertionError(f"not in the catalogue: {sorted(missing)}")


@pytest.mark.parametrize("op, dtype, case", CASES)
def test_small_int(stage, op, dtype, case):
    new_dtypes_here(stage)
    run_case(stage, op, dtype, case)
