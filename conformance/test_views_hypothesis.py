"""Property-based tests (hypothesis) of views and broadcasting against numpy.

- test_view_chain: a random chain of movement ops (reshape, permute, expand, shrink, flip, pad,
  squeeze/unsqueeze, flatten, transpose, getitem with ints, slices of any step, None, Ellipsis,
  integer lists and integer tensors) applied to our Tensor and to a numpy array: after every step
  the shape, the dtype and every value agree; then elementwise ops and a cast read the final
  view through its strides.
- test_reduce_on_views: sum / max / min / mean / argmax / cumsum over random axes (with keepdim)
  of a random view chain; argmax over repeated values checks "first index".
- test_matmul_broadcast: matmul of random batched, broadcast and 1-d shapes, any layouts and
  dtype pairs.
- test_broadcast_binary: elementwise ops between random mutually broadcastable shapes and dtypes,
  each operand possibly a non-contiguous view: result shape, contract dtype and values agree.
- test_broadcast_mismatch: shapes that do not broadcast raise ValueError, naming the shapes.

The profile (conftest) sets the number of examples: `ci` by default, `fuzz` for long runs.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

from conformance import references as R
from conformance.cases import COARSE, DTYPES, LAYOUTS, is_float, layout_applies, promote
from conformance.checks import EXAMPLES, seed

pytestmark = pytest.mark.needs("reshape", "permute", "expand", "shrink", "flip", "pad", "getitem", "squeeze",
                               "unsqueeze", "flatten", "transpose")


def base_array(shape: tuple, dtype: str) -> np.ndarray:
    """Distinct values (so any misplaced element shows), in the dtype under test."""
    n = math.prod(shape)
    values = np.arange(n, dtype=np.int64) * 7 % 101 - 50
    if dtype == "bool":
        return (values % 2 == 0).reshape(shape)
    if is_float(dtype):
        return (values / 4).astype(dtype).reshape(shape)
    return values.astype(dtype).reshape(shape)


@st.composite
def shapes(draw, max_dims: int = 4, max_side: int = 5) -> tuple:
    ndim = draw(st.integers(0, max_dims))
    # size-0 dims are interesting but rare in practice: one dim in ten
    return tuple(draw(st.integers(0, max_side) if draw(st.integers(0, 9)) == 0 else st.integers(1, max_side))
                 for _ in range(ndim))


def factor_shape(draw, n: int) -> tuple:
    """A random shape with n elements, maybe with one -1."""
    if n == 0:
        dims = list(draw(st.lists(st.integers(1, 4), max_size=3)))
        dims.insert(draw(st.integers(0, len(dims))), 0)
        return tuple(dims)
    k = draw(st.integers(0 if n == 1 else 1, 4))
    dims = [1] * k
    m, p = n, 2
    while m > 1:
        while m % p == 0:
            if k:
                dims[draw(st.integers(0, k - 1))] *= p
            m //= p
        p += 1
    if k and draw(st.booleans()):
        dims[draw(st.integers(0, k - 1))] = -1
    return tuple(dims)


def is_full(k: object) -> bool:
    return isinstance(k, slice) and k == slice(None)


def draw_key(draw, shape: tuple, T) -> tuple[tuple, tuple]:
    """A getitem key as (ours, numpy's). At most one integer list / tensor, and then no int
    indices in the same key (numpy and torch place the result dims differently there)."""
    ours, ref = [], []
    advanced = None
    if shape and draw(st.booleans()):
        advanced = draw(st.sampled_from(range(len(shape))))
    if advanced is not None and shape[advanced] == 0:
        advanced = None
    for axis, n in enumerate(shape):
        if axis == advanced:
            idx = draw(st.lists(st.integers(-n, n - 1), max_size=4))
            arr = np.array(idx, dtype=np.int64)
            as_tensor = draw(st.booleans())
            ours.append(T(arr) if as_tensor else idx)
            ref.append(arr)
            continue
        choice = draw(st.sampled_from(["int", "slice", "slice", "full"]))
        if choice == "int" and n > 0 and advanced is None:
            i = draw(st.integers(-n, n - 1))
            ours.append(i)
            ref.append(i)
        elif choice == "slice":
            bound = st.none() | st.integers(-n - 2, n + 2)
            s = slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3])))
            ours.append(s)
            ref.append(s)
        else:
            ours.append(slice(None))
            ref.append(slice(None))
    # one full slice may become an Ellipsis; without one, trailing full slices may be dropped
    fulls = [i for i, k in enumerate(ref) if is_full(k)]
    if fulls and draw(st.booleans()):
        i = draw(st.sampled_from(fulls))
        ours[i] = ref[i] = Ellipsis
    else:
        while ref and is_full(ref[-1]) and draw(st.booleans()):
            ours.pop()
            ref.pop()
    for _ in range(draw(st.integers(0, 2))):
        i = draw(st.integers(0, len(ours)))
        ours.insert(i, None)
        ref.insert(i, None)
    return tuple(ours), tuple(ref)


def view_step(draw, x, a: np.ndarray, T) -> tuple[str, object, np.ndarray]:
    """One random movement op applied to our tensor x and to numpy's a."""
    shape, nd = a.shape, a.ndim
    ops = ["reshape", "permute", "shrink", "getitem", "getitem", "unsqueeze", "expand", "squeeze"]
    if nd:
        ops += ["pad", "flip", "flatten", "transpose"]
    op = draw(st.sampled_from(ops))
    if op == "reshape":
        new = factor_shape(draw, a.size)
        return f"reshape{new}", x.reshape(new), a.reshape(new)
    if op == "permute":
        order = tuple(draw(st.permutations(range(nd))))
        return f"permute{order}", x.permute(order), a.transpose(order)
    if op == "shrink":
        arg = []
        for n in shape:
            lo = draw(st.integers(0, n))
            arg.append((lo, draw(st.integers(lo, n))))
        arg = tuple(arg)
        return f"shrink{arg}", x.shrink(arg), a[tuple(slice(lo, hi) for lo, hi in arg)]
    if op == "pad":
        arg = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in shape)
        return f"pad{arg}", x.pad(arg), np.pad(a, arg)
    if op == "getitem":
        ours, ref = draw_key(draw, shape, T)
        return f"getitem{ref}", x[ours], a[ref]
    if op == "unsqueeze":
        axis = draw(st.integers(-nd - 1, nd))
        return f"unsqueeze({axis})", x.unsqueeze(axis), np.expand_dims(a, axis)
    if op == "expand":
        new = tuple(draw(st.integers(0, 3)) if n == 1 else n for n in shape)
        new = tuple(draw(st.lists(st.integers(1, 3), max_size=2))) + new
        return f"expand{new}", x.expand(new), np.broadcast_to(a, new)
    if op == "squeeze":
        ones = [i for i, n in enumerate(shape) if n == 1]
        if ones and draw(st.booleans()):
            axis = draw(st.sampled_from(ones))
            return f"squeeze({axis})", x.squeeze(axis), np.squeeze(a, axis)
        return "squeeze()", x.squeeze(), np.squeeze(a)
    if op == "flip":
        axes = tuple(draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True)))
        return f"flip{axes}", x.flip(axes), np.flip(a, axes)
    if op == "flatten":
        start = draw(st.integers(0, nd - 1))
        end = draw(st.integers(start, nd - 1))
        new = shape[:start] + (math.prod(shape[start:end + 1]),) + shape[end + 1:]
        return f"flatten({start},{end})", x.flatten(start, end), a.reshape(new)
    d0, d1 = draw(st.integers(0, nd - 1)), draw(st.integers(0, nd - 1))
    return f"transpose({d0},{d1})", x.transpose(d0, d1), np.swapaxes(a, d0, d1)


def assert_same(x, a: np.ndarray, where: str) -> None:
    assert tuple(x.shape) == a.shape, f"{where}: shape {tuple(x.shape)}, expected {a.shape}"
    assert x.dtype.name == a.dtype.name, f"{where}: dtype {x.dtype.name}, expected {a.dtype.name}"
    np.testing.assert_array_equal(x.numpy(), a, err_msg=where, strict=True)


BINARY = {
    "add": (lambda x, y: x + y, np.add),
    "sub": (lambda x, y: x - y, np.subtract),
    "mul": (lambda x, y: x * y, np.multiply),
    "maximum": (lambda x, y: x.maximum(y), np.maximum),
    "lt": (lambda x, y: x < y, np.less),
    "eq": (lambda x, y: x == y, np.equal),
}


def operand(draw, T, shape: tuple, dtype: str, dtypes, rng):
    """A random operand as (our tensor, numpy array), made through a random layout (transposed,
    strided, flipped, expanded...) when one applies to the shape."""
    codes = [c for c in LAYOUTS if layout_applies(c, shape)]
    layout = LAYOUTS[draw(st.sampled_from(codes))]
    base = COARSE(rng, layout.base(shape), dtype)
    return layout.ours(T(base, dtype=getattr(dtypes, dtype)), shape), layout.ref(base, shape)


def view_chain(data, T, dtypes, dtype: str, max_steps: int) -> tuple[object, np.ndarray, str]:
    """A random base tensor and a random chain of views of it, checked after every step."""
    a = base_array(data.draw(shapes(), label="shape"), dtype)
    x = T(a, dtype=getattr(dtypes, dtype))
    chain = [f"Tensor{a.shape}"]
    for _ in range(data.draw(st.integers(0 if max_steps < 6 else 1, max_steps), label="steps")):
        name, x, a = view_step(data.draw, x, a, T)
        chain.append(name)
        assert_same(x, a, " -> ".join(chain))
    return x, a, " -> ".join(chain)


@given(data=st.data())
def test_view_chain(stage, data):
    EXAMPLES["test_view_chain"] += 1
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    x, a, where = view_chain(data, T, dtypes, dtype, max_steps=6)
    # kernels reading the final view through its strides, alone and against a contiguous copy
    if dtype == "bool":
        assert_same(x | x.contiguous(), a | a, where + " -> x | x.contiguous()")
        assert_same(~x, ~a, where + " -> ~x")
    else:
        assert_same(x + x.contiguous(), a + a, where + " -> x + x.contiguous()")
        assert_same(-x, -a, where + " -> -x")
    assert_same(x.cast(dtypes.float64), a.astype(np.float64), where + " -> cast(float64)")


def reduce_args(draw, shape: tuple, name: str) -> dict:
    """axis (None, one axis, or for sum/max/min a tuple) and keepdim for a reduction of shape."""
    nd = len(shape)
    kinds = ["none"] + (["int", "int"] if nd else [])
    if nd and name in ("sum", "max", "min"):
        kinds.append("tuple")
    kind = draw(st.sampled_from(kinds))
    if kind == "none":
        axis = None
    elif kind == "int":
        axis = draw(st.integers(-nd, nd - 1))
    else:
        axis = tuple(draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True)))
    return {"axis": axis, "keepdim": draw(st.booleans())}


REDUCTIONS = {  # our call, numpy's, and the result dtype for an input dtype (docs/api-contract.md)
    "sum": (lambda x, k: x.sum(**k), lambda a, k: np.sum(a, k["axis"], keepdims=k["keepdim"]),
            lambda d: "int64" if d in ("bool", "int32") else d),
    "max": (lambda x, k: x.max(**k), lambda a, k: np.max(a, k["axis"], keepdims=k["keepdim"]), lambda d: d),
    "min": (lambda x, k: x.min(**k), lambda a, k: np.min(a, k["axis"], keepdims=k["keepdim"]), lambda d: d),
    "mean": (lambda x, k: x.mean(**k), lambda a, k: np.mean(a, k["axis"], np.float64, keepdims=k["keepdim"]),
             lambda d: d if is_float(d) else "float32"),
    "argmax": (lambda x, k: x.argmax(**k), lambda a, k: R.arg_extreme(np.argmax)(a, **k), lambda d: "int64"),
    "cumsum": (lambda x, k: x.cumsum(k["axis"]), lambda a, k: np.cumsum(a, k["axis"]),
               lambda d: "int64" if d in ("bool", "int32") else d),
}


@given(data=st.data())
def test_reduce_on_views(stage, data):
    """Reductions over random axes of random views: the (outer, reduced, inner) strides the kernels
    get come from merging whatever the view chain left. Values are quarters, so float sums are exact."""
    EXAMPLES["test_reduce_on_views"] += 1
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    name = data.draw(st.sampled_from(sorted(REDUCTIONS)), label="op")
    dtype = data.draw(st.sampled_from(DTYPES if name != "mean" else DTYPES[1:]), label="dtype")
    x, a, where = view_chain(data, T, dtypes, dtype, max_steps=4)
    k = reduce_args(data.draw, a.shape, name)
    if name == "cumsum":
        assume(a.ndim > 0)
        k["axis"] = k["axis"] if isinstance(k["axis"], int) else 0
    axes = range(a.ndim) if k["axis"] is None else np.atleast_1d(k["axis"])
    if name in ("max", "min", "argmax", "mean"):
        assume(all(a.shape[i] > 0 for i in axes))  # no identity for an empty reduction
    ours, ref, out = REDUCTIONS[name]
    expected = np.asarray(ref(a, k)).astype(out(dtype))
    assert_same(ours(x, k), expected, f"{where} -> {name}({k})")


MATMUL_SHAPES = mutually_broadcastable_shapes(signature="(m?,n),(n,p?)->(m?,p?)", max_dims=3, min_side=0,
                                              max_side=5)
BINARY_SHAPES = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=4)


@given(data=st.data(), shapes=MATMUL_SHAPES)
def test_matmul_broadcast(stage, data, shapes):
    """matmul of random (batched, broadcast, 1-d) shapes and layouts. Inputs are halves and sums
    short, so every dtype's result is exact."""
    EXAMPLES["test_matmul_broadcast"] += 1
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    dts = [data.draw(st.sampled_from(DTYPES[1:]), label=f"dtype{i}") for i in range(2)]
    rng = np.random.default_rng(seed("matmul", *dts, *shapes.input_shapes))
    (x, a), (y, b) = [operand(data.draw, T, s, dt, dtypes, rng)
                      for s, dt in zip(shapes.input_shapes, dts, strict=True)]
    out = promote(*dts)
    wide = "float64" if is_float(out) else out
    expected = np.asarray(np.matmul(a.astype(wide), b.astype(wide))).astype(out)
    assert_same(x @ y, expected, f"matmul({a.shape}:{dts[0]}, {b.shape}:{dts[1]})")


@given(data=st.data(), shapes=BINARY_SHAPES)
def test_broadcast_binary(stage, data, shapes):
    EXAMPLES["test_broadcast_binary"] += 1
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    name = data.draw(st.sampled_from(sorted(BINARY)), label="op")
    dts = [data.draw(st.sampled_from(DTYPES), label=f"dtype{i}") for i in range(2)]
    assume(not (name == "sub" and "bool" in dts))
    rng = np.random.default_rng(seed(name, *dts, *shapes.input_shapes))
    (x, a), (y, b) = [operand(data.draw, T, s, dt, dtypes, rng)
                      for s, dt in zip(shapes.input_shapes, dts, strict=True)]
    ours, ref = BINARY[name]
    out = "bool" if name in ("lt", "eq") else promote(*dts)
    compute = promote(*dts)
    # one rounding of an exact float64 result: equal to the float32 op bit for bit
    wide = "float64" if is_float(compute) else compute
    expected = np.asarray(ref(a.astype(wide), b.astype(wide))).astype(out)
    got = ours(x, y)
    assert_same(got, expected, f"{name}({a.shape}:{dts[0]}, {b.shape}:{dts[1]})")


@given(shapes=st.tuples(shapes(max_dims=3, max_side=4), shapes(max_dims=3, max_side=4)))
def test_broadcast_mismatch(stage, shapes):
    EXAMPLES["test_broadcast_mismatch"] += 1
    T = stage.module.Tensor
    s1, s2 = shapes
    try:
        np.broadcast_shapes(s1, s2)
    except ValueError:
        with pytest.raises(ValueError) as info:
            T.ones(*s1) + T.ones(*s2)
        msg = str(info.value)
        for s in (s1, s2):
            assert re.search(re.escape(str(s)) + "|" + re.escape(str(list(s))), msg), (msg, s)
    else:
        assert tuple((T.ones(*s1) + T.ones(*s2)).shape) == np.broadcast_shapes(s1, s2)
