"""Optimizers step by step against torch.optim, gradient clipping against torch, the schedules'
shapes, and exact resume from a state dict."""

import math

import numpy as np
import pytest

from .. import Tensor, dtypes, optim
from ..nn.state import safe_load, safe_save

torch = pytest.importorskip("torch", reason="optimizers are checked against torch.optim (pip install -e '.[torch]')")

RNG = np.random.default_rng(0)
X, Y = RNG.standard_normal((16, 5)), RNG.standard_normal((16, 3))
W0, B0 = RNG.standard_normal((5, 3)) * 0.5, RNG.standard_normal(3) * 0.1


def ours_run(make, steps=6):
    w, b = Tensor(W0, requires_grad=True), Tensor(B0, requires_grad=True)
    opt = make([w, b])
    x, y = Tensor(X), Tensor(Y)
    history = []
    for i in range(steps):
        opt.lr = opt.lr * (0.9 if i else 1.0)  # a schedule changes lr between steps
        opt.zero_grad()
        ((x @ w + b - y) ** 2).mean().backward()
        opt.step()
        history.append((w.numpy().copy(), b.numpy().copy()))
    return history


def torch_run(make, steps=6):
    w, b = torch.tensor(W0, requires_grad=True), torch.tensor(B0, requires_grad=True)
    opt = make([w, b])
    x, y = torch.from_numpy(X), torch.from_numpy(Y)
    history = []
    for i in range(steps):
        for group in opt.param_groups:
            group["lr"] = group["lr"] * (0.9 if i else 1.0)
        opt.zero_grad()
        ((x @ w + b - y) ** 2).mean().backward()
        opt.step()
        history.append((w.detach().numpy().copy(), b.detach().numpy().copy()))
    return history


CASES = {
    "sgd": (lambda p: optim.SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    "sgd_momentum_wd": (lambda p: optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01),
                        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01)),
    "sgd_nesterov": (lambda p: optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True),
                     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True)),
    "adam": (lambda p: optim.Adam(p, lr=0.01), lambda p: torch.optim.Adam(p, lr=0.01)),
    "adam_wd": (lambda p: optim.Adam(p, lr=0.01, b1=0.8, b2=0.99, eps=1e-6, weight_decay=0.1),
                lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    "adamw": (lambda p: optim.AdamW(p, lr=0.01), lambda p: torch.optim.AdamW(p, lr=0.01)),
    "adamw_wd": (lambda p: optim.AdamW(p, lr=0.02, b1=0.9, b2=0.95, weight_decay=0.1),
                 lambda p: torch.optim.AdamW(p, lr=0.02, betas=(0.9, 0.95), weight_decay=0.1)),
}


@pytest.mark.parametrize("name", CASES)
def test_optimizer_matches_torch_step_by_step(name):
    ours, theirs = CASES[name]
    for step, ((w, b), (wt, bt)) in enumerate(zip(ours_run(ours), torch_run(theirs), strict=True)):
        np.testing.assert_allclose(w, wt, rtol=1e-12, atol=1e-13, err_msg=f"{name} w, step {step}")
        np.testing.assert_allclose(b, bt, rtol=1e-12, atol=1e-13, err_msg=f"{name} b, step {step}")


@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float64])
@pytest.mark.parametrize("make", [lambda p: optim.AdamW(p, lr=0.02, b1=0.9, b2=0.95, weight_decay=0.1),
                                  lambda p: optim.Adam(p, lr=0.01, weight_decay=0.1)], ids=["adamw", "adam_l2"])
def test_the_fused_adam_kernel_computes_the_composite_formula(make, dtype):
    """Adam._apply runs csrc/adam.c; Optimizer._apply runs the same update as 15 tensor ops (_update)."""
    runs = []
    for fused in (True, False):
        w = Tensor(W0, dtype=dtype, requires_grad=True)
        opt = make([w])
        if not fused:
            opt._apply = lambda i, p, g, opt=opt: optim.Optimizer._apply(opt, i, p, g)
        m0 = opt.state["m"][0]
        for _ in range(4):
            opt.zero_grad()
            ((Tensor(X, dtype=dtype) @ w - Tensor(Y, dtype=dtype)) ** 2).mean().backward()
            opt.step()
        assert (opt.state["m"][0] is m0) == fused  # the kernel updates the moments in place
        runs.append((w.numpy(), opt.state["m"][0].numpy(), opt.state["v"][0].numpy()))
    tol = dict(rtol=1e-6, atol=1e-7) if dtype is dtypes.float32 else dict(rtol=1e-14, atol=1e-15)
    for fused, composite, name in zip(*runs, ("param", "m", "v"), strict=True):
        np.testing.assert_allclose(fused, composite, **tol, err_msg=name)


def test_muon_refuses_vectors():
    """Muon against torch.optim.Muon, and LARS and LAMB against their papers, are in
    conformance/test_optimizers.py."""
    with pytest.raises(ValueError, match="2-D"):
        optim.Muon([Tensor.zeros(3, requires_grad=True)])


def test_newton_schulz_makes_singular_values_near_one():
    g = Tensor(RNG.standard_normal((32, 16)), dtype=dtypes.float32)
    s = np.linalg.svd(optim.newton_schulz(g).numpy(), compute_uv=False)
    assert 0.6 < s.min() and s.max() < 1.3


@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_torch(max_norm):
    grads = [RNG.standard_normal((4, 3)), RNG.standard_normal(5)]
    ours = [Tensor(np.zeros_like(g), requires_grad=True) for g in grads]
    theirs = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for p, pt, g in zip(ours, theirs, grads, strict=True):
        p.grad, pt.grad = Tensor(g), torch.from_numpy(g.copy())
    total = optim.clip_grad_norm_(ours, max_norm)
    total_t = torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    assert isinstance(total, float) and math.isclose(total, total_t.item(), rel_tol=1e-12)
    for p, pt in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(p.grad.numpy(), pt.grad.numpy(), rtol=1e-12)


def test_cosine_schedule_is_nanogpts():
    lr = [optim.cosine_lr(s, lr=1.0, warmup=10, total=100, min_lr=0.1) for s in range(120)]
    assert lr[0] == pytest.approx(1 / 11) and lr[9] == pytest.approx(10 / 11)
    assert lr[10] == pytest.approx(1.0) and lr[55] == pytest.approx(0.55) and lr[100] == pytest.approx(0.1)
    assert lr[119] == 0.1
    assert all(a >= b for a, b in zip(lr[10:], lr[11:], strict=False))


def test_linear_rampdown_schedule():
    lr = [optim.linear_rampdown_lr(s, lr=2.0, total=100, warmdown_frac=0.2) for s in range(101)]
    assert lr[0] == lr[79] == 2.0 and lr[80] == pytest.approx(2.0) and lr[90] == pytest.approx(1.0) and lr[100] == 0
    with pytest.raises(ValueError, match="warmdown_frac"):
        optim.linear_rampdown_lr(0, lr=1.0, total=10, warmdown_frac=1.5)


@pytest.mark.parametrize("make", [lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.1),
                                  lambda p: optim.SGD(p, lr=0.1, momentum=0.9)], ids=["adamw", "sgd"])
def test_resume_from_a_saved_state_is_exact(make, tmp_path):
    def train(w, opt, steps):
        for _ in range(steps):
            opt.zero_grad()
            ((Tensor(X, dtype=dtypes.float32) @ w) - Tensor(Y, dtype=dtypes.float32)).square().mean().backward()
            opt.step()

    w = Tensor(W0, dtype=dtypes.float32, requires_grad=True)
    opt = make([w])
    train(w, opt, 5)
    straight = w.numpy()

    w = Tensor(W0, dtype=dtypes.float32, requires_grad=True)
    opt = make([w])
    train(w, opt, 3)
    safe_save({"w": w, **{f"opt.{k}": v for k, v in opt.state_dict().items()}}, tmp_path / "ckpt.safetensors")
    saved = safe_load(tmp_path / "ckpt.safetensors")
    w2 = Tensor(saved["w"].numpy(), requires_grad=True)
    opt2 = make([w2])
    opt2.load_state_dict({k[4:]: v for k, v in saved.items() if k.startswith("opt.")})
    train(w2, opt2, 2)
    assert np.array_equal(w2.numpy(), straight)
    with pytest.raises(ValueError, match="keys"):
        opt2.load_state_dict({"step": Tensor(1)})


def test_a_small_mlp_learns_xor():
    from .. import nn

    Tensor.manual_seed(1)
    l1, l2 = nn.Linear(2, 16), nn.Linear(16, 2)
    opt = optim.AdamW(nn.state.get_parameters([l1, l2]), lr=0.05, weight_decay=0.0)
    x = Tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    y = Tensor([0, 1, 1, 0])
    for _ in range(150):
        opt.zero_grad()
        loss = l2(l1(x).tanh()).cross_entropy(y)
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    assert l2(l1(x).tanh()).argmax(-1).tolist() == [0, 1, 1, 0]
