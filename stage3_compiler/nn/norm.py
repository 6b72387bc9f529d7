"""Normalisation layers. Each computes a mean and a variance over some dims, then calls
Tensor.batchnorm (or Tensor.layernorm) with them:
- BatchNorm: over every dim but the channels (1), with running statistics for evaluation;
- LayerNorm: over the last dims of each sample; LayerNorm2d over the channels of an image;
- GroupNorm: over each group of channels (and the spatial dims) of each sample;
- InstanceNorm: over the spatial dims of each channel of each sample;
- RMSNorm: no mean, the root mean square over the last dim.
The variance that normalises is the biased one (divide by n); the running variance stores the
unbiased one (divide by n - 1), as torch does.
"""

from __future__ import annotations

import math

from ..dtype import dtypes
from ..errors import ArgumentError
from ..tensor import Tensor


class _RunningStats:
    """The running mean and variance of BatchNorm and InstanceNorm, and torch's num_batches_tracked."""

    def _init_stats(self, num_features: int, momentum: float | None, track_running_stats: bool) -> None:
        self.momentum, self.track_running_stats = momentum, track_running_stats
        if track_running_stats:
            self.running_mean = Tensor.zeros(num_features, requires_grad=False)
            self.running_var = Tensor.ones(num_features, requires_grad=False)
            self.num_batches_tracked = Tensor.zeros((), dtype=dtypes.int64, requires_grad=False)

    def _update(self, mean: Tensor, unbiased_var: Tensor, momentum) -> None:
        """running = (1 - momentum) * running + momentum * batch; momentum a number or a tensor."""
        with Tensor.no_grad():
            self.running_mean.assign(self.running_mean * (1 - momentum) + mean.detach() * momentum)
            self.running_var.assign(self.running_var * (1 - momentum) + unbiased_var.detach() * momentum)


def _scale_shift(x: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    """x * weight + bias with one weight and bias a channel (dim 1); nothing without them."""
    if weight is None:
        return x
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return x * weight.reshape(shape) + bias.reshape(shape)


def _affine(num_features: int, affine: bool) -> tuple[Tensor | None, Tensor | None]:
    if not affine:
        return None, None
    return Tensor.ones(num_features, requires_grad=True), Tensor.zeros(num_features, requires_grad=True)


class BatchNorm(_RunningStats):
    """Batch statistics over every dim but 1 while Tensor.training, the running ones otherwise.
    tinygrad names the first argument sz; torch num_features: both work, and the positional order
    is torch's (num_features, eps, momentum, affine, track_running_stats)."""

    def __init__(self, num_features: int | None = None, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, *, sz: int | None = None):
        if (num_features is None) == (sz is None):
            raise TypeError(f"{type(self).__name__}: give the channel count once, as num_features (torch) or sz "
                            f"(tinygrad), got num_features={num_features}, sz={sz}")
        self.num_features = num_features if sz is None else sz
        self.eps, self.affine = eps, affine
        self.weight, self.bias = _affine(self.num_features, affine)
        self._init_stats(self.num_features, momentum, track_running_stats)

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim < 2 or x.shape[1] != self.num_features:
            raise ArgumentError(f"{type(self).__name__}: expected an input (N, {self.num_features}, ...), "
                                f"got {x.shape}")
        if Tensor.training or not self.track_running_stats:
            axes = tuple(d for d in range(x.ndim) if d != 1)
            mean = x.mean(axes)
            var = (x - mean.reshape((1, -1) + (1,) * (x.ndim - 2))).square().mean(axes)
            if Tensor.training and self.track_running_stats:
                n = math.prod(x.shape) // x.shape[1]
                with Tensor.no_grad():
                    self.num_batches_tracked.assign(self.num_batches_tracked + 1)
                # momentum None is torch's cumulative average: each batch weighs 1 / batches seen
                momentum = self.momentum
                if momentum is None:
                    momentum = 1 / self.num_batches_tracked.cast(self.running_mean.dtype)
                self._update(mean, var * (n / max(n - 1, 1)), momentum)
        else:
            mean, var = self.running_mean, self.running_var
        return x.batchnorm(self.weight, self.bias, mean, (var + self.eps).rsqrt())


BatchNorm1d = BatchNorm2d = BatchNorm3d = BatchNorm


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
            raise ValueError(f"{type(self).__name__}: input {x.shape} must end in {self.normalized_shape}")
        x = x.layernorm(axis=self.axis, eps=self.eps)
        if self.weight is not None:
            x = x * self.weight
        return x if self.bias is None else x + self.bias


class LayerNorm2d(LayerNorm):
    """LayerNorm over the channels of each pixel of an (N, C, H, W) image (tinygrad's; ConvNeXt and
    SAM use it)."""

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim != 4:
            raise ArgumentError(f"LayerNorm2d: expected an input (N, C, H, W), got {x.shape}")
        return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class RMSNorm:
    """x / sqrt(mean(x^2) + eps) over the last dim, times a learned scale."""

    def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True):
        self.eps = eps
        self.weight = Tensor.ones(dim, requires_grad=True) if elementwise_affine else None

    def __call__(self, x: Tensor) -> Tensor:
        x = x * (x.square().mean(-1, keepdim=True) + self.eps).rsqrt()
        return x if self.weight is None else x * self.weight


class GroupNorm:
    """Split the channels into num_groups groups; normalise each group of each sample over its
    channels and spatial dims; then scale and shift each channel."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
        if num_groups < 1 or num_channels % num_groups:
            raise ArgumentError(f"GroupNorm: num_channels {num_channels} must divide by num_groups {num_groups}")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        self.weight, self.bias = _affine(num_channels, affine)

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ArgumentError(f"GroupNorm: expected an input (N, {self.num_channels}, ...), got {x.shape}")
        x = x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps).reshape(x.shape)
        return _scale_shift(x, self.weight, self.bias)


class InstanceNorm(_RunningStats):
    """Normalise each channel of each sample over its spatial dims. tinygrad's InstanceNorm takes any
    number of spatial dims and defaults to affine=True; torch's InstanceNorm1d/2d/3d take 1, 2 or 3
    (or an input without the batch dim) and default to affine=False. With track_running_stats, the
    running statistics average the instances' and serve in evaluation, as torch's."""

    dims: int | None = None
    default_affine = True

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool | None = None, track_running_stats: bool = False):
        self.num_features, self.eps = num_features, eps
        self.affine = self.default_affine if affine is None else affine
        self.weight, self.bias = _affine(num_features, self.affine)
        self._init_stats(num_features, momentum, track_running_stats)

    def __call__(self, x: Tensor) -> Tensor:
        ranks = (x.ndim,) if self.dims is None else (self.dims + 1, self.dims + 2)
        batched = self.dims is None or x.ndim == self.dims + 2
        if x.ndim not in ranks or x.ndim < 3 and batched or x.shape[1 if batched else 0] != self.num_features:
            raise ArgumentError(f"{type(self).__name__}: expected an input ([N,] {self.num_features}, spatial dims), "
                                f"got {x.shape}")
        y = x if batched else x.unsqueeze(0)
        if Tensor.training or not self.track_running_stats:
            flat = y.reshape(y.shape[0], y.shape[1], -1)
            mean = flat.mean(-1)
            var = (flat - mean.unsqueeze(-1)).square().mean(-1)
            if Tensor.training and self.track_running_stats:
                n = flat.shape[-1]
                # torch counts no batches here, and momentum None leaves the statistics as they are
                self._update(mean.mean(0), (var * (n / max(n - 1, 1))).mean(0), self.momentum or 0.0)
            y = _scale_shift(y.batchnorm(None, None, mean, (var + self.eps).rsqrt(), axis=(0, 1)), self.weight,
                             self.bias)
        else:
            y = y.batchnorm(self.weight, self.bias, self.running_mean, (self.running_var + self.eps).rsqrt())
        return y if batched else y.squeeze(0)


class InstanceNorm1d(InstanceNorm):
    dims, default_affine = 1, False


class InstanceNorm2d(InstanceNorm):
    dims, default_affine = 2, False


class InstanceNorm3d(InstanceNorm):
    dims, default_affine = 3, False
