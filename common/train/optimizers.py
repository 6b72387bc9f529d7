"""Building a model's optimizer: torch-style parameter groups over the stage's optimizers.

nanoGPT's configure_optimizers gives AdamW two groups: weight decay on every tensor of 2+ dims
(matmul weights, embeddings) and none on biases and LayerNorm gains. The stage's optimizers take
one flat parameter list and one weight decay, so a group is one optimizer, and
:class:`ParamGroups` steps them together with one learning rate: the same update as torch's
single optimizer with two groups, because Adam's state is per parameter anyway.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

Tensor = Any


def decay_groups(params: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    """(2+ dim tensors, the rest), each tensor once."""
    unique = {id(p): p for p in params}
    return [p for p in unique.values() if p.ndim >= 2], [p for p in unique.values() if p.ndim < 2]


class ParamGroups:
    """Several optimizers that act as one: shared ``lr``, ``params``, ``zero_grad``, ``step`` and a
    state dict whose keys carry the group's index (``g0.m.3``). ``scales`` gives each group its own
    learning rate as a multiple of the shared one (nanochat's Muon and AdamW groups run at different
    rates under one schedule); ``lr`` is then the schedule's value, 1.0 meaning every group's base rate."""

    def __init__(self, optimizers: list[Any], scales: list[float] | None = None):
        if not optimizers:
            raise ValueError("ParamGroups: need at least one optimizer")
        if scales is not None and (len(scales) != len(optimizers) or min(scales) <= 0):
            raise ValueError(f"ParamGroups: need one positive lr scale per optimizer ({len(optimizers)}), "
                             f"got {scales}")
        self.optimizers = optimizers
        self.scales = list(scales) if scales is not None else [1.0] * len(optimizers)

    @property
    def params(self) -> list[Tensor]:
        return [p for opt in self.optimizers for p in opt.params]

    @property
    def lr(self) -> float:
        return self.optimizers[0].lr / self.scales[0]

    @lr.setter
    def lr(self, value: float) -> None:
        for opt, scale in zip(self.optimizers, self.scales, strict=True):
            opt.lr = value * scale

    def zero_grad(self) -> None:
        for opt in self.optimizers:
            opt.zero_grad()

    def step(self) -> None:
        # On a lazy stage (stage3) every gradient is computed before the first group writes its parameters
        # in place: another group's gradient may still read them (the embedding's reads the block weights).
        grads = [p.grad for p in self.params if p.grad is not None]
        if len(self.optimizers) > 1 and grads:
            grads[0].realize(*grads[1:])
        for opt in self.optimizers:
            opt.step()

    def state_dict(self) -> dict[str, Tensor]:
        return {f"g{i}.{k}": v for i, opt in enumerate(self.optimizers) for k, v in opt.state_dict().items()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        for i, opt in enumerate(self.optimizers):
            prefix = f"g{i}."
            opt.load_state_dict({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)})


def build_optimizer(stage: ModuleType, model: Any, name: str, lr: float, weight_decay: float = 0.0,
                    betas: tuple[float, float] = (0.9, 0.999), momentum: float = 0.9) -> ParamGroups:
    """``name`` in sgd | adam | adamw. Weight decay applies only to tensors of 2+ dims."""
    optim = getattr(stage, "optim", None)
    if optim is None:
        raise RuntimeError(f"build_optimizer: {stage.__name__} has no optim (training needs autograd: use --stage 2)")
    params = stage.nn.state.get_parameters(model)
    groups = model.optim_groups() if hasattr(model, "optim_groups") else decay_groups(params)
    made = []
    for group, wd in zip(groups, (weight_decay, 0.0), strict=True):
        if not group:
            continue
        if name == "adamw":
            made.append(optim.AdamW(group, lr=lr, b1=betas[0], b2=betas[1], weight_decay=wd))
        elif name == "adam":
            made.append(optim.Adam(group, lr=lr, b1=betas[0], b2=betas[1], weight_decay=wd))
        elif name == "sgd":
            made.append(optim.SGD(group, lr=lr, momentum=momentum, weight_decay=wd))
        else:
            raise ValueError(f"build_optimizer: optimizer must be sgd, adam or adamw, got {name!r}")
    return ParamGroups(made)
