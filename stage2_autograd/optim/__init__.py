"""Optimizers, gradient clipping and learning-rate schedules.

Each optimizer holds its parameters (the same Tensor objects the model holds) and updates them in
place under no_grad, with torch.optim's formulas, so a run matches torch step for step. `lr` is a
plain float the caller may change before any step (that is how schedules are applied).
"""

from __future__ import annotations

import math

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
        self.lr = float(lr)
        self.steps = 0
        self.state: dict[str, list[Tensor]] = {s: [p.zeros_like() for p in self.params] for s in self.slots}

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        self.steps += 1
        with Tensor.no_grad():
            for i, p in enumerate(self.params):
                if p.grad is not None:
                    self._apply(i, p, p.grad.detach())

    def _apply(self, i: int, p: Tensor, g: Tensor) -> None:
        """Update p in place from its gradient g, by the subclass's formula (_update)."""
        p.assign(self._update(i, p.detach(), g))

    def _update(self, i: int, p: Tensor, g: Tensor) -> Tensor:
        raise NotImplementedError

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
        self.steps = int(d["step"].item())


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

    def _update(self, i, p, g):
        if self.weight_decay:
            g = g + p * self.weight_decay
        if self.momentum:
            buf = g if self.steps == 1 else self.state["momentum"][i] * self.momentum + g
            self.state["momentum"][i] = buf
            g = g + buf * self.momentum if self.nesterov else buf
        return p - g * self.lr


class Adam(Optimizer):
    """torch.optim.Adam: L2 weight decay added to the gradient, bias-corrected moments,
    p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)."""

    slots = ("m", "v")
    decoupled = False

    def __init__(self, params, lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                 weight_decay: float = 0.0):
        super().__init__(params, lr)
        self.b1, self.b2, self.eps, self.weight_decay = b1, b2, eps, weight_decay

    def _apply(self, i, p, g):
        """One pass of csrc/adam.c where p, g and the moments are contiguous tensors of one dtype and
        device; else the 15 tensor ops of _update."""
        m, v, g = self.state["m"][i], self.state["v"][i], g.cast(p.dtype).contiguous()
        bc1, bc2 = 1 - self.b1**self.steps, 1 - self.b2**self.steps
        decay = 1 - self.lr * self.weight_decay if self.decoupled else 1.0
        l2 = 0.0 if self.decoupled else self.weight_decay
        if all(t._is_contiguous() and t.dtype is p.dtype and t.device == p.device for t in (p, m, v, g)) and \
                p._buf.kernels.adam_step(p.dtype.code, p._ptr(), m._ptr(), v._ptr(), g._ptr(), p.numel(), decay, l2,
                                         self.b1, self.b2, self.lr / bc1, 1 / math.sqrt(bc2), self.eps) == 0:
            return
        super()._apply(i, p, g)

    def _update(self, i, p, g):
        if self.weight_decay and self.decoupled:
            p = p * (1 - self.lr * self.weight_decay)
        elif self.weight_decay:
            g = g + p * self.weight_decay
        m = self.state["m"][i] * self.b1 + g * (1 - self.b1)
        v = self.state["v"][i] * self.b2 + g * g * (1 - self.b2)
        self.state["m"][i], self.state["v"][i] = m, v
        bc1, bc2 = 1 - self.b1**self.steps, 1 - self.b2**self.steps
        return p - m * (self.lr / bc1) / (v.sqrt() * (1 / math.sqrt(bc2)) + self.eps)


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

    def _update(self, i, p, g):
        m = self.momentum
        buf = self.state["momentum"][i] * m + g * (1 - m)
        self.state["momentum"][i] = buf
        u = g * (1 - m) + buf * m if self.nesterov else buf
        rows = p.shape[0]
        cols = p.numel() // max(rows, 1)
        u = newton_schulz(u.reshape(rows, cols), self.ns_steps).reshape(p.shape)
        return p - u * (self.lr * max(1.0, rows / cols) ** 0.5)


def clip_grad_norm_(params, max_norm: float) -> float:
    """Scale every gradient by max_norm / (total norm + 1e-6) when that is below 1 (torch); return
    the total L2 norm over all gradients, before clipping."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    with Tensor.no_grad():
        # the squared sums stacked and summed in order (as the sum of Python floats was), then read back
        # once: on a GPU each read waits for every kernel before it
        squares = [g.cast(dtypes.float64).square().sum() for g in grads]
        total = math.sqrt(squares[0].stack(*squares[1:]).sum().item())
        coef = max_norm / (total + 1e-6)
        if coef < 1:
            for p in params:
                if p.grad is not None:
                    p.grad = p.grad * coef
    return total
