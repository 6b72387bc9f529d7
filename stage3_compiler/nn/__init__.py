"""Layers: small classes that own their parameters and call the functional ops (torch's names,
shapes and initialisations, tinygrad's plain-object style: a layer is any object with tensors in
its attributes, and `nn.state` finds them by walking those attributes)."""

from __future__ import annotations

import math

from ..dtype import dtypes
from ..tensor import Tensor
from . import state

__all__ = ["BatchNorm", "BatchNorm2d", "Conv2d", "Dropout", "Embedding", "LayerNorm", "Linear", "RMSNorm", "state"]


def _uniform(shape: tuple, bound: float) -> Tensor:
    return Tensor.uniform(*shape, low=-bound, high=bound, requires_grad=True)


class Linear:
    """y = x @ weight.T + bias with weight (out, in); uniform(+-1/sqrt(in)) init, as torch."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        bound = 1 / math.sqrt(in_features)
        self.weight = _uniform((out_features, in_features), bound)
        self.bias = _uniform((out_features,), bound) if bias else None

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


class LayerNorm:
    """Normalise over the last len(normalized_shape) dims, then scale and shift."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True):
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.axis = tuple(range(-len(self.normalized_shape), 0))
        self.eps = eps
        self.weight = Tensor.ones(*self.normalized_shape, requires_grad=True) if elementwise_affine else None
        self.bias = Tensor.zeros(*self.normalized_shape, requires_grad=True) if elementwise_affine and bias else None

    def __call__(self, x: Tensor) -> Tensor:
        if tuple(x.shape[-len(self.normalized_shape):]) != self.normalized_shape:
            raise ValueError(f"LayerNorm: input {x.shape} must end in {self.normalized_shape}")
        x = x.layernorm(axis=self.axis, eps=self.eps)
        if self.weight is not None:
            x = x * self.weight
        return x if self.bias is None else x + self.bias


class RMSNorm:
    """x / sqrt(mean(x^2) + eps) over the last dim, times a learned scale."""

    def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True):
        self.eps = eps
        self.weight = Tensor.ones(dim, requires_grad=True) if elementwise_affine else None

    def __call__(self, x: Tensor) -> Tensor:
        x = x * (x.square().mean(-1, keepdim=True) + self.eps).rsqrt()
        return x if self.weight is None else x * self.weight


class Conv2d:
    """weight (out, in/groups, kh, kw); uniform(+-1/sqrt(fan_in)) init, torch's default."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True):
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels {in_channels} and out_channels {out_channels} "
                             f"must divide by groups {groups}")
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        bound = 1 / math.sqrt(in_channels // groups * kh * kw)
        self.weight = _uniform((out_channels, in_channels // groups, kh, kw), bound)
        self.bias = _uniform((out_channels,), bound) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation,
                        padding=self.padding)


class BatchNorm:
    """Batch statistics over every dim but 1 while Tensor.training, running statistics otherwise.
    The running variance uses the unbiased batch variance, the normalisation the biased one (torch)."""

    def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True,
                 momentum: float = 0.1):
        self.eps, self.momentum, self.track_running_stats = eps, momentum, track_running_stats
        self.weight = Tensor.ones(num_features, requires_grad=True) if affine else None
        self.bias = Tensor.zeros(num_features, requires_grad=True) if affine else None
        if track_running_stats:
            self.running_mean = Tensor.zeros(num_features, requires_grad=False)
            self.running_var = Tensor.ones(num_features, requires_grad=False)
            self.num_batches_tracked = Tensor.zeros((), dtype=dtypes.int64)

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim < 2:
            raise ValueError(f"BatchNorm: expected an input (N, C, ...), got {x.shape}")
        axes = tuple(d for d in range(x.ndim) if d != 1)
        shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        if Tensor.training or not self.track_running_stats:
            mean = x.mean(axes)
            var = (x - mean.reshape(shape)).square().mean(axes)
            if Tensor.training and self.track_running_stats:
                self._update(mean, var, math.prod(x.shape) // x.shape[1])
        else:
            mean, var = self.running_mean, self.running_var
        x = (x - mean.reshape(shape)) * (var.reshape(shape) + self.eps).rsqrt()
        if self.weight is not None:
            x = x * self.weight.reshape(shape)
        return x if self.bias is None else x + self.bias.reshape(shape)

    def _update(self, mean: Tensor, var: Tensor, n: int) -> None:
        with Tensor.no_grad():
            unbiased = var * (n / max(n - 1, 1))
            m = self.momentum
            self.running_mean.assign(self.running_mean * (1 - m) + mean.detach() * m)
            self.running_var.assign(self.running_var * (1 - m) + unbiased.detach() * m)
            self.num_batches_tracked.assign(self.num_batches_tracked + 1)


BatchNorm2d = BatchNorm


class Dropout:
    def __init__(self, p: float = 0.5):
        self.p = p

    def __call__(self, x: Tensor) -> Tensor:
        return x.dropout(self.p)
