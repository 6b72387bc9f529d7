"""TinyJit: a replayed step computes what the eager step computes, runs no scheduling, and refuses
(JitError, naming the cause) every call or function a replay would get wrong."""

import numpy as np
import pytest

from .. import GlobalCounters, JitError, Tensor, TinyJit, nn, optim
from .. import realize as realize_module

RNG = np.random.default_rng(0)
BATCHES = [(RNG.standard_normal((6, 8)).astype(np.float32), RNG.integers(0, 5, 6)) for _ in range(6)]


def train(jitted: bool, dropout: float = 0.0):
    """Six steps of a small classifier (Linear, GELU, dropout, Linear, cross-entropy, clip, AdamW
    with a changing lr); the losses and the final weights."""
    Tensor.manual_seed(3)
    l1, l2 = nn.Linear(8, 16), nn.Linear(16, 5)
    opt = optim.AdamW([l1.weight, l1.bias, l2.weight, l2.bias], lr=0.05, weight_decay=0.1)

    def step(x, y):
        with Tensor.train():
            loss = l2(l1(x).gelu().dropout(dropout)).sparse_categorical_crossentropy(y)
            loss.backward()
        optim.clip_grad_norm_(opt.params, 0.5)
        opt.step()
        opt.zero_grad()
        return loss

    run = TinyJit(step) if jitted else step
    losses = []
    for i, (x, y) in enumerate(BATCHES):
        opt.lr = 0.05 / (i + 1)
        losses.append(run(Tensor(x), Tensor(y)))
    return [loss.item() for loss in losses], l1.weight.numpy(), opt


@pytest.mark.parametrize("dropout", [0.0, 0.25])
def test_a_replayed_step_is_the_eager_step_bit_for_bit(dropout):
    eager_losses, eager_w, _ = train(False, dropout)
    jit_losses, jit_w, opt = train(True, dropout)  # (the losses read after all six calls: each call's own)
    assert jit_losses == eager_losses
    np.testing.assert_array_equal(jit_w, eager_w)
    assert opt.steps == 6


def test_a_replay_schedules_nothing(monkeypatch):
    w = Tensor(np.ones((4, 4), np.float32))

    @TinyJit
    def f(x):
        return (x @ w).relu().sum()

    for _ in range(2):
        f(Tensor(RNG.standard_normal((3, 4)).astype(np.float32)))
    monkeypatch.setattr(realize_module, "create_schedule", lambda outs: pytest.fail("a replay scheduled"))
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    GlobalCounters.reset()
    out = f(Tensor(x))
    monkeypatch.undo()
    assert GlobalCounters.kernel_count == f.plan.kernels >= 1
    assert out.item() == pytest.approx(np.maximum(x @ np.ones((4, 4)), 0).sum(), rel=1e-6)


def test_temporaries_share_memory():
    @TinyJit
    def f(x):
        for _ in range(6):  # a chain of matmuls: each product lives until the next is made
            x = (x @ x.T).contiguous() / 8
        return x.sum()

    for _ in range(2):
        f(Tensor(RNG.standard_normal((8, 8)).astype(np.float32)))
    assert 0 < f.peak_bytes <= 3 * 8 * 8 * 4  # two or three live at a time, not six


def called_twice(f, *args):
    f(*args)
    f(*args)


def test_a_call_with_another_shape_is_refused_naming_the_argument():
    f = TinyJit(lambda x, y: (x + y).sum())
    a, b = Tensor(np.ones(3, np.float32)), Tensor(np.ones(3, np.float32))
    called_twice(f, a, b)
    with pytest.raises(JitError, match=r"argument 1 is a float32 tensor of shape \(4,\)"):
        f(a, Tensor(np.ones(4, np.float32)))


def test_a_changed_python_argument_is_refused():
    f = TinyJit(lambda x, scale: (x * scale).sum())
    x = Tensor(np.ones(3, np.float32))
    called_twice(f, x, 2.0)
    with pytest.raises(JitError, match="argument 1 is 3.0, the capture had 2.0"):
        f(x, 3.0)


def test_a_readback_inside_is_refused():
    f = TinyJit(lambda x: x * x.sum().item())
    with pytest.raises(JitError, match="reads a value back"):
        called_twice(f, Tensor(np.ones(3, np.float32)))


def test_an_upload_inside_is_refused():
    f = TinyJit(lambda x: x + Tensor([1.0, 2.0, 3.0]))
    with pytest.raises(JitError, match="copied in from Python"):
        called_twice(f, Tensor(np.ones(3, np.float32)))


def test_state_kept_by_rebinding_is_refused():
    state = {"total": Tensor(np.zeros(3, np.float32))}

    def f(x):
        state["total"] = (state["total"] + x).realize()  # should be state["total"].assign(...)
        return x.sum()

    with pytest.raises(JitError, match="still held after it"):
        called_twice(TinyJit(f), Tensor(np.ones(3, np.float32)))


def test_state_kept_by_assign_is_replayed():
    total = Tensor(np.zeros(3, np.float32))

    @TinyJit
    def f(x):
        total.assign(total + x)
        return total.sum()

    for i in range(5):
        f(Tensor(np.full(3, i, np.float32)))
    np.testing.assert_array_equal(total.numpy(), [10, 10, 10])


def test_a_returned_value_that_is_not_a_tensor_is_refused():
    f = TinyJit(lambda x: (x.sum(), 3))
    with pytest.raises(JitError, match="returned a int"):
        called_twice(f, Tensor(np.ones(3, np.float32)))


def test_a_bad_index_is_refused_by_a_replay_too():
    table = Tensor(RNG.standard_normal((5, 4)).astype(np.float32))
    f = TinyJit(lambda i: table[i].sum())
    called_twice(f, Tensor(np.array([0, 4])))
    assert f(Tensor(np.array([1, 2]))).item() == pytest.approx(table.numpy()[[1, 2]].sum(), rel=1e-6)
    with pytest.raises(IndexError, match="index 5 is out of bounds"):
        f(Tensor(np.array([1, 5])))


def test_an_assign_left_unrealized_is_refused():
    total = Tensor(np.zeros(3, np.float32))

    def f(x):
        total.assign(total + x)  # never realized inside: a replay would not run it
        return x.sum()

    with pytest.raises(JitError, match="was not realized inside the call"):
        called_twice(TinyJit(f), Tensor(np.ones(3, np.float32)))
