"""Movement ops are views: they run nothing and copy nothing, they compose the ShapeTracker of one
base, and the kernel that finally reads them turns the view into index arithmetic."""

import numpy as np

from .. import GlobalCounters, Tensor


def test_views_run_nothing_and_read_the_same_base():
    x = Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    ref = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    cases = [(lambda t: t.reshape(6, 4), lambda a: a.reshape(6, 4)),
             (lambda t: t.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
             (lambda t: t[1], lambda a: a[1]),
             (lambda t: t[:, ::2, ::-1], lambda a: a[:, ::2, ::-1]),
             (lambda t: t.flip(0), lambda a: a[::-1]),
             (lambda t: t[None, ..., 1], lambda a: a[None, ..., 1]),
             (lambda t: t.expand(5, 2, 3, 4), lambda a: np.broadcast_to(a, (5, 2, 3, 4))),
             (lambda t: t.shrink(((0, 1), None, (1, 3))), lambda a: a[0:1, :, 1:3]),
             (lambda t: t.flatten(1), lambda a: a.reshape(2, 12)),
             (lambda t: t.T.reshape(12, 2), lambda a: a.T.reshape(12, 2))]
    for view, expect in cases:
        GlobalCounters.reset()
        y = view(x)
        assert GlobalCounters.kernel_count == 0 and y.lazydata.base is x.lazydata.base
        np.testing.assert_array_equal(y.numpy(), expect(ref))


def test_a_reshape_of_a_whole_buffer_needs_no_copy():
    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    GlobalCounters.reset()
    np.testing.assert_array_equal(x.reshape(2, 6).numpy(), np.arange(12).reshape(2, 6))
    assert GlobalCounters.kernel_count == 0


def test_expand_costs_no_memory():
    x = Tensor([[1.0], [2.0]]).expand(2, 1000)
    assert x.lazydata.base.shape == (2, 1) and x.sum().item() == 3000


def test_contiguous_of_a_base_is_itself():
    x = Tensor(np.zeros((2, 3), np.float32))
    assert x.contiguous() is x
    assert x.T.contiguous() is not x
