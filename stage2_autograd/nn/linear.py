"""The dense layers: Linear, Embedding, Dropout, and the uniform initialiser the others share."""

from __future__ import annotations

import math

from ..tensor import Tensor


def uniform_parameter(shape: tuple, bound: float) -> Tensor:
    """A trainable tensor drawn from uniform(-bound, bound): torch's default init for Linear, the
    convolutions and the recurrent cells, with bound 1/sqrt(fan_in)."""
    return Tensor.uniform(*shape, low=-bound, high=bound, requires_grad=True)


class Linear:
    """y = x @ weight.T + bias with weight (out, in); uniform(+-1/sqrt(in)) init, as torch."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        bound = 1 / math.sqrt(in_features)
        self.weight = uniform_parameter((out_features, in_features), bound)
        self.bias = uniform_parameter((out_features,), bound) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.linear(self.weight.T, self.bias)


class Embedding:
    """A table of vocab_size rows; calling it with integer indices gathers rows (N(0, 1) init, as torch)."""

    def __init__(self, vocab_size: int, embed_size: int):
        self.vocab_size, self.embed_size = vocab_size, embed_size
        self.weight = Tensor.randn(vocab_size, embed_size, requires_grad=True)

    def __call__(self, idx: Tensor) -> Tensor:
        if not idx.dtype.is_int:
            raise TypeError(f"Embedding: indices must be an int tensor, got {idx.dtype.name} (shape {idx.shape})")
        return self.weight[idx]


class Dropout:
    def __init__(self, p: float = 0.5):
        self.p = p

    def __call__(self, x: Tensor) -> Tensor:
        return x.dropout(self.p)
