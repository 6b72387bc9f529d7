"""Optimizers, gradient clipping, loss scaling and learning-rate schedules.

Each optimizer holds its parameters (the same Tensor objects the model holds) and updates them in
place under no_grad (assign: each kernel writes the parameter's own buffer), with torch.optim's
formulas, so a run matches torch step for step. `lr` reads like a plain float the caller may change
before any step (that is how schedules are applied), but lives on the device, as do the step count
and every number computed from them (bias corrections, the clipping coefficient): a step is then
the same kernels on the same buffers every time, which a jitted step (jit.py) replays without
running this Python.
"""

from __future__ import annotations

from ..dtype import dtypes
from ..errors import ArgumentError
from ..tensor import Tensor
from .grad_scaler import GradScaler
from .schedules import cosine_lr, linear_rampdown_lr

__all__ = ["LAMB", "LARS", "SGD", "Adam", "AdamW", "GradScaler", "Muon", "Optimizer", "clip_grad_norm_",
           "cosine_lr", "linear_rampdown_lr"]


class Optimizer:
    slots: tuple[str, ...] = ()  # per-parameter state buffers, saved as "<slot>.<index>"

    def __init__(self, params, lr: float):
        params = list(params)
        seen, self.params = set(), []
        for p in params:
            if not isinstance(p, Tensor) or not p.dtype.is_float:
                raise TypeError(f"{type(self).__name__}: parameters must be float Tensors, got {p!r}")
            if id(p) not in seen and p.requires_grad is not False:  # tied: once; frozen (False): never
                seen.add(id(p))
                p.requires_grad_(True)
                self.params.append(p)
        if not self.params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        device = self.params[0].device
        self._lr_value = float(lr)
        self._lr = Tensor([self._lr_value], dtype=dtypes.float64, device=device)  # one-element buffers, written
        self._t = Tensor([0], dtype=dtypes.int64, device=device)  # in place: steps taken
        self.state: dict[str, list[Tensor]] = {s: [p.zeros_like() for p in self.params] for s in self.slots}

    @property
    def lr(self) -> float:
        return self._lr_value

    @lr.setter
    def lr(self, value: float) -> None:
        self._lr_value = float(value)
        self._lr.assign(Tensor([self._lr_value], dtype=dtypes.float64, device=self._lr.device)).realize()

    @property
    def steps(self) -> int:
        return int(self._t.item())

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        with Tensor.no_grad():
            # the step's numbers first, in one small kernel: each parameter's kernel then reads them
            # instead of computing them per element
            self._t.assign(self._t + 1)
            now = self._scalars()
            Tensor.realize(self._t, *now.values())
            for i, p in enumerate(self.params):
                if p.grad is not None:  # a parameter without a gradient is skipped, as torch does
                    self._apply(i, p, self._checked_grad(i, p), now)
        # One realize for the whole update: every parameter and state buffer is scheduled together
        # (the backward graph behind the gradients with them), and the next step starts from
        # buffers, not from an ever longer graph.
        Tensor.realize(*self.params, *(b for bufs in self.state.values() for b in bufs))

    def _checked_grad(self, i: int, p: Tensor) -> Tensor:
        g = p.grad
        if not isinstance(g, Tensor) or g.shape != p.shape or g.device != p.device or not g.dtype.is_float:
            raise ArgumentError(f"{type(self).__name__}.step: parameter {i} {p.shape} {p.dtype.name} on {p.device} has "
                                f"a gradient {getattr(g, 'shape', type(g))} {getattr(g, 'dtype', '')} that does not "
                                f"fit it (a float tensor of its shape, on its device, was expected)")
        return g.detach()

    def _scalars(self) -> dict[str, Tensor]:
        """The numbers this step's update needs besides lr, computed on the device (subclasses)."""
        return {}

    def _apply(self, i: int, p: Tensor, g: Tensor, now: dict[str, Tensor]) -> None:
        """Update p in place from its gradient g, by the subclass's formula (_update)."""
        p.assign(self._update(i, p.detach(), g, now))

    def _update(self, i: int, p: Tensor, g: Tensor, now: dict[str, Tensor]) -> Tensor:
        raise NotImplementedError

    @staticmethod
    def _held(value: Tensor, like: Tensor) -> Tensor:
        """A number that changes from step to step (a learning rate, a bias correction), computed in
        float64 in a one-element buffer, read in like's dtype: never written into a kernel as a
        constant, so the update's kernels are the same every step and compile once."""
        return value.reshape(()).cast(like.dtype)

    def state_dict(self) -> dict[str, Tensor]:
        out = {"step": Tensor(self.steps, dtype=dtypes.int64)}
        for slot, bufs in self.state.items():
            out.update({f"{slot}.{i}": b for i, b in enumerate(bufs)})
        return out

    def load_state_dict(self, d: dict[str, Tensor]) -> None:
        expected = {"step"} | {f"{s}.{i}" for s in self.state for i in range(len(self.params))}
        if set(d) != expected:
            raise ValueError(f"{type(self).__name__}.load_state_dict: keys {sorted(d)} do not match {sorted(expected)}")
        for slot, bufs in self.state.items():
            for i, b in enumerate(bufs):
                v = d[f"{slot}.{i}"]
                if tuple(v.shape) != b.shape:
                    raise ValueError(f"{type(self).__name__}.load_state_dict: {slot}.{i} has shape {tuple(v.shape)}, "
                                     f"expected {b.shape}")
                bufs[i] = v.cast(b.dtype).clone()
        self._t.assign(Tensor([int(d["step"].item())], dtype=dtypes.int64, device=self._t.device)).realize()


class SGD(Optimizer):
    """torch.optim.SGD: g += wd*p; buf = momentum*buf + (1-dampening)*g (buf = g at the first step);
    g = g + momentum*buf with nesterov, else buf; p -= lr*g. tinygrad's classic=True scales g by lr
    before the momentum instead of after (the same steps while lr is constant)."""

    slots = ("momentum",)

    def __init__(self, params, lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False, dampening: float = 0.0, classic: bool = False):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov needs a positive momentum and zero dampening")
        super().__init__(params, lr)
        self.momentum, self.weight_decay, self.nesterov = momentum, weight_decay, nesterov
        self.dampening, self.classic = dampening, classic

    def _scalars(self):
        # the gradient's weight in the momentum: 1 at the first step, 1 - dampening after it (torch)
        return {"gain": 1 - (self._t > 1).cast(dtypes.float64) * self.dampening} if self.dampening else {}

    def _trust(self, p: Tensor, g: Tensor) -> Tensor | float:
        """A factor on this parameter's step: 1 here, LARS's trust ratio in LARS."""
        return 1.0

    def _update(self, i, p, g, now):
        trust = self._trust(p, g)
        if self.weight_decay:
            g = g + p * self.weight_decay
        if self.classic:
            g = g * trust * self._held(self._lr, p)
        if self.momentum:  # buf starts at 0, so the first step's buf is g, as torch's
            gain = self._held(now["gain"], p) if self.dampening else 1.0
            buf = self.state["momentum"][i].assign(self.state["momentum"][i] * self.momentum + g * gain)
            g = g + buf * self.momentum if self.nesterov else buf
        return p - g if self.classic else p - g * trust * self._held(self._lr, p)


class LARS(SGD):
    """Layer-wise adaptive rate scaling (You, Gitman and Ginsburg 2017), tinygrad's defaults: SGD
    whose step for each parameter is scaled by the trust ratio tcoef * |p| / (|g| + wd * |p|) (1 where
    |p| or |g| is 0), so that every layer moves by about the same fraction of its norm."""

    def __init__(self, params, lr: float = 0.001, momentum: float = 0.9, weight_decay: float = 1e-4,
                 nesterov: bool = False, classic: bool = True, tcoef: float = 0.001):
        super().__init__(params, lr, momentum, weight_decay, nesterov, classic=classic)
        self.tcoef = tcoef

    def _trust(self, p, g):
        p_norm, g_norm = p.square().sum().sqrt(), g.square().sum().sqrt()
        ratio = self.tcoef * p_norm / (g_norm + p_norm * self.weight_decay)
        return ((p_norm > 0) & (g_norm > 0)).where(ratio, 1.0)


class Adam(Optimizer):
    """torch.optim.Adam: L2 weight decay added to the gradient, bias-corrected moments,
    p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)."""

    slots = ("m", "v")
    decoupled = False

    def __init__(self, params, lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                 weight_decay: float = 0.0, *, betas: tuple[float, float] | None = None):
        super().__init__(params, lr)
        b1, b2 = _betas(type(self).__name__, b1, b2, betas)
        self.b1, self.b2, self.eps, self.weight_decay = b1, b2, eps, weight_decay

    def _scalars(self):
        # lr / (1 - b1^t), 1 / sqrt(1 - b2^t) and the decay factor 1 - lr*wd, in float64 as Python
        # computed them
        t = self._t.cast(dtypes.float64)
        return {"step_size": self._lr / (1 - self.b1**t), "inv_bc2": 1 / (1 - self.b2**t).sqrt(),
                "decay": 1 - self._lr * self.weight_decay}

    def _update(self, i, p, g, now):
        if self.weight_decay and self.decoupled:
            p = p * self._held(now["decay"], p)
        elif self.weight_decay:
            g = g + p * self.weight_decay
        m = self.state["m"][i].assign(self.state["m"][i] * self.b1 + g * (1 - self.b1))
        v = self.state["v"][i].assign(self.state["v"][i] * self.b2 + g * g * (1 - self.b2))
        return p - m * self._held(now["step_size"], p) / (v.sqrt() * self._held(now["inv_bc2"], p) + self.eps)


class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay, p *= 1 - lr*wd before the Adam step."""

    decoupled = True

    def __init__(self, params, lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                 weight_decay: float = 0.01, *, betas: tuple[float, float] | None = None):
        super().__init__(params, lr, b1, b2, eps, weight_decay, betas=betas)


class LAMB(Adam):
    """Layer-wise adaptive moments (You et al. 2019), tinygrad's defaults: the Adam direction
    u = m_hat / (sqrt(v_hat) + eps) + wd * p, scaled for each parameter by the trust ratio |p| / |u|
    (1 where either is 0): p -= lr * ratio * u. adam=True drops the ratio (then it is AdamW)."""

    def __init__(self, params, lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6,
                 weight_decay: float = 0.0, adam: bool = False, *, betas: tuple[float, float] | None = None):
        super().__init__(params, lr, b1, b2, eps, weight_decay, betas=betas)
        self.adam = adam

    def _scalars(self):
        t = self._t.cast(dtypes.float64)
        return {"inv_bc1": 1 / (1 - self.b1**t), "inv_bc2": 1 / (1 - self.b2**t)}

    def _update(self, i, p, g, now):
        m = self.state["m"][i].assign(self.state["m"][i] * self.b1 + g * (1 - self.b1))
        v = self.state["v"][i].assign(self.state["v"][i] * self.b2 + g * g * (1 - self.b2))
        u = m * self._held(now["inv_bc1"], p) / ((v * self._held(now["inv_bc2"], p)).sqrt() + self.eps)
        if self.weight_decay:
            u = u + p * self.weight_decay
        if not self.adam:
            p_norm, u_norm = p.square().sum().sqrt(), u.square().sum().sqrt()
            u = u * ((p_norm > 0) & (u_norm > 0)).where(p_norm / u_norm, 1.0)
        return p - u * self._held(self._lr, p)


def _betas(name: str, b1: float, b2: float, betas) -> tuple[float, float]:
    """torch's betas=(b1, b2) or tinygrad's b1=, b2=: one spelling at a time."""
    if betas is None:
        return b1, b2
    if (b1, b2) != (0.9, 0.999):
        raise TypeError(f"{name}: give the moments' decay rates once, as betas (torch) or b1, b2 (tinygrad)")
    if len(betas) != 2:
        raise ValueError(f"{name}: betas must be two numbers, got {betas}")
    return float(betas[0]), float(betas[1])


NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def newton_schulz(g: Tensor, steps: int = 5, eps: float = 1e-7, coefficients=NS_COEFFICIENTS) -> Tensor:
    """An approximately orthogonal matrix with g's singular vectors (U V^T), by Keller Jordan's quintic
    Newton-Schulz iteration; its coefficients push singular values into about [0.7, 1.2] fast. g is
    first divided by its Frobenius norm (at least eps), which bounds its spectral norm by 1."""
    a, b, c = coefficients
    wide = g.shape[0] > g.shape[1]
    x = g.T if wide else g
    norm = x.square().sum().sqrt()
    x = x / (norm < eps).where(eps, norm)
    for _ in range(steps):
        A = x @ x.T
        B = A * b + (A @ A) * c
        x = x * a + B @ x
    return x.T if wide else x


class Muon(Optimizer):
    """torch.optim.Muon (Keller Jordan's, as nanochat uses it), with its defaults: momentum orthogonalised
    by Newton-Schulz, for weights of 2 dims (or more, flattened to (rows, -1); torch takes 2 only):
    buf = m*buf + (1-m)*g; u = lerp(g, buf, m) with nesterov, else buf; p *= 1 - lr*wd;
    p -= lr * scale * NS(u), scale max(1, rows/cols)^0.5 ("original") or 0.2 * max(rows, cols)^0.5
    ("match_rms_adamw"). torch runs the iteration in bfloat16; ours runs it in the weight's dtype."""

    slots = ("momentum",)
    ADJUST_LR = ("original", "match_rms_adamw")

    def __init__(self, params, lr: float = 1e-3, weight_decay: float = 0.1, momentum: float = 0.95,
                 nesterov: bool = True, ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
                 eps: float = 1e-7, ns_steps: int = 5, adjust_lr_fn: str | None = None):
        if adjust_lr_fn not in (None, *self.ADJUST_LR):
            raise ValueError(f"Muon: adjust_lr_fn must be None or one of {self.ADJUST_LR}, got {adjust_lr_fn!r}")
        if len(tuple(ns_coefficients)) != 3 or not 0 < ns_steps < 100:
            raise ValueError(f"Muon: ns_coefficients must be 3 numbers and ns_steps in 1..99, got {ns_coefficients} "
                             f"and {ns_steps}")
        super().__init__(params, lr)
        for p in self.params:
            if p.ndim < 2:
                raise ValueError(f"Muon: only 2-D (or higher) weights are supported, got shape {p.shape}; "
                                 "use AdamW for biases and norms")
        self.weight_decay, self.momentum, self.nesterov = weight_decay, momentum, nesterov
        self.ns_coefficients, self.eps, self.ns_steps = tuple(ns_coefficients), eps, ns_steps
        self.adjust_lr_fn = adjust_lr_fn

    def _scalars(self):
        return {"decay": 1 - self._lr * self.weight_decay}

    def _update(self, i, p, g, now):
        m = self.momentum
        buf = self.state["momentum"][i].assign(self.state["momentum"][i] * m + g * (1 - m))
        u = g * (1 - m) + buf * m if self.nesterov else buf
        rows = p.shape[0]
        cols = p.numel() // max(rows, 1)
        u = newton_schulz(u.reshape(rows, cols), self.ns_steps, self.eps, self.ns_coefficients).reshape(p.shape)
        if self.adjust_lr_fn == "match_rms_adamw":
            scale = 0.2 * max(rows, cols) ** 0.5
        else:
            scale = max(1.0, rows / cols) ** 0.5
        if self.weight_decay:
            p = p * self._held(now["decay"], p)
        return p - u * self._held(self._lr * scale, p)


def clip_grad_norm_(params, max_norm: float) -> Tensor:
    """Scale every gradient by max_norm / (total norm + 1e-6) when that is below 1 (torch); return
    the total L2 norm over all gradients, before clipping, as a float64 0-d tensor (as torch does:
    the step never waits for the number, and a jitted step stays on the device)."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return Tensor(0.0, dtype=dtypes.float64)
    with Tensor.no_grad():
        Tensor.realize(*grads)  # once, together: each norm below would otherwise recompute the backward graph
        # the squared sums stacked and summed in order (as the sum of Python floats was): the sums
        # over same-shaped gradients share a kernel
        squares = [g.cast(dtypes.float64).square().sum() for g in grads]
        total = squares[0].stack(*squares[1:]).sum().sqrt()
        coef = max_norm / (total + 1e-6)
        coef = (coef < 1).where(coef, 1.0)  # x * 1.0 is x: no branch on a number read back
        held = {}  # one cast per dtype, shared by every gradient of it
        for p in params:
            if p.grad is not None:
                p.grad = p.grad * held.setdefault(p.grad.dtype, coef.cast(p.grad.dtype))
    return total
