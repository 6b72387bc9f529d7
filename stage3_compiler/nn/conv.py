"""Convolutions over 1, 2 or 3 spatial dims, and their transposes: thin layers over Tensor.conv2d and
Tensor.conv_transpose2d, which take any number of spatial dims from the weight's shape.

The constructors check everything torch checks (channels against groups, sizes, the padding string)
so that a bad layer fails where it is built, not at its first call. Padding is an int, one int a
spatial dim, the flat (before, after) form (last dim first, as Tensor.pad and tinygrad take it),
"valid" (none) or "same" (the output keeps the input's size: d * (k - 1) split with the extra one
after, torch's rule; stride 1 only, as in torch).
"""

from __future__ import annotations

import math

from ..errors import ArgumentError
from ..tensor import Tensor
from .linear import uniform_parameter

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(value, n: int, name: str, what: str, minimum: int) -> tuple[int, ...]:
    t = (value,) * n if isinstance(value, int) else tuple(value)
    if len(t) != n or any(not isinstance(v, int) or isinstance(v, bool) or v < minimum for v in t):
        raise ArgumentError(f"{name}: {what} must be an int or {n} ints >= {minimum}, got {value!r}")
    return t


def resolve_padding(padding, kernel: tuple, stride: tuple, dilation: tuple, name: str) -> tuple[int, ...]:
    """Any accepted padding as the flat form Tensor.pad takes: (before, after) a dim, last dim first."""
    n = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * (2 * n)
        if padding != "same":
            raise ArgumentError(f"{name}: padding string must be 'valid' or 'same', got {padding!r}")
        if any(s != 1 for s in stride):
            raise ArgumentError(f"{name}: padding='same' needs stride 1 (the output keeps the input's size), "
                                f"got stride {stride}")
        flat = []
        for k, d in zip(reversed(kernel), reversed(dilation), strict=True):
            total = d * (k - 1)
            flat += [total // 2, total - total // 2]
        return tuple(flat)
    p = (padding,) * n if isinstance(padding, int) else tuple(padding)
    if len(p) == n:
        p = tuple(v for v in reversed(p) for _ in range(2))
    if len(p) != 2 * n or any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in p):
        raise ArgumentError(f"{name}: padding must be 'valid', 'same', an int, {n} ints or {2 * n} ints >= 0 "
                            f"(before and after each dim, last dim first), got {padding!r}")
    return p


class _ConvNd:
    """What every convolution layer shares: torch's attributes, checks and uniform(+-1/sqrt(fan_in))
    init, where fan_in counts the inputs one output sees (torch's rule, also for the transposes,
    whose weight is (in, out/groups, *kernel))."""

    dims = 2
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding, dilation, groups: int,
                 bias: bool, padding_mode: str, output_padding=0):
        name, n = type(self).__name__, self.dims
        if not isinstance(groups, int) or groups < 1 or in_channels % groups or out_channels % groups:
            raise ArgumentError(f"{name}: in_channels {in_channels} and out_channels {out_channels} must divide by "
                                f"groups {groups}")
        if padding_mode not in PADDING_MODES or (self.transposed and padding_mode != "zeros"):
            allowed = ("zeros",) if self.transposed else PADDING_MODES
            raise ArgumentError(f"{name}: padding_mode must be one of {allowed}, got {padding_mode!r}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _tuple(kernel_size, n, name, "kernel_size", 1)
        self.stride = _tuple(stride, n, name, "stride", 1)
        self.dilation = _tuple(dilation, n, name, "dilation", 1)
        self.padding, self.padding_mode = padding, padding_mode
        self.output_padding = _tuple(output_padding, n, name, "output_padding", 0)
        if any(e >= max(s, d) for e, s, d in zip(self.output_padding, self.stride, self.dilation, strict=True)):
            raise ArgumentError(f"{name}: output_padding {self.output_padding} must be smaller than stride "
                                f"{self.stride} or dilation {self.dilation}")
        self._pads = resolve_padding(padding, self.kernel_size, self.stride, self.dilation, name)
        if self.transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        bound = 1 / math.sqrt(shape[1] * math.prod(self.kernel_size))
        self.weight = uniform_parameter(shape, bound)
        self.bias = uniform_parameter((out_channels,), bound) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        """x (N, in, *S), or (in, *S) without a batch dim, as torch takes it."""
        batched = x.ndim == self.dims + 2
        if x.ndim not in (self.dims + 1, self.dims + 2) or x.shape[-self.dims - 1] != self.in_channels:
            raise ArgumentError(f"{type(self).__name__}: expected an input ([N,] {self.in_channels}, "
                                f"{self.dims} spatial dims), got {x.shape}")
        out = self._forward(x if batched else x.unsqueeze(0))
        return out if batched else out.squeeze(0)


class Conv2d(_ConvNd):
    """y = the cross-correlation of x (N, in, *S) with weight (out, in/groups, *kernel), plus bias."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros"):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode)

    def _forward(self, x: Tensor) -> Tensor:
        pads = self._pads
        if self.padding_mode != "zeros":
            x, pads = x.pad(pads, mode=self.padding_mode), 0
        return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation,
                        padding=pads)


class Conv1d(Conv2d):
    dims = 1


class Conv3d(Conv2d):
    dims = 3


class ConvTranspose2d(_ConvNd):
    """The adjoint of Conv2d with the same arguments: weight (in, out/groups, *kernel), the output
    (S - 1) * stride - padding_before - padding_after + dilation * (kernel - 1) + output_padding + 1.
    The positional order after output_padding is torch's (groups, bias, dilation); tinygrad's
    (dilation, groups, bias) works by keyword."""

    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros"):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         output_padding)

    def _forward(self, x: Tensor) -> Tensor:
        return x.conv_transpose2d(self.weight, self.bias, groups=self.groups, stride=self.stride,
                                  dilation=self.dilation, padding=self._pads, output_padding=self.output_padding)


class ConvTranspose1d(ConvTranspose2d):
    dims = 1


class ConvTranspose3d(ConvTranspose2d):
    dims = 3
