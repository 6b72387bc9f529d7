"""Every optimizer of `optim` against a reference, step by step, on every stage with `optim` (stage2 on).

- SGD (with momentum, dampening, nesterov, weight decay), Adam, AdamW and Muon against torch.optim's
  own classes. torch's Muon runs its Newton-Schulz iteration in bfloat16; the test swaps in the same
  iteration in the weight's dtype (its only change), so everything else (momentum, nesterov, weight
  decay, the lr adjustment, the norm's clamp) is torch's code.
- LARS and LAMB, which torch lacks, against the papers' update rules written below in torch
  (You, Gitman and Ginsburg 2017; You et al. 2019), with tinygrad's defaults.
- Every optimizer's state dict round-trips: a run stopped, saved and resumed ends bit for bit where
  the straight run ends.
- torch's and tinygrad's spellings and defaults.

The runs are float64 with a learning rate changed between steps (as a schedule does), six steps;
the tolerance (1e-10 relative) allows float64 sums in another order and nothing else.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="optimizers are checked against torch.optim (pip install -e '.[torch]')")

RNG = np.random.default_rng(0)
X, Y = RNG.standard_normal((16, 5)), RNG.standard_normal((16, 3))
W0, B0 = RNG.standard_normal((5, 3)) * 0.5, RNG.standard_normal(3) * 0.1
STEPS, RTOL, ATOL = 6, 1e-10, 1e-12


def _loss(x, y, w, b):
    out = (x @ w).tanh()
    return ((out if b is None else out + b) - y).square().mean()


def ours_run(stage, make, bias: bool = True) -> list[np.ndarray]:
    T = stage.module.Tensor
    params = [T(W0, requires_grad=True)] + ([T(B0, requires_grad=True)] if bias else [])
    opt = make(stage.module.optim, params)
    history = []
    for i in range(STEPS):
        opt.lr = opt.lr * (0.9 if i else 1.0)
        opt.zero_grad()
        _loss(T(X), T(Y), params[0], params[1] if bias else None).backward()
        opt.step()
        history.append(np.concatenate([p.numpy().ravel() for p in params]))
    return history


def torch_run(make, bias: bool = True) -> list[np.ndarray]:
    params = [torch.tensor(W0, requires_grad=True)] + ([torch.tensor(B0, requires_grad=True)] if bias else [])
    opt = make(params)
    history = []
    for i in range(STEPS):
        for group in opt.param_groups:
            group["lr"] = group["lr"] * (0.9 if i else 1.0)
        opt.zero_grad()
        _loss(torch.from_numpy(X), torch.from_numpy(Y), params[0], params[1] if bias else None).backward()
        opt.step()
        history.append(np.concatenate([p.detach().numpy().ravel() for p in params]))
    return history


class PaperLARS(torch.optim.Optimizer):
    """LARS: trust = tcoef * |p| / (|g| + wd * |p|) (1 if a norm is 0); g' = (g + wd * p) * trust * lr;
    buf = momentum * buf + g'; p -= buf (or g' + momentum * buf with nesterov)."""

    def __init__(self, params, lr=0.001, momentum=0.9, weight_decay=1e-4, nesterov=False, tcoef=0.001):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov,
                                      tcoef=tcoef))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                wd, m = group["weight_decay"], group["momentum"]
                p_norm, g_norm = p.norm(), p.grad.norm()
                trust = group["tcoef"] * p_norm / (g_norm + wd * p_norm) if p_norm > 0 and g_norm > 0 else 1.0
                g = (p.grad + wd * p) * trust * group["lr"]
                buf = self.state[p].setdefault("buf", torch.zeros_like(p))
                buf.mul_(m).add_(g)
                p.sub_(g + m * buf if group["nesterov"] else buf)


class PaperLAMB(torch.optim.Optimizer):
    """LAMB: Adam's bias-corrected moments; u = m_hat / (sqrt(v_hat) + eps) + wd * p;
    p -= lr * (|p| / |u|) * u (the ratio 1 if a norm is 0)."""

    def __init__(self, params, lr=0.001, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            (b1, b2), wd = group["betas"], group["weight_decay"]
            for p in group["params"]:
                st = self.state[p]
                t = st["t"] = st.get("t", 0) + 1
                m = st.setdefault("m", torch.zeros_like(p)).mul_(b1).add_((1 - b1) * p.grad)
                v = st.setdefault("v", torch.zeros_like(p)).mul_(b2).add_((1 - b2) * p.grad**2)
                u = (m / (1 - b1**t)) / ((v / (1 - b2**t)).sqrt() + group["eps"]) + wd * p
                p_norm, u_norm = p.norm(), u.norm()
                p.sub_(group["lr"] * (p_norm / u_norm if p_norm > 0 and u_norm > 0 else 1.0) * u)


def _ns_in_dtype(grad, ns_coefficients, ns_steps, eps):
    """torch's _zeropower_via_newtonschulz without its cast to bfloat16."""
    a, b, c = ns_coefficients
    x = grad.T if grad.size(0) > grad.size(1) else grad
    x = x / x.norm().clamp(min=eps)
    for _ in range(ns_steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if grad.size(0) > grad.size(1) else x


CASES = {  # name: (ours(optim, params), theirs(params), has a bias (Muon takes 2-D weights only))
    "sgd": (lambda o, p: o.SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1), True),
    "sgd_momentum_dampening": (lambda o, p: o.SGD(p, lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01),
                               lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01),
                               True),
    "sgd_nesterov": (lambda o, p: o.SGD(p, lr=0.05, momentum=0.8, nesterov=True),
                     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True), True),
    "adam_betas": (lambda o, p: o.Adam(p, lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
                   lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1), True),
    "adamw_tinygrad_names": (lambda o, p: o.AdamW(p, lr=0.02, b1=0.9, b2=0.95, weight_decay=0.1),
                             lambda p: torch.optim.AdamW(p, lr=0.02, betas=(0.9, 0.95), weight_decay=0.1), True),
    "muon_defaults": (lambda o, p: o.Muon(p, lr=0.02), lambda p: torch.optim.Muon(p, lr=0.02), False),
    "muon_tall_plain": (lambda o, p: o.Muon(p, lr=0.05, weight_decay=0.0, nesterov=False, momentum=0.9, ns_steps=3),
                        lambda p: torch.optim.Muon(p, lr=0.05, weight_decay=0.0, nesterov=False, momentum=0.9,
                                                   ns_steps=3), False),
    "muon_match_rms_adamw": (
        lambda o, p: o.Muon(p, lr=0.02, ns_coefficients=(2.0, -1.5, 0.5), adjust_lr_fn="match_rms_adamw"),
        lambda p: torch.optim.Muon(p, lr=0.02, ns_coefficients=(2.0, -1.5, 0.5), adjust_lr_fn="match_rms_adamw"),
        False),
    "lars": (lambda o, p: o.LARS(p, lr=0.5, tcoef=0.01), lambda p: PaperLARS(p, lr=0.5, tcoef=0.01), True),
    "lars_nesterov_wd": (lambda o, p: o.LARS(p, lr=0.3, momentum=0.8, weight_decay=0.05, nesterov=True),
                         lambda p: PaperLARS(p, lr=0.3, momentum=0.8, weight_decay=0.05, nesterov=True), True),
    "lamb": (lambda o, p: o.LAMB(p, lr=0.05), lambda p: PaperLAMB(p, lr=0.05), True),
    "lamb_wd": (lambda o, p: o.LAMB(p, lr=0.05, b1=0.8, b2=0.99, weight_decay=0.1),
                lambda p: PaperLAMB(p, lr=0.05, betas=(0.8, 0.99), weight_decay=0.1), True),
    "lamb_adam_is_adamw": (lambda o, p: o.LAMB(p, lr=0.02, eps=1e-8, weight_decay=0.1, adam=True),
                           lambda p: torch.optim.AdamW(p, lr=0.02, weight_decay=0.1), True),
}


@pytest.mark.needs("train")
@pytest.mark.parametrize("name", CASES)
def test_optimizer_matches_its_reference(stage, name, monkeypatch):
    ours, theirs, bias = CASES[name]
    monkeypatch.setattr(torch.optim._muon, "_zeropower_via_newtonschulz", _ns_in_dtype)
    for step, (a, b) in enumerate(zip(ours_run(stage, ours, bias), torch_run(theirs, bias), strict=True)):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=f"{name}, step {step}")


@pytest.mark.needs("train")
@pytest.mark.parametrize("name", CASES)
def test_state_dict_round_trip_resumes_exactly(stage, name):
    T, optim = stage.module.Tensor, stage.module.optim
    make, _, bias = CASES[name]

    def train(params, opt, steps):
        for _ in range(steps):
            opt.zero_grad()
            _loss(T(X), T(Y), params[0], params[1] if bias else None).backward()
            opt.step()

    def fresh():
        params = [T(W0, requires_grad=True)] + ([T(B0, requires_grad=True)] if bias else [])
        return params, make(optim, params)

    params, opt = fresh()
    train(params, opt, 5)
    straight = [p.numpy() for p in params]
    params, opt = fresh()
    train(params, opt, 3)
    saved = {k: T(v.numpy()) for k, v in opt.state_dict().items()}  # through numpy, as a file would
    values = [p.numpy() for p in params]
    params, opt = fresh()
    for p, v in zip(params, values, strict=True):
        p.assign(T(v)).realize()
    opt.load_state_dict(saved)
    train(params, opt, 2)
    for p, s in zip(params, straight, strict=True):
        np.testing.assert_array_equal(p.numpy(), s, err_msg=f"{name}: resumed run differs from the straight one")


def test_muon_takes_torchs_arguments_and_defaults():
    from conformance.stages import present

    theirs = inspect.signature(torch.optim.Muon).parameters
    for stage in present():
        if not hasattr(stage.module, "optim"):
            continue
        ours = inspect.signature(stage.module.optim.Muon).parameters
        for name, param in theirs.items():
            if name != "params":
                default = ours[name].default
                assert tuple(default) == tuple(param.default) if isinstance(default, tuple) else \
                    default == param.default, f"{stage.name} Muon {name}: {default} != torch's {param.default}"


@pytest.mark.needs("train")
def test_a_gradient_that_does_not_fit_its_parameter_is_refused(stage):
    T, optim = stage.module.Tensor, stage.module.optim
    w = T(W0, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    w.grad = T(np.ones((3, 5)))
    with pytest.raises(ValueError, match=r"SGD.step: parameter 0 \(5, 3\).*gradient \(3, 5\)"):
        opt.step()
    w.grad = None
    opt.step()  # a parameter without a gradient is skipped, as torch skips it
    np.testing.assert_array_equal(w.numpy(), W0)


@pytest.mark.needs("train")
def test_betas_and_b1_b2_are_one_spelling_at_a_time(stage):
    T, optim = stage.module.Tensor, stage.module.optim
    with pytest.raises(TypeError, match="betas"):
        optim.AdamW([T(W0, requires_grad=True)], b1=0.8, betas=(0.9, 0.95))
    with pytest.raises(ValueError, match="adjust_lr_fn"):
        optim.Muon([T(W0, requires_grad=True)], adjust_lr_fn="spectral")
