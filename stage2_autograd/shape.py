"""Pure shape and stride arithmetic: broadcasting, axis checks, no-copy reshape, dim merging.

Strides are in elements. Nothing here touches memory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .errors import ArgumentError

Shape = tuple[int, ...]

MAX_DIMS = 64  # the C walk keeps one index per dim on the stack


def prod(xs: Sequence[int]) -> int:
    return math.prod(xs)


def contiguous_strides(shape: Shape) -> Shape:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def is_contiguous(shape: Shape, strides: Shape) -> bool:
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides), strict=True):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def broadcast_shapes(op: str, *shapes: Shape) -> Shape:
    """numpy's rule: align on the right; each dim is equal, or 1 and stretched."""
    if shapes and all(s == shapes[0] for s in shapes):  # the common case, answered without a loop
        return tuple(shapes[0])
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        sizes = {s[d - ndim + len(s)] for s in shapes if d - ndim + len(s) >= 0} - {1}
        if len(sizes) > 1:
            shown = " and ".join(str(tuple(s)) for s in shapes)
            raise ArgumentError(f"{op}: cannot broadcast shapes {shown}: dims must match or be 1")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def normalize_axis(op: str, axis: int, ndim: int, shape: Shape | None = None) -> int:
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError(f"{op}: axis must be an int, got {type(axis).__name__}")
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        where = f" for shape {tuple(shape)}" if shape is not None else ""
        raise IndexError(f"{op}: axis {axis} is out of range{where} (ndim {ndim})")
    return axis % max(ndim, 1)


def normalize_axes(op: str, axis, ndim: int, shape: Shape | None = None) -> tuple[int, ...]:
    """None means every axis; an int or a sequence of ints otherwise, without repeats."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = tuple(normalize_axis(op, a, ndim, shape) for a in axes)
    if ndim == 0:
        return ()
    if len(set(out)) != len(out):
        raise ArgumentError(f"{op}: repeated axis in {axis} for shape {tuple(shape or ())}")
    return out


def resolve_reshape(op: str, old: Shape, new: Sequence[int]) -> Shape:
    """Fill in one -1, keep the old dim where new has None (tinygrad's), and check that the element count
    is kept."""
    if any(n is None for n in new):
        if len(new) > len(old):
            raise ArgumentError(f"{op}: None keeps a dim of {old}, but {tuple(new)} has more dims")
        new = tuple(old[i] if n is None else n for i, n in enumerate(new))
    new = tuple(int(n) for n in new)
    if new.count(-1) > 1:
        raise ArgumentError(f"{op}: can only infer one dimension, got {new}")
    if any(n < -1 for n in new):
        raise ArgumentError(f"{op}: negative dimension in {new}")
    total = prod(old)
    if -1 in new:
        known = prod(n for n in new if n != -1)
        if known == 0 or total % known:
            raise ArgumentError(f"{op}: cannot reshape {old} ({total} elements) into {new}")
        new = tuple(total // known if n == -1 else n for n in new)
    if prod(new) != total:
        raise ArgumentError(f"{op}: cannot reshape {old} ({total} elements) into {new} "
                            f"({prod(new)} elements)")
    return new


def reshape_strides(shape: Shape, strides: Shape, new: Shape) -> Shape | None:
    """Strides that view (shape, strides) as `new` without copying, or None if impossible.

    Walk both shapes in groups of equal element count; inside an old group the dims must be
    laid out contiguously relative to each other, and then the new dims of that group can be
    given strides carved out of the group's innermost stride (numpy's rule).
    """
    if prod(shape) == 0:
        return contiguous_strides(new)
    old = [(n, s) for n, s in zip(shape, strides, strict=True) if n != 1]
    i = 0
    new_idx = [j for j, n in enumerate(new) if n != 1]
    j = 0
    result = [0] * len(new)
    while i < len(old) or j < len(new_idx):
        if i >= len(old) or j >= len(new_idx):
            return None
        oi, nj = i + 1, j + 1
        osize, nsize = old[i][0], new[new_idx[j]]
        while osize != nsize:
            if osize < nsize:
                if oi >= len(old):
                    return None
                osize *= old[oi][0]
                oi += 1
            else:
                if nj >= len(new_idx):
                    return None
                nsize *= new[new_idx[nj]]
                nj += 1
        for k in range(i, oi - 1):
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return None
        stride = old[oi - 1][1]
        for k in range(nj - 1, j - 1, -1):
            result[new_idx[k]] = stride
            stride *= new[new_idx[k]]
        i, j = oi, nj
    return tuple(result)


def merge_dims(shape: Shape, *strides: Shape) -> tuple[Shape, list[Shape]]:
    """Drop size-1 dims and merge neighbours that every operand walks as one (fewer, longer loops)."""
    if len(shape) > 1 and all(s == strides[0] for s in strides) and is_contiguous(shape, strides[0]):
        return (prod(shape),), [(1,)] * len(strides)  # the common case: one flat loop
    dims = [(n, [s[d] for s in strides]) for d, n in enumerate(shape) if n != 1]
    if any(n == 0 for n in shape):
        return (0,), [(1,) for _ in strides]
    merged: list[tuple[int, list[int]]] = []
    for n, ss in dims:
        if merged:
            pn, ps = merged[-1]
            if all(p == s * n for p, s in zip(ps, ss, strict=True)):
                merged[-1] = (pn * n, ss)
                continue
        merged.append((n, ss))
    new_shape = tuple(n for n, _ in merged)
    return new_shape, [tuple(ss[k] for _, ss in merged) for k in range(len(strides))]
