"""The error contract (DESIGN rule 4, docs/api-contract.md "Errors").

Each class of bad input raises the named exception, and the message names the op and the
shapes (or the dtype / device) involved:
- ValueError: shapes and values (broadcasting, matmul inner dims, reshape size and two -1s,
  cat/stack of mismatched shapes, expand, pad, shrink, split, conv2d channels, a singular solve).
  Each is also a RuntimeError (the stage's ArgumentError is both), the type torch and tinygrad raise;
- IndexError: out-of-range int indices, axes and integer-index-tensor values, a float tensor used
  as an index, cat of 0-d tensors;
- TypeError: unsupported dtypes (numpy complex / datetime input, casts to them), int64 with uint64
  (no least common dtype), a bitcast between sizes, `-` on bool, bitwise ops on floats;
- RuntimeError: a device the stage does not have.
test_bad_inputs_never_crash feeds all of them, and more, to a child interpreter and checks it
exits normally (a segfault in a kernel would kill it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest


def shape(*dims: int) -> str:
    """A regex for a shape as the message may print it: (2, 3) or [2, 3]."""
    t = tuple(dims)
    return re.escape(str(t)) + "|" + re.escape(str(list(t)))


@dataclass(frozen=True)
class Bad:
    id: str
    fn: Callable  # fn(T, stage) must raise
    exc: type[Exception]
    op: str  # regex the message must match (case-insensitive): the op's name
    detail: str  # regex the message must also match: a shape, a dtype or a device
    needs: tuple[str, ...] = ()


def _ones(T, *s):
    return T.ones(*s)


def _index(T, values):
    return T(np.array(values, dtype=np.int64))


def _other_device(stage) -> str:
    return "TPU" if "CUDA" in stage.devices else "cuda"


ERRORS = [
    # ValueError: shapes and values
    Bad("add-broadcast", lambda T, s: _ones(T, 2, 3) + _ones(T, 4), ValueError, r"add|\+|broadcast",
        shape(2, 3)),
    Bad("mul-broadcast", lambda T, s: _ones(T, 3, 4) * _ones(T, 3), ValueError, r"mul|\*|broadcast",
        shape(3, 4)),
    Bad("where-broadcast", lambda T, s: (_ones(T, 2, 3) > 0).where(_ones(T, 3, 2), 0.0), ValueError,
        r"where|broadcast", shape(3, 2)),
    Bad("copysign-broadcast", lambda T, s: _ones(T, 2, 3).copysign(_ones(T, 4)), ValueError, "copysign",
        shape(2, 3)),
    Bad("logaddexp-broadcast", lambda T, s: _ones(T, 2, 3).logaddexp(_ones(T, 3, 2)), ValueError, "logaddexp",
        shape(3, 2)),
    Bad("isclose-broadcast", lambda T, s: _ones(T, 5).isclose(_ones(T, 4)), ValueError, "isclose", shape(5)),
    Bad("lerp-broadcast", lambda T, s: _ones(T, 2, 3).lerp(_ones(T, 3), _ones(T, 4)), ValueError, "lerp",
        shape(4)),
    Bad("masked_fill-broadcast", lambda T, s: _ones(T, 2, 3).masked_fill(T([True, False]), 0.0), ValueError,
        "masked_fill", shape(2, 3)),
    Bad("gather-shape", lambda T, s: _ones(T, 2, 3).gather(0, _index(T, [[0, 1, 0, 1]])), ValueError, "gather",
        shape(2, 3)),
    Bad("roll-arity", lambda T, s: _ones(T, 2, 3).roll((1, 2), (0,)), ValueError, "roll", shape(2, 3)),
    Bad("diag-3d", lambda T, s: _ones(T, 2, 2, 2).diag(), ValueError, "diag", shape(2, 2, 2)),
    Bad("diagonal-same-dim", lambda T, s: _ones(T, 2, 3).diagonal(dim1=1, dim2=-1), ValueError, "diagonal",
        shape(2, 3)),
    Bad("meshgrid-2d", lambda T, s: _ones(T, 3).meshgrid(_ones(T, 2, 2)), ValueError, "meshgrid", shape(2, 2)),
    Bad("einsum-operands", lambda T, s: T.einsum("ij,jk->ik", _ones(T, 2, 3)), ValueError, "einsum", shape(2, 3)),
    Bad("einsum-trace-sizes", lambda T, s: T.einsum("ii->i", _ones(T, 2, 3)), ValueError, "einsum", "2 and 3"),
    Bad("einsum-ellipsis", lambda T, s: T.einsum("...ijk", _ones(T, 2, 3)), ValueError, "einsum", shape(2, 3)),
    Bad("einsum-sizes", lambda T, s: T.einsum("ij,jk->ik", _ones(T, 2, 3), _ones(T, 4, 2)), ValueError, "einsum",
        r"sizes 3 and 4"),
    Bad("gqa-groups", lambda T, s: _ones(T, 1, 3, 4, 8).scaled_dot_product_attention(
        _ones(T, 1, 2, 4, 8), _ones(T, 1, 2, 4, 8), enable_gqa=True), ValueError, "scaled_dot_product_attention",
        shape(1, 2, 4, 8)),
    Bad("pad-reflect-too-wide", lambda T, s: _ones(T, 2, 3).pad(((0, 0), (3, 0)), mode="reflect"), ValueError, "pad",
        shape(2, 3)),
    Bad("pad-mode", lambda T, s: _ones(T, 2, 3).pad(((0, 0), (1, 0)), mode="mirror"), ValueError, "pad", "mirror"),
    Bad("unfold-size", lambda T, s: _ones(T, 2, 3).unfold(1, 4, 1), ValueError, "unfold", shape(2, 3)),
    Bad("masked_select-broadcast", lambda T, s: _ones(T, 2, 3).masked_select(T([True, False])), ValueError,
        "masked_select", shape(2, 3)),
    Bad("topk-k", lambda T, s: _ones(T, 2, 3).topk(4), ValueError, "topk", shape(2, 3)),
    Bad("matmul-inner", lambda T, s: _ones(T, 2, 3) @ _ones(T, 4, 5), ValueError, "matmul", shape(2, 3)),
    Bad("matmul-batch", lambda T, s: _ones(T, 2, 3, 4).matmul(_ones(T, 3, 4, 5)), ValueError,
        r"matmul|broadcast", shape(2, 3, 4)),
    Bad("matmul-0d", lambda T, s: _ones(T) @ _ones(T, 3), ValueError, "matmul", shape()),
    Bad("reshape-size", lambda T, s: _ones(T, 2, 3).reshape(4, 2), ValueError, "reshape", shape(2, 3)),
    Bad("reshape-two-minus-one", lambda T, s: _ones(T, 2, 3).reshape(-1, -1), ValueError, "reshape",
        shape(-1, -1) + "|" + shape(2, 3)),
    Bad("reshape-minus-one-indivisible", lambda T, s: _ones(T, 2, 3).reshape(4, -1), ValueError, "reshape",
        shape(2, 3)),
    Bad("cat-shapes", lambda T, s: _ones(T, 2, 3).cat(_ones(T, 2, 4), dim=0), ValueError, "cat", shape(2, 4)),
    Bad("cat-ndim", lambda T, s: _ones(T, 2, 3).cat(_ones(T, 3), dim=0), ValueError, "cat", shape(3)),
    Bad("stack-shapes", lambda T, s: _ones(T, 2, 3).stack(_ones(T, 3, 2)), ValueError, "stack", shape(3, 2)),
    Bad("expand", lambda T, s: _ones(T, 2, 3).expand(4, 3), ValueError, "expand", shape(2, 3)),
    Bad("pad-arity", lambda T, s: _ones(T, 2, 3).pad(((1, 1),)), ValueError, "pad", shape(2, 3)),
    Bad("shrink-bounds", lambda T, s: _ones(T, 2, 3).shrink(((0, 5), (0, 3))), ValueError, "shrink",
        shape(2, 3)),
    Bad("split-sizes", lambda T, s: _ones(T, 6).split([2, 2]), ValueError, "split", shape(6)),
    Bad("unflatten-sizes", lambda T, s: _ones(T, 2, 6).unflatten(1, (4, 2)), ValueError, r"unflatten|reshape",
        shape(2, 6)),
    Bad("conv2d-channels", lambda T, s: _ones(T, 1, 3, 5, 5).conv2d(_ones(T, 2, 4, 3, 3)), ValueError,
        "conv2d", shape(1, 3, 5, 5) + "|" + shape(2, 4, 3, 3), needs=("conv2d",)),
    Bad("conv2d-kernel-too-big", lambda T, s: _ones(T, 1, 1, 3, 3).conv2d(_ones(T, 1, 1, 5, 5)), ValueError,
        "conv2d", shape(1, 1, 3, 3), needs=("conv2d",)),
    Bad("max_pool2d-kernel-too-big", lambda T, s: _ones(T, 1, 1, 3, 3).max_pool2d(kernel_size=5), ValueError,
        "max_pool2d", shape(1, 1, 3, 3), needs=("max_pool2d",)),
    Bad("conv2d-stride-zero", lambda T, s: _ones(T, 1, 1, 3, 3).conv2d(_ones(T, 1, 1, 2, 2), stride=0),
        ValueError,
        "conv2d", r"stride", needs=("conv2d",)),
    Bad("conv2d-spatial-dims", lambda T, s: _ones(T, 1, 2, 5).conv2d(_ones(T, 3, 2, 3, 3)), ValueError, "conv2d",
        shape(1, 2, 5)),
    Bad("conv_transpose2d-channels", lambda T, s: _ones(T, 1, 3, 5, 5).conv_transpose2d(_ones(T, 4, 2, 3, 3)),
        ValueError, "conv_transpose2d", shape(1, 3, 5, 5)),
    Bad("conv_transpose2d-output-padding",
        lambda T, s: _ones(T, 1, 2, 5, 5).conv_transpose2d(_ones(T, 2, 2, 3, 3), stride=2, output_padding=2),
        ValueError, "conv_transpose2d", "output_padding"),
    Bad("avg_pool2d-padding-form", lambda T, s: _ones(T, 1, 1, 4, 4).avg_pool2d(2, padding=(1, 1, 1)), ValueError,
        "avg_pool2d", r"padding"),
    Bad("max_unpool2d-output-size", lambda T, s: _ones(T, 1, 1, 2, 2).max_unpool2d(
        _index(T, [[[[0, 1], [2, 3]]]]), output_size=(4, -1)), ValueError, "max_unpool2d", shape(1, 1, 2, 2)),
    Bad("interpolate-mode", lambda T, s: _ones(T, 1, 1, 2, 2).interpolate((3, 3), mode="bicubic"), ValueError,
        "interpolate", "bicubic"),
    Bad("interpolate-size", lambda T, s: _ones(T, 2, 2).interpolate((3, 3, 3)), ValueError, "interpolate",
        shape(2, 2)),
    Bad("scatter-shape", lambda T, s: _ones(T, 2, 3).scatter(1, _index(T, [[0, 1, 1, 0]]), _ones(T, 2, 3)),
        ValueError, "scatter", shape(1, 4)),
    Bad("scatter_reduce-reduce", lambda T, s: _ones(T, 2, 3).scatter_reduce(0, _index(T, [[0]]), _ones(T, 1, 1),
                                                                             "median"), ValueError, "scatter_reduce",
        "median"),
    Bad("floordiv-zero", lambda T, s: _index(T, [4, 2]) // _index(T, [1, 0]), ValueError, "floordiv", shape(2)),
    Bad("rshift-bits", lambda T, s: _index(T, [4, 2]) >> 64, ValueError, "rshift", r"\[0, 63\)"),
    Bad("div-rounding-mode", lambda T, s: _ones(T, 2).div(2, rounding_mode="round"), ValueError, "div", "round"),
    Bad("repeat_interleave-counts", lambda T, s: _ones(T, 3).repeat_interleave(_index(T, [1, 2])), ValueError,
        "repeat_interleave", shape(3)),
    Bad("multinomial-shape", lambda T, s: _ones(T, 2, 3, 4).multinomial(), ValueError, "multinomial", shape(2, 3, 4)),
    Bad("linear-inner", lambda T, s: _ones(T, 2, 3).linear(_ones(T, 4, 5)), ValueError, r"linear|matmul",
        shape(2, 3), needs=("linear",)),
    Bad("solve-singular", lambda T, s: T.zeros(3, 3).solve(_ones(T, 3)), ValueError, "solve|singular",
        r"singular|" + shape(3, 3), needs=("solve",)),
    Bad("solve-not-square", lambda T, s: _ones(T, 2, 3).solve(_ones(T, 2)), ValueError, "solve", shape(2, 3)),
    Bad("max-empty", lambda T, s: T.ones(2, 0).max(axis=1), ValueError, "max", shape(2, 0)),
    Bad("item-numel", lambda T, s: _ones(T, 2).item(), ValueError, "item", shape(2)),
    Bad("ragged-list", lambda T, s: T([[1, 2], [3]]), ValueError, "Tensor",
        r"ragged|rectangular|inhomogeneous"),
    # IndexError: indices and axes
    Bad("int-index", lambda T, s: _ones(T, 3)[3], IndexError, r"getitem|index", shape(3)),
    Bad("int-index-negative", lambda T, s: _ones(T, 3, 4)[-4], IndexError, r"getitem|index", shape(3, 4)),
    Bad("int-index-inner", lambda T, s: _ones(T, 3, 4)[0, 4], IndexError, r"getitem|index", shape(3, 4)),
    Bad("too-many-indices", lambda T, s: _ones(T, 3)[0, 0], IndexError, r"getitem|index", shape(3)),
    Bad("index-tensor", lambda T, s: _ones(T, 3)[_index(T, [0, 3])], IndexError, r"getitem|index|gather",
        shape(3)),
    Bad("index-tensor-negative", lambda T, s: _ones(T, 3, 2)[_index(T, [-4])], IndexError,
        r"getitem|index|gather", shape(3, 2)),
    Bad("index-list", lambda T, s: _ones(T, 3)[[1, 5]], IndexError, r"getitem|index|gather", shape(3)),
    # (a lazy stage checks a loss's labels at the next realize, so these realize the loss)
    Bad("cross_entropy-label", lambda T, s: _ones(T, 3, 2).cross_entropy(_index(T, [0, 5, 1])).realize(), IndexError,
        "cross_entropy", shape(3, 2) + "|" + shape(3) + "|5", needs=("cross_entropy",)),
    Bad("sparse_categorical_crossentropy-label",
        lambda T, s: _ones(T, 3, 2).sparse_categorical_crossentropy(_index(T, [0, -3, 1])).realize(), IndexError,
        "sparse_categorical_crossentropy", shape(3, 2) + "|" + shape(3) + "|-3",
        needs=("sparse_categorical_crossentropy",)),
    Bad("sum-axis", lambda T, s: _ones(T, 2, 3).sum(axis=2), IndexError, "sum", shape(2, 3)),
    Bad("max-axis", lambda T, s: _ones(T, 2, 3).max(axis=-3), IndexError, "max", shape(2, 3)),
    Bad("argmax-axis", lambda T, s: _ones(T, 2, 3).argmax(axis=5), IndexError, "argmax", shape(2, 3)),
    Bad("softmax-axis", lambda T, s: _ones(T, 2, 3).softmax(2), IndexError, "softmax|max|sum", shape(2, 3)),
    Bad("cumsum-axis", lambda T, s: _ones(T, 2, 3).cumsum(2), IndexError, "cumsum", shape(2, 3)),
    Bad("gather-value", lambda T, s: _ones(T, 2, 3).gather(1, _index(T, [[0, 3]])), IndexError, "gather",
        shape(2, 3)),
    Bad("scatter-value", lambda T, s: _ones(T, 2, 3).scatter(0, _index(T, [[0, 2, 1]]), _ones(T, 1, 3)), IndexError,
        "scatter", shape(2, 3)),
    Bad("max_unpool2d-index-value", lambda T, s: _ones(T, 1, 1, 2, 2).max_unpool2d(_index(T, [[[[0, 1], [2, 99]]]])),
        IndexError, "max_unpool2d", r"\[0, 16\)"),
    Bad("getitem-mask-shape", lambda T, s: _ones(T, 2, 3)[T(np.ones(3, bool))], IndexError, "getitem", shape(3)),
    Bad("gather-axis", lambda T, s: _ones(T, 2, 3).gather(2, _index(T, [[0]])), IndexError, "gather", shape(2, 3)),
    Bad("roll-axis", lambda T, s: _ones(T, 2, 3).roll(1, 2), IndexError, "roll", shape(2, 3)),
    Bad("nll_loss-label", lambda T, s: _ones(T, 3, 2).nll_loss(_index(T, [0, 5, 1])).realize(), IndexError, "nll_loss",
        shape(3, 2)),
    Bad("sort-axis", lambda T, s: _ones(T, 2, 3).sort(2), IndexError, "sort", shape(2, 3)),
    Bad("cumprod-axis", lambda T, s: _ones(T, 2, 3).cumprod(2), IndexError, "cumprod", shape(2, 3)),
    Bad("cummax-axis", lambda T, s: _ones(T, 2, 3).cummax(-3), IndexError, "cummax", shape(2, 3)),
    Bad("any-axis", lambda T, s: _ones(T, 2, 3).any(axis=2), IndexError, "any", shape(2, 3)),
    Bad("var_mean-axis", lambda T, s: _ones(T, 2, 3).var_mean(axis=3), IndexError, "var_mean", shape(2, 3)),
    Bad("permute-axis", lambda T, s: _ones(T, 2, 3).permute(0, 2), IndexError, "permute", shape(2, 3)),
    Bad("transpose-axis", lambda T, s: _ones(T, 2, 3).transpose(0, 2), IndexError, r"transpose|permute",
        shape(2, 3)),
    Bad("squeeze-axis", lambda T, s: _ones(T, 1, 3).squeeze(3), IndexError, "squeeze", shape(1, 3)),
    Bad("unsqueeze-axis", lambda T, s: _ones(T, 2, 3).unsqueeze(4), IndexError, "unsqueeze", shape(2, 3)),
    Bad("flip-axis", lambda T, s: _ones(T, 2, 3).flip(2), IndexError, "flip", shape(2, 3)),
    Bad("cat-dim", lambda T, s: _ones(T, 2, 3).cat(_ones(T, 2, 3), dim=2), IndexError, "cat", shape(2, 3)),
    Bad("cat-0d", lambda T, s: T(1.0).cat(T(2.0)), IndexError, "cat", "zero-dimensional"),
    Bad("cumsum-0d-axis", lambda T, s: T(1.0).cumsum(axis=1), IndexError, "cumsum", "axis 1"),
    Bad("float-index", lambda T, s: _ones(T, 3)[T([0.0, 1.0])], IndexError, r"getitem|index", "float32"),
    # TypeError: dtypes
    Bad("numpy-datetime", lambda T, s: T(np.zeros(3, "datetime64[s]")), TypeError, r"Tensor|dtype", "datetime64"),
    Bad("numpy-complex", lambda T, s: T(np.zeros(3, np.complex64)), TypeError, r"Tensor|dtype", "complex64"),
    Bad("dtype-name", lambda T, s: T.zeros(2, dtype="complex64"), TypeError, r"zeros|dtype", "complex64"),
    Bad("cast-complex", lambda T, s: _ones(T, 2).cast(np.complex64), TypeError, r"cast|dtype", "complex64"),
    Bad("promote-int64-uint64", lambda T, s: T(np.zeros(2, np.int64)) + T(np.zeros(2, np.uint64)), TypeError,
        r"promote|add", "uint64"),
    Bad("bitcast-size", lambda T, s: _ones(T, 2).bitcast(np.int64), TypeError, "bitcast", "float32"),
    Bad("bool-sub", lambda T, s: T([True, False]) - T([False, False]), TypeError, r"sub|-", "bool"),
    Bad("bool-neg", lambda T, s: -T([True, False]), TypeError, r"neg|-", "bool"),
    Bad("float-and", lambda T, s: _ones(T, 2) & _ones(T, 2), TypeError, r"and|&|bitwise|logical", "float32"),
    Bad("float-invert", lambda T, s: ~_ones(T, 2), TypeError, r"not|invert|~|bitwise|logical", "float32"),
    Bad("floor-bool", lambda T, s: T([True, False]).floor(), TypeError, "floor", "bool"),
    Bad("sinh-bool", lambda T, s: T([True, False]).sinh(), TypeError, "sinh", "bool"),
    Bad("elu-bool", lambda T, s: T([True]).elu(), TypeError, "elu", "bool"),
    Bad("scatter-float-index", lambda T, s: _ones(T, 2, 3).scatter(0, _ones(T, 1, 3), _ones(T, 1, 3)), TypeError,
        "scatter", "float32"),
    Bad("max_unpool2d-float-indices", lambda T, s: _ones(T, 1, 1, 2, 2).max_unpool2d(_ones(T, 1, 1, 2, 2)), TypeError,
        "max_unpool2d", "float32"),
    Bad("lshift-float", lambda T, s: _ones(T, 2) << 1, TypeError, "lshift", "float32"),
    Bad("bernoulli-int", lambda T, s: _index(T, [0, 1]).bernoulli(), TypeError, "bernoulli", "int64"),
    Bad("gather-float-index", lambda T, s: _ones(T, 2, 3).gather(0, _ones(T, 2, 3)), TypeError, "gather", "float32"),
    Bad("repeat_interleave-float", lambda T, s: _ones(T, 3).repeat_interleave(_ones(T, 3)), TypeError,
        "repeat_interleave", "float32"),
    Bad("logcumsumexp-bool", lambda T, s: T([True]).logcumsumexp(), TypeError, "logcumsumexp", "bool"),
    Bad("bitwise_and-float", lambda T, s: _ones(T, 2).bitwise_and(_ones(T, 2)), TypeError, r"and|bitwise",
        "float32"),
    Bad("sequential-not-callable", lambda T, s: _ones(T, 2).sequential([3]), TypeError, "sequential", "int"),
    # RuntimeError: devices
    Bad("device-create", lambda T, s: T([1.0, 2.0], device=_other_device(s)), RuntimeError, r"device|Tensor",
        r"(?i)cuda|tpu"),
    Bad("device-to", lambda T, s: _ones(T, 2).to(_other_device(s)), RuntimeError, r"device|to",
        r"(?i)cuda|tpu"),
]

PARAMS = [pytest.param(bad, id=bad.id, marks=[pytest.mark.needs(*bad.needs)]) for bad in ERRORS]


@pytest.mark.parametrize("bad", PARAMS)
def test_error(stage, bad):
    with pytest.raises(bad.exc) as info:
        bad.fn(stage.module.Tensor, stage)
    message = str(info.value)
    assert re.search(bad.op, message,
                     re.IGNORECASE), f"the message {message!r} does not name the op /{bad.op}/"
    assert re.search(bad.detail, message), f"the message {message!r} does not name /{bad.detail}/"


@pytest.mark.parametrize("bad", [p for p in PARAMS if p.values[0].exc is ValueError])
def test_value_errors_are_runtime_errors(stage, bad):
    """torch, and tinygrad since 0.10, raise RuntimeError for these: code written for them catches ours."""
    with pytest.raises(RuntimeError):
        bad.fn(stage.module.Tensor, stage)


# More bad inputs for the child: they must raise some Python exception, never crash.
EXTRA = """
lambda T: T.zeros(-1)
lambda T: T.ones(2, 3).reshape(-2, -3)
lambda T: T.ones(2, 3).expand(-1, -1, 3)
lambda T: T.ones(2, 3).pad(((-5, 0), (0, 0)))
lambda T: T.ones(2, 3).shrink(((2, 1), (0, 3)))
lambda T: T.ones(4)[::0]
lambda T: T.ones(4)[T(np.array([2**40], dtype=np.int64))]
lambda T: T.ones(4)[T(np.array([-2**40], dtype=np.int64))]
lambda T: T.ones(3, 4)[T(np.array([[0, 9]], dtype=np.int64))]
lambda T: T.ones(2, 3).permute(0, 0)
lambda T: T.ones(2, 3).permute(0)
lambda T: T.ones(2, 3) @ T.ones(2, 3)
lambda T: T.ones(2, 3).sum(axis=(0, 7))
lambda T: T.ones(0).max()
lambda T: T.ones(0).argmax()
lambda T: T.ones(2, 3).split(0)
lambda T: T.ones(2, 3).chunk(0)
lambda T: T.ones(1, 1, 3, 3).avg_pool2d(kernel_size=(1, 4))
lambda T: T.ones(1, 1, 3, 3).conv2d(T.ones(1, 1, 2, 2), padding=-2)
lambda T: T.ones(2, 4).scaled_dot_product_attention(T.ones(2, 5), T.ones(2, 4))
lambda T: T.ones(3, 2).sparse_categorical_crossentropy(T(np.array([0, 2**40, 1], dtype=np.int64))).realize()
lambda T: T(np.zeros((2, 2), np.complex128))
lambda T: T(object())
lambda T: T([1.0, "a"])
lambda T: T.ones(*([1] * 100))
lambda T: T.ones(2, 3).reshape(*([1] * 70), 6)
lambda T: T.ones(3)[(None,) * 70]
lambda T: T.ones(2).solve(T.ones(2))
lambda T: T.eye(3).solve(T.ones(4))
lambda T: T.ones(3).cast("int8")
lambda T: T.full((2,), 2**40, dtype="int32")
lambda T: T.randint(3, low=5, high=5)
lambda T: T.linspace(0, 1, -1)
lambda T: T.arange(0, 10, 0)
"""

CHILD = """
import sys
import numpy as np
sys.path[:0] = [{root!r}]
import importlib
from conformance.stages import BY_NAME
from conformance.test_errors import ERRORS, EXTRA
stage = BY_NAME[{name!r}]
T = stage.module.Tensor
cases = [(b.id, (lambda b: lambda: b.fn(T, stage))(b)) for b in ERRORS]
cases += [(src, (lambda f: lambda: f(T))(eval(src))) for src in EXTRA.strip().splitlines()]
quiet = 0
for name, fn in cases:
    try:
        fn()
        quiet += 1
        print("no exception:", name)
    except Exception:
        pass
print(f"survived {{len(cases)}} bad inputs ({{quiet}} raised nothing)")
"""


def test_bad_inputs_never_crash(stage, tmp_path: Path):
    """A crash in C (segfault, abort) would kill the child: it must exit 0 after every input."""
    root = str(Path(__file__).resolve().parent.parent)
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD.format(root=root, name=stage.name)))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    output = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, f"child exited {proc.returncode}\n{output}"
    assert "survived" in proc.stdout, proc.stdout
