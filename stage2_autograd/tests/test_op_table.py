"""The one op table: the C kernels' dispatch codes come from ops.py, the CUDA generator's tables
name only ops of it, each (op, dtype) pair has a CUDA kernel exactly when the C kernel accepts it,
and every op a tensor can be recorded by has a derivative rule (record refuses one without)."""

import numpy as np
import pytest

from .. import Tensor, dtypes
from ..autograd import RULES, VARIADIC, record
from ..ckernels import int64s, lib
from ..cuda import elementwise_src as gen
from ..ops import ARG, BINARY, COMPARE, REDUCE, UNARY, Ops


def test_the_c_enum_is_the_op_table():
    for op in Ops:
        assert getattr(lib, f"OP_{op.name}") == op.value


def test_the_cuda_tables_name_ops_of_the_table():
    names = {op.name.lower(): op for op in Ops}
    assert {names[o] for o in gen.KIND_OPS["unary"]} == set(UNARY)
    assert {names[o] for o in gen.KIND_OPS["binary"]} == set(BINARY)
    assert {names[o] for o in gen.KIND_OPS["reduce"]} == set(REDUCE)
    assert {names[o] for o in gen.KIND_OPS["arg_reduce"]} == set(ARG)
    assert {names[o] for o in gen.COMPARE} == set(COMPARE)


# Every dtype has cuda kernels; the half types and the small ints as storage (cast, copy, where, gather, fill),
# as in the C kernels.
CUDA_DTYPES = [d for d in dtypes.all if d.name in gen.CTYPES]


def c_accepts(kind: str, op: Ops, dtype) -> bool:
    """Whether the C kernel runs (op, dtype): status 0 on a one-element call, -1 where it has no case."""
    a = Tensor(np.ones(1, dtype.np))
    out = a._alloc((1,), dtypes.bool if op in COMPARE else dtype)
    shape, strides = int64s([1]), int64s([1])
    if kind == "unary":
        return lib.unary(op, dtype.code, out._ptr(), a._ptr(), 1, shape, strides) == 0
    return lib.binary(op, dtype.code, out._ptr(), a._ptr(), a._ptr(), 1, shape, strides, strides) == 0


@pytest.mark.parametrize("kind,ops", [("unary", sorted(UNARY)), ("binary", sorted(BINARY))])
def test_c_and_cuda_have_kernels_for_the_same_pairs(kind, ops):
    table = gen.UNARY if kind == "unary" else gen.BINARY
    differ = [(op.name, d.name) for op in ops for d in CUDA_DTYPES
              if c_accepts(kind, op, d) != (op.name.lower() in table.get(d.name, {}))]
    assert differ == [], "C and CUDA disagree on these (op, dtype) pairs"


def test_c_and_cuda_reduce_the_same_dtypes():
    a = Tensor(np.ones(1, np.float32))
    for op in sorted(REDUCE):
        for d in CUDA_DTYPES:
            x, out = a.cast(d), a.cast(d)._alloc((1,), d)
            ok = lib.reduce(op, d.code, out._ptr(), x._ptr(), 1, 1, 1, 1, 1, 1) == 0
            computes = d.name in gen.CORE or d.name == "uint64"
            cuda = computes and (d.name != "bool" or op.name.lower() in gen.BOOL_REDUCE)
            assert ok == cuda, (op.name, d.name)


def test_c_and_cuda_cast_the_same_pairs():
    cuda = {(frm, to) for kind, _, frm, to, _ in gen.catalogue((1,)) if kind == "cast"}
    differ = []
    for frm in dtypes.all:
        for to in dtypes.all:
            if frm is to:
                continue
            a = Tensor(np.zeros(1, frm.np))
            out = a._alloc((1,), to)
            ok = lib.cast(to.code, frm.code, out._ptr(), a._ptr(), 1, int64s([1]), int64s([1])) == 0
            if ok != ((frm.name, to.name) in cuda):
                differ.append((frm.name, to.name))
    assert differ == [], "C and CUDA disagree on these casts (from, to)"


def test_every_recordable_op_has_a_rule():
    # The ops a float result can be recorded by: everything but the int/bool-only kernels and argmax/argmin.
    never = {Ops.NOT, Ops.AND, Ops.OR, Ops.XOR, Ops.ARGMAX, Ops.ARGMIN, Ops.GELU_GRAD} | COMPARE
    missing = [op.name for op in Ops if op not in never and op not in RULES and op not in VARIADIC]
    assert missing == []


def test_record_refuses_an_op_without_a_rule():
    x = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="has no derivative rule"):
        record(x * 1, Ops.ARGMAX, (x,))
