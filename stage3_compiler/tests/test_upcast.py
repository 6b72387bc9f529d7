"""Upcasting: a reduce kernel computes several outputs a pass of its loop (lower.upcast_axes), a
matmul a 4 x 8 tile of them. Which axes it picks, and that every shape still computes the right
numbers: sizes the tile divides, sizes it does not, and transposed operands."""

import numpy as np
import pytest

from .. import Tensor
from ..lower import upcast_axes
from ..schedule import create_schedule


def rand(*shape, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def only_item(t: Tensor):
    items = create_schedule([t.lazydata])
    assert len(items) == 1, items
    return items[0]


def test_a_matmul_takes_a_tile_of_eight_columns_by_four_rows():
    a, b = rand(16, 12), rand(12, 24, seed=1)
    ups = upcast_axes(only_item(a @ b))
    # the product's shape is (16, 24, 1): 8 along the columns (axis 1), 4 along the rows (axis 0)
    assert ups == {1: 8, 0: 4}


def test_a_plain_sum_takes_one_axis():
    x = rand(16, 12)
    assert upcast_axes(only_item(x.sum(1))) == {0: 8}
    assert upcast_axes(only_item((x * x).sum(1))) == {0: 8}  # both operands vary along the rows


def test_nothing_divides_nothing_is_upcast():
    assert upcast_axes(only_item(rand(7, 5).sum(1))) == {}
    assert upcast_axes(only_item(rand(5).sum())) == {}


@pytest.mark.parametrize("m,k,n", [(16, 12, 24), (8, 3, 8), (12, 7, 4), (5, 9, 16), (7, 5, 3), (32, 64, 8)])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn"])
def test_matmuls_with_and_without_a_tile_match_numpy(m, k, n, layout):
    a = rand(m, k) if layout[0] == "n" else rand(k, m).T
    b = rand(k, n, seed=1) if layout[1] == "n" else rand(n, k, seed=1).T
    out = (a @ b).numpy()
    np.testing.assert_allclose(out, a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-5)


def test_a_batched_matmul_with_a_fused_bias_and_relu():
    x, w, bias = rand(2, 8, 12), rand(12, 16, seed=1), rand(16, seed=2)
    out = (x @ w + bias).relu().numpy()
    np.testing.assert_allclose(out, np.maximum(x.numpy() @ w.numpy() + bias.numpy(), 0), rtol=1e-5, atol=1e-5)
