"""Fusion, counted: how many kernels the scheduler makes for the ops the issue names, read from
GlobalCounters.kernel_count around one realize, with the results checked against numpy."""

import numpy as np
import pytest

from .. import GlobalCounters, Tensor


def realized(*shape):
    return Tensor(np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32))


def count(t: Tensor) -> int:
    GlobalCounters.reset()
    t.realize()
    return GlobalCounters.kernel_count


@pytest.mark.parametrize("length", [1, 4, 16])
def test_an_elementwise_chain_is_one_kernel(length):
    x, y = realized(8, 16), realized(8, 16)
    out, ref = x, x.numpy()
    for i in range(length):
        out, ref = (out * y + i).maximum(0.5), np.maximum(ref * y.numpy() + i, 0.5)
    assert count(out) == 1
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)


def test_mul_sum_is_one_kernel():
    x, y = realized(32, 16), realized(32, 16)
    out = (x * y).sum()
    assert count(out) == 1
    np.testing.assert_allclose(out.numpy(), (x.numpy() * y.numpy()).sum(), rtol=1e-5)


def test_softmax_is_at_most_three_kernels():
    x = realized(4, 33)
    out = x.softmax(-1)
    assert count(out) <= 3
    e = np.exp(x.numpy() - x.numpy().max(-1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_layernorm_is_at_most_three_kernels():
    x = realized(6, 40)
    out = x.layernorm()
    assert count(out) <= 3
    a = x.numpy()
    ref = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-5)


def test_relu_of_a_linear_layer_is_at_most_two_kernels():
    x, w, b = realized(8, 24), realized(24, 12), realized(12)
    out = (x @ w + b).relu()
    assert count(out) <= 2
    np.testing.assert_allclose(out.numpy(), np.maximum(x.numpy() @ w.numpy() + b.numpy(), 0), rtol=1e-5, atol=1e-5)


def test_views_copy_nothing_until_realized():
    x = realized(4, 6)
    GlobalCounters.reset()
    y = x.T.reshape(2, 12)[:, ::3].flip(0).pad(((1, 0), (0, 2)))
    assert GlobalCounters.kernel_count == 0  # nothing ran yet: the ops only built a view
    ref = np.pad(x.numpy().T.reshape(2, 12)[:, ::3][::-1], ((1, 0), (0, 2)))
    np.testing.assert_array_equal(y.numpy(), ref)
    assert GlobalCounters.kernel_count == 1  # one kernel read the whole view through index arithmetic
