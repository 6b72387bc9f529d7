"""numpy references for convolution, pooling, resizing and scatter (convolution.py and scatter.py in
every stage), in float64 and written from their definitions, one output element or one kernel tap
at a time, not the way the stages compute them (windows stacked into a matmul, one-hot selects).

Padding follows the API: an int, one int a spatial dim, or torch's flat (before, after) pairs, last
dim first; a negative amount crops.
"""

from __future__ import annotations

import itertools
import math

import numpy as np


def _ints(v, n: int) -> tuple[int, ...]:
    return (v,) * n if isinstance(v, int) else tuple(v)


def _pads(padding, n: int) -> list[tuple[int, int]]:
    p = _ints(padding, n)
    return [(v, v) for v in p] if len(p) == n else [(p[2 * i], p[2 * i + 1]) for i in range(n)][::-1]


def pad_crop(x: np.ndarray, pads: list[tuple[int, int]]) -> np.ndarray:
    """Zeros added (or rows cropped, for negative amounts) on the last len(pads) dims."""
    lead = x.ndim - len(pads)
    x = np.pad(x, [(0, 0)] * lead + [(max(a, 0), max(b, 0)) for a, b in pads])
    keep = [slice(max(-a, 0), x.shape[lead + i] - max(-b, 0)) for i, (a, b) in enumerate(pads)]
    return x[(Ellipsis, *keep)]


def conv(x, w, b=None, stride=1, padding=0, dilation=1, groups=1) -> np.ndarray:
    """Cross-correlation of x (N, C, *S) with w (O, C/groups, *K), summed tap by tap."""
    n = w.ndim - 2
    s, d, k = _ints(stride, n), _ints(dilation, n), w.shape[2:]
    x = pad_crop(x, _pads(padding, n))
    o, cg = w.shape[:2]
    og = o // groups
    out_shape = tuple((size - dd * (kk - 1) - 1) // ss + 1
                      for size, kk, ss, dd in zip(x.shape[2:], k, s, d, strict=True))
    out = np.zeros((x.shape[0], o) + out_shape)
    for g in range(groups):
        xg, wg = x[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og]
        for tap in itertools.product(*map(range, k)):
            patch = xg[(slice(None), slice(None)) + tuple(slice(t * dd, t * dd + ss * (oo - 1) + 1, ss)
                                                          for t, dd, ss, oo in zip(tap, d, s, out_shape, strict=True))]
            out[:, g * og:(g + 1) * og] += np.moveaxis(np.tensordot(wg[(slice(None), slice(None)) + tap], patch,
                                                                    axes=([1], [1])), 0, 1)
    return out if b is None else out + b.reshape((1, o) + (1,) * n)


def conv_transpose(x, w, b=None, stride=1, padding=0, dilation=1, groups=1, output_padding=0) -> np.ndarray:
    """x (N, Cin, *S) with w (Cin, Cout/groups, *K): every input element adds its weighted kernel
    into the output at stride * i + dilation * tap, then the padding is cut off each end."""
    n = w.ndim - 2
    s, d, extra, k = _ints(stride, n), _ints(dilation, n), _ints(output_padding, n), w.shape[2:]
    cin, og = w.shape[:2]
    cg = cin // groups
    full = tuple((size - 1) * ss + dd * (kk - 1) + 1 + e
                 for size, ss, dd, kk, e in zip(x.shape[2:], s, d, k, extra, strict=True))
    out = np.zeros((x.shape[0], og * groups) + full)
    for g in range(groups):
        xg, wg = x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg]
        for tap in itertools.product(*map(range, k)):
            spots = tuple(slice(t * dd, t * dd + ss * (size - 1) + 1, ss)
                          for t, dd, ss, size in zip(tap, d, s, x.shape[2:], strict=True))
            added = np.moveaxis(np.tensordot(xg, wg[(slice(None), slice(None)) + tap], axes=([1], [0])), -1, 1)
            out[(slice(None), slice(g * og, (g + 1) * og)) + spots] += added
    out = pad_crop(out, [(-lo, -hi) for lo, hi in _pads(padding, n)])
    return out if b is None else out + b.reshape((1, og * groups) + (1,) * n)


def pool(x, kernel_size=(2, 2), stride=None, padding=0, dilation=1, ceil_mode=False, count_include_pad=True,
         mode="max", indices=False) -> np.ndarray:
    """Max or mean of each window over the last len(kernel_size) dims, one output element at a time.
    A window's taps on the input count; for the mean with count_include_pad, so do its taps on the
    declared padding. ceil_mode adds a last, partial window when it starts inside the input or its
    padding before. indices: where each maximum lies in the pooled dims, flattened (the first of equals)."""
    k = _ints(kernel_size, 2 if isinstance(kernel_size, int) else len(kernel_size))
    n = len(k)
    s = k if stride is None else _ints(stride, n)
    d, pads, spatial = _ints(dilation, n), _pads(padding, n), x.shape[-n:]
    out_shape = []
    for size, kk, ss, dd, (lo, hi) in zip(spatial, k, s, d, pads, strict=True):
        span = size + lo + hi - dd * (kk - 1) - 1
        o = (span + (ss - 1 if ceil_mode else 0)) // ss + 1
        out_shape.append(o - 1 if ceil_mode and o > 1 and (o - 1) * ss >= size + lo else o)
    out = np.zeros(x.shape[:-n] + tuple(out_shape), np.int64 if indices else np.float64)
    for pos in np.ndindex(*out_shape):
        values, where, count = [], [], 0
        for tap in np.ndindex(*k):
            q = [p * ss - lo + t * dd for p, ss, (lo, _), t, dd in zip(pos, s, pads, tap, d, strict=True)]
            inside = all(0 <= qq < size for qq, size in zip(q, spatial, strict=True))
            declared = all(-lo <= qq < size + hi for qq, size, (lo, hi) in zip(q, spatial, pads, strict=True))
            if inside:
                values.append(x[(Ellipsis, *q)])
                where.append(np.ravel_multi_index(q, spatial))
            count += inside or (count_include_pad and declared)
        v = np.stack(values, -1)
        if indices:
            out[(Ellipsis, *pos)] = np.array(where)[v.argmax(-1)]
        else:
            out[(Ellipsis, *pos)] = v.max(-1) if mode == "max" else v.sum(-1) / count
    return out


def max_unpool(x, kernel_size=(2, 2), stride=None, padding=0, output_size=None) -> np.ndarray:
    """max_pool then its inverse: each maximum back where it came from, zeros elsewhere."""
    n = 2 if isinstance(kernel_size, int) else len(kernel_size)
    values = pool(x, kernel_size, stride, padding)
    where = pool(x, kernel_size, stride, padding, indices=True)
    size = x.shape[-n:] if output_size is None else tuple(output_size)[-n:]
    out = np.zeros(x.shape[:-n] + (math.prod(size),))
    lead = x.shape[:-n]
    for i in np.ndindex(*lead):
        out[i][where[i].reshape(-1)] = values[i].reshape(-1)
    return out.reshape(lead + tuple(size))


def interpolate(x, size, mode="linear", align_corners=False) -> np.ndarray:
    """torch's source positions, one dim at a time: nearest takes row floor(i * n / out) ("nearest-exact":
    floor((i + 0.5) * n / out)); linear blends rows floor(p) and floor(p) + 1 at p = i * (n - 1) / (out - 1)
    (align_corners) or max((i + 0.5) * n / out - 0.5, 0)."""
    first = x.ndim - len(size)
    for dim in range(first, x.ndim):
        n, o = x.shape[dim], size[dim - first]
        if n == o:
            continue
        i = np.arange(o)
        if mode in ("nearest", "nearest-exact"):
            p = np.floor((i + (0.5 if mode == "nearest-exact" else 0.0)) * n / o)
            x = np.take(x, np.minimum(p.astype(np.int64), n - 1), dim)
            continue
        if align_corners:
            p = i * (n - 1) / (o - 1) if o > 1 else np.zeros(o)
        else:
            p = np.maximum((i + 0.5) * n / o - 0.5, 0.0)
        low = np.floor(p).astype(np.int64)
        high = np.minimum(low + 1, n - 1)
        w = (p - low).reshape((o,) + (1,) * (x.ndim - dim - 1))
        x = np.take(x, low, dim) * (1 - w) + np.take(x, high, dim) * w
    return x


def scatter_reduce(x, index, src, dim, reduce=None, include_self=True) -> np.ndarray:
    """torch's scatter_reduce, source by source: reduce None writes the last source along dim; an
    integer mean rounds down."""
    out, d = x.copy(), dim % x.ndim
    landed: dict[tuple, list] = {}
    for pos in np.ndindex(*index.shape):
        landed.setdefault(pos[:d] + (int(index[pos]),) + pos[d + 1:], []).append(src[pos])
    for target, values in landed.items():
        if reduce is None:
            out[target] = values[-1]
            continue
        values = ([x[target]] if include_self else []) + values
        if reduce == "mean":
            total = np.sum(values)
            out[target] = total / len(values) if x.dtype.kind == "f" else total // len(values)
        else:
            out[target] = {"sum": np.sum, "prod": np.prod, "amax": np.max, "amin": np.min}[reduce](values)
    return out
