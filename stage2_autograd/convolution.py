"""Convolution, pooling and resizing over any number of spatial dims, written once on the Tensor API
and shared by every stage (this file is byte-identical in stage1, stage2 and stage3).

Each op is a view trick followed by a matmul or a reduction:
- A window over the last n dims is one strided slice per kernel tap, the taps stacked on a new
  last dim (im2col built from views).
- conv2d multiplies that stack by the weight: one matmul over channels and taps. Its name is
  tinygrad's; like tinygrad's, it takes 1, 2 or 3 (any) spatial dims, from the weight's shape.
- conv_transpose2d is the conv's adjoint: the input spread out by the stride (stride - 1 zeros
  between elements), padded by dilation * (k - 1) - padding, convolved with the flipped kernel.
- Pools reduce the stack with max or mean. return_indices windows an arange of the positions the
  same way and picks the first maximum's; max_unpool2d scatters values back to those positions.
- interpolate resizes one dim at a time, the last first: nearest picks rows by an index list,
  linear blends two picked rows with weights computed from the sizes alone.

Padding is an int, one int a spatial dim, or torch's flat form (before, after) a dim, last dim
first; a negative amount crops.
"""

from __future__ import annotations

import itertools
import math
from typing import Self

from .autocast import lowered
from .dtype import dtypes, rounds_once
from .errors import ArgumentError
from .hooks import TensorCore


def _ints(x, n: int, name: str, what: str, minimum: int = 1) -> tuple[int, ...]:
    """An int for every spatial dim, or one int a dim."""
    t = (x,) * n if isinstance(x, int) else tuple(x)
    if len(t) != n or any(not isinstance(v, int) or v < minimum for v in t):
        raise ArgumentError(f"{name}: {what} must be an int or {n} ints >= {minimum}, got {x}")
    return t


def _pads(padding, n: int, name: str) -> list[tuple[int, int]]:
    """(before, after) for each of n spatial dims, first dim first."""
    p = (padding,) * n if isinstance(padding, int) else tuple(padding)
    if not all(isinstance(v, int) for v in p) or len(p) not in (n, 2 * n):
        raise ArgumentError(f"{name}: padding must be an int, {n} ints or {2 * n} ints (torch's flat form, "
                            f"last dim first), got {padding}")
    if len(p) == n:
        return [(v, v) for v in p]
    return [(p[2 * i], p[2 * i + 1]) for i in range(n)][::-1]


def _kernel(kernel_size, name: str) -> tuple[int, ...]:
    """A pool's window: an int means two spatial dims, as the name says; a tuple gives its own count."""
    return _ints(kernel_size, 2 if isinstance(kernel_size, int) else len(tuple(kernel_size)), name, "kernel_size")


class ConvolutionMixin(TensorCore):
    # ---- windows ----

    def _windows(self, name: str, kernel: tuple, stride: tuple, dilation: tuple) -> Self:
        """(..., *S) -> (..., *O, prod(kernel)) over the last len(kernel) dims: one strided slice a tap."""
        n = len(kernel)
        out = tuple((size - d * (k - 1) - 1) // s + 1
                    for size, k, s, d in zip(self.shape[-n:], kernel, stride, dilation, strict=True))
        if any(o <= 0 for o in out):
            raise ArgumentError(f"{name}: kernel {tuple(kernel)} with dilation {tuple(dilation)} does not fit input "
                                f"{self.shape}")
        taps = [self[(Ellipsis,) + tuple(slice(t * d, t * d + s * (o - 1) + 1, s)
                                         for t, d, s, o in zip(tap, dilation, stride, out, strict=True))]
                for tap in itertools.product(*(range(k) for k in kernel))]
        return taps[0].stack(*taps[1:], dim=-1)

    def _spread(self, dim: int, step: int) -> Self:
        """step - 1 zeros between neighbours along dim: n -> (n - 1) * step + 1."""
        n = self.shape[dim]
        x = self.unsqueeze(dim + 1).pad(tuple((0, step - 1) if d == dim + 1 else (0, 0) for d in range(self.ndim + 1)))
        x = x.reshape(self.shape[:dim] + (n * step,) + self.shape[dim + 1:])
        return x.shrink(tuple((0, (n - 1) * step + 1) if d == dim else None for d in range(self.ndim)))

    # ---- convolution ----

    @rounds_once
    def conv2d(self, weight, bias=None, groups: int = 1, stride=1, dilation=1, padding=0) -> Self:
        """x (N, Cin, *S), weight (Cout, Cin/groups, *K) -> (N, Cout, *O), by im2col and one matmul;
        the weight's dims say how many spatial dims there are (1, 2, 3...)."""
        n = weight.ndim - 2
        if n < 1 or self.ndim != n + 2:
            raise ArgumentError(f"conv2d: expected x (N, Cin, *spatial) and weight (Cout, Cin/groups, *kernel) with "
                                f"the same spatial dims, got {self.shape} and {weight.shape}")
        N, C = self.shape[:2]
        cout, cin_g, kernel = weight.shape[0], weight.shape[1], weight.shape[2:]
        if not isinstance(groups, int) or groups < 1 or C != cin_g * groups or cout % groups:
            raise ArgumentError(f"conv2d: input channels {C} must equal {cin_g} * groups ({groups}) and "
                                f"out channels {cout} must divide by groups (x {self.shape}, weight {weight.shape})")
        pads = _pads(padding, n, "conv2d")
        x = self.pad([(0, 0), (0, 0)] + pads) if any(p != (0, 0) for p in pads) else self
        cols = x._windows("conv2d", kernel, _ints(stride, n, "conv2d", "stride"),
                          _ints(dilation, n, "conv2d", "dilation"))
        out_shape, taps = cols.shape[2:-1], math.prod(kernel)
        # (N, C, *O, taps) -> (N, groups, Cin/g * taps, prod(O))
        cols = cols.permute(0, 1, n + 2, *range(2, n + 2)).reshape(N, groups, cin_g * taps, math.prod(out_shape))
        w = weight.reshape(1, groups, cout // groups, cin_g * taps)
        out = (w @ cols).reshape((N, cout) + out_shape)  # (autocast: in its half type, and so the bias)
        (bias,) = lowered(bias)
        return out if bias is None else out + bias.reshape((1, cout) + (1,) * n)

    @rounds_once
    def conv_transpose2d(self, weight, bias=None, groups: int = 1, stride=1, dilation=1, padding=0,
                         output_padding=0) -> Self:
        """x (N, Cin, *S), weight (Cin, Cout/groups, *K) -> (N, Cout, *O) with
        O = (S - 1) * stride - pad_before - pad_after + dilation * (K - 1) + output_padding + 1."""
        name, n = "conv_transpose2d", weight.ndim - 2
        if n < 1 or self.ndim != n + 2:
            raise ArgumentError(f"{name}: expected x (N, Cin, *spatial) and weight (Cin, Cout/groups, *kernel) with "
                                f"the same spatial dims, got {self.shape} and {weight.shape}")
        cin, cout_g, kernel = weight.shape[0], weight.shape[1], weight.shape[2:]
        if not isinstance(groups, int) or groups < 1 or self.shape[1] != cin or cin % groups:
            raise ArgumentError(f"{name}: input channels {self.shape[1]} must equal the weight's first dim {cin}, "
                                f"which must divide by groups ({groups}) (x {self.shape}, weight {weight.shape})")
        stride, dilation = _ints(stride, n, name, "stride"), _ints(dilation, n, name, "dilation")
        extra = _ints(output_padding, n, name, "output_padding", 0)
        if any(e >= max(s, d) for e, s, d in zip(extra, stride, dilation, strict=True)):
            raise ArgumentError(f"{name}: output_padding {extra} must be smaller than stride {stride} or dilation "
                                f"{dilation}")
        pads = _pads(padding, n, name)
        full = [(d * (k - 1) - lo, d * (k - 1) - hi + e)
                for k, d, (lo, hi), e in zip(kernel, dilation, pads, extra, strict=True)]
        out = [(size - 1) * s + 1 + lo + hi - d * (k - 1)
               for size, s, (lo, hi), k, d in zip(self.shape[2:], stride, full, kernel, dilation, strict=True)]
        if any(size == 0 for size in self.shape[2:]) or any(o <= 0 for o in out):
            raise ArgumentError(f"{name}: input {self.shape} with weight {weight.shape}, stride {stride}, padding "
                                f"{padding} gives an empty output {tuple(out)}")
        x = self
        for d, s in enumerate(stride):
            x = x._spread(2 + d, s) if s > 1 else x
        x = x.pad([(0, 0), (0, 0)] + full)
        # (Cin, Cout/g, *K) -> (Cout, Cin/g, *K), each kernel flipped: the conv that undoes the gather
        w = weight.reshape((groups, cin // groups, cout_g) + kernel).transpose(1, 2)
        w = w.reshape((groups * cout_g, cin // groups) + kernel).flip(tuple(range(2, n + 2)))
        return x.conv2d(w, bias, groups=groups, dilation=dilation)

    # ---- pooling ----

    def _geometry(self, name: str, kernel_size, stride, dilation, padding):
        """A pool's window over the last len(kernel) dims: (kernel, stride, dilation), and its padding."""
        k = _kernel(kernel_size, name)
        n = len(k)
        if self.ndim < n:
            raise ArgumentError(f"{name}: a {n}-d window needs an input with at least {n} dims, got shape {self.shape}")
        s = k if stride is None else _ints(stride, n, name, "stride")
        return (k, s, _ints(dilation, n, name, "dilation")), _pads(padding, n, name)

    def _pool(self, name: str, kernel_size, stride, dilation, padding, ceil_mode: bool):
        """The window, the declared padding of each pooled dim, and that padding with the rows
        ceil_mode adds after it so that the last, partial window fits (torch's rule: a window must
        start inside the input or its padding before)."""
        geometry, pads = self._geometry(name, kernel_size, stride, dilation, padding)
        whole = []
        for size, k, s, d, (lo, hi) in zip(self.shape[-len(pads):], *geometry, pads, strict=True):
            span = size + lo + hi - d * (k - 1) - 1
            o = (span + (s - 1 if ceil_mode else 0)) // s + 1
            if ceil_mode and o > 1 and (o - 1) * s >= size + lo:
                o -= 1
            whole.append((lo, max(hi, (o - 1) * s + d * (k - 1) + 1 - (size + lo))))
        return geometry, pads, whole

    def _pad_trailing(self, pairs: list, value: float = 0.0) -> Self:
        return self.pad([(0, 0)] * (self.ndim - len(pairs)) + pairs, value)

    def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False,
                   return_indices: bool = False):
        """The maximum of each window over the last len(kernel_size) dims. With return_indices, also
        where each maximum came from: its position in the pooled dims flattened (the first of equal
        maxima), as torch's max_pool."""
        name = "max_pool2d"
        geometry, _, whole = self._pool(name, kernel_size, stride, dilation, padding, ceil_mode)
        windows = self._pad_trailing(whole, self._extreme_value(False))._windows(name, *geometry)
        values = windows.max(-1)
        if not return_indices:
            return values
        spatial = self.shape[self.ndim - len(whole):]
        where_from = self.arange(math.prod(spatial), device=self.device).reshape(spatial).pad(whole, -1)
        where_from = where_from._windows(name, *geometry)
        first = windows.argmax(-1).unsqueeze(-1) == self.arange(windows.shape[-1], device=self.device)
        return values, first.where(where_from, 0).sum(-1)

    def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False,
                   count_include_pad: bool = True) -> Self:
        """The mean of each window. The divisor counts the window's taps on the input and, with
        count_include_pad, on the declared padding too, never on the rows ceil_mode adds (torch's)."""
        name = "avg_pool2d"
        geometry, pads, whole = self._pool(name, kernel_size, stride, dilation, padding, ceil_mode)
        windows = self._pad_trailing(whole)._windows(name, *geometry)
        if count_include_pad and whole == pads:
            return windows.mean(-1)
        # the divisor: a window's sum over ones on the input (and the declared padding), zeros elsewhere
        dtype = self.dtype if self.dtype.is_float else dtypes.default_float
        counted = self.ones(self.shape[self.ndim - len(pads):], dtype=dtype, device=self.device)
        counted = counted.pad(pads, 1.0 if count_include_pad else 0.0)
        counted = counted.pad([(0, w - h) for (_, h), (_, w) in zip(pads, whole, strict=True)])
        return windows.sum(-1) / counted._windows(name, *geometry).sum(-1)

    def max_unpool2d(self, indices, kernel_size=(2, 2), stride=None, dilation=1, padding=0, output_size=None) -> Self:
        """max_pool2d's inverse: each value goes back to the position its index names in a tensor of
        zeros of the unpooled size (the pool's input size, or output_size's last dims)."""
        name = "max_unpool2d"
        if not isinstance(indices, TensorCore) or not indices.dtype.is_int or indices.shape != self.shape:
            raise TypeError(f"{name}: indices must be an int tensor of the values' shape {self.shape}, got "
                            f"{getattr(indices, 'dtype', type(indices))} {getattr(indices, 'shape', '')}")
        (k, s, d), pads = self._geometry(name, kernel_size, stride, dilation, padding)
        n = len(k)
        if output_size is None:
            size = tuple((i - 1) * ss - lo - hi + dd * (kk - 1) + 1
                         for i, ss, (lo, hi), dd, kk in zip(self.shape[-n:], s, pads, d, k, strict=True))
        else:
            size = tuple(output_size)[-n:]
        if len(size) != n or any(not isinstance(v, int) or v < 0 for v in size):
            raise ArgumentError(f"{name}: output size {size} of values {self.shape} must be {n} ints >= 0")
        lead = self.shape[:-n]
        flat = self.reshape(lead + (-1,))
        out = self.zeros(lead + (math.prod(size),), dtype=self.dtype, device=self.device)
        return out._scatter(name, -1, indices.reshape(lead + (-1,)), flat, None, True).reshape(lead + size)

    # ---- resizing ----

    def interpolate(self, size, mode: str = "linear", align_corners: bool = False) -> Self:
        """Resize the last len(size) dims to size: "nearest", "nearest-exact" or "linear" (also spelled
        "bilinear", "trilinear"), with torch's source positions and align_corners rule."""
        size = (size,) if isinstance(size, int) else tuple(size)
        mode = {"bilinear": "linear", "trilinear": "linear"}.get(mode, mode)
        if mode not in ("nearest", "nearest-exact", "linear"):
            raise ArgumentError(f"interpolate: mode must be 'nearest', 'nearest-exact' or 'linear', got {mode!r}")
        if align_corners and mode != "linear":
            raise ArgumentError(f"interpolate: align_corners only applies to mode 'linear', not {mode!r}")
        first = self.ndim - len(size)
        if first < 0 or any(not isinstance(v, int) or v < 1 for v in size) or 0 in self.shape[first:]:
            raise ArgumentError(f"interpolate: size {size} must be positive ints, one per trailing dim of a non-empty "
                                f"input, got input {self.shape}")
        x = self if mode != "linear" or self.dtype.is_float else self.cast(dtypes.default_float)
        for dim in reversed(range(first, self.ndim)):
            if x.shape[dim] != size[dim - first]:  # torch copies a dim that keeps its size
                x = x._resize(dim, size[dim - first], mode, align_corners)
        return x

    def _resize(self, dim: int, out: int, mode: str, align_corners: bool) -> Self:
        n = self.shape[dim]

        def pick(rows: list[int]) -> Self:
            return self[(slice(None),) * dim + (rows,)]

        if mode == "nearest":  # floor(i * n / out), in integers so no rounding moves a row
            return pick([min(i * n // out, n - 1) for i in range(out)])
        if mode == "nearest-exact":  # floor((i + 0.5) * n / out)
            return pick([min((2 * i + 1) * n // (2 * out), n - 1) for i in range(out)])
        if align_corners:
            src = [i * (n - 1) / (out - 1) if out > 1 else 0.0 for i in range(out)]
        else:
            src = [max((i + 0.5) * n / out - 0.5, 0.0) for i in range(out)]
        low = [int(p) for p in src]
        high = [lo + (lo < n - 1) for lo in low]
        far = [p - lo for p, lo in zip(src, low, strict=True)]  # the weight of the higher row
        shape = (out,) + (1,) * (self.ndim - dim - 1)
        w_high = self._like(far, self.dtype).reshape(shape)
        w_low = self._like([1.0 - f for f in far], self.dtype).reshape(shape)
        return pick(low) * w_low + pick(high) * w_high
