"""TinyJit: a replayed step computes what the eager step computes, runs no scheduling, and refuses
(JitError, naming the cause) every call or function a replay would get wrong."""

import warnings

import numpy as np
import pytest

from .. import GlobalCounters, JitError, Tensor, TinyJit, nn, optim
from ..engine import realize as realize_module

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

    with pytest.raises(JitError, match=r"\['total'\] held a tensor this call read .* rebinding a name"):
        called_twice(TinyJit(f), Tensor(np.ones(3, np.float32)))


def test_state_kept_by_rebinding_is_refused_even_when_the_old_tensor_lives_on():
    history = []
    state = {"total": Tensor(np.zeros(3, np.float32))}

    def f(x):
        history.append(state["total"])  # the old tensor stays alive: no buffer is dropped
        state["total"] = (state["total"] + x).realize()
        return x.sum()

    with pytest.raises(JitError, match=r"\['total'\] held a tensor this call read and now holds another"):
        called_twice(TinyJit(f), Tensor(np.ones(3, np.float32)))


@pytest.mark.parametrize("realized", [True, False])
def test_gradients_accumulated_across_calls_are_refused(realized):
    w = Tensor(np.ones(3, np.float32), requires_grad=True)

    @TinyJit
    def f(x):
        (w * x).sum().backward()  # nothing zeroes w.grad: each call adds to the last call's gradient
        if realized:
            w.grad.realize()
        return w.grad.sum()

    why = r"\['grad'\] held a tensor this call read and now holds another.* not zeroed inside the step"
    with pytest.raises(JitError, match=why):
        f(Tensor(np.ones(3, np.float32)))
        f(Tensor(np.ones(3, np.float32)))


def test_gradients_zeroed_inside_the_step_stay_on_the_parameters():
    """What a replay writes again may stay held: the gradients of the last call, as eagerly."""
    w = Tensor(np.ones(3, np.float32), requires_grad=True)
    scale = Tensor.ones(3) * 3  # unrealized until the first call realizes it (a buffer that call makes)

    @TinyJit
    def f(x):
        w.grad = None
        (w * x * scale).square().sum().backward()
        return w.grad.sum()

    for i in range(5):
        x = np.full(3, i + 1, np.float32)
        assert f(Tensor(x)).item() == pytest.approx(3 * 2 * 9 * (i + 1) ** 2)
        np.testing.assert_allclose(w.grad.numpy(), 2 * 9 * x**2)  # this call's gradient, on the parameter


def test_a_lazy_tensor_rebound_in_a_dict_or_an_attribute_is_refused():
    class Holder:
        pass

    holder, state = Holder(), {}
    holder.w = Tensor(np.ones(3, np.float32)).realize() * 2  # unrealized: each call computes it in its kernel
    state["w"] = Tensor(np.ones(3, np.float32)).realize() * 3
    f = TinyJit(lambda x: (x * holder.w * state["w"]).sum())
    x = Tensor(np.arange(3, dtype=np.float32))
    called_twice(f, x)
    assert f(x).item() == 18
    state["w"] = Tensor(np.full(3, 5, np.float32)).realize() * 1
    with pytest.raises(JitError, match=r"made at .*test_jit.py:\d+.* no longer held"):
        f(x)
    f, x = TinyJit(lambda x: (x * holder.w).sum()), Tensor(np.arange(3, dtype=np.float32))
    called_twice(f, x)
    holder.w = holder.w * 1  # a new graph over the same buffer: the old one is gone
    with pytest.raises(JitError, match=r"made at .*test_jit.py:\d+.* no longer held"):
        f(x)


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


def test_an_assign_left_unrealized_is_realized_by_the_call():
    total = Tensor(np.zeros(3, np.float32)).realize()

    @TinyJit
    def f(x):
        total.assign(total + x)  # nothing inside realizes it: the call does, as a replay runs it
        return x.sum()

    for i in range(4):
        f(Tensor(np.full(3, i, np.float32)))
    np.testing.assert_array_equal(total.numpy(), [6, 6, 6])


# ---- the footguns of a tracing JIT: the right answer or a JitError, never a crash or a stale answer ----


def test_views_as_inputs():
    base = Tensor(np.arange(40, dtype=np.float32).reshape(10, 4)).realize()
    f = TinyJit(lambda x: (x * 2).sum(0))
    for i in (0, 3, 0, 5, 2):  # a slice from the start is a reshape of the base; the others are offset views
        np.testing.assert_array_equal(f(base[i:i + 3]).numpy(), (base.numpy()[i:i + 3] * 2).sum(0))
    g = TinyJit(lambda x: x + 1)
    for view in (base.T[:, :3], base[::2, 1:], base.reshape(4, 10)[1:], base.flip(0)[:4].T):
        want = view.numpy() + 1
        np.testing.assert_array_equal(TinyJit(lambda x: x + 1)(view).numpy(), want)
    for k in range(4):  # one capture replayed on views of another layout each call
        np.testing.assert_array_equal(g(base[k:k + 2, ::2].T).numpy(), base.numpy()[k:k + 2, ::2].T + 1)
    assert g.plan is not None


def test_a_constant_and_an_unrealized_input():
    f = TinyJit(lambda x: x * 3)
    for v in (1.0, 2.0, 3.0, 4.0):
        np.testing.assert_array_equal(f(Tensor.full((2, 2), v)).numpy(), np.full((2, 2), 3 * v))
        np.testing.assert_array_equal(f(Tensor.ones(2, 2) * v + 1).numpy(), np.full((2, 2), 3 * (v + 1)))


class Scaler:
    def __init__(self, k: float):
        self.w = Tensor(np.full(3, k, np.float32)).realize()

    @TinyJit
    def __call__(self, x):
        return (x * self.w).sum()

    @TinyJit
    def forward(self, x):
        return (x + self.w).sum()


def test_tinyjit_on_methods_one_capture_per_instance():
    a, b = Scaler(2.0), Scaler(10.0)
    for i in range(4):
        x = Tensor(np.full(3, i, np.float32))
        assert a(x).item() == 6 * i and b(x).item() == 30 * i
        assert a.forward(x).item() == 3 * i + 6 and b.forward(x).item() == 3 * i + 30
    assert a.__call__ is a.__call__ and a.__call__ is not b.__call__
    assert a.__call__.plan is not None and a.__call__.plan is not b.__call__.plan


def closure_step():
    state = {"w": Tensor(np.ones(3, np.float32)).realize()}
    f = TinyJit(lambda x: (x * state["w"]).sum())
    x = Tensor(np.arange(3, dtype=np.float32))
    called_twice(f, x)
    assert f(x).item() == 3  # replayed
    return f, x, state


def test_a_closure_tensor_rebound_to_a_new_tensor_is_refused():
    f, x, state = closure_step()
    state["w"] = Tensor(np.full(3, 5, np.float32)).realize()
    with pytest.raises(JitError, match=r"float32 tensor of shape \(3,\) made at .*test_jit.py:\d+.* no longer held"):
        f(x)


def test_a_closure_tensor_rebound_to_a_graph_is_refused():
    f, x, state = closure_step()
    state["w"] = state["w"] * 2  # unrealized: the graph still reads the old buffer, no tensor holds it
    with pytest.raises(JitError, match="no longer held"):
        f(x)


def test_a_tensor_rebound_in_place_is_refused():
    w = Tensor(np.ones(3, np.float32)).realize()
    f = TinyJit(lambda x: (x * w).sum())
    x = Tensor(np.arange(3, dtype=np.float32))
    called_twice(f, x)
    keep = w
    w.lazydata = (w * 2).lazydata  # what an in-place op that is not assign would do
    with pytest.raises(JitError, match="rebound since"):
        f(x)
    del keep


def test_a_closure_tensor_assigned_between_calls_is_read_fresh():
    f, x, state = closure_step()
    state["w"].assign(state["w"] * 2)  # lazy: the replay realizes it into the captured buffer first
    assert f(x).item() == 6
    state["w"].assign(Tensor(np.full(3, 10, np.float32))).realize()
    assert f(x).item() == 30


def test_a_capture_touches_no_object_of_another_library():
    # torch.distributed.reduce_op warns when anything reads its attributes: a capture that looked through
    # every object of the process for the tensors holding its state printed that warning
    distributed = pytest.importorskip("torch.distributed")
    held = distributed.reduce_op  # noqa: F841 (alive during the capture)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f, x, state = closure_step()
        assert f(x).item() == 3


def test_a_bad_label_is_refused_by_a_replay():
    logits = Tensor(RNG.standard_normal((4, 5)).astype(np.float32)).realize()
    f = TinyJit(lambda y: logits.cross_entropy(y))
    called_twice(f, Tensor(np.array([0, 1, 2, 3])))
    assert np.isfinite(f(Tensor(np.array([4, 3, 2, 1]))).item())
    with pytest.raises(IndexError, match=r"got values in \[0, 7\]"):
        f(Tensor(np.array([0, 7, 2, 1])))


def test_a_cnn_training_step_with_batchnorm_is_the_eager_step():
    """tinygrad's MNIST example in small: Conv2d, BatchNorm, max_pool2d, Linear, Adam, jitted; its running
    statistics are state that the step updates with assign (nothing reads them while training)."""
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((4, 1, 8, 8)).astype(np.float32) for _ in range(5)]
    ys = [rng.integers(0, 3, 4) for _ in range(5)]

    def run(jitted: bool):
        Tensor.manual_seed(5)
        conv, bn, head = nn.Conv2d(1, 4, 3), nn.BatchNorm(4), nn.Linear(4 * 3 * 3, 3)
        params = [conv.weight, conv.bias, bn.weight, bn.bias, head.weight, head.bias]
        opt = optim.Adam(params, lr=0.01)

        def step(x, y):
            with Tensor.train():
                h = bn(conv(x)).relu().max_pool2d(2)
                loss = head(h.flatten(1)).sparse_categorical_crossentropy(y).realize()  # before the update
                loss.backward()
                opt.step()
                opt.zero_grad()
            return loss

        f = TinyJit(step) if jitted else step
        losses = [f(Tensor(x), Tensor(y)).item() for x, y in zip(xs, ys, strict=True)]
        return losses, bn.running_mean.numpy(), bn.running_var.numpy(), head.weight.numpy()

    eager, jitted = run(False), run(True)
    assert jitted[0] == eager[0]
    for a, b in zip(jitted[1:], eager[1:], strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(jitted[1], 0)  # the running mean moved


class TinyMnistNet:
    """The model of tinygrad's MNIST example, in small: Conv2d, BatchNorm, relu and max_pool2d twice,
    then a Linear, written as a Tensor.sequential list."""

    def __init__(self):
        self.layers = [nn.Conv2d(1, 4, 3), nn.BatchNorm(4), Tensor.relu, lambda t: t.max_pool2d(2),
                       nn.Conv2d(4, 8, 3), nn.BatchNorm(8), Tensor.relu, lambda t: t.max_pool2d(2),
                       lambda t: t.flatten(1), nn.Linear(32, 3)]

    def __call__(self, x):
        return x.sequential(self.layers)


def test_tinygrads_mnist_step_is_jitted_as_written():
    """tinygrad's example step, unchanged: inside Tensor.train(), zero_grad first, a Tensor.randint batch,
    the loss's backward, the optimizer step; the gradients and the running statistics stay on the
    model after each call. Jitted, it is the eager run: the same losses, weights, statistics and last
    gradients, and the same accuracy."""
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 3, 96)
    images = (rng.standard_normal((96, 1, 14, 14)) + labels[:, None, None, None]).astype(np.float32)

    def run(jitted: bool):
        Tensor.manual_seed(7)
        model = TinyMnistNet()
        opt = optim.Adam(nn.state.get_parameters(model), lr=0.01)
        X, Y = Tensor(images).realize(), Tensor(labels).realize()

        def train_step():
            with Tensor.train():
                opt.zero_grad()
                samples = Tensor.randint(16, high=X.shape[0])
                loss = model(X[samples]).sparse_categorical_crossentropy(Y[samples]).backward()
                opt.step()
                return loss

        step = TinyJit(train_step) if jitted else train_step
        losses = [step().item() for _ in range(12)]
        accuracy = (model(X).argmax(-1) == Y).mean().item()
        grads = [p.grad.numpy() for p in opt.params]
        return losses, accuracy, [t.numpy() for t in nn.state.get_state_dict(model).values()], grads

    eager, jitted = run(False), run(True)
    np.testing.assert_allclose(jitted[0], eager[0], rtol=1e-6)
    assert jitted[1] == eager[1] and eager[1] > 0.5  # it learned, and the same
    for kind in (2, 3):  # every weight and running statistic; every gradient of the last call
        for a, b in zip(jitted[kind], eager[kind], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_losses_with_labels_are_jitted_without_a_readback():
    logp = Tensor(RNG.standard_normal((4, 5)).astype(np.float32)).log_softmax(-1).realize()
    for loss in (lambda y: logp.nll_loss(y), lambda y: logp.sparse_categorical_crossentropy(y)):
        f = TinyJit(loss)
        for labels in ([0, 1, 2, 3], [4, 4, 0, 1], [1, 2, 3, 4]):
            want = -logp.numpy()[np.arange(4), labels].mean()
            assert f(Tensor(np.array(labels))).item() == pytest.approx(want, rel=1e-5)
        with pytest.raises(IndexError, match=r"\[-2, 3\]"):
            f(Tensor(np.array([0, -2, 3, 1])))
