"""Optimizers, gradient clipping and learning-rate schedules.

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
from ..tensor import Tensor
from .schedules import cosine_lr, linear_rampdown_lr

__all__ = ["SGD", "Adam", "AdamW", "Muon", "Optimizer", "clip_grad_norm_", "cosine_lr", "linear_rampdown_lr"]


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
                if p.grad is not None:
                    self._apply(i, p, p.grad.detach(), now)
        # One realize for the whole update: every parameter and state buffer is scheduled together
        # (the backward graph behind the gradients with them), and the next step starts from
        # buffers, not from an ever longer graph.
        Tensor.realize(*self.params, *(b for bufs in self.state.values() for b in bufs))

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
    """torch.optim.SGD (dampening 0): g += wd*p; buf = momentum*buf + g (buf = g at the first step);
    g = g + momentum*buf with nesterov, else buf; p -= lr*g."""

    slots = ("momentum",)

    def __init__(self, params, lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False):
        if nesterov and momentum <= 0:
            raise ValueError("SGD: nesterov needs a positive momentum")
        super().__init__(params, lr)
        self.momentum, self.weight_decay, self.nesterov = momentum, weight_decay, nesterov

    def _update(self, i, p, g, now):
        if self.weight_decay:
            g = g + p * self.weight_decay
        if self.momentum:  # buf starts at 0, so the first step's buf is g, as torch's
            buf = self.state["momentum"][i].assign(self.state["momentum"][i] * self.momentum + g)
            g = g + buf * self.momentum if self.nesterov else buf
        return p - g * self._held(self._lr, p)


class Adam(Optimizer):
    """torch.optim.Adam: L2 weight decay added to the gradient, bias-corrected moments,
    p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)."""

    slots = ("m", "v")
    decoupled = False

    def __init__(self, params, lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                 weight_decay: float = 0.0):
        super().__init__(params, lr)
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
                 weight_decay: float = 0.01):
        super().__init__(params, lr, b1, b2, eps, weight_decay)


def newton_schulz(g: Tensor, steps: int = 5, eps: float = 1e-7) -> Tensor:
    """An approximately orthogonal matrix with g's singular vectors (U V^T), by Keller Jordan's quintic
    Newton-Schulz iteration; its coefficients push singular values into about [0.7, 1.2] fast."""
    a, b, c = 3.4445, -4.7750, 2.0315
    wide = g.shape[0] > g.shape[1]
    x = g.T if wide else g
    x = x / (x.square().sum().sqrt() + eps)
    for _ in range(steps):
        A = x @ x.T
        B = A * b + (A @ A) * c
        x = x * a + B @ x
    return x.T if wide else x


class Muon(Optimizer):
    """Momentum orthogonalised by Newton-Schulz (Keller Jordan's Muon, as nanochat uses it), for 2-D+
    weights (flattened to (rows, -1)): buf = m*buf + (1-m)*g; u = lerp(g, buf, m) with nesterov;
    p -= lr * max(1, rows/cols)^0.5 * NS(u)."""

    slots = ("momentum",)

    def __init__(self, params, lr: float = 0.02, momentum: float = 0.95, nesterov: bool = True, ns_steps: int = 5):
        super().__init__(params, lr)
        for p in self.params:
            if p.ndim < 2:
                raise ValueError(f"Muon: only 2-D (or higher) weights are supported, got shape {p.shape}; "
                                 "use AdamW for biases and norms")
        self.momentum, self.nesterov, self.ns_steps = momentum, nesterov, ns_steps

    def _update(self, i, p, g, now):
        m = self.momentum
        buf = self.state["momentum"][i].assign(self.state["momentum"][i] * m + g * (1 - m))
        u = g * (1 - m) + buf * m if self.nesterov else buf
        rows = p.shape[0]
        cols = p.numel() // max(rows, 1)
        u = newton_schulz(u.reshape(rows, cols), self.ns_steps).reshape(p.shape)
        return p - u * self._held(self._lr * max(1.0, rows / cols) ** 0.5, p)


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
