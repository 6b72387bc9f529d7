"""Shape trackers against numpy: random chains of movement ops (reshape, permute, expand, pad,
shrink, flip, with size-0 and size-1 dims) applied to a tracker and to np.arange(n) must agree
at every position, through expr_idxs, expr_node, render and simplify. Also: how many views known
cases take, the simple index strings, View canonicalisation, size, and the argument errors."""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ..graph.shapetracker import ShapeTracker, View, index_vars, strides_for_shape
from ..graph.symbolic import Num, Var, evaluate, render

PAD = -1  # what numpy holds where the tracker must say "invalid"


def _python(c_source: str) -> str:
    return c_source.replace("&&", " and ").replace("/", "//")


def check(tracker: ShapeTracker, arr: np.ndarray) -> None:
    """Every position of tracker reads arr's value as its buffer index, or is invalid exactly
    where arr holds PAD; the rendered C and the flat-index form say the same."""
    assert tracker.shape == arr.shape
    idx, valid = tracker.expr_idxs(index_vars(tracker.shape))
    narrow, _ = tracker.expr_idxs(index_vars(tracker.shape), where_valid=True)  # right where valid only
    flat = Var("f", 0, max(arr.size - 1, 0))
    fidx, fvalid = tracker.expr_node(flat)
    sources = [_python(render(n)) for n in (idx, Num(1) if valid is None else valid)]
    if len(tracker.views) == 1:  # one view is strides and a mask: no division may survive
        assert "/" not in sources[0] + sources[1] and "%" not in sources[0] + sources[1], sources
    for f, pos in enumerate(np.ndindex(*arr.shape)):
        env = {f"i{d}": p for d, p in enumerate(pos)} | {"f": f}
        want = int(arr[pos])
        for i, v in ((idx, valid), (fidx, fvalid)):
            assert (v is None or bool(evaluate(v, env))) == (want != PAD), (pos, v)
            if want != PAD:
                assert evaluate(i, env) == want, (pos, i)
        if want != PAD:
            assert evaluate(narrow, env) == want, (pos, narrow)
        assert bool(eval(sources[1], {}, env)) == (want != PAD)
        if want != PAD:
            assert eval(sources[0], {}, env) == want
            assert want < tracker.size


def _factors(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def _random_op(data, tracker: ShapeTracker, arr: np.ndarray) -> tuple[ShapeTracker, np.ndarray]:
    shape = tracker.shape
    ndim = len(shape)
    kind = data.draw(st.sampled_from(["reshape", "permute", "expand", "pad", "shrink", "flip"]))
    if kind == "reshape":
        if arr.size == 0:
            new = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
            new[data.draw(st.integers(0, len(new) - 1))] = 0
        else:
            new = [1] * data.draw(st.integers(1, 4))
            for f in data.draw(st.permutations(_factors(arr.size))):
                new[data.draw(st.integers(0, len(new) - 1))] *= f
        return tracker.reshape(tuple(new)), arr.reshape(new)
    if kind == "permute":
        order = tuple(data.draw(st.permutations(range(ndim))))
        return tracker.permute(order), arr.transpose(order)
    if kind == "expand":
        new = tuple(data.draw(st.integers(0, 3)) if s == 1 else s for s in shape)
        return tracker.expand(new), np.broadcast_to(arr, new)
    if kind == "pad":
        arg = tuple((data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in shape)
        return tracker.pad(arg), np.pad(arr, arg, constant_values=PAD) if ndim else arr
    if kind == "shrink":
        arg = []
        for s in shape:
            b = data.draw(st.integers(0, s))
            arg.append((b, data.draw(st.integers(b, s))))
        return tracker.shrink(tuple(arg)), arr[tuple(slice(b, e) for b, e in arg)]
    axes = tuple(d for d in range(ndim) if data.draw(st.booleans()))
    return tracker.flip(axes), np.flip(arr, axes) if axes else arr


@settings(max_examples=int(os.environ.get("SHAPETRACKER_EXAMPLES", 150)), deadline=None)
@given(st.lists(st.integers(0, 4), max_size=3), st.data())
def test_random_movement_chains_match_numpy(shape, data):
    tracker = ShapeTracker.from_shape(tuple(shape))
    arr = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    assert tracker.size == arr.size
    for _ in range(data.draw(st.integers(1, 6))):
        if arr.size > 300:
            break
        tracker, arr = _random_op(data, tracker, arr)
        check(tracker, arr)
    check(tracker.simplify(), arr)
    assert tracker.size <= max(int(np.prod(shape)), 0)


def test_contiguous_index_is_the_plain_string():
    tracker = ShapeTracker.from_shape((4, 8))
    idx, valid = tracker.expr_idxs([Var("i0", 0, 3), Var("i1", 0, 7)])
    assert idx == Var("i0", 0, 3) * 8 + Var("i1", 0, 7) and valid is None
    assert render(idx) == "i0*8+i1"
    assert render(tracker.permute((1, 0)).expr_idxs()[0]) == "i0+i1*8"
    assert render(tracker.reshape((32,)).expr_idxs()[0]) == "i0"
    assert render(tracker.flip((1,)).expr_idxs()[0]) == "i0*8-i1+7"


def test_how_many_views():
    base = ShapeTracker.from_shape((2, 3, 4))
    assert len(base.reshape((6, 4)).reshape((24,)).reshape((4, 3, 2)).views) == 1  # contiguous reshapes
    merged = base.permute((2, 0, 1)).reshape((4, 6))  # the permuted (2, 3) dims are still one run
    assert len(merged.views) == 1 and merged.views[0].strides == (1, 4)
    flat = ShapeTracker.from_shape((2, 3)).permute((1, 0)).reshape((6,))
    assert len(flat.views) == 2
    assert render(flat.expr_idxs()[0]) == "i0/2+(i0%2)*3"
    padded = ShapeTracker.from_shape((4,)).pad(((1, 1),))
    assert len(padded.reshape((1, 6, 1)).views) == 1  # unit dims do not cross the mask
    assert len(padded.reshape((2, 3)).views) == 2  # rows of 3 cut through the valid range [1, 5)
    assert len(ShapeTracker.from_shape((2, 4)).pad(((1, 1), (0, 0))).reshape((16,)).views) == 1  # whole rows


def test_padded_index_and_validity_render_simply():
    tracker = ShapeTracker.from_shape((4, 8)).pad(((0, 0), (1, 2)))
    idx, valid = tracker.expr_idxs()
    assert render(idx) == "i0*8+i1-1"
    assert render(valid) == "(0<i1)&&(i1<9)"


def test_view_canonicalisation():
    v = View.create((3, 1, 4), (4, 4, 1))
    assert v.strides == (4, 0, 1) and v.contiguous and v.mask is None
    assert View.create((3, 4), mask=((0, 3), (0, 4))).mask is None
    empty = View.create((3, 4), (4, 1), 7, mask=((1, 1), (0, 4)))
    assert empty.mask == ((0, 0), (0, 0)) and empty.offset == 0 and not empty.contiguous
    assert View.create((3, 0, 2), (5, 5, 5), 9) == View.create((3, 0, 2))
    assert strides_for_shape((2, 1, 3)) == (3, 0, 1) and strides_for_shape(()) == ()


def test_expanding_an_all_padding_view_stays_all_padding():
    tracker = ShapeTracker.from_shape((2,)).pad(((1, 0),)).shrink(((0, 1),))  # only the pad is left
    assert tracker.views[0].mask == ((0, 0),)
    assert tracker.expand((3,)).expr_idxs()[1] == Num(0)
    check(tracker.expand((3,)), np.full(3, PAD))


def test_size_and_contiguous():
    base = ShapeTracker.from_shape((4, 8))
    assert base.size == 32 and base.contiguous
    assert base.shrink(((0, 2), (0, 3))).size == 11  # reaches index 1*8+2
    assert base.pad(((1, 1), (2, 2))).size == 32 and not base.pad(((1, 1), (2, 2))).contiguous
    assert base.permute((1, 0)).permute((1, 0)).contiguous
    assert ShapeTracker.from_shape((1, 3)).expand((5, 3)).size == 3
    assert ShapeTracker.from_shape((2, 0)).size == 0 and ShapeTracker.from_shape(()).size == 1


def test_simplify_merges_views_that_one_view_can_say():
    stacked = ShapeTracker((View.create((2, 3)), View.create((6,))))
    assert stacked.simplify().views == (View.create((6,)),)
    offset = ShapeTracker((View.create((4, 3), offset=5), View.create((2, 6))))
    assert offset.simplify().views == (View.create((2, 6), offset=5),)
    permuted = ShapeTracker((View.create((3, 2), (1, 3)), View.create((6,))))
    assert len(permuted.simplify().views) == 2


@pytest.mark.parametrize("op, arg, match", [
    ("reshape", (5, 7), r"reshape.*\(4, 8\).*\(5, 7\)"),
    ("reshape", (-1, 32), "reshape"),
    ("permute", (0, 0), "permute"),
    ("expand", (4, 8, 2), "expand"),
    ("expand", (5, 8), "expand"),
    ("pad", ((0, -1), (0, 0)), "pad"),
    ("pad", ((0, 1),), "pad"),
    ("shrink", ((0, 5), (0, 8)), "shrink"),
    ("shrink", ((3, 2), (0, 8)), "shrink"),
    ("flip", (2,), "flip"),
    ("flip", (1, -1), "flip"),
])
def test_bad_arguments_raise_value_error_naming_the_op(op, arg, match):
    with pytest.raises(ValueError, match=match):
        getattr(ShapeTracker.from_shape((4, 8)), op)(arg)


def test_an_all_padding_view_reshaped_to_a_scalar_stays_padding():
    # (0, 1) padded to (1, 1) holds one padded element; as a 0-d view it has no dim for the empty
    # mask, so the view must stay stacked on the masked one, not become a plain (contiguous) view
    st = ShapeTracker.from_shape((0, 1)).pad(((1, 0), (0, 0))).reshape(())
    assert not st.contiguous
    _, valid = st.expr_idxs([])
    assert valid is not None and evaluate(valid, {}) == 0


def test_padding_of_an_empty_tensor_reads_as_zeros():
    from .. import Tensor

    for _ in range(20):  # it read uninitialized memory, so it failed only now and then
        assert Tensor(np.zeros((0, 1), bool)).pad(((1, 0), (0, 0))).reshape(()).numpy() == np.False_


def test_a_part_of_a_concatenation_reads_at_a_plain_offset_where_valid():
    # (12, 64, 128) heads-permuted gradient padded into the middle third of (12, 64, 384), as
    # a backward through q, k, v = qkv.split(128, -1) builds it: everywhere, its index divides by 8192,
    # 128 and 32; where the view is valid (128 <= i2 < 256) the divisions by 8192 and 128 fold away
    t = ShapeTracker.from_shape((12, 4, 64, 32)).permute((0, 2, 1, 3)).reshape((12, 64, 128))
    t = t.pad(((0, 0), (0, 0), (128, 128)))
    idxs = index_vars(t.shape)
    wide, valid = t.expr_idxs(idxs)
    narrow, _ = t.expr_idxs(idxs, where_valid=True)
    assert "/8192" in render(wide) and "/128" in render(wide)
    assert "/8192" not in render(narrow) and "/128" not in render(narrow), render(narrow)
    for i0, i1, i2 in [(0, 0, 128), (3, 17, 200), (11, 63, 255)]:
        env = {"i0": i0, "i1": i1, "i2": i2}
        assert evaluate(valid, env) and evaluate(narrow, env) == evaluate(wide, env)


def test_an_upcast_index_into_a_concatenation_reads_its_part_at_a_plain_offset_where_valid():
    # the same middle third, copied into a matmul's panels of 8 columns (rows of 384 as 48 panels,
    # panel-major), with the panel axis upcast by 8: lane 3 reads panel 8g + 3, not a plain loop index.
    # The validity (16 <= 8g + 3 < 32) narrows g itself to [2, 3], so the divisions fold all the same
    t = ShapeTracker.from_shape((12, 4, 64, 32)).permute((0, 2, 1, 3)).reshape((12, 64, 128))
    t = t.pad(((0, 0), (0, 0), (128, 128))).reshape((768, 48, 8)).permute((1, 0, 2))
    g, i1, i2 = Var("g", 0, 5), Var("i1", 0, 767), Var("i2", 0, 7)
    idxs = [g * 8 + 3, i1, i2]
    wide, valid = t.expr_idxs(idxs)
    narrow, _ = t.expr_idxs(idxs, where_valid=True)
    assert "/128" in render(wide) and "g/2" in render(wide)
    assert render(narrow) == "(i1/64)*8192+(i1%64)*32+g*4096+i2-8168"  # b, t, h = 2g - 4, d = 24 + i2
    for gv, v1, v2 in [(2, 0, 0), (3, 100, 5), (3, 767, 7)]:
        env = {"g": gv, "i1": v1, "i2": v2}
        assert evaluate(valid, env) and evaluate(narrow, env) == evaluate(wide, env)
