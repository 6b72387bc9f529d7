"""Movement ops: views that only rewrite (shape, strides, offset), and the few that must copy
(pad, cat, integer-array indexing, reshape of a layout that cannot be re-strided)."""

from __future__ import annotations

import math
from typing import Self

import numpy as np

from .autograd import record
from .ckernels import ffi, int64s
from .device import check, check_same
from .dtype import dtypes, promote
from .errors import ArgumentError
from .hooks import TensorCore
from .ops import Ops
from .shape import (
    MAX_DIMS,
    broadcast_shapes,
    merge_dims,
    normalize_axes,
    normalize_axis,
    prod,
    reshape_strides,
    resolve_reshape,
)


def _argfix(*x) -> tuple:
    if len(x) == 1 and isinstance(x[0], (tuple, list)):
        return tuple(x[0])
    return tuple(x)


def _is_mask(index) -> bool:
    """A boolean tensor or array as the whole index (numpy's mask indexing)."""
    return (isinstance(index, TensorCore) and index.dtype is dtypes.bool) or \
        (isinstance(index, np.ndarray) and index.dtype == np.bool_)


def _is_index_array(item) -> bool:
    return isinstance(item, (TensorCore, list, tuple, np.ndarray))  # a tuple inside the index: a list


class MovementMixin(TensorCore):
    # ---- pure views ----

    def reshape(self, *shape) -> Self:
        new = resolve_reshape("reshape", self.shape, _argfix(*shape))
        if len(new) > MAX_DIMS:
            raise ArgumentError(f"reshape: at most {MAX_DIMS} dims are supported, got {len(new)}")
        strides = reshape_strides(self.shape, self._strides, new)
        if strides is None:  # the layout cannot be re-strided: copy, as numpy does
            base = self.contiguous()
            out = self._view(base, new, reshape_strides(base.shape, base._strides, new), base._offset)
            return record(out, Ops.RESHAPE, (self,))
        return record(self._view(self, new, strides, self._offset), Ops.RESHAPE, (self,))

    def view(self, *shape) -> Self:
        return self.reshape(*shape)

    def permute(self, *order) -> Self:
        order = _argfix(*order)
        axes = tuple(normalize_axis("permute", a, self.ndim, self.shape) for a in order)
        if sorted(axes) != list(range(self.ndim)):
            raise ArgumentError(f"permute: {order} is not a permutation of the dims of shape {self.shape}")
        if self.ndim == 0:
            return self
        out = self._view(self, tuple(self.shape[a] for a in axes),
                         tuple(self._strides[a] for a in axes), self._offset)
        return record(out, Ops.PERMUTE, (self,), order=axes)

    def transpose(self, dim0: int = 1, dim1: int = 0) -> Self:
        order = list(range(self.ndim))
        a = normalize_axis("transpose", dim0, self.ndim, self.shape)
        b = normalize_axis("transpose", dim1, self.ndim, self.shape)
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    def expand(self, *shape) -> Self:
        shape = _argfix(*shape)
        if len(shape) < self.ndim:
            raise ArgumentError(f"expand: cannot expand shape {self.shape} to fewer dims {shape}")
        lead = len(shape) - self.ndim
        new, strides = [], []
        for d, want in enumerate(shape):
            have = self.shape[d - lead] if d >= lead else 1
            stride = self._strides[d - lead] if d >= lead else 0
            if want == -1 and d >= lead:
                want = have
            if want == have:
                new.append(have)
                strides.append(stride)
            elif have == 1 and want >= 0:
                new.append(want)
                strides.append(0)
            else:
                raise ArgumentError(f"expand: cannot expand shape {self.shape} to {shape}: "
                                    f"dim {d} has size {have}, expected it to be 1 or {want}")
        return record(self._view(self, tuple(new), tuple(strides), self._offset), Ops.EXPAND, (self,))

    def _broadcast_to(self, shape) -> Self:
        return self if self.shape == tuple(shape) else self.expand(shape)

    def shrink(self, arg) -> Self:
        if len(arg) != self.ndim:
            raise ArgumentError(f"shrink: need one (start, end) per dim of {self.shape}, got {arg}")
        offset = self._offset
        shape = []
        for n, s, bounds in zip(self.shape, self._strides, arg, strict=True):
            start, end = (0, n) if bounds is None else bounds
            if not 0 <= start <= end <= n:
                raise ArgumentError(f"shrink: bounds {(start, end)} are outside a dim of size {n} "
                                    f"in shape {self.shape}")
            offset += start * s if end > start else 0
            shape.append(end - start)
        return record(self._view(self, tuple(shape), self._strides, offset), Ops.SHRINK, (self,), arg=tuple(arg))

    def flip(self, axis, *more: int) -> Self:
        """flip(0, 1) or flip((0, 1))."""
        axes = normalize_axes("flip", (axis, *more) if more else axis, self.ndim, self.shape)
        offset, strides = self._offset, list(self._strides)
        for a in axes:
            if self.shape[a] > 0:
                offset += (self.shape[a] - 1) * strides[a]
            strides[a] = -strides[a]
        return record(self._view(self, self.shape, tuple(strides), offset), Ops.FLIP, (self,), axes=axes)

    def squeeze(self, dim: int | None = None) -> Self:
        if dim is None:
            keep = [d for d in range(self.ndim) if self.shape[d] != 1]
        else:
            d = normalize_axis("squeeze", dim, self.ndim, self.shape)
            keep = [k for k in range(self.ndim) if k != d or self.shape[d] != 1]
        out = self._view(self, tuple(self.shape[d] for d in keep),
                         tuple(self._strides[d] for d in keep), self._offset)
        return record(out, Ops.RESHAPE, (self,))

    def unsqueeze(self, dim: int) -> Self:
        d = normalize_axis("unsqueeze", dim, self.ndim + 1, self.shape)
        out = self._view(self, self.shape[:d] + (1,) + self.shape[d:],
                         self._strides[:d] + (0,) + self._strides[d:], self._offset)
        return record(out, Ops.RESHAPE, (self,))

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Self:
        if self.ndim == 0:
            return self.reshape(1)
        a = normalize_axis("flatten", start_dim, self.ndim, self.shape)
        b = normalize_axis("flatten", end_dim, self.ndim, self.shape)
        return self.reshape(self.shape[:a] + (prod(self.shape[a:b + 1]),) + self.shape[b + 1:])

    def unflatten(self, dim: int, sizes) -> Self:
        d = normalize_axis("unflatten", dim, self.ndim, self.shape)
        return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])

    # ---- copies ----

    def _copy_into(self, src: Self) -> None:
        """Write src (same shape) through this view's strides."""
        if src.device != self.device:
            check_same("copy", self, src)
        shape, (so, sa) = merge_dims(self.shape, self._strides, src._strides)
        check(self._buf.kernels.copy_strided(self.dtype.itemsize, self._ptr(), int64s(so), src._ptr(), int64s(sa),
                                             len(shape), int64s(shape)), "copy_strided", "copy", self, src)

    def pad(self, padding, value: float = 0.0, mode: str = "constant") -> Self:
        pads = list(padding)
        if pads and all(isinstance(p, int) for p in pads):  # torch's flat form, last dim first
            if len(pads) % 2 or len(pads) // 2 > self.ndim:
                raise ArgumentError(f"pad: flat padding {padding} needs an even count <= 2*{self.ndim}")
            pairs = [(pads[i], pads[i + 1]) for i in range(0, len(pads), 2)][::-1]
            pads = [None] * (self.ndim - len(pairs)) + pairs
        if len(pads) != self.ndim:
            raise ArgumentError(f"pad: need one (before, after) per dim of {self.shape}, got {padding}")
        pads = [(0, 0) if p is None else (int(p[0]), int(p[1])) for p in pads]
        if mode != "constant":
            return self._pad_mode(pads, mode)  # reflect, replicate, circular: views and cats (surface.py)
        # Negative padding crops first, then the rest is a fill plus a copy into the interior.
        crop = tuple((max(-b, 0), n - max(-a, 0)) for n, (b, a) in zip(self.shape, pads, strict=True))
        if any(lo > hi for lo, hi in crop):
            raise ArgumentError(f"pad: padding {padding} crops more than shape {self.shape} holds")
        x = self.shrink(crop)
        grow = [(max(b, 0), max(a, 0)) for b, a in pads]
        out = self.full(tuple(n + b + a for n, (b, a) in zip(x.shape, grow, strict=True)), value, self.dtype,
                        self.device)
        out.shrink(tuple((b, b + n) for n, (b, _) in zip(x.shape, grow, strict=True)))._copy_into(x)
        return record(out, Ops.PAD, (self,), pads=tuple(pads))

    def cat(self, *args, dim: int = 0) -> Self:
        tensors = list(self) if isinstance(self, (list, tuple)) else [self, *args]
        first = tensors[0]
        if first.ndim == 0:
            raise IndexError("cat: a zero-dimensional tensor has no dim to concatenate along")
        d = normalize_axis("cat", dim, first.ndim, first.shape)
        for t in tensors[1:]:
            if t.ndim != first.ndim or any(a != b for k, (a, b) in enumerate(zip(t.shape, first.shape, strict=True))
                                           if k != d):
                raise ArgumentError(f"cat: shapes {first.shape} and {t.shape} must match except in dim {d}")
        check_same("cat", *tensors)
        dtype = first.dtype
        for t in tensors[1:]:
            dtype = promote(dtype, t.dtype)
        tensors = [t.cast(dtype) for t in tensors]
        shape = list(first.shape)
        shape[d] = sum(t.shape[d] for t in tensors)
        out = first._alloc(tuple(shape), dtype)
        start = 0
        for t in tensors:
            bounds = tuple((start, start + t.shape[d]) if k == d else None for k in range(first.ndim))
            out.shrink(bounds)._copy_into(t)
            start += t.shape[d]
        return record(out, Ops.CAT, tuple(tensors), sizes=tuple(t.shape[d] for t in tensors), dim=d)

    def stack(self, *args, dim: int = 0) -> Self:
        tensors = list(self) if isinstance(self, (list, tuple)) else [self, *args]
        shapes = {t.shape for t in tensors}
        if len(shapes) > 1:
            raise ArgumentError(f"stack: every tensor must have the same shape, got {sorted(shapes)}")
        d = normalize_axis("stack", dim, tensors[0].ndim + 1, tensors[0].shape)
        return MovementMixin.cat(*[t.unsqueeze(d) for t in tensors], dim=d)

    def split(self, sizes, dim: int = 0) -> tuple[Self, ...]:
        d = normalize_axis("split", dim, self.ndim, self.shape)
        n = self.shape[d]
        if isinstance(sizes, int):
            if sizes <= 0:
                raise ArgumentError(f"split: split size must be positive, got {sizes}")
            sizes = [min(sizes, n - s) for s in range(0, n, sizes)] or [0]
        if sum(sizes) != n:
            raise ArgumentError(f"split: sizes {list(sizes)} must add up to dim {d} of shape {self.shape}")
        out, start = [], 0
        for s in sizes:
            out.append(self.shrink(tuple((start, start + s) if k == d else None for k in range(self.ndim))))
            start += s
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Self, ...]:
        if chunks <= 0:
            raise ArgumentError(f"chunk: chunks must be positive, got {chunks}")
        d = normalize_axis("chunk", dim, self.ndim, self.shape)
        return self.split(max(1, math.ceil(self.shape[d] / chunks)), d)

    def repeat(self, *repeats) -> Self:
        repeats = _argfix(*repeats)
        if len(repeats) < self.ndim:
            raise ArgumentError(f"repeat: need at least {self.ndim} repeats for shape {self.shape}, got {repeats}")
        x = self.reshape((1,) * (len(repeats) - self.ndim) + self.shape)
        inter = tuple(k for n in x.shape for k in (1, n))
        wide = tuple(k for r, n in zip(repeats, x.shape, strict=True) for k in (r, n))
        return x.reshape(inter).expand(wide).reshape(tuple(r * n for r, n in zip(repeats, x.shape, strict=True)))

    # ---- indexing ----

    def __getitem__(self, index) -> Self:
        if isinstance(index, list) and any(_is_index_array(i) or isinstance(i, slice) or i is None or i is Ellipsis
                                           for i in index):
            index = tuple(index)  # torch's rule: a list holding sequences, tensors or slices is a tuple of indices
        if _is_mask(index):  # x[mask]: the selected rows, by a one-hot select (scatter.py)
            return self._select_mask(index if isinstance(index, TensorCore) else self._like(index))
        view, advanced = self._basic_index(index if isinstance(index, tuple) else (index,))
        out = view if not advanced else view._gather(advanced)
        return record(out, Ops.INDEX, (self,), key=index)

    def _basic_index(self, index: tuple) -> tuple[Self, list]:
        """Apply ints, slices, None and ... as a view; keep array-indexed dims for _gather."""
        if sum(item is Ellipsis for item in index) > 1:
            raise IndexError("getitem: an index can only have a single ellipsis ('...')")
        consumed = sum(item is not None and item is not Ellipsis for item in index)
        if consumed > self.ndim:
            raise IndexError(f"getitem: too many indices for tensor of shape {self.shape}: "
                             f"{consumed} were indexed")
        fill = (slice(None),) * (self.ndim - consumed)
        if Ellipsis in [i for i in index if not _is_index_array(i)]:
            k = next(k for k, i in enumerate(index) if i is Ellipsis)
            index = index[:k] + fill + index[k + 1:]
        else:
            index = index + fill
        shape, strides, offset, dim, advanced = [], [], self._offset, 0, []
        for k, item in enumerate(index):
            if item is None:
                shape.append(1)
                strides.append(0)
                continue
            n, s = self.shape[dim], self._strides[dim]
            if isinstance(item, (bool, np.bool_)):
                raise TypeError("getitem: boolean indices are not supported; use where()")
            if isinstance(item, (int, np.integer)):  # selects, even beside index arrays (torch's rule)
                i = int(item)
                if not -n <= i < n:
                    raise IndexError(f"getitem: index {i} is out of bounds for axis {dim} with size {n} "
                                     f"(shape {self.shape})")
                offset += (i % n) * s
            elif isinstance(item, slice):
                if item.step == 0:
                    raise ArgumentError("getitem: slice step cannot be zero")
                start, stop, step = item.indices(n)
                length = len(range(start, stop, step))
                offset += start * s if length else 0
                shape.append(length)
                strides.append(s * step)
            elif _is_index_array(item):
                advanced.append((k, len(shape), item, n, s))
                shape.append(n)
                strides.append(s)
            else:
                raise TypeError(f"getitem: unsupported index {item!r} of type {type(item).__name__}")
            dim += 1
        return self._view(self, tuple(shape), tuple(strides), offset), advanced

    def _gather(self, advanced: list) -> Self:
        """Integer-array indexing (numpy's rules): index arrays broadcast together to shape B;
        each B position selects a block of the remaining dims, copied by the gather kernel."""
        idx = []
        for _, _, item, n, _ in advanced:
            # Index arrays are data, like the lists they may be: they follow the tensor to its device.
            t = item.to(self.device) if isinstance(item, TensorCore) else self._like(
                item if not isinstance(item, (list, tuple)) else list(item) or np.zeros(0, np.int64))
            if not t.dtype.is_int:
                raise IndexError(f"getitem: index arrays must be integers, got {t.dtype.name}")
            t = t.cast(dtypes.int64)
            t = (t < 0).where(t + n, t)
            if t.numel() and (t.min().item() < 0 or t.max().item() >= n):
                bad = t.min().item() if t.min().item() < 0 else t.max().item()
                raise IndexError(f"getitem: index {bad - n if bad < 0 else bad} is out of bounds for a dim "
                                 f"of size {n} in shape {self.shape}")
            idx.append(t)
        b_shape = broadcast_shapes("getitem", *(t.shape for t in idx))
        offsets = self.zeros(b_shape, dtype=dtypes.int64, device=self.device)
        for t, (_, _, _, _, s) in zip(idx, advanced, strict=True):
            offsets = offsets + t._broadcast_to(b_shape) * s
        offsets = offsets.contiguous()
        adv_dims = {pos for _, pos, _, _, _ in advanced}
        rest = [d for d in range(self.ndim) if d not in adv_dims]
        rest_shape = tuple(self.shape[d] for d in rest)
        out = self._alloc(b_shape + rest_shape, self.dtype)
        shape, (sa,) = merge_dims(rest_shape, tuple(self._strides[d] for d in rest))
        check(self._buf.kernels.gather(self.dtype.itemsize, out._ptr(), self._ptr(),
                                       ffi.cast("int64_t *", offsets._ptr()), prod(b_shape),
                                       len(shape), int64s(shape), int64s(sa)), "gather", "getitem", self)
        positions = [pos for _, pos, _, _, _ in advanced]  # where each array's dim was after the ints went
        if positions != list(range(positions[0], positions[0] + len(positions))):
            return out  # index arrays apart (a slice or None between them): their dims go first, as in numpy
        p, nb = advanced[0][1], len(b_shape)
        order = [nb + j for j in range(p)] + list(range(nb)) + [nb + j for j in range(p, len(rest))]
        return out.permute(order)
