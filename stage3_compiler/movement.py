"""Movement ops: each validates its arguments here, at the call, then becomes one of the IR's six
movement primitives (RESHAPE, PERMUTE, EXPAND, PAD, SHRINK, FLIP), which compose the view of the
lazy graph and never copy. The rest is written on those: basic indexing (ints, slices with steps,
None) is shrinks, flips and reshapes; cat pads every piece to the whole and adds; integer-array
indexing is a one-hot mask and a sum (a gather the compiler fuses into the reading kernel)."""

from __future__ import annotations

import math
from typing import Self

import numpy as np

from .autograd import record
from .device import check_same
from .dtype import dtypes, promote
from .engine import checks
from .errors import ArgumentError
from .graph.symbolic import Node, SymbolicError
from .hooks import TensorCore
from .ops import Ops
from .shape import MAX_DIMS, broadcast_shapes, normalize_axes, normalize_axis, prod, resolve_reshape


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
        return record(self._make(self.lazydata.reshape(new)), Ops.RESHAPE, (self,))

    def view(self, *shape) -> Self:
        return self.reshape(*shape)

    def permute(self, *order) -> Self:
        order = _argfix(*order)
        axes = tuple(normalize_axis("permute", a, self.ndim, self.shape) for a in order)
        if sorted(axes) != list(range(self.ndim)):
            raise ArgumentError(f"permute: {order} is not a permutation of the dims of shape {self.shape}")
        if self.ndim == 0:
            return self
        return record(self._make(self.lazydata.permute(axes)), Ops.PERMUTE, (self,), order=axes)

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
        new = []
        for d, want in enumerate(shape):
            have = self.shape[d - lead] if d >= lead else 1
            if want == -1 and d >= lead:
                want = have
            if want == have or (have == 1 and want >= 0):
                new.append(want)
            else:
                raise ArgumentError(f"expand: cannot expand shape {self.shape} to {shape}: "
                                    f"dim {d} has size {have}, expected it to be 1 or {want}")
        new = self._check_dims("expand", new)
        lazy = self.lazydata.reshape((1,) * lead + self.shape).expand(new)
        return record(self._make(lazy), Ops.EXPAND, (self,))

    def _broadcast_to(self, shape) -> Self:
        return self if self.shape == tuple(shape) else self.expand(shape)

    def shrink(self, arg) -> Self:
        if len(arg) != self.ndim:
            raise ArgumentError(f"shrink: need one (start, end) per dim of {self.shape}, got {arg}")
        bounds = []
        for n, b in zip(self.shape, arg, strict=True):
            start, end = (0, n) if b is None else b
            try:
                inside = 0 <= start <= end <= n
            except SymbolicError:
                raise ArgumentError(f"shrink: the ranges of bounds {(start, end)} do not prove them inside a dim of "
                                    f"size {n} in shape {self.shape}") from None
            if not inside:
                raise ArgumentError(f"shrink: bounds {(start, end)} are outside a dim of size {n} "
                                    f"in shape {self.shape}")
            bounds.append((start, end))
        return record(self._make(self.lazydata.shrink(tuple(bounds))), Ops.SHRINK, (self,), arg=tuple(arg))

    def flip(self, axis, *more: int) -> Self:
        """flip(0, 1) or flip((0, 1))."""
        axes = normalize_axes("flip", (axis, *more) if more else axis, self.ndim, self.shape)
        return record(self._make(self.lazydata.flip(tuple(sorted(axes)))), Ops.FLIP, (self,), axes=axes)

    def squeeze(self, dim: int | None = None) -> Self:
        if dim is None:
            keep = [d for d in range(self.ndim) if self.shape[d] != 1]
        else:
            d = normalize_axis("squeeze", dim, self.ndim, self.shape)
            keep = [k for k in range(self.ndim) if k != d or self.shape[d] != 1]
        return self.reshape(tuple(self.shape[d] for d in keep))

    def unsqueeze(self, dim: int) -> Self:
        d = normalize_axis("unsqueeze", dim, self.ndim + 1, self.shape)
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

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

    def pad(self, padding, value: float = 0.0, mode: str = "constant") -> Self:
        pads = list(padding)
        if pads and all(isinstance(p, int) for p in pads):  # torch's flat form, last dim first
            if len(pads) % 2 or len(pads) // 2 > self.ndim:
                raise ArgumentError(f"pad: flat padding {padding} needs an even count <= 2*{self.ndim}")
            pairs = [(pads[i], pads[i + 1]) for i in range(0, len(pads), 2)][::-1]
            pads = [None] * (self.ndim - len(pairs)) + pairs
        if len(pads) != self.ndim:
            raise ArgumentError(f"pad: need one (before, after) per dim of {self.shape}, got {padding}")
        pads = [(0, 0) if p is None else tuple(v if isinstance(v, Node) else int(v) for v in p) for p in pads]
        if any(isinstance(v, Node) for p in pads for v in p):  # a pad by a symbolic amount: no crop, no mode
            if mode != "constant" or any(v < 0 for p in pads for v in p):
                raise ArgumentError(f"pad: a symbolic padding {padding} must be >= 0 in constant mode, "
                                    f"got mode {mode!r}")
            grow = tuple(pads)
            x = self
        elif mode != "constant":
            return self._pad_mode(pads, mode)  # reflect, replicate, circular: views and cats (surface.py)
        else:  # negative padding crops first, then the rest is a fill plus a copy into the interior
            crop = tuple((max(-b, 0), n - max(-a, 0)) for n, (b, a) in zip(self.shape, pads, strict=True))
            if any(lo > hi for lo, hi in crop):
                raise ArgumentError(f"pad: padding {padding} crops more than shape {self.shape} holds")
            x = self.shrink(crop)
            grow = tuple((max(b, 0), max(a, 0)) for b, a in pads)
        out = record(self._make(x.lazydata.pad(grow)), Ops.PAD, (x,), pads=grow)  # the new area reads 0
        if value == 0:
            return out
        inside = self._make(x.lazydata.const(True, dtypes.bool, x.device, x.shape).pad(grow))
        return inside.where(out, self.full((), value, self.dtype, self.device))

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
        total, start, out = sum(t.shape[d] for t in tensors), 0, None
        for t in tensors:  # each piece padded with zeros to the whole, then summed: one fused kernel
            piece = t.pad(tuple((start, total - start - t.shape[d]) if k == d else (0, 0) for k in range(first.ndim)))
            out = piece if out is None else out + piece
            start += t.shape[d]
        return out

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
        return view if not advanced else view._gather(advanced)

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
        x, dim, advanced = self, 0, []  # dim: the dim of x the next item indexes
        for k, item in enumerate(index):
            if item is None:
                x, dim = x.unsqueeze(dim), dim + 1
                continue
            n = x.shape[dim]
            if isinstance(item, (bool, np.bool_)):
                raise TypeError("getitem: boolean indices are not supported; use where()")
            if isinstance(item, Node) or (isinstance(item, slice) and any(isinstance(b, Node) for b in
                                                                          (item.start, item.stop, item.step, n))):
                x, dim = x._symbolic_index(dim, item), dim + isinstance(item, slice)
                continue
            if isinstance(item, (int, np.integer)):  # selects, even beside index arrays (torch's rule)
                i = int(item)
                if not -n <= i < n:
                    raise IndexError(f"getitem: index {i} is out of bounds for axis {k} with size {n} "
                                     f"(shape {self.shape})")
                x = x._slice(dim, i % n, i % n + 1, 1).squeeze(dim)
                continue
            if isinstance(item, slice):
                if item.step == 0:
                    raise ArgumentError("getitem: slice step cannot be zero")
                x = x._slice(dim, *item.indices(n))
            elif _is_index_array(item):
                advanced.append((k, dim, item, n, None))
            else:
                raise TypeError(f"getitem: unsupported index {item!r} of type {type(item).__name__}")
            dim += 1
        return x, advanced

    def _symbolic_index(self, dim: int, item) -> Self:
        """x[v] or x[a:b] where v, a or b is symbolic (graph/symbolic.Variable): one shrink, steps of 1,
        bounds counted from the start (a negative end would move the elements with the value)."""
        n = self.shape[dim]
        if isinstance(item, slice):
            if item == slice(None):  # the whole of a symbolic dim
                return self
            if item.step not in (None, 1):
                raise ArgumentError(f"getitem: a slice with a symbolic bound takes step 1, got {item.step}")
            start, stop = (0 if item.start is None else item.start), (n if item.stop is None else item.stop)
        else:
            start, stop = item, item + 1
        if any(isinstance(b, int) and b < 0 for b in (start, stop)):
            raise IndexError(f"getitem: a symbolic index counts from the start; got {start}:{stop} "
                             f"for shape {self.shape}")
        out = self.shrink(tuple((start, stop) if d == dim else None for d in range(self.ndim)))
        return out if isinstance(item, slice) else out.squeeze(dim)

    def _slice(self, dim: int, start: int, stop: int, step: int) -> Self:
        """x[start:stop:step] along dim on the primitives: a negative step flips first; a step k > 1
        pads to a multiple of k, splits the dim into (m, k) and keeps column 0."""
        n = self.shape[dim]
        length = len(range(start, stop, step))
        x = self
        if step < 0:
            x, start, step = x.flip(dim), n - 1 - start, -step
        if length == 0:
            return x.shrink(tuple((0, 0) if d == dim else None for d in range(x.ndim)))
        end = start + (length - 1) * step + 1
        x = x.shrink(tuple((start, end) if d == dim else None for d in range(x.ndim)))
        if step == 1:
            return x
        x = x.pad(tuple((0, length * step - x.shape[dim]) if d == dim else (0, 0) for d in range(x.ndim)))
        x = x.reshape(x.shape[:dim] + (length, step) + x.shape[dim + 1:])
        return x.shrink(tuple((0, 1) if d == dim + 1 else None for d in range(x.ndim))).squeeze(dim + 1)

    def _gather(self, advanced: list) -> Self:
        """Integer-array indexing (numpy's rules): index arrays broadcast together to shape B;
        each B position selects a block of the remaining dims, picked out by a one-hot mask and a sum."""
        idx = []
        for _, _, item, n, _ in advanced:
            # Index arrays are data, like the lists they may be: they follow the tensor to its device.
            t = item.to(self.device) if isinstance(item, TensorCore) else self._like(
                item if not isinstance(item, (list, tuple)) else list(item) or np.zeros(0, np.int64))
            if not t.dtype.is_int:
                raise IndexError(f"getitem: index arrays must be integers, got {t.dtype.name}")
            t = t.cast(dtypes.int64)
            t = (t < 0).where(t + n, t)
            shape = self.shape
            checks.check_now(t, n, lambda low, top, n=n, shape=shape: IndexError(
                f"getitem: index {low - n if low < 0 else top} is out of bounds for a dim of size {n} "
                f"in shape {shape}"))
            idx.append(t)
        b_shape = broadcast_shapes("getitem", *(t.shape for t in idx))
        # Move the indexed dims to the front, then one mask per index array: position b selects
        # element idx[b] of its dim. The masks multiply (AND) into one over all indexed dims, and a
        # sum over those dims keeps the selected block: out (B, rest) = sum_j mask[B, j] * x[j, rest].
        adv_dims = [pos for _, pos, _, _, _ in advanced]
        rest = [d for d in range(self.ndim) if d not in adv_dims]
        x = self.permute(adv_dims + rest)
        nb, na = len(b_shape), len(adv_dims)
        mask = None
        for a, (t, (_, _, _, n, _)) in enumerate(zip(idx, advanced, strict=True)):
            hit = t._broadcast_to(b_shape).reshape(b_shape + (1,) * a + (1,) + (1,) * (na - a - 1)) == \
                self.arange(n, device=self.device).reshape((1,) * nb + (1,) * a + (n,) + (1,) * (na - a - 1))
            mask = hit if mask is None else mask & hit
        rest_shape = tuple(self.shape[d] for d in rest)
        zero = self.full((), 0, self.dtype, self.device)
        picked = mask.reshape(mask.shape + (1,) * len(rest)).where(x.reshape((1,) * nb + x.shape), zero)
        out = picked._reduce(Ops.REDUCE_ADD, "getitem", tuple(range(nb, nb + na))).reshape(b_shape + rest_shape)
        positions = [pos for _, pos, _, _, _ in advanced]  # where each array's dim was after the ints went
        if positions != list(range(positions[0], positions[0] + len(positions))):
            return out  # index arrays apart (a slice or None between them): their dims go first, as in numpy
        p, nb = advanced[0][1], len(b_shape)
        order = [nb + j for j in range(p)] + list(range(nb)) + [nb + j for j in range(p, len(rest))]
        return out.permute(order)
