"""Forward-only layers for a stage without ``nn`` (stage1), and the helper that picks a stage's layers.

Why this duplicates a little of stage2's ``nn``: stage1 must load a checkpoint trained on stage2
and sample from it with the same logits, but stage1 has no ``nn`` (layers arrive with autograd
in stage2) and a stage may never import another stage. So the few layers the zoo uses are
written here again on the Tensor API, forward only, with the same attribute names and shapes as
stage2's (``weight`` (out, in), ``bias``), so that one checkpoint fits both. Models always ask
:func:`layers_of` and get the stage's own ``nn`` when it has one.
"""

from __future__ import annotations

import math
from types import ModuleType, SimpleNamespace
from typing import Any

Tensor = Any  # a stage's Tensor; no stage is imported here


def _uniform(T: type, shape: tuple, bound: float) -> Tensor:
    return T.uniform(*shape, low=-bound, high=bound)


def fallback_layers(T: type) -> SimpleNamespace:
    """Linear, Embedding, LayerNorm, Conv2d and Dropout on the Tensor class ``T`` (forward only)."""

    class Linear:
        def __init__(self, in_features: int, out_features: int, bias: bool = True):
            bound = 1 / math.sqrt(in_features)
            self.weight = _uniform(T, (out_features, in_features), bound)
            self.bias = _uniform(T, (out_features,), bound) if bias else None

        def __call__(self, x: Tensor) -> Tensor:
            return x.linear(self.weight.T, self.bias)

    class Embedding:
        def __init__(self, vocab_size: int, embed_size: int):
            self.weight = T.randn(vocab_size, embed_size)

        def __call__(self, idx: Tensor) -> Tensor:
            return self.weight[idx]

    class LayerNorm:
        def __init__(self, normalized_shape: int, eps: float = 1e-5, elementwise_affine: bool = True,
                     bias: bool = True):
            self.eps = eps
            self.weight = T.ones(normalized_shape) if elementwise_affine else None
            self.bias = T.zeros(normalized_shape) if elementwise_affine and bias else None

        def __call__(self, x: Tensor) -> Tensor:
            x = x.layernorm(axis=-1, eps=self.eps)
            if self.weight is not None:
                x = x * self.weight
            return x if self.bias is None else x + self.bias

    class Conv2d:
        def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                     padding: int = 0, bias: bool = True):
            self.stride, self.padding = stride, padding
            bound = 1 / math.sqrt(in_channels * kernel_size * kernel_size)
            self.weight = _uniform(T, (out_channels, in_channels, kernel_size, kernel_size), bound)
            self.bias = _uniform(T, (out_channels,), bound) if bias else None

        def __call__(self, x: Tensor) -> Tensor:
            return x.conv2d(self.weight, self.bias, stride=self.stride, padding=self.padding)

    class Dropout:
        def __init__(self, p: float = 0.5):
            self.p = p

        def __call__(self, x: Tensor) -> Tensor:
            return x.dropout(self.p)

    return SimpleNamespace(Linear=Linear, Embedding=Embedding, LayerNorm=LayerNorm, Conv2d=Conv2d, Dropout=Dropout)


def layers_of(stage: ModuleType) -> Any:
    """The stage's ``nn`` if it has one, else the forward-only fallback built on its Tensor."""
    return getattr(stage, "nn", None) or fallback_layers(stage.Tensor)


def named_tensors(obj: Any, prefix: str = "") -> dict[str, Tensor]:
    """Every tensor reachable from a model by dotted name (attributes, then list items), in
    attribute order: the same walk as stage2's ``nn.state.get_state_dict``, for stages without it."""
    if hasattr(obj, "numpy") and hasattr(obj, "shape"):
        return {prefix.rstrip("."): obj}
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, (type, ModuleType)):
        items = vars(obj).items()
    else:
        return {}
    out: dict[str, Tensor] = {}
    for name, value in items:
        out.update(named_tensors(value, f"{prefix}{name}."))
    return out
