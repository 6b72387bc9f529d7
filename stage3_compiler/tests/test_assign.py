"""assign writes in place: a realized tensor keeps its buffer, kernels that read the old values run
first, and a lazy tensor built on the old values but computed after the write raises."""

import numpy as np
import pytest

from .. import GlobalCounters, Tensor, optim


def realized(*shape):
    return Tensor(np.arange(np.prod(shape), dtype=np.float32).reshape(shape))


def test_assign_writes_the_tensors_own_buffer():
    p = realized(2, 3)
    buf = p.lazydata.buffer
    p.assign(p * 2 + 1).realize()
    assert p.lazydata.buffer is buf
    np.testing.assert_array_equal(p.numpy(), np.arange(6).reshape(2, 3) * 2 + 1)


def test_a_reader_of_the_old_values_in_the_same_realize_runs_first():
    p = realized(4, 3)
    total = (p @ Tensor.ones(3, 5)).sum()  # a reduction over the old p, realized with the write
    p.assign(p + 100)
    Tensor.realize(p, total)
    assert total.item() == np.arange(12).sum() * 5
    np.testing.assert_array_equal(p.numpy(), np.arange(12).reshape(4, 3) + 100)


def test_a_view_shares_the_write_as_torch_views_do():
    p = realized(2, 3)
    view = p.detach().T
    view.realize()
    p.assign(p * 0).realize()
    assert not view.numpy().any()


def test_clone_is_a_buffer_of_its_own():
    p = realized(2, 3)
    c = p.clone().realize()
    p.assign(p - 1).realize()
    np.testing.assert_array_equal(c.numpy(), np.arange(6).reshape(2, 3))


def test_a_lazy_read_of_overwritten_values_raises():
    p = realized(2, 3)
    stale = p + 1  # not realized before the write below
    p.assign(p * 3).realize()
    with pytest.raises(RuntimeError, match="overwritten in place"):
        stale.numpy()


def test_assign_of_a_sum_is_one_kernel():
    s = Tensor([0.0])
    s.assign(realized(4, 8).sum().reshape(1))
    GlobalCounters.reset()
    s.realize()
    assert GlobalCounters.kernel_count == 1 and s.item() == np.arange(32).sum()


def test_an_unrealized_tensor_just_points_at_the_new_values():
    z = Tensor.zeros(3)  # a constant, no buffer of its own yet
    z.assign(Tensor.ones(3) * 2)
    np.testing.assert_array_equal(z.numpy(), [2, 2, 2])


def test_an_optimizer_step_keeps_every_parameter_and_state_buffer():
    w = Tensor(np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32), requires_grad=True)
    opt = optim.AdamW([w], lr=0.1)
    buffers = []
    x = Tensor(np.ones((8, 4), np.float32))
    for _ in range(3):  # the moments start as constants and get their buffers at the first step
        (w * x).sum().backward()  # (a gradient that read w in the update's kernel would keep w out of place)
        opt.step()
        opt.zero_grad()
        buffers.append([t.lazydata.buffer for t in (w, *opt.state["m"], *opt.state["v"], opt._t, opt._lr)])
    assert all(a is b for a, b in zip(buffers[1], buffers[2], strict=True))
    assert buffers[0][0] is buffers[2][0] and opt.steps == 3
