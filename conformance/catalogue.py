"""The op catalogue: every op of the Tensor API, in DESIGN's order, with how to call it, its numpy
reference, the dtypes it supports, its input domain, the dtype the contract promises and its
tolerances. test_forward.py turns each (op, dtype, case) into one test on every stage.

An entry's `call(T, *tensors, **params)` uses our API (T is the stage's Tensor class); its
`ref(*arrays, **params)` gets the same inputs as numpy arrays. Unless an op says otherwise
(`compute="same"`), the arrays reach `ref` in float64 when a float is involved and in the result's
integer dtype otherwise, and the answer is cast to the contract's dtype (`out`): so float32 ops are
checked against a correctly rounded float64 answer, and int ops exactly.

Tolerances (rtol, atol) for float32 / float64; ints and bools are always compared exactly:
- EXACT: data movement, casts, comparisons and max/min copy or compare values: bit-for-bit.
- ELEMENTWISE (1e-5, 1e-6) / (1e-12, 1e-12): one rounding or one libm call (a few ulp).
- COMPOSITE (1e-5, 1e-6) / (1e-10, 1e-12): a short chain (sigmoid, gelu, softmax...) of such steps;
  float32 stays at elementwise tolerance because each step is well conditioned on our domains.
- REDUCE (1e-5, 1e-5) / (1e-10, 1e-10): float32 accumulation over up to 64 terms of size <= 4:
  the rounding error grows like sqrt(n)*eps*sum|x|, so atol is 10x the elementwise one.
- GEMM: like REDUCE: dot products of length <= 64.
- SOLVE (1e-4, 1e-5) / (1e-9, 1e-10): Gaussian elimination loses cond(A) digits; our diagonally
  dominant A has cond < 10.
- LARGE_REDUCE (1e-5, 1e-3) / (1e-10, 1e-9): the `*_large` entries reduce up to 5000 terms to reach
  the kernels' blocked paths; plain float32 accumulation drifts like sqrt(n)*eps*|partial sums|,
  ~3e-4 at n = 5000 with |x| <= 2, and that is an accepted way to sum, so atol is 1e-3.
- LARGE_GEMM (1e-5, 1e-4) / (1e-10, 1e-10): dot products of length 300 (past a K block of 256):
  sqrt(300)*eps*|partial sums| ~ 3e-5.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import references as R
from . import references_conv as RC
from .cases import (
    ANY,
    COARSE,
    DEFAULT_DEVICE,
    DTYPES,
    EXPONENT,
    FLOATS,
    INTS,
    KINKS,
    NEGATIVE,
    NONNEG,
    NONZERO,
    NUMERIC,
    POSITIVE,
    PROB,
    SMALL,
    WIDE,
    Arg,
    Case,
    D,
    Domain,
    Index,
    accumulate,
    attention_mask,
    axis_cases,
    binary_cases,
    case,
    classes,
    diag_dominant,
    domain,
    expect,
    is_float,
    key_id,
    labels_with_ignored,
    probabilities,
    reduce_cases,
    same,
    shape_id,
    special,
    special_cases,
    to_bool,
    to_float,
    to_int64,
    unary_cases,
    with_scalar,
)

SECTIONS = ("creation", "properties", "movement", "elementwise", "reduction", "nn", "conversion", "autograd")


@dataclass(frozen=True)
class Tol:
    """(rtol, atol) per float type. The half types' are counted in their unit roundoff u (2**-11 for
    float16, 2**-8 for bfloat16), `half` = (rtol, atol) in u: a result rounded once from float32
    arithmetic lies within u of the exact value, and the reference, rounded to the half type too,
    within u of it again, so an op computed in one kernel is within 2u. Composite ops (several
    kernels on stages 1 and 2, each rounding) get a count of roundings times their condition."""
    float32: tuple[float, float]
    float64: tuple[float, float]
    half: tuple[float, float] = (2.0, 2.0)


EXACT = Tol((0.0, 0.0), (0.0, 0.0), (0.0, 0.0))
ELEMENTWISE = Tol((1e-5, 1e-6), (1e-12, 1e-12))
COMPOSITE = Tol((1e-5, 1e-6), (1e-10, 1e-12), (8.0, 8.0))
REDUCE = Tol((1e-5, 1e-5), (1e-10, 1e-10))
GEMM = REDUCE
SOLVE = Tol((1e-4, 1e-5), (1e-9, 1e-10))
LARGE_REDUCE = Tol((1e-5, 1e-3), (1e-10, 1e-9))
LARGE_GEMM = Tol((1e-5, 1e-4), (1e-10, 1e-10))


@dataclass(frozen=True)
class Op:
    """One op of the API. `kind` says what the call returns and how it is checked: "tensor",
    "tensors" (a sequence of them), "array" (numpy), "value" (a Python value, compared with ==
    and by type), "meta" (only shape and dtype: Tensor.empty) or "random" (by `check`, a law).
    `capability` is the capability-table key when several entries test one API op."""

    name: str
    section: str
    call: Callable[..., Any]
    ref: Callable[..., Any] | None
    dtypes: tuple[str, ...]
    cases: Callable[[str], list[Case]]
    out: Callable[..., str] = same
    domain: Domain = ANY
    tol: Tol = ELEMENTWISE
    kind: str = "tensor"
    compute: str = "auto"
    check: Callable[..., None] | None = None
    capability: str = ""

    @property
    def needs(self) -> str:
        """The capability-table key a stage must have for this op."""
        return self.capability or self.name


def fixed(cases: list[Case]) -> Callable[[str], list[Case]]:
    return lambda dtype: cases


CATALOGUE: list[Op] = []


def add(*ops: Op) -> None:
    CATALOGUE.extend(ops)


def _shape_style(shape: tuple, style: str) -> tuple:
    """Shape arguments are accepted both as f(2, 3) and as f((2, 3))."""
    return tuple(shape) if style == "args" else (tuple(shape),)


def _dtype_param(dtype: str, default: str = "float32") -> dict:
    """No dtype argument when the op's default is the dtype under test, else dtype=D(dtype)."""
    return {} if dtype == default else {"dtype": D(dtype)}


# ==== creation ====


def _tensor_cases(dtype: str) -> list[Case]:
    """Tensor(data): Python lists and scalars get the contract's default dtypes; numpy arrays keep
    theirs (contiguous or not); an explicit dtype (DType, name string or numpy dtype) wins."""
    np_dt = np.dtype(dtype)
    grid = (np.arange(12).reshape(3, 4) % 3).astype(np_dt)
    python = {
        "bool": [[True, False], True, [[False], [True]]],
        "int64": [[1, -2, 3], 7, [[1, 2], [3, 4]]],
        "float32": [[1.5, -2.0], 2.5, [[1, 2.5], [3, 4]], []],
    }
    cases = [case(data=v) for v in python.get(dtype, [])]
    cases += [case(data=grid), case(data=grid.T), case(data=grid[::-1, ::2]),
              case(data=np.zeros((0, 3), np_dt)), case(data=np.array(1, np_dt)),
              case(data=[[0, 1], [1, 0]], dtype=D(dtype)), case(data=[1, 0, 1], dtype=dtype),
              case(data=[1, 0], dtype=np_dt)]
    return cases


def _creation_cases(dtype: str) -> list[Case]:
    shapes = [((2, 3), "args"), ((2, 3), "tuple"), ((), "tuple"), ((0, 4), "args"), ((1, 1, 5), "args")]
    cases = [case(shape=s, style=st, **_dtype_param(dtype)) for s, st in shapes]
    if dtype == "float64":  # the dtype spelled as a string and as a numpy dtype
        cases += [case(shape=(2, 2), style="args", dtype="float64"),
                  case(shape=(2, 2), style="args", dtype=np.float64)]
    return cases


def _full_cases(dtype: str) -> list[Case]:
    value = {"bool": True, "int32": 3, "int64": -4, "float32": 2.5, "float64": -0.75}.get(dtype,
                                                                                        1.5 if is_float(dtype) else 3)
    cases = [case(shape=s, value=value, dtype=D(dtype)) for s in [(2, 3), (), (0, 2)]]
    if dtype in ("bool", "int64", "float32"):  # the fill value's own kind sets the dtype
        cases.append(case(shape=(2, 3), value=value))
    return cases


def _arange_cases(dtype: str) -> list[Case]:
    if dtype == "int64":
        return [case(args=a) for a in [(5,), (2, 10, 3), (10, 0, -2), (0,), (3, 3)]]
    if dtype == "float32":
        return [case(args=a) for a in [(1.0, 2.0, 0.25), (0.5, 3.0, 0.5), (3.0, 0.0, -0.75)]]
    return [case(args=a, dtype=D(dtype)) for a in [(6,), (1, 7, 2)]]


def _random_cases(dtype: str) -> list[Case]:
    return [case(shape=s, **_dtype_param(dtype)) for s in [(100, 100), (10000,)]]


_LIKE = [case(Arg((3, 4))), case(Arg((3, 4), "T")), case(Arg((0, 2))), case(Arg(()))]
_INIT = fixed([case(shape=(64, 128)), case(shape=(32, 3, 5, 5))])

add(
    Op("tensor", "creation", lambda T, data, **k: T(data, **k), lambda data, **_: np.array(data),
       DTYPES, _tensor_cases, compute="same", tol=EXACT),
    Op("zeros", "creation", lambda T, shape, style, **k: T.zeros(*_shape_style(shape, style), **k),
       lambda shape, **_: np.zeros(shape), DTYPES, _creation_cases, tol=EXACT),
    Op("ones", "creation", lambda T, shape, style, **k: T.ones(*_shape_style(shape, style), **k),
       lambda shape, **_: np.ones(shape), DTYPES, _creation_cases, tol=EXACT),
    Op("full", "creation", lambda T, shape, value, **k: T.full(shape, value, **k),
       lambda shape, value, **_: np.full(shape, value), DTYPES, _full_cases, tol=EXACT),
    Op("empty", "creation", lambda T, shape, style, **k: T.empty(*_shape_style(shape, style), **k),
       lambda shape, **_: np.empty(shape), DTYPES, _creation_cases, kind="meta"),
    Op("arange", "creation", lambda T, args, **k: T.arange(*args, **k), lambda args, **_: np.arange(*args),
       ("int32", "int64", "float32", "float64"), _arange_cases),
    Op("linspace", "creation", lambda T, args, **k: T.linspace(*args, **k),
       lambda args, **_: np.linspace(*args), FLOATS,
       lambda dt: [case(args=a, **_dtype_param(dt))
                   for a in [(0, 1, 5), (-1.5, 2.0, 8), (2, 3, 1), (2, 3, 0)]]),
    Op("eye", "creation", lambda T, args, **k: T.eye(*args, **k), lambda args, **_: np.eye(*args), DTYPES,
       lambda dt: [case(args=a, **_dtype_param(dt)) for a in [(3,), (2, 4), (4, 2), (1,), (0,)]], tol=EXACT),
    Op("zeros_like", "creation", lambda T, x: T.zeros_like(x), np.zeros_like, DTYPES, fixed(_LIKE),
       compute="same", tol=EXACT),
    Op("ones_like", "creation", lambda T, x: T.ones_like(x), np.ones_like, DTYPES, fixed(_LIKE),
       compute="same", tol=EXACT),
    Op("full_like", "creation", lambda T, x, value: T.full_like(x, value),
       lambda a, value: np.full_like(a, value), DTYPES,
       fixed([case(Arg((3, 4)), value=1), case(Arg((3, 4), "S"), value=1), case(Arg(()), value=1)]),
       compute="same", tol=EXACT),
    Op("rand", "creation", lambda T, shape, **k: T.rand(*shape, **k), None, FLOATS, _random_cases,
       kind="random", check=R.random_law(0.0, 1.0, 0.5, math.sqrt(1 / 12))),
    Op("randn", "creation", lambda T, shape, **k: T.randn(*shape, **k), None, FLOATS, _random_cases,
       kind="random", check=R.random_law(-np.inf, np.inf, 0.0, 1.0)),
    Op("randint", "creation", lambda T, shape, low, high: T.randint(*shape, low=low, high=high), None,
       ("int64",), fixed([case(shape=(100, 100), low=-3, high=5), case(shape=(5000,), low=0, high=2)]),
       kind="random", check=R.randint_law, out=lambda dt, **_: None),  # int32 or int64: tinygrad vs torch
    Op("uniform", "creation", lambda T, shape, **k: T.uniform(*shape, **k), None, ("float32",),
       fixed([case(shape=(100, 100), low=-2.0, high=3.0)]),
       kind="random", check=R.random_law(-2.0, 3.0, 0.5, 5 / math.sqrt(12))),
    Op("normal", "creation", lambda T, shape, **k: T.normal(*shape, **k), None, ("float32",),
       fixed([case(shape=(100, 100), mean=1.5, std=0.5)]),
       kind="random", check=R.random_law(-np.inf, np.inf, 1.5, 0.5)),
    Op("manual_seed", "creation", lambda T, seed: R.three_draws(T, seed), None, ("float32",),
       fixed([case(seed=0), case(seed=1234)]), kind="random", check=R.seed_law),
    Op("kaiming_uniform", "creation", lambda T, shape: T.kaiming_uniform(*shape), None, ("float32",), _INIT,
       kind="random", check=R.init_law(R.kaiming_bound)),
    Op("glorot_uniform", "creation", lambda T, shape: T.glorot_uniform(*shape), None, ("float32",), _INIT,
       kind="random", check=R.init_law(R.glorot_bound)),
)

# ==== properties ====

_PROPS = fixed([case(Arg(s, lay)) for s, lay in [((), "C"), ((0,), "C"), ((3, 4), "C"), ((2, 3, 5), "T"),
                                                  ((4, 1), "E")]])
_ONE = fixed([case(Arg((3,)))])


def _prop(name: str, call: Callable[..., Any], ref: Callable[..., Any], dtypes: tuple[str, ...] = DTYPES,
          cases: Callable[[str], list[Case]] = _PROPS) -> Op:
    return Op(name, "properties", call, ref, dtypes, cases, kind="value", compute="same")


add(
    _prop("shape", lambda T, x: tuple(x.shape), lambda a: a.shape),
    _prop("dtype", lambda T, x: (x.dtype.name, x.dtype.itemsize, np.dtype(x.dtype.np)),
          lambda a: (a.dtype.name, a.dtype.itemsize, a.dtype)),
    _prop("device", lambda T, x, device: str(x.device).upper(), lambda a, device: device.upper(),
          cases=fixed([case(Arg((3, 4)), device=DEFAULT_DEVICE)])),
    _prop("ndim", lambda T, x: x.ndim, lambda a: a.ndim),
    _prop("numel", lambda T, x: x.numel(), lambda a: a.size),
    Op("T", "properties", lambda T, x: x.T, lambda a: a.T, DTYPES,
       fixed([case(Arg((3, 4))), case(Arg((3, 4), "F")), case(Arg((1, 0)))]), compute="same", tol=EXACT),
    _prop("grad", lambda T, x: x.grad, lambda a: None, FLOATS, _ONE),
    _prop("requires_grad", lambda T, x: bool(x.requires_grad), lambda a: False, FLOATS, _ONE),
)

# ==== movement: values are copied, never computed, so every dtype is compared exactly ====


def _mv(name: str, call: Callable[..., Any], ref: Callable[..., Any], cases: list[Case], **kw: Any) -> Op:
    return Op(name, "movement", call, ref, DTYPES, fixed(cases), compute="same", tol=EXACT, **kw)


_S = slice
_GETITEM_KEYS = {
    (3, 4, 5): [1, -1, (0, 2), (1, -1, 2), (-3, 0, -5), _S(None), _S(1, None), _S(None, None, 2),
                _S(None, None, -1), (_S(None), _S(-2, None)), (_S(None), _S(3, 0, -2)),
                (_S(-100, 100), _S(None, None, -3)), (_S(2, 1),), (..., 1), (..., _S(None, 3)),
                (None, 0), (0, None, _S(None, None, -1)), (..., None), (1, ..., None, 2),
                Index([2, 0, 2]), (_S(None), Index([-1, 0])), (..., Index([[0, 1], [3, 4]])),
                Index([1]), [0, 2], (_S(None), [3, 1, 3]), (None, Index([0, 0]), _S(None, None, 2)),
                (Index([0, 2]), Index([1, 3])), (Index([[0], [2]]), Index([1, 3])),
                (_S(None), Index([0, 1]), Index([4, 2])), (..., Index([-1]), Index([[0, 1]])),
                ((0, 2),), (1, (0, 3), [1, 4])],  # a tuple inside the index is a list
    (): [(), None, ...],
    (6,): [5, -6, _S(2, 2), _S(None, None, -1), _S(5, None, -2), Index([]), Index([5, -6, 0])],
}
_GETITEM = [Case(f"{shape_id(s)}{key_id(k)}", (Arg(s),), {"key": k}) for s, keys in _GETITEM_KEYS.items()
            for k in keys]
# Where torch and tinygrad index otherwise than numpy: an int beside index arrays is a basic index (it
# neither joins their broadcast nor keeps them apart), and a list holding arrays is a tuple of indices.
_GETITEM_TORCH = [Case(f"2x3x4x5{key_id(k)}", (Arg((2, 3, 4, 5)),), {"key": k}) for k in [
    (1, _S(None), Index([0, 2])), (Index([0, 1]), 2, Index([1, 3])), (_S(None), Index([0, 2]), 1, Index([1, 0])),
    (0, _S(None), _S(None), Index([[1], [2]])), (Index([1, 0]), _S(None), 3), (1, Index([2, 0]), None, 0),
    [Index([0, 1]), 1], [Index([1]), [2, 0]], [[0], Index([1, 2])]]]
_GETITEM += [Case(f"3x4:{lay}{key_id(k)}", (Arg((3, 4), lay),), {"key": k})
             for lay, k in [("T", (_S(None, None, -1), 1)), ("X", (..., _S(1, None, 2))),
                            ("E", (Index([2, 0]), 3)), ("F", (_S(1, 3), Index([0, 3])))]]

_RESHAPES = [((2, 3, 4), (6, 4)), ((2, 3, 4), (4, -1)), ((2, 3, 4), (24,)), ((2, 3, 4), (-1,)),
             ((), (1, 1)), ((1,), ()), ((0, 3), (3, 0)), ((0, 3), (-1, 3)), ((4, 1), (2, 2))]
_PERMUTES = [((2, 3, 4), "C", (2, 0, 1), "args"), ((2, 3, 4), "C", (1, 2, 0), "tuple"),
             ((2, 3, 4), "C", (-1, 0, 1), "tuple"), ((), "C", (), "tuple"), ((0, 3), "C", (1, 0), "args"),
             ((2, 3, 4), "X", (0, 2, 1), "args"), ((3, 4), "E", (1, 0), "args")]
_EXPANDS = [((3, 1), "C", (3, 4), "args"), ((1,), "C", (5,), "tuple"), ((), "C", (2, 3), "args"),
            ((2, 1, 3), "C", (4, 2, 5, 3), "args"), ((3, 1), "C", (-1, 4), "args"),
            ((1, 3), "C", (0, 3), "tuple"), ((3, 1), "F", (2, 3, 4), "args"), ((1, 4), "S", (3, 4), "args")]
_REPEATS = [((2, 3), "C", (2, 1), "args"), ((3,), "C", (2, 2), "tuple"), ((), "C", (3,), "args"),
            ((2, 1), "E", (1, 3), "args"), ((2, 3), "T", (2, 2), "args"), ((0, 2), "C", (3, 1), "args")]

add(
    _mv("reshape", lambda T, x, shape, style: x.reshape(*_shape_style(shape, style)),
        lambda a, shape, style: a.reshape(shape),
        [case(Arg(s), shape=t, style=st) for s, t in _RESHAPES for st in ("args", "tuple")]
        + [case(Arg((3, 4), lay), shape=(2, 6), style="args") for lay in "TSFREX"]),
    _mv("view", lambda T, x, shape: x.view(*shape), lambda a, shape: a.reshape(shape),
        [case(Arg(s), shape=t) for s, t in _RESHAPES]),
    _mv("permute", lambda T, x, order, style: x.permute(*_shape_style(order, style)),
        lambda a, order, style: a.transpose(order),
        [case(Arg(s, lay), order=o, style=st) for s, lay, o, st in _PERMUTES]),
    _mv("transpose", lambda T, x, **k: x.transpose(*k.values()),
        lambda a, **k: np.swapaxes(a, *k.values()) if k else a.T,
        [case(Arg((3, 4))), case(Arg((2, 3, 4)), dim0=0, dim1=2), case(Arg((2, 3, 4)), dim0=-1, dim1=-2),
         case(Arg((2, 3, 4), "T"), dim0=1, dim1=1), case(Arg((3, 4), "F"), dim0=0, dim1=1)]),
    _mv("expand", lambda T, x, shape, style: x.expand(*_shape_style(shape, style)),
        lambda a, shape, style: R.expand(a, shape),
        [case(Arg(s, lay), shape=t, style=st) for s, lay, t, st in _EXPANDS]),
    _mv("pad", lambda T, x, arg: x.pad(arg), R.pad,
        [case(Arg((3, 4)), arg=((1, 2), (0, 1))), case(Arg((3, 4)), arg=((0, 0), (3, 0))),
         case(Arg((3, 4)), arg=(None, (1, 1))), case(Arg((0, 3)), arg=((1, 1), (0, 0))),
         case(Arg((5,)), arg=((2, 2),)), case(Arg((2, 3, 4), "X"), arg=((1, 0), (0, 2), (1, 1)))]),
    _mv("pad_modes", lambda T, x, arg, mode: x.pad(arg, mode=mode), R.pad_mode,
        [case(Arg((3, 4)), arg=((1, 2), (2, 1)), mode=m) for m in ("reflect", "replicate", "circular")]
        # a negative amount crops first, the rest pads what is left (torch)
        + [case(Arg((3, 5)), arg=(None, p), mode=m) for m in ("reflect", "replicate", "circular")
           for p in ((-1, 2), (2, -1))] + [case(Arg((4, 3), "T"), arg=((-1, -1), (1, 0)), mode="reflect")]
        + [case(Arg((2, 3, 4), "X"), arg=(None, (2, 0), (0, 3)), mode=m) for m in ("reflect", "replicate", "circular")]
        + [case(Arg((5,)), arg=((4, 4),), mode="replicate"), case(Arg((0, 3)), arg=(None, (1, 1)), mode="reflect")],
        capability="pad"),
    _mv("shrink", lambda T, x, arg: x.shrink(arg), R.shrink,
        [case(Arg((3, 4)), arg=((1, 3), (0, 4))), case(Arg((3, 4)), arg=(None, (1, 2))),
         case(Arg((3, 4)), arg=((1, 1), (0, 4))), case(Arg((5,)), arg=((0, 5),)),
         case(Arg((2, 3, 4), "T"), arg=((0, 1), (1, 3), (2, 4))),
         case(Arg((3, 4), "F"), arg=((2, 3), (1, 4)))]),
    _mv("flip_args", lambda T, x, axes: x.flip(*axes), lambda a, axes: np.flip(a, axes),
        [case(Arg((3, 4)), axes=(0, 1)), case(Arg((2, 3, 4), "X"), axes=(2, 0)), case(Arg((3, 4)), axes=(-1,))],
        capability="flip"),
    _mv("flip", lambda T, x, axis: x.flip(axis), lambda a, axis: np.flip(a, axis),
        [case(Arg((3, 4)), axis=0), case(Arg((3, 4)), axis=(0, 1)), case(Arg((2, 3, 4)), axis=-1),
         case(Arg((2, 3, 4)), axis=(0, 2)), case(Arg((0, 3)), axis=1), case(Arg((3, 4), "T"), axis=1),
         case(Arg((3, 4), "F"), axis=0), case(Arg((3, 4), "E"), axis=1)]),
    _mv("flatten", lambda T, x, **k: x.flatten(**k), R.flatten,
        [case(Arg((2, 3, 4))), case(Arg((2, 3, 4)), start_dim=1),
         case(Arg((2, 3, 4, 5)), start_dim=1, end_dim=2), case(Arg(())), case(Arg((0, 3))),
         case(Arg((2, 3, 4), "X"), start_dim=0, end_dim=1)]),
    _mv("unflatten", lambda T, x, dim, sizes: x.unflatten(dim, sizes), R.unflatten,
        [case(Arg((2, 12)), dim=1, sizes=(3, 4)), case(Arg((6, 2)), dim=0, sizes=(2, 1, 3)),
         case(Arg((2, 6)), dim=-1, sizes=(6, 1)), case(Arg((4, 3), "T"), dim=0, sizes=(2, 2))]),
    _mv("squeeze", lambda T, x, **k: x.squeeze(*k.values()), lambda a, **k: R.squeeze(a, *k.values()),
        [case(Arg((1, 3, 1, 4))), case(Arg((1, 3, 1, 4)), dim=0), case(Arg((1, 3, 1, 4)), dim=-2),
         case(Arg((1, 3, 1, 4)), dim=1), case(Arg((1,))), case(Arg(())), case(Arg((1, 0)), dim=0),
         case(Arg((1, 4), "E"), dim=0)]),
    _mv("unsqueeze", lambda T, x, dim: x.unsqueeze(dim), lambda a, dim: np.expand_dims(a, dim),
        [case(Arg((3, 4)), dim=0), case(Arg((3, 4)), dim=1), case(Arg((3, 4)), dim=-1),
         case(Arg(()), dim=0), case(Arg((3, 4)), dim=-3), case(Arg((3, 4), "F"), dim=2)]),
    _mv("contiguous", lambda T, x: x.contiguous(), lambda a: a, unary_cases()),
    _mv("getitem", lambda T, x, key: x[key], lambda a, key: a[key], _GETITEM),
    _mv("getitem_torch_rules", lambda T, x, key: x[key], R.getitem_torch, _GETITEM_TORCH, capability="getitem"),
    _mv("reshape_none", lambda T, x, shape: x.reshape(shape),
        lambda a, shape: a.reshape([a.shape[i] if n is None else n for i, n in enumerate(shape)]),
        [case(Arg((2, 3, 4)), shape=(None, 12)), case(Arg((2, 3, 4)), shape=(None, None, 4)),
         case(Arg((2, 3, 4)), shape=(None, -1)), case(Arg((2, 3, 4), "T"), shape=(None, 4, 3))],
        capability="reshape"),
    _mv("pad2d", lambda T, x, arg, value: x.pad2d(arg, value), lambda a, arg, value: R.pad_flat(a, arg, value),
        [case(Arg((2, 3, 4)), arg=(1, 2, 0, 1), value=0.0), case(Arg((2, 3, 4)), arg=(-1, 2, -2, 1), value=5.0),
         case(Arg((3, 4)), arg=(0, 0, 1, -1), value=0.0), case(Arg((3, 4), "T"), arg=(2, -1), value=-1.0)],
        capability="pad"),
    _mv("cat", lambda T, *xs, dim: xs[0].cat(*xs[1:], dim=dim), lambda *a, dim: np.concatenate(a, axis=dim),
        [case(Arg((2, 3)), Arg((4, 3)), dim=0), case(Arg((2, 3)), Arg((2, 1)), dim=1),
         case(Arg((2, 3)), Arg((2, 0)), Arg((2, 2)), dim=-1), case(Arg((0, 3)), Arg((2, 3)), dim=0),
         case(Arg((3,)), Arg((1,)), Arg((2,)), dim=0), case(Arg((2, 3, 4)), Arg((2, 1, 4)), dim=1),
         case(Arg((3, 4), "T"), Arg((2, 4), "S"), dim=0), case(Arg((3, 4), "F"), Arg((3, 2), "E"), dim=1),
         case(Arg((3,)), dim=0)]),
    _mv("stack", lambda T, *xs, dim: xs[0].stack(*xs[1:], dim=dim), lambda *a, dim: np.stack(a, axis=dim),
        [case(Arg((2, 3)), Arg((2, 3)), dim=0), case(Arg((2, 3)), Arg((2, 3)), Arg((2, 3)), dim=1),
         case(Arg((2, 3)), Arg((2, 3)), dim=-1), case(Arg(()), Arg(()), Arg(()), dim=0),
         case(Arg((0, 2)), Arg((0, 2)), dim=1), case(Arg((3, 4), "T"), Arg((3, 4), "R"), dim=2)]),
    _mv("split", lambda T, x, sizes, dim=0: x.split(sizes, dim), R.split,
        [case(Arg((6, 4)), sizes=2), case(Arg((6, 4)), sizes=4), case(Arg((6, 4)), sizes=[1, 5]),
         case(Arg((6, 4)), sizes=[2, 0, 2], dim=1), case(Arg((2, 7)), sizes=3, dim=-1),
         case(Arg((6, 4), "F"), sizes=[3, 3])], kind="tensors"),
    _mv("chunk", lambda T, x, chunks, dim=0: x.chunk(chunks, dim), R.chunk,
        [case(Arg((6, 4)), chunks=3), case(Arg((7,)), chunks=3), case(Arg((2, 5)), chunks=2, dim=1),
         case(Arg((4,)), chunks=6), case(Arg((3, 4), "T"), chunks=2, dim=-1)], kind="tensors"),
    _mv("repeat", lambda T, x, reps, style: x.repeat(*_shape_style(reps, style)),
        lambda a, reps, style: np.tile(a, reps),
        [case(Arg(s, lay), reps=r, style=st) for s, lay, r, st in _REPEATS]),
)

# ==== elementwise ====


def _both(a: Any, b: Any) -> Any:
    """Two spellings of one op (x.neg() and -x) must agree; the first is checked against numpy."""
    expect(np.array_equal(a.numpy(), b.numpy(), equal_nan=True), "the method and the operator disagree")
    return a


def _with_specials(cases: list[Case], arity: int, specials: bool) -> Callable[[str], list[Case]]:
    """The op's cases, plus inf/nan/extreme inputs for float dtypes when `specials` (IEEE
    semantics, which C, numpy and torch share)."""
    return lambda dtype: cases + (special_cases(arity) if specials and is_float(dtype) else [])


def _binary(name: str, call: Callable[..., Any], ref: Callable[..., Any], dtypes: tuple[str, ...],
            out: Callable[..., str] = same, left: Domain | None = None, right: Domain | None = None,
            domain: Domain = ANY, specials: bool = False) -> Op:
    cases = _with_specials(binary_cases(left, right), 2, specials)
    return Op(name, "elementwise", call, ref, dtypes, cases, out=out, domain=domain)


def _unary(name: str, call: Callable[..., Any], ref: Callable[..., Any], dtypes: tuple[str, ...],
           out: Callable[..., str] = same, domain: Domain = ANY, tol: Tol = ELEMENTWISE,
           specials: bool = False, **params: Any) -> Op:
    cases = [Case(c.id + (f"|{params}" if params else ""), c.args, params) for c in unary_cases()]
    return Op(name, "elementwise", call, ref, dtypes, _with_specials(cases, 1, specials), out=out,
              domain=domain, tol=tol)


_SCALAR_ARGS = [Arg(()), Arg((3, 4)), Arg((0,)), Arg((3, 4), "T"), Arg((2, 3, 5), "X")]


def _scalar(name: str, call: Callable[..., Any], ref: Callable[..., Any], dtypes: tuple[str, ...],
            scalars: tuple, promote: Callable[[str], str] = same, domain: Domain = ANY) -> Op:
    """`x op s` or `s op x` with a weak Python scalar: the result dtype follows with_scalar."""
    cases = [case(arg, s=s) for s in scalars for arg in _SCALAR_ARGS]
    return Op(name, "elementwise", call, ref, dtypes, fixed(cases),
              out=lambda dt, s, **_: promote(with_scalar(dt, s)), domain=domain)


_WHERE = [((3, 4), "C", (3, 4), "C", (3, 4), "C"), ((3, 1), "C", (3, 4), "C", (4,), "C"),
          ((), "C", (2, 3), "C", (), "C"), ((0, 3), "C", (0, 3), "C", (3,), "C"),
          ((3, 4), "T", (3, 4), "F", (3, 4), "E"), ((2, 3, 5), "X", (2, 3, 5), "R", (5,), "S")]
_BITS = ("bool",) + INTS
_F = to_float

add(
    _binary("add", lambda T, x, y: x + y, np.add, DTYPES, specials=True),
    _binary("sub", lambda T, x, y: x - y, np.subtract, NUMERIC, specials=True),
    _binary("mul", lambda T, x, y: x * y, np.multiply, DTYPES, specials=True),
    _binary("div", lambda T, x, y: x / y, np.divide, NUMERIC, out=_F, right=NONZERO, specials=True),
    _binary("pow", lambda T, x, y: x**y, np.power, NUMERIC, left=POSITIVE, right=EXPONENT),
    _binary("pow_negative_base", lambda T, x, y: x**y, np.power, FLOATS, left=NEGATIVE, right=EXPONENT),
    Op("__matmul__", "elementwise", lambda T, x, y: x @ y, np.matmul, NUMERIC,
       fixed([case(Arg((3, 4)), Arg((4, 5))), case(Arg((4,)), Arg((4, 5))), case(Arg((2, 3, 4)), Arg((4,)))]),
       tol=GEMM),
    _scalar("add_scalar", lambda T, x, s: x + s, lambda a, s: a + s, DTYPES, (2, 2.5)),
    _scalar("radd", lambda T, x, s: s + x, lambda a, s: s + a, DTYPES, (-3, 0.25)),
    _scalar("sub_scalar", lambda T, x, s: x - s, lambda a, s: a - s, NUMERIC, (2, 2.5)),
    _scalar("rsub", lambda T, x, s: s - x, lambda a, s: s - a, NUMERIC, (5, -1.5)),
    _scalar("mul_scalar", lambda T, x, s: x * s, lambda a, s: a * s, DTYPES, (3, -0.5)),
    _scalar("rmul", lambda T, x, s: s * x, lambda a, s: s * a, DTYPES, (-2, 1.5)),
    _scalar("div_scalar", lambda T, x, s: x / s, lambda a, s: a / s, NUMERIC, (4, -2.5), promote=_F),
    _scalar("rdiv", lambda T, x, s: s / x, lambda a, s: s / a, NUMERIC, (3, 2.5), promote=_F, domain=NONZERO),
    _scalar("pow_scalar", lambda T, x, s: x**s, lambda a, s: a**s, NUMERIC, (2, 0.5, -1.5), domain=POSITIVE),
    _scalar("rpow", lambda T, x, s: s**x, lambda a, s: s**a, NUMERIC, (2, 1.5), domain=EXPONENT),
    _binary("lt", lambda T, x, y: x < y, np.less, DTYPES, out=to_bool, domain=COARSE, specials=True),
    _binary("le", lambda T, x, y: x <= y, np.less_equal, DTYPES, out=to_bool, domain=COARSE),
    _binary("gt", lambda T, x, y: x > y, np.greater, DTYPES, out=to_bool, domain=COARSE),
    _binary("ge", lambda T, x, y: x >= y, np.greater_equal, DTYPES, out=to_bool, domain=COARSE),
    _binary("eq", lambda T, x, y: x == y, np.equal, DTYPES, out=to_bool, domain=COARSE, specials=True),
    _binary("ne", lambda T, x, y: x != y, np.not_equal, DTYPES, out=to_bool, domain=COARSE, specials=True),
    _scalar("lt_scalar", lambda T, x, s: x < s, lambda a, s: a < s, NUMERIC, (1, 0.5), promote=to_bool,
            domain=COARSE),
    _scalar("eq_scalar", lambda T, x, s: x == s, lambda a, s: a == s, NUMERIC, (1, 0.5), promote=to_bool,
            domain=COARSE),
    _scalar("gt_rscalar", lambda T, x, s: s < x, lambda a, s: s < a, NUMERIC, (0, -0.5), promote=to_bool,
            domain=COARSE),
    _unary("neg", lambda T, x: _both(x.neg(), -x), np.negative, NUMERIC, specials=True),
    _unary("reciprocal", lambda T, x: x.reciprocal(), np.reciprocal, NUMERIC, out=_F, domain=NONZERO,
           specials=True),
    _unary("exp", lambda T, x: x.exp(), np.exp, DTYPES, out=_F, specials=True),
    _unary("exp2", lambda T, x: x.exp2(), np.exp2, DTYPES, out=_F, specials=True),
    _unary("log", lambda T, x: x.log(), np.log, DTYPES, out=_F, domain=POSITIVE, specials=True),
    _unary("log2", lambda T, x: x.log2(), np.log2, DTYPES, out=_F, domain=POSITIVE, specials=True),
    _unary("sqrt", lambda T, x: x.sqrt(), np.sqrt, DTYPES, out=_F, domain=NONNEG, specials=True),
    _unary("rsqrt", lambda T, x: x.rsqrt(), lambda a: 1 / np.sqrt(a), DTYPES, out=_F, domain=POSITIVE,
           specials=True),
    _unary("sin", lambda T, x: x.sin(), np.sin, DTYPES, out=_F, domain=WIDE, specials=True),
    _unary("cos", lambda T, x: x.cos(), np.cos, DTYPES, out=_F, domain=WIDE, specials=True),
    _unary("tanh", lambda T, x: x.tanh(), np.tanh, DTYPES, out=_F, domain=WIDE, tol=COMPOSITE, specials=True),
    _unary("sigmoid", lambda T, x: x.sigmoid(), R.sigmoid, DTYPES, out=_F, domain=WIDE, tol=COMPOSITE,
           specials=True),
    _unary("relu", lambda T, x: x.relu(), lambda a: np.maximum(a, 0), NUMERIC),
    _unary("relu_at_kinks", lambda T, x: x.relu(), lambda a: np.maximum(a, 0), FLOATS, domain=KINKS),
    _unary("leakyrelu", lambda T, x: x.leakyrelu(), R.leaky_relu, FLOATS),
    _unary("gelu", lambda T, x: x.gelu(), R.gelu, NUMERIC, out=_F, domain=WIDE, tol=COMPOSITE),
    _unary("gelu_tanh", lambda T, x: x.gelu(approximate="tanh"), R.gelu_tanh, FLOATS, domain=WIDE,
           tol=COMPOSITE),
    _unary("silu", lambda T, x: x.silu(), R.silu, NUMERIC, out=_F, domain=WIDE, tol=COMPOSITE),
    _unary("leaky_relu", lambda T, x: x.leaky_relu(), R.leaky_relu, FLOATS),
    _unary("leaky_relu_slope", lambda T, x, neg_slope: x.leaky_relu(neg_slope), R.leaky_relu, FLOATS,
           neg_slope=0.2),
    _unary("abs", lambda T, x: x.abs(), np.abs, NUMERIC, specials=True),
    _unary("sign", lambda T, x: x.sign(), lambda x: np.where(np.isnan(x), 0, np.sign(x)).astype(x.dtype),
           NUMERIC, domain=COARSE, specials=True),  # sign(NaN) is 0, torch's answer (numpy's is NaN)
    _unary("square", lambda T, x: x.square(), np.square, NUMERIC, specials=True),
    _binary("maximum", lambda T, x, y: x.maximum(y), np.maximum, DTYPES, domain=COARSE, specials=True),
    _binary("minimum", lambda T, x, y: x.minimum(y), np.minimum, DTYPES, domain=COARSE, specials=True),
    _unary("clip", lambda T, x, lo, hi: x.clip(lo, hi), lambda a, lo, hi: np.clip(a, lo, hi), NUMERIC,
           lo=-1, hi=1),
    Op("where", "elementwise", lambda T, c, x, y: c.where(x, y), np.where, DTYPES,
       fixed([case(Arg(sc, lc, dtype="bool"), Arg(sx, lx), Arg(sy, ly))
              for sc, lc, sx, lx, sy, ly in _WHERE])),
    Op("where_scalar", "elementwise", lambda T, c, x, y: c.where(x, y), lambda c, a, y: np.where(c, a, y),
       DTYPES, fixed([case(Arg((3, 4), dtype="bool"), Arg((3, 4)), y=y) for y in (2, 2.5, -math.inf)]
                     + [case(Arg((3, 1), dtype="bool"), Arg((4,), "F"), y=-1)]),
       out=lambda dt, y: with_scalar(dt, y), capability="where"),
    _scalar("maximum_scalar", lambda T, x, s: x.maximum(s), lambda a, s: np.maximum(a, s), DTYPES, (0, 0.5),
            domain=COARSE),
    Op("clip_float_bounds", "elementwise", lambda T, x, lo, hi: x.clip(lo, hi),
       lambda a, lo, hi: np.clip(a, lo, hi), NUMERIC, fixed([case(Arg((3, 4)), lo=-0.5, hi=1.5)]),
       out=lambda dt, lo, hi: with_scalar(dt, lo), domain=COARSE, capability="clip"),
    _binary("and", lambda T, x, y: x & y, np.bitwise_and, _BITS),
    _binary("or", lambda T, x, y: x | y, np.bitwise_or, _BITS),
    _binary("xor", lambda T, x, y: x ^ y, np.bitwise_xor, _BITS),
    _unary("not", lambda T, x: ~x, np.invert, _BITS),
)

# ---- tinygrad's surface (surface.py, one file shared by every stage) ----

TRIG = domain(-1.2, 1.2, -1, 1)  # tan: clear of its poles at +-pi/2
UNIT = domain(-0.95, 0.95, 0, 0)  # asin, acos, atanh: inside (-1, 1)
AT_LEAST_ONE = domain(1.0, 5.0, 1, 9)  # acosh
HALVES = domain(-3.0, 3.0, -9, 9, coarse=True)  # round: halves, to see ties go to even


# These ops are composites of primitives whose every layout the cases above test, so they take a
# sample of the layouts (0-d, empty, broadcast, one of each view kind): stage3 compiles a kernel per
# case, and the full lists would add minutes to its session.
_SAMPLE = {"0d", "0", "1x1x1", "3x4", "2x3x5", "3x4:T", "2x3x5:X", "6:S", "1x5:E",
           "0d,0d", "3x4,3x4", "3x4,4", "3x1,1x4", "0d,3x4", "1,0", "3x4:T,3x4:S", "2x3x5:X,2x3x5:R",
           "4x5", "5x4:T", "4x5,4x5", "5x4:T,5x4:T"}  # and the special values


def _sampled(op: Op) -> Op:
    cases = op.cases
    return dataclasses.replace(op, cases=lambda dtype: [c for c in cases(dtype) if c.id.split("|")[0] in _SAMPLE])


def _np_elu(a: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    return np.where(a > 0, a, alpha * np.expm1(np.minimum(a, 0)))


def _np_softplus(a: np.ndarray, beta: float = 1.0, threshold: float = 20.0) -> np.ndarray:
    return np.where(a * beta > threshold, a, np.logaddexp(0, a * beta) / beta)


add(*map(_sampled, [
    _unary("floor", lambda T, x: x.floor(), np.floor, NUMERIC, specials=True),
    _unary("ceil", lambda T, x: x.ceil(), np.ceil, NUMERIC, specials=True),
    _unary("trunc", lambda T, x: x.trunc(), np.trunc, NUMERIC, specials=True),
    _unary("round", lambda T, x: x.round(), np.round, NUMERIC, domain=HALVES, specials=True),
    _unary("tan", lambda T, x: x.tan(), np.tan, NUMERIC, out=_F, domain=TRIG),
    _unary("atan", lambda T, x: x.atan(), np.arctan, NUMERIC, out=_F, domain=WIDE, specials=True),
    _unary("asin", lambda T, x: x.asin(), np.arcsin, FLOATS, domain=UNIT),
    _unary("acos", lambda T, x: x.acos(), np.arccos, FLOATS, domain=UNIT),
    _unary("sinh", lambda T, x: x.sinh(), np.sinh, NUMERIC, out=_F),
    _unary("cosh", lambda T, x: x.cosh(), np.cosh, NUMERIC, out=_F),
    _unary("atanh", lambda T, x: x.atanh(), np.arctanh, FLOATS, domain=UNIT),
    _unary("asinh", lambda T, x: x.asinh(), np.arcsinh, NUMERIC, out=_F, domain=WIDE),
    _unary("acosh", lambda T, x: x.acosh(), np.arccosh, FLOATS, domain=AT_LEAST_ONE),
    _unary("isnan", lambda T, x: x.isnan(), np.isnan, FLOATS, out=to_bool, specials=True),
    _unary("isinf", lambda T, x: x.isinf(), np.isinf, FLOATS, out=to_bool, specials=True),
    _unary("isfinite", lambda T, x: x.isfinite(), np.isfinite, FLOATS, out=to_bool, specials=True),
    _binary("isclose", lambda T, x, y: x.isclose(y), np.isclose, FLOATS, out=to_bool, domain=COARSE,
            specials=True),
    _binary("copysign", lambda T, x, y: x.copysign(y), np.copysign, FLOATS, specials=True),
    _binary("logaddexp", lambda T, x, y: x.logaddexp(y), np.logaddexp, FLOATS, domain=WIDE, specials=True),
]))
add(
    Op("lerp", "elementwise", lambda T, x, y, w: x.lerp(y, w), lambda a, b, w: a + (b - a) * w, FLOATS,
       fixed([case(Arg((3, 4)), Arg((3, 4)), Arg((3, 4))), case(Arg((2, 3)), Arg((3,)), Arg((2, 1))),
              case(Arg((4, 3), "T"), Arg((4, 3)), Arg(()))])),
)
add(*map(_sampled, [
    _unary("elu", lambda T, x: x.elu(), _np_elu, FLOATS, domain=WIDE),
    _unary("elu_alpha", lambda T, x, alpha: x.elu(alpha), _np_elu, FLOATS, domain=WIDE, alpha=0.5),
    _unary("celu", lambda T, x, alpha: x.celu(alpha), lambda a, alpha: _np_elu(a / alpha) * alpha * (a <= 0)
           + a * (a > 0), FLOATS, domain=WIDE, alpha=1.5),
    _unary("selu", lambda T, x: x.selu(), lambda a: 1.0507009873554804934 * _np_elu(a, 1.6732632423543772848),
           FLOATS, domain=WIDE),
    _unary("softplus", lambda T, x: x.softplus(), _np_softplus, FLOATS, domain=WIDE, tol=COMPOSITE),
    _unary("softplus_beta", lambda T, x, beta: x.softplus(beta), _np_softplus, FLOATS, domain=WIDE,
           tol=COMPOSITE, beta=4.0),
    _unary("softsign", lambda T, x: x.softsign(), lambda a: a / (1 + np.abs(a)), FLOATS, domain=WIDE),
    _unary("mish", lambda T, x: x.mish(), lambda a: a * np.tanh(np.logaddexp(0, a)), FLOATS, domain=WIDE,
           tol=COMPOSITE),
    _unary("swish", lambda T, x: x.swish(), R.silu, FLOATS, domain=WIDE, tol=COMPOSITE),
    _unary("quick_gelu", lambda T, x: x.quick_gelu(), lambda a: a * R.sigmoid(1.702 * a), FLOATS, domain=WIDE,
           tol=COMPOSITE),
    _unary("relu6", lambda T, x: x.relu6(), lambda a: np.clip(a, 0, 6), FLOATS, domain=domain(-3, 9, -3, 9)),
    _unary("hardtanh", lambda T, x: x.hardtanh(), lambda a: np.clip(a, -1, 1), FLOATS),
    _unary("hardsigmoid", lambda T, x: x.hardsigmoid(), lambda a: np.clip(a / 6 + 0.5, 0, 1), FLOATS,
           domain=WIDE),
    _unary("hardswish", lambda T, x: x.hardswish(), lambda a: a * np.clip(a + 3, 0, 6) / 6, FLOATS, domain=WIDE),
    _unary("logsigmoid", lambda T, x: x.logsigmoid(), lambda a: -np.logaddexp(0, -a), FLOATS, domain=WIDE,
           tol=COMPOSITE),
    _binary("bitwise_and", lambda T, x, y: x.bitwise_and(y), np.bitwise_and, _BITS),
    _binary("bitwise_or", lambda T, x, y: x.bitwise_or(y), np.bitwise_or, _BITS),
    _binary("bitwise_xor", lambda T, x, y: x.bitwise_xor(y), np.bitwise_xor, _BITS),
    _unary("bitwise_not", lambda T, x: x.bitwise_not(), np.invert, _BITS),
]))


def _np_trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    q = np.trunc(np.true_divide(a, b))
    return q if q.dtype == np.result_type(a, b) else q.astype(np.result_type(a, b))


def _wrap64(v: int) -> int:
    return (v + 2**63) % 2**64 - 2**63


def _np_exact(fn: Callable[[int, int], int]) -> Callable[..., np.ndarray]:
    """An int64 op by Python's unbounded ints, wrapped to int64 (numpy's ints go through floats)."""
    return lambda a, b: np.array([_wrap64(fn(int(x), int(y))) for x, y in zip(a.ravel(), b.ravel(), strict=True)],
                                 dtype=np.int64).reshape(a.shape)


def _huge(divisor: bool) -> Domain:
    """int64 values across the whole range, where float64 loses the low bits: dividends up to 2^63 in
    size, divisors from 1 to 2^62 (each a random count of bits), the extremes included."""

    def draw(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
        if not divisor:
            x = rng.integers(-2**63, 2**63 - 1, size=shape, dtype=np.int64, endpoint=True)
            x.flat[:2] = [-2**63, 2**63 - 1]
            return x
        bits = rng.integers(1, 63, size=shape)
        x = np.array([int(rng.integers(2**(k - 1), 2**k)) for k in bits.ravel()], dtype=np.int64).reshape(shape)
        return x * rng.choice(np.array([-1, 1]), size=shape)

    return draw


_DIVIDE_INTS = [case(Arg((200,), domain=_huge(False)), Arg((200,), domain=_huge(True)))]

add(*map(_sampled, [
    _binary("floordiv", lambda T, x, y: x // y, np.floor_divide, NUMERIC, right=NONZERO),
    _binary("mod", lambda T, x, y: x % y, np.remainder, NUMERIC, right=NONZERO),
    _binary("idiv", lambda T, x, y: x.idiv(y), _np_trunc_div, NUMERIC, right=NONZERO),
    _binary("div_floor", lambda T, x, y: x.div(y, rounding_mode="floor"), np.floor_divide, NUMERIC, right=NONZERO),
    _binary("div_trunc", lambda T, x, y: x.div(y, rounding_mode="trunc"), _np_trunc_div, NUMERIC, right=NONZERO),
    _unary("lshift", lambda T, x, bits: x << bits, lambda a, bits: np.left_shift(a, bits), INTS, bits=3),
    _unary("rshift", lambda T, x, bits: x >> bits, lambda a, bits: np.right_shift(a, bits), INTS, bits=2),
]))
add(
    _scalar("floordiv_scalar", lambda T, x, s: x // s, lambda a, s: np.floor_divide(a, s), NUMERIC, (3, -2.5)),
    _scalar("rfloordiv", lambda T, x, s: s // x, lambda a, s: np.floor_divide(s, a), NUMERIC, (7, 2.5),
            domain=NONZERO),
    _scalar("mod_scalar", lambda T, x, s: x % s, lambda a, s: np.remainder(a, s), NUMERIC, (3, -2.5)),
    _scalar("rmod", lambda T, x, s: s % x, lambda a, s: np.remainder(s, a), NUMERIC, (7, 2.5), domain=NONZERO),
    # int64 beyond float64's 53 bits, against Python's exact ints
    Op("floordiv_int64", "elementwise", lambda T, x, y: x // y, _np_exact(lambda x, y: x // y), ("int64",),
       fixed(_DIVIDE_INTS), compute="same", capability="floordiv"),
    Op("mod_int64", "elementwise", lambda T, x, y: x % y, _np_exact(lambda x, y: x % y), ("int64",),
       fixed(_DIVIDE_INTS), compute="same", capability="mod"),
    Op("idiv_int64", "elementwise", lambda T, x, y: x.idiv(y),
       _np_exact(lambda x, y: abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)), ("int64",),
       fixed(_DIVIDE_INTS), compute="same", capability="idiv"),
)

# ==== reductions ====


def _np_reduce(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    return lambda a, axis, keepdim: fn(a, axis, keepdims=keepdim)


_SPECIAL_REDUCE = [Case(c.id + "|special", c.args, c.params) for c in
                   [case(Arg((4, 5), domain=special), axis=1, keepdim=False),
                    case(Arg((5, 4), "T", domain=special), axis=None, keepdim=False)]]


def _reduce(name: str, call: Callable[..., Any], ref: Callable[..., Any], dtypes: tuple[str, ...],
            cases: list[Case], out: Callable[..., str] = same, domain: Domain = ANY, tol: Tol = REDUCE,
            compute: str = "auto", specials: bool = False, capability: str = "") -> Op:
    def cases_for(dtype: str) -> list[Case]:
        return cases + (_SPECIAL_REDUCE if specials and is_float(dtype) else [])

    return Op(name, "reduction", call, ref, dtypes, cases_for, out=out, domain=domain, tol=tol,
              compute=compute, capability=capability)


_VAR = reduce_cases(min_len=2) + [case(Arg((3, 4)), axis=1, keepdim=False, correction=0),
                                  case(Arg((2, 3, 4)), axis=None, keepdim=False, correction=0)]
# No degrees of freedom left (N - correction <= 0): inf, or nan where the slice is constant, as numpy and torch.
_VAR_NO_DOF = [case(Arg((1, 2, 3, 1, 5)), axis=(0, 3), keepdim=False, correction=c) for c in (1, 5)] + \
    [case(Arg((2, 3)), axis=1, keepdim=True, correction=4)]
# A size-1 slice has variance 0: std's gradient there is torch's 0, not sqrt's infinite slope at 0.
_STD_CONSTANT = [case(Arg((1, 2, 3, 1, 5)), axis=(0, 3), keepdim=False, correction=0),
                 case(Arg((3, 1)), axis=1, keepdim=True, correction=0)]
_ARGS = reduce_cases(tuples=False)

add(
    _reduce("sum", lambda T, x, **k: x.sum(**k), _np_reduce(np.sum), DTYPES, reduce_cases(empty=True),
            out=accumulate, specials=True),
    _reduce("mean", lambda T, x, **k: x.mean(**k), _np_reduce(np.mean), NUMERIC, reduce_cases(), out=_F),
    _reduce("max", lambda T, x, **k: x.max(**k), _np_reduce(np.max), DTYPES, reduce_cases(), domain=COARSE,
            tol=EXACT, specials=True),
    _reduce("min", lambda T, x, **k: x.min(**k), _np_reduce(np.min), DTYPES, reduce_cases(), domain=COARSE,
            tol=EXACT, specials=True),
    _reduce("argmax", lambda T, x, **k: x.argmax(**k), R.arg_extreme(np.argmax), DTYPES, _ARGS,
            out=to_int64, domain=COARSE, compute="same"),
    _reduce("argmin", lambda T, x, **k: x.argmin(**k), R.arg_extreme(np.argmin), DTYPES, _ARGS,
            out=to_int64, domain=COARSE, compute="same"),
    _reduce("var", lambda T, x, **k: x.var(**k), R.var, NUMERIC, _VAR, out=_F),
    _reduce("std", lambda T, x, **k: x.std(**k), R.std, NUMERIC, _VAR, out=_F),
    _reduce("var_no_dof", lambda T, x, **k: x.var(**k), R.var, FLOATS, _VAR_NO_DOF, out=_F),
    _reduce("std_no_dof", lambda T, x, **k: x.std(**k), R.std, FLOATS, _VAR_NO_DOF, out=_F),
    _reduce("std_constant", lambda T, x, **k: x.std(**k), R.std, FLOATS, _STD_CONSTANT, out=_F),
    _reduce("prod", lambda T, x, **k: x.prod(**k), _np_reduce(np.prod), DTYPES, reduce_cases(empty=True),
            out=accumulate, domain=SMALL),
    # dtype=: cast first and accumulate in it (torch, tinygrad)
    _reduce("sum_dtype", lambda T, x, axis, dtype: x.sum(axis, dtype=dtype),
            lambda a, axis, dtype: np.sum(a.astype(str(dtype)), axis=axis), DTYPES,
            [case(Arg((3, 4)), axis=a, dtype=D(d)) for a in (None, 1) for d in ("int32", "float64")],
            out=lambda dt, axis, dtype: dtype, compute="same", capability="sum"),
    _reduce("prod_dtype", lambda T, x, axis, dtype: x.prod(axis, dtype=dtype),
            lambda a, axis, dtype: np.prod(a.astype(str(dtype)), axis=axis), DTYPES,
            [case(Arg((3, 4)), axis=a, dtype=D(d)) for a in (None, 0) for d in ("int64", "float64")],
            out=lambda dt, axis, dtype: dtype, domain=SMALL, compute="same", capability="prod"),
    _reduce("softmax", lambda T, x, axis: x.softmax(axis), R.softmax, FLOATS, axis_cases(), tol=COMPOSITE),
    _reduce("log_softmax", lambda T, x, axis: x.log_softmax(axis), R.log_softmax, FLOATS, axis_cases(),
            tol=COMPOSITE),
    _reduce("logsumexp", lambda T, x, **k: x.logsumexp(**k), _np_reduce(R.logsumexp), FLOATS,
            reduce_cases(tuples=False)),
    _reduce("cumsum", lambda T, x, axis: x.cumsum(axis), lambda a, axis: np.cumsum(a, axis), DTYPES,
            axis_cases(), out=accumulate),
)

# tinygrad's surface (surface.py): any/all, var_mean/std_mean and the scans written on reductions
_PAIRED = [case(Arg((3, 4)), axis=1, keepdim=False), case(Arg((2, 3, 4)), axis=None, keepdim=False),
           case(Arg((2, 3, 4), "X"), axis=(0, 2), keepdim=True, correction=0)]


_SPECIAL_SCAN = [Case(c.id + "|special", c.args, c.params) for c in
                 [case(Arg((4, 5), domain=special), axis=1), case(Arg((5, 4), "T", domain=special), axis=0)]]


def _np_pair(var: Callable[..., Any]) -> Callable[..., Any]:
    return lambda a, axis, keepdim, correction=1: (var(a, axis, keepdim, correction),
                                                   np.mean(a, axis=axis, keepdims=keepdim))


add(
    _reduce("any", lambda T, x, **k: x.any(**k), _np_reduce(np.any), DTYPES, reduce_cases(empty=True),
            out=to_bool, domain=COARSE, specials=True),
    _reduce("all", lambda T, x, **k: x.all(**k), _np_reduce(np.all), DTYPES, reduce_cases(empty=True),
            out=to_bool, domain=COARSE, specials=True),
    dataclasses.replace(_reduce("var_mean", lambda T, x, **k: x.var_mean(**k), _np_pair(R.var), FLOATS, _PAIRED),
                        kind="tensors"),
    dataclasses.replace(_reduce("std_mean", lambda T, x, **k: x.std_mean(**k), _np_pair(R.std), FLOATS, _PAIRED),
                        kind="tensors"),
    _reduce("cumprod", lambda T, x, axis: x.cumprod(axis), lambda a, axis: np.cumprod(a, axis), DTYPES,
            axis_cases(), out=accumulate, domain=SMALL),
    dataclasses.replace(
        _reduce("cummax", lambda T, x, axis: x.cummax(axis), lambda a, axis: np.maximum.accumulate(a, axis),
                DTYPES, axis_cases(), tol=EXACT, compute="same"),
        cases=lambda dtype: axis_cases() + (_SPECIAL_SCAN if is_float(dtype) else [])),
    _reduce("cummin", lambda T, x, axis: x.cummin(axis), lambda a, axis: np.minimum.accumulate(a, axis), DTYPES,
            axis_cases(), tol=EXACT, compute="same"),
    _reduce("logcumsumexp", lambda T, x, axis: x.logcumsumexp(axis),
            lambda a, axis: np.logaddexp.accumulate(a, axis), FLOATS, axis_cases(), tol=COMPOSITE),
)

# tinygrad's surface (surface.py): indexing ops written on where, sum and views


def _np_gather(a: np.ndarray, i: np.ndarray, dim: int) -> np.ndarray:
    """torch's gather: index may be smaller than the input on the other dims."""
    d = dim % a.ndim
    return np.take_along_axis(a[tuple(slice(None) if k == d else slice(0, n) for k, n in enumerate(i.shape))], i, d)


_FLAGS = {"dtype": "bool"}


def _np_masked_select(a: np.ndarray, m: np.ndarray) -> np.ndarray:
    shape = np.broadcast_shapes(a.shape, m.shape)
    return np.broadcast_to(a, shape)[np.broadcast_to(m, shape)]


def _np_argsort(a: np.ndarray, dim: int, descending: bool) -> np.ndarray:
    """Stable; descending keeps equal elements in their order and puts NaN first, as torch's stable sort."""
    if not descending:
        return np.argsort(a, axis=dim, kind="stable")
    f = a.astype(np.float64)
    return np.lexsort((-np.where(np.isnan(f), 0, f), ~np.isnan(f)), axis=dim)


def _np_sort(a: np.ndarray, dim: int, descending: bool) -> tuple[np.ndarray, np.ndarray]:
    i = _np_argsort(a, dim, descending)
    return np.take_along_axis(a, i, dim), i


def _np_topk(a: np.ndarray, k: int, dim: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    v, i = _np_sort(a, dim, largest)
    keep = tuple(slice(0, k) if d == dim % a.ndim else slice(None) for d in range(a.ndim))
    return v[keep], i[keep]


_SORTS = [case(Arg((3, 6)), dim=1, descending=False), case(Arg((3, 6)), dim=0, descending=True),
          case(Arg((2, 3, 4), "X"), dim=-1, descending=True), case(Arg((5,)), dim=0, descending=False),
          case(Arg((0, 3)), dim=1, descending=False),
          # past NETWORK_FROM (64): the bitonic network instead of ranks
          case(Arg((3, 100)), dim=1, descending=False), case(Arg((70, 2), "T"), dim=0, descending=True)]
_TOPK = [case(Arg((3, 6)), k=2, dim=1, largest=True), case(Arg((4, 3)), k=4, dim=0, largest=False),
         case(Arg((2, 3, 4), "T"), k=0, dim=-1, largest=True), case(Arg((3, 100)), k=5, dim=1, largest=True)]
_SORT_SPECIAL = [Case(c.id + "|special", c.args, c.params)
                 for c in [case(Arg((4, 5), domain=special), dim=1, descending=False),
                           case(Arg((2, 90), domain=special), dim=1, descending=True)]]

add(
    Op("masked_fill", "movement", lambda T, x, m, value: x.masked_fill(m, value),
       lambda a, m, value: np.where(m, value, a), NUMERIC,
       fixed([case(Arg((3, 4)), Arg((3, 4), **_FLAGS), value=2), case(Arg((2, 3, 4)), Arg((3, 1), **_FLAGS), value=2),
              case(Arg((3, 4), "T"), Arg((4,), **_FLAGS), value=2), case(Arg((0, 4)), Arg((4,), **_FLAGS), value=2)]),
       out=lambda dt, value: with_scalar(dt, value), compute="same", tol=EXACT),
    # one_hot gives ints, as torch (int64) and tinygrad (its default int) do
    Op("one_hot", "movement", lambda T, x, n: x.one_hot(n),
       lambda a, n: (a[..., None] == np.arange(n)).astype(np.int64), INTS,
       fixed([case(Arg((5,), domain=classes(4)), n=4), case(Arg((2, 3), domain=classes(6)), n=6),
              case(Arg((0,), domain=classes(3)), n=3), case(Arg((3, 2), "T", domain=classes(2)), n=2)]),
       out=to_int64, compute="same", tol=EXACT),
    Op("gather", "movement", lambda T, x, i, dim: x.gather(dim, i), _np_gather, DTYPES,
       fixed([case(Arg((3, 4, 5)), Arg((3, 2, 5), dtype="int64", domain=classes(4)), dim=1),
              case(Arg((4, 3)), Arg((6, 3), dtype="int64", domain=classes(4)), dim=0),
              case(Arg((4, 3), "T"), Arg((2, 2), dtype="int64", domain=classes(3)), dim=-1),
              case(Arg((4, 3)), Arg((0, 3), dtype="int64", domain=classes(4)), dim=0)]), compute="same", tol=EXACT),
    Op("masked_select", "movement", lambda T, x, m: x.masked_select(m), _np_masked_select, DTYPES,
       fixed([case(Arg((3, 4)), Arg((3, 4), **_FLAGS)), case(Arg((2, 3, 4), "T"), Arg((4,), **_FLAGS)),
              case(Arg((0, 4)), Arg((4,), **_FLAGS))]), compute="same", tol=EXACT),
    Op("unfold", "movement", lambda T, x, dim, size, step: x.unfold(dim, size, step),
       lambda a, dim, size, step: np.moveaxis(np.lib.stride_tricks.sliding_window_view(a, size, dim)
                                              .take(range(0, a.shape[dim] - size + 1, step), dim), -1, -1), DTYPES,
       fixed([case(Arg((2, 3, 4)), dim=2, size=2, step=1), case(Arg((2, 3, 4), "X"), dim=1, size=2, step=2),
              case(Arg((5,)), dim=0, size=5, step=3), case(Arg((4, 3)), dim=0, size=1, step=2)]),
       compute="same", tol=EXACT),
    Op("roll", "movement", lambda T, x, shifts, dims: x.roll(shifts, dims),
       lambda a, shifts, dims: np.roll(a, shifts, dims), DTYPES,
       fixed([case(Arg((3, 4, 5)), shifts=2, dims=1), case(Arg((3, 4)), shifts=(1, -3), dims=(0, 1)),
              case(Arg((3, 4), "T"), shifts=5, dims=None), case(Arg((0, 3)), shifts=1, dims=0)]),
       compute="same", tol=EXACT),
    Op("diag", "movement", lambda T, x: x.diag(), np.diag, DTYPES,
       fixed([case(Arg((4,))), case(Arg((3, 4))), case(Arg((3, 3), "T")), case(Arg((0,)))]), compute="same",
       tol=EXACT),
    Op("diagonal", "movement", lambda T, x, **k: x.diagonal(**k),
       lambda a, offset=0, dim1=0, dim2=1: np.diagonal(a, offset, dim1, dim2), DTYPES,
       fixed([case(Arg((3, 4))), case(Arg((3, 4, 5)), offset=1, dim1=1, dim2=2),
              case(Arg((3, 4, 5), "X"), offset=-2, dim1=2, dim2=0), case(Arg((3, 4)), offset=7)]),
       compute="same", tol=EXACT),
    Op("repeat_interleave", "movement", lambda T, x, repeats, dim: x.repeat_interleave(repeats, dim),
       lambda a, repeats, dim: np.repeat(a, repeats, dim), DTYPES,
       fixed([case(Arg((3, 4)), repeats=2, dim=1), case(Arg((2, 3, 4), "T"), repeats=3, dim=0),
              case(Arg((3, 4)), repeats=2, dim=None), case(Arg((3, 4)), repeats=0, dim=-1),
              case(Arg((3, 4)), repeats=[2, 0, 3, 1], dim=1), case(Arg((3, 4), "T"), repeats=[3], dim=0)]),
       compute="same", tol=EXACT),
    Op("repeat_interleave_tensor", "movement", lambda T, x, r, dim: x.repeat_interleave(r, dim),
       lambda a, r, dim: np.repeat(a, r, dim), DTYPES,
       fixed([case(Arg((3, 4)), Arg((4,), dtype="int64", domain=classes(3)), dim=1),
              case(Arg((2, 3, 4), "X"), Arg((2,), dtype="int64", domain=classes(3)), dim=0)]),
       compute="same", tol=EXACT, capability="repeat_interleave"),
    Op("meshgrid", "movement", lambda T, x, *others, indexing: x.meshgrid(*others, indexing=indexing),
       lambda *arrays, indexing: np.meshgrid(*arrays, indexing=indexing), DTYPES,
       fixed([case(Arg((3,)), Arg((2,)), indexing="ij"), case(Arg((3,)), Arg((2,)), Arg((4,)), indexing="xy"),
              case(Arg((3,)), Arg((0,)), indexing="xy"), case(Arg(()), Arg((2,)), indexing="ij")]),
       compute="same", tol=EXACT, kind="tensors"),
    # sort and topk return (values, indices): each piece is its own entry, the values' with a gradient
    Op("sort", "reduction", lambda T, x, dim, descending: x.sort(dim, descending)[0],
       lambda a, **k: _np_sort(a, **k)[0], DTYPES, lambda dtype: _SORTS + (_SORT_SPECIAL if is_float(dtype) else []),
       domain=COARSE, compute="same", tol=EXACT),
    Op("sort_indices", "reduction", lambda T, x, dim, descending: x.sort(dim, descending)[1],
       lambda a, **k: _np_sort(a, **k)[1], DTYPES, lambda dtype: _SORTS + (_SORT_SPECIAL if is_float(dtype) else []),
       out=to_int64, domain=COARSE, compute="same", tol=EXACT, capability="sort"),
    Op("argsort", "reduction", lambda T, x, dim, descending: x.argsort(dim, descending), _np_argsort, DTYPES,
       fixed(_SORTS), out=to_int64, domain=COARSE, compute="same", tol=EXACT),
    Op("topk", "reduction", lambda T, x, k, dim, largest: x.topk(k, dim, largest)[0],
       lambda a, **kw: _np_topk(a, **kw)[0], DTYPES, fixed(_TOPK), domain=COARSE, compute="same", tol=EXACT),
    Op("topk_indices", "reduction", lambda T, x, k, dim, largest: x.topk(k, dim, largest)[1],
       lambda a, **kw: _np_topk(a, **kw)[1], DTYPES, fixed(_TOPK), out=to_int64, domain=COARSE, compute="same",
       tol=EXACT, capability="topk"),
    Op("scaled_uniform", "creation", lambda T, shape: T.scaled_uniform(*shape), None, ("float32",), _INIT,
       kind="random", check=R.init_law(lambda shape: math.prod(shape) ** -0.5)),
    Op("kaiming_normal", "creation", lambda T, shape: T.kaiming_normal(*shape), None, ("float32",), _INIT,
       kind="random", check=R.normal_init_law(lambda shape: R.kaiming_bound(shape) / math.sqrt(3.0))),
    Op("rand_like", "creation", lambda T, x: x.rand_like(), None, FLOATS, fixed([case(Arg((100, 100)))]),
       kind="random", check=R.random_law(0.0, 1.0, 0.5, math.sqrt(1 / 12))),
    Op("randn_like", "creation", lambda T, x: x.randn_like(), None, FLOATS, fixed([case(Arg((100, 100), "T"))]),
       kind="random", check=R.random_law(-np.inf, np.inf, 0.0, 1.0)),
    Op("bernoulli", "creation", lambda T, p: p.bernoulli(), None, FLOATS,
       fixed([case(Arg((100, 100), domain=lambda rng, shape, dtype: np.full(shape, 0.25, dtype)))]),
       kind="random", check=R.bernoulli_law),
    Op("multinomial", "creation", lambda T, w, n: w.multinomial(n, replacement=True), None, FLOATS,
       fixed([case(Arg(s, domain=lambda rng, shape, dtype: np.broadcast_to(np.array([1, 2, 0, 5], dtype), shape)),
                   n=4000) for s in [(4,), (3, 4)]]), kind="random", check=R.multinomial_law, out=to_int64),
    Op("randperm", "creation", lambda T, n: T.randperm(n), None, ("int64",), fixed([case(n=40), case(n=1)]),
       kind="random", check=R.randperm_law, out=lambda dt, **_: None),
)



def _distinct(n: int, dim: int):
    """Index values 0..n-1 that never repeat along dim (scatter's targets, so no write is lost)."""

    def draw(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
        moved = shape[:dim] + shape[dim + 1:] + (shape[dim],)
        lines = [rng.permutation(n)[:shape[dim]] for _ in range(math.prod(moved[:-1]))]
        return np.moveaxis(np.array(lines, dtype=np.int64).reshape(moved), -1, dim).astype(dtype)

    return draw


def _targets(shape: tuple, n: int, dim: int = 0, layout: str = "C", repeats: bool = False) -> Arg:
    return Arg(shape, layout, dtype="int64", domain=classes(n) if repeats else _distinct(n, dim))


_SCATTER = [case(Arg((4, 5)), _targets((3, 5), 4), Arg((3, 6)), dim=0),
            case(Arg((3, 6), "T"), _targets((2, 4), 6, 1), Arg((3, 5)), dim=1),
            case(Arg((2, 3, 4)), _targets((2, 2, 4), 3, 1), Arg((2, 3, 4), "X"), dim=-2),
            case(Arg((4, 5)), _targets((0, 5), 4, repeats=True), Arg((3, 5)), dim=0)]
_SCATTER_REDUCE = [case(Arg((4, 5)), _targets((3, 5), 4, repeats=True), Arg((3, 6)), dim=0, reduce=r, include_self=i)
                   for r, i in [("sum", True), ("prod", False), ("mean", True), ("mean", False), ("amax", True),
                                ("amin", False)]]
_SCATTER_REDUCE += [case(Arg((2, 3, 4), "T"), _targets((2, 3, 6), 4, repeats=True), Arg((2, 3, 6)), dim=-1,
                         reduce="sum", include_self=False)]
_MASKS = [case(Arg((3, 4)), Arg((3, 4), **_FLAGS)), case(Arg((4, 3), "T"), Arg((4,), **_FLAGS)),
          case(Arg((2, 3, 4)), Arg((2, 3), **_FLAGS)), case(Arg((0, 3)), Arg((0,), **_FLAGS))]

add(
    Op("scatter", "movement", lambda T, x, i, s, dim: x.scatter(dim, i, s),
       lambda a, i, s, dim: RC.scatter_reduce(a, i, s, dim), DTYPES, fixed(_SCATTER), compute="same", tol=EXACT),
    Op("scatter_value", "movement", lambda T, x, i, dim, value: x.scatter(dim, i, value),
       lambda a, i, dim, value: RC.scatter_reduce(a, i, np.full(i.shape, value, a.dtype), dim), DTYPES,
       fixed([case(Arg((4, 5)), _targets((2, 5), 4), dim=0, value=2)]), compute="same", tol=EXACT,
       capability="scatter"),
    # a repeated target keeps the last source: forward only (see NO_GRADIENT)
    Op("scatter_repeats", "movement", lambda T, x, i, s, dim: x.scatter(dim, i, s),
       lambda a, i, s, dim: RC.scatter_reduce(a, i, s, dim), NUMERIC,
       fixed([case(Arg((4, 5)), _targets((3, 5), 4, repeats=True), Arg((3, 5)), dim=0)]), compute="same", tol=EXACT),
    Op("scatter_add", "movement", lambda T, x, i, s, dim: x.scatter(dim, i, s, reduce="add"),
       lambda a, i, s, dim: RC.scatter_reduce(a, i, s, dim, "sum"), NUMERIC,
       fixed([case(Arg((4, 5)), _targets((3, 5), 4, repeats=True), Arg((3, 6)), dim=0)]), tol=REDUCE,
       capability="scatter"),
    Op("scatter_reduce", "movement", lambda T, x, i, s, **k: x.scatter_reduce(src=s, index=i, **k),
       lambda a, i, s, dim, reduce, include_self: RC.scatter_reduce(a, i, s, dim, reduce, include_self), NUMERIC,
       fixed(_SCATTER_REDUCE), tol=REDUCE),
    Op("getitem_mask", "movement", lambda T, x, m: x[m], lambda a, m: a[m], DTYPES, fixed(_MASKS), compute="same",
       tol=EXACT, capability="getitem"),
)

# Sizes past the kernels' blocks (16-wide unrolled rows, 4096-element chunks, strided columns).
_LARGE = [case(Arg(s), axis=ax, keepdim=False)
          for s, ax in [((5000,), 0), ((3, 4100), 1), ((4100, 3), 0), ((2, 3000), -1), ((70, 80), None)]]
_LARGE += [case(Arg((80, 70), "T"), axis=0, keepdim=False), case(Arg((2, 3000), "F"), axis=1, keepdim=True)]

add(
    _reduce("sum_large", lambda T, x, **k: x.sum(**k), _np_reduce(np.sum), DTYPES, _LARGE, out=accumulate,
            tol=LARGE_REDUCE, capability="sum"),
    _reduce("max_large", lambda T, x, **k: x.max(**k), _np_reduce(np.max), DTYPES, _LARGE, tol=EXACT,
            capability="max"),
    _reduce("argmax_large", lambda T, x, **k: x.argmax(**k), R.arg_extreme(np.argmax), DTYPES, _LARGE,
            out=to_int64, domain=COARSE, compute="same", capability="argmax"),
    _reduce("cumsum_large", lambda T, x, axis: x.cumsum(axis), lambda a, axis: np.cumsum(a, axis), DTYPES,
            [case(Arg(s), axis=ax) for s, ax in [((5000,), 0), ((3, 4100), 1), ((4100, 3), 0)]],
            out=accumulate, tol=LARGE_REDUCE, capability="cumsum"),
)

# ==== linear algebra and NN functional (float64 references in references.py) ====


def _nn(name: str, call: Callable[..., Any], ref: Callable[..., Any], cases: list[Case], tol: Tol = GEMM,
        dtypes: tuple[str, ...] = FLOATS, **kw: Any) -> Op:
    return Op(name, "nn", call, ref, dtypes, fixed(cases), tol=tol, **kw)


def _seq_layers(w: Any) -> list[Callable[[Any], Any]]:
    """Three layers for Tensor.sequential: a product with w, a relu, an affine map."""
    return [lambda t: t @ w, lambda t: t.relu(), lambda t: t * 2 - 1]


def _pairs(specs: list[tuple]) -> list[Case]:
    return [case(Arg(a, la), Arg(b, lb)) for a, la, b, lb in specs]


_MATMUL = _pairs([((3, 4), "C", (4, 5), "C"), ((4,), "C", (4, 5), "C"), ((3, 4), "C", (4,), "C"),
                  ((4,), "C", (4,), "C"), ((2, 3, 4), "C", (4, 5), "C"), ((2, 3, 4), "C", (2, 4, 5), "C"),
                  ((2, 1, 3, 4), "C", (5, 4, 2), "C"), ((3, 0), "C", (0, 2), "C"), ((0, 4), "C", (4, 3), "C"),
                  ((1, 1), "C", (1, 1), "C"), ((5, 64), "C", (64, 6), "C"), ((3, 4), "T", (4, 5), "T"),
                  ((3, 4), "F", (4, 5), "X"), ((2, 3, 4), "S", (4, 5), "E"), ((4, 3), "R", (3,), "F")])
# K past the GEMM's k-block of 256
_MATMUL_LARGE = _pairs([((7, 300), "C", (300, 9), "C"), ((2, 33, 260), "C", (260, 17), "C"),
                        ((7, 300), "T", (300, 9), "T"), ((5, 300), "F", (300,), "S")])
_X = (2, 3, 7, 7)
_W = (4, 3, 3, 3)
_CONV = [case(Arg(_X), Arg(_W)), case(Arg(_X), Arg(_W), Arg((4,))), case(Arg(_X), Arg(_W), stride=2),
         case(Arg(_X), Arg(_W), padding=1), case(Arg(_X), Arg(_W), dilation=2),
         case(Arg((1, 4, 6, 6)), Arg((6, 2, 3, 3)), groups=2),
         case(Arg(_X), Arg((2, 3, 2, 3)), padding=(1, 2)),
         case(Arg(_X), Arg((2, 3, 1, 1))),
         case(Arg(_X, "F"), Arg(_W, "X"), Arg((4,), "S"), stride=(2, 1), padding=1),
         case(Arg((2, 4, 9)), Arg((6, 2, 3)), Arg((6,)), groups=2, stride=2, padding=1),  # 1-d
         case(Arg((1, 2, 5, 6, 4)), Arg((3, 2, 2, 3, 2)), dilation=(1, 2, 1), padding=(1, 0, 1)),  # 3-d
         case(Arg(_X), Arg((2, 3, 3, 2)), padding=(1, 0, 2, -1))]  # torch's flat form: asymmetric, negative
_CONV_T = [case(Arg((2, 4, 5, 6)), Arg((4, 3, 3, 2))),
           case(Arg((2, 4, 5, 6)), Arg((4, 3, 3, 2)), Arg((6,)), groups=2, stride=(2, 3), padding=(1, 0),
                output_padding=(1, 2)),
           case(Arg((1, 3, 4, 4), "T"), Arg((3, 2, 3, 3)), stride=2, padding=1, dilation=2, output_padding=1),
           case(Arg((2, 3, 7)), Arg((3, 4, 3)), stride=3, padding=2),  # 1-d
           case(Arg((1, 2, 3, 4, 3)), Arg((2, 2, 2, 2, 2)), Arg((2,)), stride=2)]  # 3-d
_POOL = [case(Arg((2, 3, 6, 6))), case(Arg((2, 3, 6, 6)), kernel_size=3, stride=1),
         case(Arg((1, 2, 5, 7)), kernel_size=(2, 3), stride=(1, 2)),
         case(Arg((2, 3, 7, 7)), kernel_size=3, stride=2), case(Arg((2, 3, 6, 6), "F"), kernel_size=2),
         case(Arg((2, 5, 5)), kernel_size=2, stride=1)]
_POOL_MORE = [case(Arg((2, 3, 7, 6)), kernel_size=3, stride=2, padding=1, ceil_mode=True),
              case(Arg((2, 3, 9)), kernel_size=(3,), stride=(2,), ceil_mode=True),  # 1-d
              case(Arg((1, 2, 5, 4, 6), "T"), kernel_size=(2, 2, 3), ceil_mode=True)]  # 3-d
_UNPOOL = [case(Arg((2, 3, 6, 6)), kernel_size=2),
           case(Arg((2, 3, 7, 6)), kernel_size=3, padding=1, output_size=(7, 6)),
           case(Arg((2, 3, 8), "T"), kernel_size=(2,), stride=(3,))]  # windows that never overlap (see TORCH)
_RESIZE = [case(Arg((2, 3, 4, 5)), size=(7, 3), mode="linear"),
           case(Arg((2, 3, 4, 5)), size=(6, 9), mode="linear", align_corners=True),
           case(Arg((2, 3, 5)), size=(8,), mode="linear"),
           case(Arg((1, 2, 3, 4, 2), "T"), size=(5, 2, 3), mode="linear", align_corners=True),
           case(Arg((2, 3, 4, 5)), size=(1, 1), mode="linear", align_corners=True),
           case(Arg((2, 3, 4, 5)), size=(7, 3), mode="nearest"),
           case(Arg((2, 3, 4, 5), "F"), size=(3, 8), mode="nearest-exact")]
_ATTENTION = [case(Arg((2, 3, lq, 8)), Arg((2, 3, lk, 8)), Arg((2, 3, lk, 4)), is_causal=c)
              for lq, lk, c in [(5, 6, False), (5, 5, True), (1, 4, False), (4, 4, True)]]
_ATTENTION += [case(Arg((2, 5, 8)), Arg((2, 6, 8)), Arg((2, 6, 4)),
                    Arg((5, 6), dtype="bool", domain=attention_mask), is_causal=False),
               case(Arg((2, 5, 8), "F"), Arg((2, 5, 8), "T"), Arg((2, 5, 4), "S"), is_causal=True)]
_GQA = [case(Arg((2, 6, 5, 8)), Arg((2, 2, 7, 8)), Arg((2, 2, 7, 4)), is_causal=False),
        case(Arg((1, 4, 5, 8)), Arg((1, 1, 5, 8)), Arg((1, 1, 5, 4)), is_causal=True)]


def _labels(shape: tuple, n: int, layout: str = "C") -> Arg:
    return Arg(shape, layout, dtype="int64", domain=classes(n))


def _unpool(T, x, kernel_size, stride=None, padding=0, output_size=None):
    values, where = x.max_pool2d(kernel_size, stride, padding=padding, return_indices=True)
    return values.max_unpool2d(where, kernel_size, stride, padding=padding, output_size=output_size)


def _attention(T, q, k, v, *mask, is_causal):
    return q.scaled_dot_product_attention(k, v, *mask, is_causal=is_causal)


add(
    _nn("sequential", lambda T, x, w: x.sequential(_seq_layers(w)),
        lambda a, w: np.maximum(a @ w, 0) * 2 - 1,
        [case(Arg((3, 4)), Arg((4, 5))), case(Arg((2, 3, 4), "T"), Arg((4, 2)))]),
    _nn("matmul", lambda T, x, y: x.matmul(y), np.matmul, _MATMUL, dtypes=NUMERIC),
    _nn("matmul_large", lambda T, x, y: x.matmul(y), np.matmul, _MATMUL_LARGE, dtypes=NUMERIC, tol=LARGE_GEMM,
        capability="matmul"),
    _nn("dot", lambda T, x, y: x.dot(y), np.dot,
        [case(Arg((3, 4)), Arg((4, 5))), case(Arg((4,)), Arg((4,))), case(Arg((3, 4), "T"), Arg((4,)))],
        dtypes=NUMERIC),
    _nn("linear", lambda T, x, w, *b: x.linear(w, *b), lambda a, w, *b: a @ w + (b[0] if b else 0),
        [case(Arg((2, 3, 4)), Arg((4, 5)), Arg((5,))), case(Arg((6, 4)), Arg((4, 2))),
         case(Arg((6, 4), "F"), Arg((4, 2), "T"), Arg((2,)))]),
    _nn("layernorm", lambda T, x, **k: x.layernorm(**k), R.layernorm,
        [case(Arg((2, 3, 8))), case(Arg((4, 16)), eps=1e-3), case(Arg((2, 3, 8)), axis=1),
         case(Arg((3, 8), "T")), case(Arg((1, 5)))], tol=COMPOSITE),
    _nn("batchnorm", lambda T, x, *stats, **k: x.batchnorm(*stats, **k), R.batchnorm,
        [case(Arg((4, 3)), Arg((3,)), Arg((3,)), Arg((3,)), Arg((3,), domain=POSITIVE)),
         case(Arg((2, 3, 4, 5), "T"), Arg((3,)), Arg((3,)), Arg((3,)), Arg((3,), domain=POSITIVE)),
         case(Arg((2, 3, 4)), Arg((2, 3)), Arg((2, 3)), Arg((2, 3)), Arg((2, 3), domain=POSITIVE), axis=(0, 1)),
         case(Arg((2, 3, 4)), Arg((4,)), Arg((4,)), Arg((4,)), Arg((4,), domain=POSITIVE), axis=-1)],
        tol=COMPOSITE),
    _nn("conv2d", lambda T, x, w, *b, **k: x.conv2d(w, *b, **k), RC.conv, _CONV),
    _nn("conv_transpose2d", lambda T, x, w, *b, **k: x.conv_transpose2d(w, *b, **k), RC.conv_transpose, _CONV_T),
    _nn("max_pool2d", lambda T, x, **k: x.max_pool2d(**k), lambda a, **k: RC.pool(a, mode="max", **k),
        _POOL + _POOL_MORE + [case(Arg((2, 3, 6, 6)), kernel_size=3, stride=2, padding=1),
                              case(Arg((1, 2, 7, 7)), kernel_size=2, dilation=2)], tol=EXACT),
    _nn("max_pool2d_indices", lambda T, x, **k: x.max_pool2d(**k, return_indices=True)[1],
        lambda a, **k: RC.pool(a, indices=True, **k), _POOL[:3] + _POOL_MORE, out=to_int64, tol=EXACT,
        capability="max_pool2d"),
    _nn("max_unpool2d", _unpool, RC.max_unpool, _UNPOOL, tol=EXACT),
    _nn("avg_pool2d", lambda T, x, **k: x.avg_pool2d(**k), lambda a, **k: RC.pool(a, mode="avg", **k),
        _POOL + _POOL_MORE + [case(Arg((2, 3, 6, 6)), kernel_size=3, stride=1, padding=1),
                              case(Arg((2, 3, 6, 6)), kernel_size=3, stride=1, padding=1, count_include_pad=False),
                              case(Arg((2, 3, 7, 6)), kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                   count_include_pad=False)], tol=COMPOSITE),
    _nn("interpolate", lambda T, x, **k: x.interpolate(**k), RC.interpolate, _RESIZE, tol=COMPOSITE),
    _nn("dropout", lambda T, x, p: x.dropout(p), lambda a, p: a,
        [case(Arg((4, 5)), p=0.5), case(Arg(()), p=0.9)], tol=EXACT),
    _nn("dropout_train", lambda T, x, p: R.dropout_train(T, x, p), None,
        [case(Arg((100, 100), domain=POSITIVE), p=0.25), case(Arg((50, 40), "T", domain=POSITIVE), p=0.5)],
        kind="random", check=R.dropout_law, capability="dropout"),
    _nn("scaled_dot_product_attention", _attention,
        lambda q, k, v, *m, is_causal: R.attention(q, k, v, *m, is_causal=is_causal), _ATTENTION,
        tol=COMPOSITE),
    _nn("scaled_dot_product_attention_gqa",
        lambda T, q, k, v, is_causal: q.scaled_dot_product_attention(k, v, is_causal=is_causal, enable_gqa=True),
        lambda q, k, v, is_causal: R.attention(q, np.repeat(k, q.shape[-3] // k.shape[-3], -3),
                                               np.repeat(v, q.shape[-3] // v.shape[-3], -3), is_causal=is_causal),
        _GQA, tol=COMPOSITE, capability="scaled_dot_product_attention"),
    _nn("cross_entropy", lambda T, x, y: x.cross_entropy(y), R.cross_entropy,
        [case(Arg((6, 5)), _labels((6,), 5)), case(Arg((1, 3)), _labels((1,), 3)),
         case(Arg((4, 5), "T"), _labels((4,), 5, "F")), case(Arg((6, 5)), Arg((6, 5), domain=probabilities))],
        tol=COMPOSITE),
    _nn("sparse_categorical_crossentropy", lambda T, x, y, **k: x.sparse_categorical_crossentropy(y, **k),
        R.sparse_categorical_crossentropy,
        [case(Arg((8, 5)), _labels((8,), 5)),
         case(Arg((2, 4, 5)), Arg((2, 4), dtype="int64", domain=labels_with_ignored)),
         case(Arg((6, 5)), _labels((6,), 5), ignore_index=2), case(Arg((4, 5), "T"), _labels((4,), 5, "R"))],
        tol=COMPOSITE),
    _nn("binary_crossentropy", lambda T, p, y: p.binary_crossentropy(y), R.binary_crossentropy,
        [case(Arg((10,)), Arg((10,))), case(Arg((3, 4), "T"), Arg((3, 4), "E"))], domain=PROB, tol=COMPOSITE),
    _nn("binary_crossentropy_logits", lambda T, x, y: x.binary_crossentropy_logits(y),
        R.binary_crossentropy_logits,
        [case(Arg((10,), domain=WIDE), Arg((10,))), case(Arg((3, 4), "F", domain=WIDE), Arg((3, 4)))],
        domain=PROB, tol=COMPOSITE),
    _nn("binary_crossentropy_logits_pos_weight", lambda T, x, y, w: x.binary_crossentropy_logits(y, pos_weight=w),
        lambda x, y, w: -np.mean(w * y * np.log(R.sigmoid(x)) + (1 - y) * np.log(R.sigmoid(-x))),
        [case(Arg((6, 3), domain=WIDE), Arg((6, 3)), Arg((3,), domain=POSITIVE)),
         case(Arg((4, 3), "T", domain=WIDE), Arg((4, 3)), Arg((4, 3), domain=POSITIVE))],
        domain=PROB, tol=COMPOSITE, capability="binary_crossentropy_logits"),
    _nn("nll_loss", lambda T, x, y, **k: x.nll_loss(y, **k), R.nll_loss,
        [case(Arg((6, 5)), _labels((6,), 5)), case(Arg((2, 5, 3)), _labels((2, 3), 5), reduction="sum"),
         case(Arg((4, 5), "T"), Arg((4,), dtype="int64", domain=labels_with_ignored), ignore_index=-1),
         case(Arg((6, 5)), _labels((6,), 5), reduction="none")], tol=COMPOSITE),
    _nn("nll_loss_weight", lambda T, x, y, w: x.nll_loss(y, w), lambda x, y, w: R.nll_loss(x, y, w),
        [case(Arg((6, 5)), _labels((6,), 5), Arg((5,), domain=POSITIVE))], tol=COMPOSITE, capability="nll_loss"),
    _nn("einsum", lambda T, *xs, formula: T.einsum(formula, *xs), lambda *a, formula: np.einsum(formula, *a),
        [case(Arg((3, 4)), Arg((4, 5)), formula="ij,jk->ik"), case(Arg((3, 4)), Arg((4, 5)), formula="ij,jk"),
         case(Arg((2, 3, 4), "X"), formula="bij->jb"), case(Arg((2, 3, 4)), Arg((4, 5)), formula="bij,jk->bik"),
         case(Arg((3, 4)), Arg((3, 4), "T"), formula="ij,ij->"), case(Arg((3,)), Arg((4,)), formula="i,j->ij"),
         case(Arg((2, 3)), Arg((3, 4)), Arg((4,)), formula="ab,bc,c->a"),
         case(Arg((3, 3)), formula="ii->i"), case(Arg((3, 3), "T"), formula="ii"),
         case(Arg((3, 3, 2)), formula="iij->j"), case(Arg((2, 3, 4)), Arg((4, 5)), formula="...ij,jk->...ik"),
         case(Arg((2, 4, 4), "X"), formula="...ii->...i"), case(Arg((2, 3)), Arg((3,)), formula="...j,...j")]),
    _nn("solve", lambda T, a, b: a.solve(b), np.linalg.solve,
        [case(Arg((n, n), domain=diag_dominant), Arg(b)) for n, b in [(1, (1,)), (4, (4,)), (7, (7, 3))]]
        + [case(Arg((5, 5), "T", domain=diag_dominant), Arg((5, 2), "F"))], tol=SOLVE),
)

# ==== conversion ====

_CONVERT = [case(Arg(s, lay)) for s, lay in [((), "C"), ((0,), "C"), ((7,), "R"), ((3, 4), "C"),
                                             ((3, 4), "T"), ((2, 3, 5), "X"), ((3, 4), "E"),
                                             ((1, 0, 2), "C")]]
_CASTS = [((3, 4), "C"), ((3, 4), "T"), ((0,), "C"), ((), "C")]


def _conv(name: str, call: Callable[..., Any], ref: Callable[..., Any], cases: Callable[[str], list[Case]],
          **kw: Any) -> Op:
    return Op(name, "conversion", call, ref, DTYPES, cases, compute="same", **kw)


add(
    _conv("numpy", lambda T, x: x.numpy(), lambda a: a, fixed(_CONVERT), kind="array", tol=EXACT),
    _conv("item", lambda T, x: x.item(), lambda a: a.item(),
          fixed([case(Arg(())), case(Arg((1,))), case(Arg((1, 1), "T")), case(Arg((1,), "R"))]),
          kind="value"),
    _conv("tolist", lambda T, x: x.tolist(), lambda a: a.tolist(), fixed(_CONVERT), kind="value"),
    _conv("to", lambda T, x, device: x.to(device), lambda a, device: a,
          fixed([case(Arg((3, 4)), device=DEFAULT_DEVICE), case(Arg((3, 4), "T"), device=DEFAULT_DEVICE)]),
          tol=EXACT),
    _conv("cast", lambda T, x, dtype: x.cast(dtype), lambda a, dtype: a.astype(dtype),
          fixed([case(Arg(s, lay), dtype=D(to)) for to in DTYPES for s, lay in _CASTS]),
          out=lambda dt, dtype: dtype, tol=EXACT),
    _conv("float", lambda T, x: x.float(), lambda a: a.astype(np.float32), fixed(_CONVERT[2:5]),
          out=lambda dt: "float32", tol=EXACT),
    _conv("int", lambda T, x: x.int(), lambda a: a.astype(np.int32), fixed(_CONVERT[2:5]),
          out=lambda dt: "int32", tol=EXACT),  # int32, as in tinygrad and torch
    _conv("bool", lambda T, x: x.bool(), lambda a: a.astype(bool), fixed(_CONVERT[2:5]),
          out=lambda dt: "bool", tol=EXACT),
)

# ==== autograd (stage2+): one smoke test each here; gradients get their own suite ====


def _backward(T, x):
    y = T(x.numpy(), requires_grad=True)
    (y * y).sum().backward()
    return y.grad


def _no_grad(T, x):
    with T.no_grad():
        y = T(x.numpy(), requires_grad=True) * 2
    return bool(y.requires_grad)


def _detach(T, x):
    return bool(T(x.numpy(), requires_grad=True).detach().requires_grad)


add(
    Op("backward", "autograd", _backward, lambda a: 2 * a, FLOATS,
       fixed([case(Arg((3, 4))), case(Arg((3, 4), "T"))])),
    Op("detach", "autograd", _detach, lambda a: False, FLOATS, _ONE, kind="value", compute="same"),
    Op("requires_grad_", "autograd", lambda T, x: bool(x.requires_grad_().requires_grad), lambda a: True,
       FLOATS, _ONE, kind="value", compute="same"),
    Op("no_grad", "autograd", _no_grad, lambda a: False, FLOATS, _ONE, kind="value", compute="same"),
)

# ==== gradients (stage2+): how test_grad.py checks each differentiable op ====
#
# Movement ops only move values, so their gradient is the adjoint of an index map: replaying the
# op's numpy reference on the positions 1..n of each input tells where every output element came
# from, and the gradient must add the output's cotangent back there (exactly, in every dtype).
# Every other float op is checked against torch's autograd on the same inputs; `t` is the torch
# module, the other arguments are torch tensors (or the case's params), as in `call`.

MOVED = {"T", "reshape", "view", "permute", "transpose", "expand", "pad", "shrink", "flip", "flatten",
         "unflatten", "squeeze", "unsqueeze", "contiguous", "getitem", "cat", "stack", "split", "chunk", "repeat",
         "to", "dropout", "getitem_torch_rules", "reshape_none", "flip_args"}


def _t_dims(axis: Any) -> tuple:
    return () if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)


def _t_reduce(name: str) -> Callable[..., Any]:
    def ref(t, x, axis, keepdim, **k):
        if axis is None:
            return getattr(t, name)(x, **k) if name in ("var", "std") else getattr(t, name)(x)
        return getattr(t, name)(x, dim=_t_dims(axis), keepdim=keepdim, **k)

    return ref


def _t_prod(t, x, axis, keepdim):
    for d in sorted((a % max(x.ndim, 1) for a in _t_dims(axis)), reverse=True) if axis is not None else []:
        x = x.prod(dim=d, keepdim=keepdim)
    return x if axis is not None else x.prod()


def _t_amax(name: str) -> Callable[..., Any]:
    def ref(t, x, axis, keepdim):  # amax/amin split the gradient between ties, as our max/min do
        return getattr(t, name)(x, dim=_t_dims(axis), keepdim=keepdim)

    return ref


def _t_logsumexp(t, x, axis, keepdim):
    return t.logsumexp(x, dim=_t_dims(axis) or tuple(range(x.ndim)), keepdim=keepdim)


def _t_layernorm(t, x, axis=-1, eps=1e-5):
    centered = x - x.mean(dim=axis, keepdim=True)
    return centered * (centered.square().mean(dim=axis, keepdim=True) + eps).rsqrt()


def _t_pool(kind: str) -> Callable[..., Any]:
    def ref(t, x, kernel_size=(2, 2), stride=None, padding=0, dilation=1, ceil_mode=False, count_include_pad=True):
        n = 2 if isinstance(kernel_size, int) else len(kernel_size)
        if kind == "max":
            return getattr(t.nn.functional, f"max_pool{n}d")(x, kernel_size, stride, padding, dilation,
                                                              ceil_mode=ceil_mode)
        return getattr(t.nn.functional, f"avg_pool{n}d")(x, kernel_size, stride, padding, ceil_mode=ceil_mode,
                                                          count_include_pad=count_include_pad)

    return ref


def _t_fit(src, index):
    return src[tuple(slice(0, n) for n in index.shape)]


def _t_unpool(t, x, kernel_size, stride=None, padding=0, output_size=None):
    """(torch gives an element that is the maximum of two overlapping windows its gradient twice; the
    derivative of the unpooled output is once, as ours: _UNPOOL's windows never overlap.)"""
    n = 2 if isinstance(kernel_size, int) else len(kernel_size)
    values, where = getattr(t.nn.functional, f"max_pool{n}d")(x, kernel_size, stride, padding, return_indices=True)
    return getattr(t.nn.functional, f"max_unpool{n}d")(values, where, kernel_size, stride, padding, output_size)


def _t_conv(t, x, w, *b, stride=1, padding=0, dilation=1, groups=1):
    n = w.ndim - 2
    if not isinstance(padding, int) and len(padding) == 2 * n:  # torch's conv has no flat form: pad first
        x, padding = t.nn.functional.pad(x, padding), 0
    return getattr(t.nn.functional, f"conv{n}d")(x, w, *b, stride=stride, padding=padding, dilation=dilation,
                                                 groups=groups)


def _t_conv_transpose(t, x, w, *b, stride=1, padding=0, dilation=1, groups=1, output_padding=0):
    return getattr(t.nn.functional, f"conv_transpose{w.ndim - 2}d")(x, w, *b, stride=stride, padding=padding,
                                                                    output_padding=output_padding, groups=groups,
                                                                    dilation=dilation)


def _t_interpolate(t, x, size, mode="linear", align_corners=False):
    if mode != "linear":
        return t.nn.functional.interpolate(x, size, mode=mode)
    return t.nn.functional.interpolate(x, size, mode=("linear", "bilinear", "trilinear")[len(size) - 1],
                                       align_corners=align_corners)


def _t_attention(t, q, k, v, *mask, is_causal):
    return t.nn.functional.scaled_dot_product_attention(q, k, v, *mask, is_causal=is_causal)


def _t_cross_entropy(t, x, y):
    return t.nn.functional.cross_entropy(x, y)


def _t_sparse(t, x, y, ignore_index=-1):
    return t.nn.functional.cross_entropy(x.reshape(-1, x.shape[-1]), y.reshape(-1), ignore_index=ignore_index)


def _t_bce(t, p, y):
    return -(y * p.log().clamp(min=-100) + (1 - y) * (1 - p).log().clamp(min=-100)).mean()


def _t_bce_logits(t, x, y):
    return (x.clamp(min=0) - x * y + (1 + (-x.abs()).exp()).log()).mean()


TORCH: dict[str, Callable[..., Any]] = {
    # elementwise
    "add": lambda t, x, y: x + y,
    "sub": lambda t, x, y: x - y,
    "mul": lambda t, x, y: x * y,
    "div": lambda t, x, y: x / y,
    "pow": lambda t, x, y: x**y,
    "pow_negative_base": lambda t, x, y: x**y,
    "__matmul__": lambda t, x, y: x @ y,
    "add_scalar": lambda t, x, s: x + s,
    "radd": lambda t, x, s: s + x,
    "sub_scalar": lambda t, x, s: x - s,
    "rsub": lambda t, x, s: s - x,
    "mul_scalar": lambda t, x, s: x * s,
    "rmul": lambda t, x, s: s * x,
    "div_scalar": lambda t, x, s: x / s,
    "rdiv": lambda t, x, s: s / x,
    "pow_scalar": lambda t, x, s: x**s,
    "rpow": lambda t, x, s: s**x,
    "neg": lambda t, x: -x,
    "reciprocal": lambda t, x: x.reciprocal(),
    "exp": lambda t, x: x.exp(),
    "exp2": lambda t, x: x.exp2(),
    "log": lambda t, x: x.log(),
    "log2": lambda t, x: x.log2(),
    "sqrt": lambda t, x: x.sqrt(),
    "rsqrt": lambda t, x: x.rsqrt(),
    "sin": lambda t, x: x.sin(),
    "cos": lambda t, x: x.cos(),
    "tanh": lambda t, x: x.tanh(),
    "sigmoid": lambda t, x: x.sigmoid(),
    "relu": lambda t, x: x.relu(),
    "relu_at_kinks": lambda t, x: x.relu(),
    "leakyrelu": lambda t, x: t.nn.functional.leaky_relu(x, 0.01),
    "gelu": lambda t, x: t.nn.functional.gelu(x),
    "gelu_tanh": lambda t, x: t.nn.functional.gelu(x, approximate="tanh"),
    "silu": lambda t, x: t.nn.functional.silu(x),
    "leaky_relu": lambda t, x: t.nn.functional.leaky_relu(x, 0.01),
    "leaky_relu_slope": lambda t, x, neg_slope: t.nn.functional.leaky_relu(x, neg_slope),
    "abs": lambda t, x: x.abs(),
    "sign": lambda t, x: x.sign(),
    "square": lambda t, x: x.square(),
    "maximum": lambda t, x, y: t.maximum(x, y),
    "minimum": lambda t, x, y: t.minimum(x, y),
    "clip": lambda t, x, lo, hi: x.clamp(lo, hi),
    "where": lambda t, c, x, y: t.where(c, x, y),
    "where_scalar": lambda t, c, x, y: t.where(c, x, t.tensor(y, dtype=x.dtype)),
    "maximum_scalar": lambda t, x, s: t.maximum(x, t.tensor(s, dtype=x.dtype)),
    "clip_float_bounds": lambda t, x, lo, hi: x.clamp(lo, hi),
    "floor": lambda t, x: x.floor(),
    "ceil": lambda t, x: x.ceil(),
    "trunc": lambda t, x: x.trunc(),
    "round": lambda t, x: x.round(),
    "tan": lambda t, x: x.tan(),
    "atan": lambda t, x: x.atan(),
    "asin": lambda t, x: x.asin(),
    "acos": lambda t, x: x.acos(),
    "sinh": lambda t, x: x.sinh(),
    "cosh": lambda t, x: x.cosh(),
    "atanh": lambda t, x: x.atanh(),
    "asinh": lambda t, x: x.asinh(),
    "acosh": lambda t, x: x.acosh(),
    "copysign": lambda t, x, y: t.copysign(x, y),
    "floordiv": lambda t, x, y: t.div(x, y, rounding_mode="floor"),
    "mod": lambda t, x, y: t.remainder(x, y),
    "idiv": lambda t, x, y: t.div(x, y, rounding_mode="trunc"),
    "div_floor": lambda t, x, y: t.div(x, y, rounding_mode="floor"),
    "div_trunc": lambda t, x, y: t.div(x, y, rounding_mode="trunc"),
    "floordiv_scalar": lambda t, x, s: t.div(x, s, rounding_mode="floor"),
    "mod_scalar": lambda t, x, s: x % s,
    # torch has no derivative of a scalar's remainder or floor division by a tensor: their formulas
    "rfloordiv": lambda t, x, s: (s / x).floor(),
    "rmod": lambda t, x, s: s - (s / x).floor() * x,
    "logaddexp": lambda t, x, y: t.logaddexp(x, y),
    "lerp": lambda t, x, y, w: x + (y - x) * w,
    "elu": lambda t, x: t.nn.functional.elu(x),
    "elu_alpha": lambda t, x, alpha: t.nn.functional.elu(x, alpha),
    "celu": lambda t, x, alpha: t.nn.functional.celu(x, alpha),
    "selu": lambda t, x: t.nn.functional.selu(x),
    "softplus": lambda t, x: t.nn.functional.softplus(x),
    "softplus_beta": lambda t, x, beta: t.nn.functional.softplus(x, beta),
    "softsign": lambda t, x: t.nn.functional.softsign(x),
    "mish": lambda t, x: t.nn.functional.mish(x),
    "swish": lambda t, x: t.nn.functional.silu(x),
    "quick_gelu": lambda t, x: x * t.sigmoid(1.702 * x),
    "relu6": lambda t, x: t.nn.functional.relu6(x),
    "hardtanh": lambda t, x: t.nn.functional.hardtanh(x),
    "hardsigmoid": lambda t, x: (x / 6 + 0.5).clamp(0, 1),  # torch's float64 kernel rounds 1/6 to float32
    "hardswish": lambda t, x: t.nn.functional.hardswish(x),
    "logsigmoid": lambda t, x: t.nn.functional.logsigmoid(x),
    # reductions
    "sum": _t_reduce("sum"),
    "mean": _t_reduce("mean"),
    "max": _t_amax("amax"),
    "min": _t_amax("amin"),
    "var": _t_reduce("var"),
    "std": _t_reduce("std"),
    "std_constant": _t_reduce("std"),
    "sum_dtype": lambda t, x, axis, dtype: x.sum(dtype=getattr(t, dtype)) if axis is None else
    x.sum(axis, dtype=getattr(t, dtype)),
    "prod_dtype": lambda t, x, axis, dtype: x.prod(dtype=getattr(t, dtype)) if axis is None else
    x.prod(axis, dtype=getattr(t, dtype)),
    "pad2d": lambda t, x, arg, value: t.nn.functional.pad(x, arg, value=value),
    "prod": _t_prod,
    "softmax": lambda t, x, axis: t.softmax(x, axis),
    "log_softmax": lambda t, x, axis: t.log_softmax(x, axis),
    "logsumexp": _t_logsumexp,
    "cumsum": lambda t, x, axis: t.cumsum(x, axis),
    "var_mean": lambda t, x, axis, keepdim, **k: t.var_mean(x, dim=_t_dims(axis) or None, keepdim=keepdim, **k),
    "std_mean": lambda t, x, axis, keepdim, **k: t.std_mean(x, dim=_t_dims(axis) or None, keepdim=keepdim, **k),
    "sort": lambda t, x, dim, descending: t.sort(x, dim=dim, descending=descending, stable=True)[0],
    "topk": lambda t, x, k, dim, largest: t.topk(x, k, dim, largest)[0],
    "masked_fill": lambda t, x, m, value: x.masked_fill(m, value),
    "gather": lambda t, x, i, dim: t.gather(x, dim, i),
    "roll": lambda t, x, shifts, dims: t.roll(x, shifts, dims),
    "masked_select": lambda t, x, m: t.masked_select(x, m),
    # (torch's scatter backward fails for a src larger than the index: the refs cut src to its size)
    "scatter": lambda t, x, i, s, dim: t.scatter(x, dim, i, _t_fit(s, i)),
    "scatter_value": lambda t, x, i, dim, value: t.scatter(x, dim, i, value),
    "scatter_add": lambda t, x, i, s, dim: t.scatter_add(x, dim, i, _t_fit(s, i)),
    "scatter_reduce": lambda t, x, i, s, **k: t.scatter_reduce(x, src=_t_fit(s, i), index=i, **k),
    "getitem_mask": lambda t, x, m: x[m],
    "unfold": lambda t, x, dim, size, step: x.unfold(dim, size, step),
    "diag": lambda t, x: t.diag(x),
    "diagonal": lambda t, x, **k: t.diagonal(x, **k),
    "repeat_interleave": lambda t, x, repeats, dim: t.repeat_interleave(
        x, t.tensor(repeats) if isinstance(repeats, list) else repeats, dim),
    "repeat_interleave_tensor": lambda t, x, r, dim: t.repeat_interleave(x, r, dim),
    "meshgrid": lambda t, *xs, indexing: t.meshgrid(*xs, indexing=indexing),
    "cumprod": lambda t, x, axis: t.cumprod(x, axis),
    # (torch's cummax/cummin of an empty tensor is cut from the graph: its gradient is x's, empty)
    "cummax": lambda t, x, axis: t.cummax(x, axis)[0] if x.numel() else x * 1,
    "cummin": lambda t, x, axis: t.cummin(x, axis)[0] if x.numel() else x * 1,
    "logcumsumexp": lambda t, x, axis: t.logcumsumexp(x, axis),
    # linear algebra and nn
    "sequential": lambda t, x, w: _seq_layers(w)[2](_seq_layers(w)[1](_seq_layers(w)[0](x))),
    "matmul": lambda t, x, y: t.matmul(x, y),
    "dot": lambda t, x, y: t.matmul(x, y),
    "linear": lambda t, x, w, *b: x @ w + (b[0] if b else 0),
    "layernorm": _t_layernorm,
    "batchnorm": lambda t, *a, **k: R.batchnorm(*a, **k),
    "conv2d": _t_conv,
    "conv_transpose2d": _t_conv_transpose,
    "max_pool2d": _t_pool("max"),
    "max_unpool2d": _t_unpool,
    "avg_pool2d": _t_pool("avg"),
    "interpolate": _t_interpolate,
    "scaled_dot_product_attention": _t_attention,
    "scaled_dot_product_attention_gqa": lambda t, q, k, v, is_causal: t.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=is_causal, enable_gqa=True),
    # torch's own functions refuse a gradient for their weights: their documented formulas, written out
    "binary_crossentropy_logits_pos_weight": lambda t, x, y, w: ((1 - y) * x + (1 + (w - 1) * y)
                                                                 * t.nn.functional.softplus(-x)).mean(),
    "nll_loss": lambda t, x, y, **k: t.nn.functional.nll_loss(x, y, **k),
    "nll_loss_weight": lambda t, x, y, w: -(w[y] * x[t.arange(len(y)), y]).sum() / w[y].sum(),
    "einsum": lambda t, *xs, formula: t.einsum(formula, *xs),
    "cross_entropy": _t_cross_entropy,
    "sparse_categorical_crossentropy": _t_sparse,
    "binary_crossentropy": _t_bce,
    "binary_crossentropy_logits": _t_bce_logits,
    # conversion
    "cast": lambda t, x, dtype: x.to(getattr(t, dtype)),
    "float": lambda t, x: x.float(),
}

# Float ops that have no gradient, with the reason (test_grad checks the lists cover the catalogue).
NO_GRADIENT = {
    "scatter_repeats": "where a target repeats, only the source written gets its gradient (the derivative of our "
                       "forward); torch gives every repeated source one, for a forward it leaves undefined",
    "solve": "solve is forward-only in stage2 (the GLMs use it for the closed-form fit)",
    "var_no_dof": "the value is total / 0 (inf, or nan): its gradient is a convention of dividing by zero",
    "std_no_dof": "the value is sqrt(total / 0) (inf, or nan): its gradient is a convention of dividing by zero",
}


def grad_ref(op: Op) -> str | None:
    """How op's gradient is checked: "index" (adjoint of the index map), "torch", or None."""
    name = op.name if op.name in TORCH or op.name in MOVED else op.needs
    if name in MOVED:
        return "index"
    return "torch" if name in TORCH else None


def torch_ref(op: Op) -> Callable[..., Any]:
    return TORCH[op.name] if op.name in TORCH else TORCH[op.needs]
