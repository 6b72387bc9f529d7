"""Inputs for the catalogue: dtypes and the contract's promotion rules, value domains, view
layouts (how a non-contiguous input is made) and the families of shapes an op is tested on.

Everything here is plain numpy and data; nothing imports a stage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
import pytest


def expect(ok: bool, message: Any) -> None:
    """An assert that `python -O` keeps: the suite also runs optimized, to prove that no stage does
    its work inside an assert (which -O drops)."""
    if not ok:
        raise AssertionError(message)

# ---- dtypes and promotion (docs/api-contract.md) ----

DTYPES = ("bool", "int32", "int64", "float32", "float64")  # also the promotion lattice, low to high
INTS = ("int32", "int64")
FLOATS = ("float32", "float64")
NUMERIC = INTS + FLOATS
DEFAULT_FLOAT = "float32"
DEFAULT_INT = "int64"
# The half types, storage for float32 arithmetic: test_half.py runs the float32 cases in them.
HALVES = ("float16", "bfloat16")
# The small ints and the unsigned ones: test_small_ints.py runs the ops that make sense for them.
SMALL_INTS = ("int8", "int16", "uint8", "uint16", "uint32", "uint64")


def new_dtypes_here(stage: Any) -> None:
    """Skip a test of the half types or the small ints on a device that does not compute them (stage3's cuda
    device: its renderer does not take them yet)."""
    if stage.devices[0] not in stage.new_dtype_devices:
        pytest.skip(f"{stage.name} on {stage.devices[0]} computes bool, int32, int64, float32 and float64; the half "
                    "types and the small and unsigned ints run on its CPU")


def is_float(dtype: str) -> bool:
    return dtype in FLOATS or dtype in HALVES


def np_dtype(dtype: str) -> np.dtype:
    """numpy's dtype of a name (bfloat16's comes from ml_dtypes, which numpy does not know by name)."""
    return np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)


def promote(*dtypes: str) -> str:
    """The higher of the inputs on bool < int32 < int64 < float32 < float64 (a type with itself: that
    type, the half types and small ints too)."""
    if len(set(dtypes)) == 1:
        return dtypes[0]
    return max(dtypes, key=DTYPES.index)


def same(dtype: str, /, **_: Any) -> str:
    return dtype


def to_float(dtype: str, /, **_: Any) -> str:
    """exp, log, /, mean, ... : ints and bools compute in the default float."""
    return dtype if is_float(dtype) else DEFAULT_FLOAT


def accumulate(dtype: str, /, **_: Any) -> str:
    """sum, cumsum, prod: bool and every int give int64 (torch's); floats keep their dtype."""
    return "int64" if dtype == "bool" or dtype in INTS or dtype in SMALL_INTS else dtype


def to_bool(dtype: str, /, **_: Any) -> str:
    return "bool"


def to_int64(dtype: str, /, **_: Any) -> str:
    return "int64"


def with_scalar(dtype: str, scalar: Any) -> str:
    """Python scalars are weak: they take the tensor's dtype unless they are of a higher kind."""
    if isinstance(scalar, bool):
        return dtype
    if isinstance(scalar, int):
        return DEFAULT_INT if dtype == "bool" else dtype
    return dtype if is_float(dtype) else DEFAULT_FLOAT


# ---- value domains: (rng, shape, dtype) -> array of that dtype ----

Domain = Callable[[np.random.Generator, tuple, str], np.ndarray]


def domain(lo: float, hi: float, ilo: int, ihi: int, bools: str = "any", sign: bool = False,
           coarse: bool = False) -> Domain:
    """Floats uniform in [lo, hi), ints uniform in [ilo, ihi]; `sign` flips a random half negative;
    `coarse` draws floats on a grid of halves so that ties happen (==, max, argmax).

    bools: "any" (random), "true" (all True, for domains that exclude 0).
    """

    def draw(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
        if dtype == "bool":
            if bools == "true":
                return np.ones(shape, dtype=bool)
            return rng.integers(0, 2, size=shape).astype(bool)
        if is_float(dtype) and coarse:
            x = rng.integers(int(2 * lo), int(2 * hi), size=shape, endpoint=True) / 2
        elif is_float(dtype):
            x = rng.uniform(lo, hi, size=shape)
        else:
            x = rng.integers(ilo, ihi, size=shape, endpoint=True)
        if sign:
            x = x * rng.choice(np.array([-1, 1]), size=shape)
        return np.asarray(x).astype(np_dtype(dtype))

    return draw


ANY = domain(-2.0, 2.0, -9, 9)  # the default: both signs, zeros possible for ints
POSITIVE = domain(0.1, 4.0, 1, 9, bools="true")  # log, log2, rsqrt, x ** float
NONNEG = domain(0.0, 4.0, 0, 9)  # sqrt
NONZERO = domain(0.5, 2.0, 1, 9, bools="true", sign=True)  # reciprocal, divisors
SMALL = domain(-1.5, 1.5, -3, 3)  # prod: keeps products far from overflow
EXPONENT = domain(-2.0, 2.0, 0, 3)  # pow: ints reject negative exponents
NEGATIVE = domain(-2.0, -0.5, -3, -1)  # pow of a negative base: NaN at a fractional exponent, and NaN slopes
PROB = domain(0.05, 0.95, 0, 1)  # probabilities for binary cross-entropy
WIDE = domain(-6.0, 6.0, -9, 9)  # tanh, sigmoid, gelu: reach both saturated tails
COARSE = domain(-2.0, 2.0, -3, 3, coarse=True)  # comparisons, max/min, argmax: many ties
KINKS = domain(-1.0, 1.0, -1, 1, coarse=True)  # relu's gradient at exactly 0 (kept for the gradient tests)


_SPECIALS = np.array([0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -2.0, 3.0, 1e-30, -1e-30, 100.0, -100.0])


def special(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    """IEEE special values (inf, nan, tiny, huge) mixed with ordinary ones; floats only."""
    return rng.choice(_SPECIALS, size=shape).astype(dtype)


def attention_mask(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    """A boolean attention mask in which every query sees at least its first key."""
    m = rng.integers(0, 2, size=shape).astype(bool)
    m[..., 0] = True
    return m


def probabilities(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    p = rng.uniform(0.1, 1.0, size=shape)
    return (p / p.sum(axis=1, keepdims=True)).astype(dtype)


def labels_with_ignored(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    """Class indices 0..4 with about a quarter replaced by -1 (ignored), the first one kept."""
    y = rng.integers(0, 5, size=shape)
    y[rng.uniform(size=shape) < 0.25] = -1
    y.flat[0] = 1
    return y.astype(dtype)


def diag_dominant(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    n = shape[0]
    return (rng.uniform(-1, 1, size=shape) + n * np.eye(n)).astype(dtype)


def classes(n: int) -> Domain:
    """Class indices 0..n-1 (always drawn as ints, whatever dtype is asked)."""

    def draw(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
        return rng.integers(0, n, size=shape).astype(dtype)

    return draw


# ---- layouts: how an input of a given shape is made as a view of a larger base ----


@dataclass(frozen=True)
class Layout:
    """`base(shape)` is the shape of the contiguous tensor we create; `ours(t, shape)` and
    `ref(a, shape)` take the same view of it with our API and with numpy."""

    code: str
    doc: str
    base: Callable[[tuple], tuple]
    ours: Callable[[Any, tuple], Any]
    ref: Callable[[np.ndarray, tuple], np.ndarray]
    min_ndim: int = 1


def _rev(shape: tuple) -> tuple:
    return tuple(reversed(shape))


def _order(shape: tuple) -> tuple:
    return tuple(reversed(range(len(shape))))


def _expand_axis(shape: tuple) -> int | None:
    """The axis an expanded view broadcasts: the last one whose size is not 1."""
    axes = [i for i, n in enumerate(shape) if n != 1]
    return axes[-1] if axes else None


def _expand_base(shape: tuple) -> tuple:
    axis = _expand_axis(shape)
    return tuple(1 if i == axis else n for i, n in enumerate(shape))


def _double0(shape: tuple, extra: int = 0) -> tuple:
    return (2 * shape[0] + extra,) + tuple(shape[1:])


LAYOUTS = {
    "C": Layout("C", "contiguous", lambda s: s, lambda t, s: t, lambda a, s: a, min_ndim=0),
    "T": Layout("T", "all axes reversed with permute (a transposed view)", _rev,
                lambda t, s: t.permute(_order(s)), lambda a, s: a.transpose(_order(s)), min_ndim=2),
    "S": Layout("S", "x[1::2]: stride 2 with an offset", lambda s: _double0(s, 1),
                lambda t, s: t[1::2], lambda a, s: a[1::2]),
    "F": Layout("F", "flip of every axis: all strides negative", lambda s: s,
                lambda t, s: t.flip(tuple(range(len(s)))), lambda a, s: np.flip(a, tuple(range(len(s))))),
    "R": Layout("R", "x[::-2]: negative step through getitem", _double0,
                lambda t, s: t[::-2], lambda a, s: a[::-2]),
    "E": Layout("E", "expand of a size-1 axis: stride 0", _expand_base,
                lambda t, s: t.expand(s), lambda a, s: np.broadcast_to(a, s)),
    "X": Layout("X", "x[::2] of a transposed base, then flip(0): steps, permute and a negative stride",
                lambda s: _double0(_rev(s)),
                lambda t, s: t[::2].permute(_order(s)).flip(0),
                lambda a, s: np.flip(a[::2].transpose(_order(s)), 0), min_ndim=2),
}


def layout_applies(code: str, shape: tuple) -> bool:
    layout = LAYOUTS[code]
    if len(shape) < layout.min_ndim:
        return False
    return code != "E" or _expand_axis(shape) is not None


# ---- cases: the inputs and parameters of one call ----


@dataclass(frozen=True)
class Arg:
    """One tensor input. A fixed `dtype` (conditions, class labels) overrides the dtype under test,
    takes no part in promotion and is never cast for the reference."""

    shape: tuple
    layout: str = "C"
    dtype: str | None = None
    domain: Domain | None = None


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[Arg, ...] = ()
    params: dict = field(default_factory=dict)


class D(str):
    """A dtype name in a case's params: the runner turns it into the stage's DType object."""


class Index(tuple):
    """An integer index array in a getitem key: a Tensor for us, an ndarray for numpy."""


class Device(str):
    """A device in a case's params: the runner turns it into the stage's default device."""


DEFAULT_DEVICE = Device("default")


def shape_id(shape: tuple) -> str:
    return "x".join(map(str, shape)) if shape else "0d"


def args_id(args: tuple[Arg, ...]) -> str:
    parts = [shape_id(a.shape) + ("" if a.layout == "C" else ":" + a.layout) for a in args]
    return ",".join(parts)


def value_id(v: Any) -> str:
    """A short, unambiguous test-id fragment for a parameter value."""
    if isinstance(v, np.ndarray):
        return f"array{shape_id(v.shape)}" + ("" if v.flags.c_contiguous else "(strided)")
    if isinstance(v, (D, Device)):
        return str(v)
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, type) or isinstance(v, np.dtype):
        return f"np.{np.dtype(v).name}"
    return str(v).replace(" ", "")


def key_id(key: Any) -> str:
    """A short test-id fragment for a getitem key: [1,::-1,...,T[0,2]]."""

    def one(k: Any) -> str:
        if isinstance(k, slice):
            return ":".join("" if v is None else str(v) for v in (k.start, k.stop, k.step))
        if k is Ellipsis:
            return "..."
        if isinstance(k, Index):
            return "T" + str(list(k)).replace(" ", "")
        return str(k).replace(" ", "")

    return "[" + ",".join(one(k) for k in (key if isinstance(key, tuple) and not isinstance(key, Index)
                                           else (key,))) + "]"


# A view changes which elements a kernel reads: the index arithmetic, one path for every dtype. A dtype
# changes what a kernel loads, computes and stores: one path for every view. Every case of an op runs in
# VIEWS_DTYPE; in the op's other dtypes the cases without a view run, and the views again only under
# `--every-dtype-view` (the product repeats one index arithmetic once a dtype; nox -s conformance runs it).
VIEWS_DTYPE = DEFAULT_FLOAT


def repeats_a_view(c: Case, dtype: str) -> bool:
    """Does this case read a view in a dtype other than VIEWS_DTYPE?"""
    return dtype != VIEWS_DTYPE and any(a.layout != "C" for a in c.args)


# The default `nox` runs a sample of the new dtypes' cases (the whole of them would add minutes to every
# stage's session): one case of every op in each half type (float16 its first case, an edge shape;
# bfloat16 its last, the largest plain shape) and one in one small int, the ops taking the small ints in
# turn (what differs between them is the C type a kernel loads and stores, not its code). The rest carry
# the `dtype_extra` mark; `nox -s conformance` runs them all.
HALF_SAMPLE = {"float16": 0, "bfloat16": -1}


def sample_marks(index: int, count: int, dtype: str, turn: str | None = None) -> list:
    """The marks of the index-th of an op's `count` cases in one of the new dtypes; `turn` names the small
    int whose sample this op runs."""
    if dtype in HALF_SAMPLE:
        chosen = index == HALF_SAMPLE[dtype] % count
    else:
        chosen = dtype == turn and index == count - 1
    return [] if chosen else [pytest.mark.dtype_extra]


def view_marks(c: Case, dtype: str) -> list:
    """The test parameter's marks: `layout_case` on a case that reads a view (nox's reruns on another
    device or instruction set select by it), and `dtype_view` on one `repeats_a_view` names (conftest
    deselects it)."""
    return ([pytest.mark.layout_case] if any(a.layout != "C" for a in c.args) else []) + \
        ([pytest.mark.dtype_view] if repeats_a_view(c, dtype) else [])


def case(*args: Arg, **params: Any) -> Case:
    extra = ",".join(f"{k}={value_id(v)}" for k, v in params.items())
    sep = "|" if args and extra else ""
    return Case(args_id(args) + sep + extra, tuple(args), params)


# Shapes that probe the edges (0-d, size-0 and size-1 dims) and ordinary ones.
EDGE_SHAPES = [(), (0,), (2, 0, 3), (1,), (1, 1, 1), (4, 1, 3)]
PLAIN_SHAPES = [(7,), (3, 4), (2, 3, 5)]
# Every layout on a 2-d and a 3-d shape, and the cheap ones on the edges.
NONCONTIG = [((3, 4), "TSFREX"), ((2, 3, 5), "TSFREX"), ((0, 3), "TSF"), ((1, 5), "TE"), ((6,), "SRE"),
             ((2, 1, 2, 1, 2, 1, 2, 3), "TX"), ((1,) * 30 + (2,) + (1,) * 30 + (3, 1, 2), "T")]  # 8-d, 64-d


def unary_cases() -> list[Case]:
    cases = [case(Arg(s)) for s in EDGE_SHAPES + PLAIN_SHAPES]
    for shape, codes in NONCONTIG:
        cases += [case(Arg(shape, code)) for code in codes if layout_applies(code, shape)]
    return cases


def special_cases(arity: int) -> list[Case]:
    """inf, nan and extreme values in every operand, contiguous and transposed (float dtypes)."""
    cases = [case(*[Arg((4, 5), domain=special)] * arity), case(*[Arg((5, 4), "T", domain=special)] * arity)]
    return [Case(c.id + "|special", c.args, c.params) for c in cases]


# Pairs that broadcast: (left, right) shapes, then non-contiguous pairs.
BROADCAST_PAIRS = [
    ((), ()), ((0,), (0,)), ((3, 4), (3, 4)), ((2, 3, 5), (2, 3, 5)),
    ((3, 4), (4,)), ((4,), (3, 4)), ((3, 1), (1, 4)), ((2, 1, 5), (3, 1)), ((), (3, 4)), ((3, 4), ()),
    ((1,), (0,)), ((2, 0, 3), (3,)), ((1, 1), (5,)), ((5, 1, 1), (1, 1)),
]
NONCONTIG_PAIRS = [
    ((3, 4), "T", (3, 4), "S"), ((3, 4), "F", (3, 4), "E"), ((2, 3, 5), "X", (2, 3, 5), "R"),
    ((3, 4), "E", (4,), "F"), ((2, 3, 5), "T", (3, 1), "C"), ((3, 4), "R", (3, 4), "C"),
]


def binary_cases(left: Domain | None = None, right: Domain | None = None) -> list[Case]:
    """Broadcasting and non-contiguous pairs; `left`/`right` override the op's domain per side."""
    cases = [case(Arg(a, domain=left), Arg(b, domain=right)) for a, b in BROADCAST_PAIRS]
    cases += [case(Arg(a, la, domain=left), Arg(b, lb, domain=right)) for a, la, b, lb in NONCONTIG_PAIRS]
    return cases


def reduce_cases(keepdim: bool = True, tuples: bool = True, empty: bool = False,
                 min_len: int = 1) -> list[Case]:
    """Reductions with `axis`/`keepdim`. `empty`: the op is defined on a size-0 reduction
    (sum, prod); `min_len`: the smallest reduced length it is defined for (var needs 2)."""
    specs = [((2, 3, 4), None), ((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), 2), ((2, 3, 4), -1),
             ((5,), 0), ((5,), None), ((), None), ((1, 4), 0), ((0, 3), 1), ((3, 0), 0),
             ((4, 4), 1)]
    if tuples:
        specs += [((2, 3, 4), (0, 2)), ((2, 3, 4), (-1, 1))]
    if empty:
        specs += [((3, 0), 1), ((0, 3), None), ((0,), 0)]
    cases = []
    for shape, axis in specs:
        if _reduced_len(shape, axis) < min_len:
            continue
        cases.append(case(Arg(shape), axis=axis, keepdim=False))
        if keepdim and axis is not None:
            cases.append(case(Arg(shape), axis=axis, keepdim=True))
    for shape, layout, axis in [((3, 4), "T", 0), ((2, 3, 5), "X", 1), ((3, 4), "E", 1), ((3, 4), "F", -1),
                                ((2, 3, 5), "S", None)]:
        cases.append(case(Arg(shape, layout), axis=axis, keepdim=False))
    return cases


def _reduced_len(shape: tuple, axis: Any) -> int:
    if axis is None:
        return int(np.prod(shape, dtype=np.int64))
    axes = axis if isinstance(axis, tuple) else (axis,)
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))


def axis_cases(min_len: int = 1) -> list[Case]:
    """Ops that keep the shape and work along one axis (softmax, cumsum)."""
    specs = [((2, 3, 4), -1), ((2, 3, 4), 0), ((2, 3, 4), 1), ((5,), 0), ((1, 4), -1), ((3, 1), 1),
             ((0, 3), 1), ((3, 4), 0)]
    cases = [case(Arg(s), axis=ax) for s, ax in specs if s[ax] >= min_len]
    cases += [case(Arg((3, 4), "T"), axis=-1), case(Arg((2, 3, 5), "X"), axis=0),
              case(Arg((3, 4), "F"), axis=1), case(Arg((3, 4), "E"), axis=-1)]
    return cases

