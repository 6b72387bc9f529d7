"""The autograd engine: backward basics, deep graphs, determinism, accumulation, no_grad, detach,
dtype rules, and the gradients of gather (scatter-add) and dropout. Op-by-op gradients against
torch live in conformance/test_grad.py."""

import math

import numpy as np
import pytest

from .. import Tensor, dtypes
from ..autograd import toposort
from ..ops import Ops


def leaf(values, dtype=dtypes.float64):
    return Tensor(np.asarray(values, dtype=np.float64), dtype=dtype, requires_grad=True)


def test_chain_rule_and_broadcast_sum_back():
    x = leaf([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = leaf([10.0, 20.0, 30.0])
    ((x * b).exp().log() + b).sum().backward()  # d/dx = b, d/db = sum_rows(x) + 2
    np.testing.assert_allclose(x.grad.numpy(), np.broadcast_to([10.0, 20.0, 30.0], (2, 3)))
    np.testing.assert_allclose(b.grad.numpy(), [7.0, 9.0, 11.0])
    assert b.grad.shape == b.shape and b.grad.dtype is dtypes.float64


def test_a_chain_of_ten_thousand_ops_needs_no_recursion():
    x = leaf([1.0])
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0001**10_000], rtol=1e-9)


def test_the_same_graph_built_twice_gives_bit_identical_gradients():
    def run():
        Tensor.manual_seed(3)
        w = Tensor.randn(8, 5, requires_grad=True)
        x = Tensor.randn(16, 8)
        h = (x @ w).tanh()
        loss = (h * h).sum() + h.softmax(-1).max(-1).sum() + (w[Tensor([0, 2, 2, 7])] ** 2).mean()
        loss.backward()
        return w.grad.numpy()

    assert np.array_equal(run(), run())


def test_toposort_puts_parents_first_and_visits_each_node_once():
    x = leaf([1.0, 2.0])
    a = x * 2
    b = a + x
    c = b * a
    order = toposort(c)
    assert [id(t) for t in order] == [id(x), id(a), id(b), id(c)]


def test_gradients_accumulate_across_backward_calls():
    x = leaf([1.0, -2.0])
    (x * 3).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3 + 2, 3 - 4])


def test_one_tensor_on_two_paths_adds_both_gradients():
    x = leaf([2.0])
    (x * x * x + x.exp()).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [12 + np.exp(2.0)])


def test_no_grad_records_nothing_and_detach_cuts_the_graph():
    x = leaf([1.0, 2.0])
    with Tensor.no_grad():
        y = x * 2
    assert not y.requires_grad and y._ctx is None
    z = (x * 2).detach()
    assert not z.requires_grad and z._ctx is None
    assert np.array_equal(z.numpy(), [2.0, 4.0])
    w = x * 2 + z
    w.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_only_leaves_get_grad():
    x = leaf([1.0])
    y = x * 2
    (y * 3).sum().backward()
    assert y.grad is None and x.grad is not None


def test_int_and_bool_tensors_never_require_grad():
    with pytest.raises(TypeError, match="float"):
        Tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError, match="float"):
        Tensor([1, 2]).requires_grad_()
    with pytest.raises(TypeError, match="float"):
        Tensor.zeros(3, dtype=dtypes.int32, requires_grad=True)
    x = leaf([1.5, -2.5])
    assert not (x > 0).requires_grad and not x.argmax().requires_grad and not x.cast(dtypes.int64).requires_grad


def test_backward_needs_a_scalar_or_a_gradient():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="scalar"):
        (x * 2).backward()
    (x * 2).backward(Tensor([1.0, 0.5], dtype=dtypes.float64))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 1.0])
    with pytest.raises(ValueError, match="shape"):
        (x * 2).backward(Tensor([1.0]))
    with pytest.raises(RuntimeError, match="does not require grad"):
        Tensor([1.0]).sum().backward()


def test_gather_gradient_adds_repeated_rows():
    w = leaf(np.arange(12.0).reshape(4, 3))
    idx = Tensor([[0, 2], [2, 2]])
    w[idx].sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[1, 1, 1], [0, 0, 0], [3, 3, 3], [0, 0, 0]])


def test_max_splits_the_gradient_between_ties():
    x = leaf([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]])
    x.max(axis=1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 0.5, 0.5], [1, 0, 0]])


def test_dropout_in_training_scales_the_kept_gradient():
    Tensor.manual_seed(0)
    x = leaf(np.ones((50, 40)), dtype=dtypes.float32)
    with Tensor.train():
        assert Tensor.training
        y = x.dropout(0.25)
    assert not Tensor.training
    y.sum().backward()
    kept = y.numpy() != 0
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 1 / 0.75, 0.0), rtol=1e-6)
    assert 0.6 < kept.mean() < 0.9


def test_optimizer_style_in_place_assign_keeps_identity():
    x = leaf([1.0, 2.0])
    before = id(x)
    with Tensor.no_grad():
        x.assign(x * 3)
    assert id(x) == before and np.array_equal(x.numpy(), [3.0, 6.0]) and x.requires_grad


def test_backward_frees_the_graph_unless_retained():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 8.0])
    with pytest.raises(RuntimeError, match="retain_graph"):
        y.backward()


def test_each_leaf_owns_a_contiguous_grad():
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (a + b).sum().backward()
    # data_ptr raises for a tensor that is a view rather than memory of its own
    assert a.grad is not b.grad and a.grad.data_ptr() != b.grad.data_ptr()
    assert a.grad.tolist() == b.grad.tolist() == [1.0, 1.0]


def test_gelu_is_one_node_differentiated_by_its_own_rule():
    x = Tensor(np.linspace(-9.0, 9.0, 181), requires_grad=True)
    y = x.gelu()
    assert y._ctx.op is Ops.GELU and len(y._ctx.parents) == 1 and y._ctx.parents[0] is x
    y.sum().backward()
    want = [0.5 * math.erfc(-v / math.sqrt(2)) + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi)
            for v in x.numpy().tolist()]
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12, atol=1e-300)
