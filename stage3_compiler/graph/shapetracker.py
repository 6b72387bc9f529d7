"""Shape trackers: movement ops as views of a buffer, never copies.

A `View` maps an index over its shape to a flat index `offset + sum(i_d * strides[d])`, with an
optional mask: one valid range per dim, outside which elements read as padding (0). A
`ShapeTracker` is a stack of views over one buffer: each view indexes the flat layout of the view
below it, and the last one is the shape the user sees. Movement ops rewrite the last view when a
single view can express the result (always for permute, expand, pad, shrink and flip; for
reshape when the strides and mask allow) and otherwise push a new view.

When a kernel is generated, `expr_idxs` turns one loop index per dim into the buffer index and
the validity condition, composed through every view and simplified by `symbolic`.

A dim may be symbolic: a node over a user's `Variable` (`start_pos+1`), from a shrink or a pad by
one. Such a dim is *laid out at its maximum*: strides, buffer sizes and flat indices count it as
`layout(size)` elements, and only the loops that walk it stop at the bound value. Strides and
allocations stay integers, the same buffers serve every value (a jitted decoder replays on them),
and an index is a sum of loop variables times constants, as before; the price is memory for the
longest case. A reshape must then keep each symbolic dim as a dim of its own (the concrete dims
between them regroup freely): merged with another, its elements would move with the value.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

from .symbolic import (
    And,
    Lt,
    Mul,
    Node,
    Num,
    Sum,
    Var,
    ands,
    bounds_under,
    concrete,
    evaluate,
    layout,
    lo_hi,
    lt,
    smax,
    smin,
    substitute,
    sum_nodes,
    variables,
)
from .symbolic import vars as symbolic_vars

Shape = tuple[int, ...]
Mask = tuple[tuple[int, int], ...]


def strides_for_shape(shape: Shape) -> tuple[int, ...]:
    """Row-major strides in elements (symbolic dims at their layout size); 0 for size-1 dims and
    for every dim of an empty shape."""
    if 0 in shape:
        return (0,) * len(shape)
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(0 if s == 1 else acc)
        acc *= layout(s)
    return tuple(reversed(strides))


def is_symbolic(shape) -> bool:
    return any(isinstance(s, Node) for s in shape)


def index_vars(shape: Shape, prefix: str = "i") -> list[Node]:
    """One loop variable per dim, i0 in [0, shape[0]-1], ... (Num(0) for an empty dim)."""
    return [Var(f"{prefix}{d}", 0, layout(s) - 1) if layout(s) > 0 else Num(0) for d, s in enumerate(shape)]


def _unflatten(idx: Node, shape: Shape) -> list[Node]:
    """A flat index over shape as one index per dim. The outermost dim needs no % (the flat
    index is below the size wherever it is used); size-1 dims are 0."""
    if 0 in shape:  # no elements: nothing to index
        return [Num(0)] * len(shape)
    out: list[Node] = []
    acc = 1
    outer = next((d for d, s in enumerate(shape) if s != 1), len(shape))
    for d in reversed(range(len(shape))):
        if shape[d] == 1:
            out.append(Num(0))
            continue
        out.append(idx // acc if d == outer else (idx // acc) % layout(shape[d]))
        acc *= layout(shape[d])
    return out[::-1]


@dataclass(frozen=True)
class View:
    shape: Shape
    strides: tuple[int, ...]
    offset: int
    mask: Mask | None
    contiguous: bool  # the identity layout of its shape: row-major strides, offset 0, no mask

    @staticmethod
    def create(shape: Shape, strides: tuple[int, ...] | None = None, offset: int = 0,
               mask: Mask | None = None) -> View:
        """The canonical view: size-1 dims get stride 0, a mask covering everything becomes None,
        and a view with nothing valid (or nothing at all) forgets its strides and offset. Views are
        immutable, so equal arguments share one (a training step asks for the same few thousand
        views every step: the cache halves the time spent building the graph's views). Not a view
        with a Variable: equal to one of another value, it must keep its own bound value."""
        if isinstance(offset, Node) or is_symbolic(shape) or (mask is not None and is_symbolic(sum(mask, ()))):
            shape, offset = tuple(concrete(s) for s in shape), concrete(offset)
            mask = None if mask is None else tuple((concrete(lo), concrete(hi)) for lo, hi in mask)
            return View._create(shape, None if strides is None else tuple(int(s) for s in strides), offset, mask)
        return _create(tuple(int(s) for s in shape), None if strides is None else tuple(int(s) for s in strides),
                       int(offset), None if mask is None else tuple((int(lo), int(hi)) for lo, hi in mask))

    @staticmethod
    def _create(shape: Shape, strides: tuple[int, ...] | None, offset: int, mask: Mask | None) -> View:
        if strides is None:
            strides = strides_for_shape(shape)
        strides = tuple(0 if s == 1 else int(st) for s, st in zip(shape, strides, strict=True))
        if 0 in shape:
            return View(shape, (0,) * len(shape), 0, None, True)
        if mask is not None:
            mask = tuple((smax(0, lo), smin(s, hi)) for (lo, hi), s in zip(mask, shape, strict=True))
            if any(_empty(lo, hi) for lo, hi in mask):
                return View(shape, (0,) * len(shape), 0, ((0, 0),) * len(shape), False)
            if all(m == (0, s) for m, s in zip(mask, shape, strict=True)):
                mask = None
        contiguous = offset == 0 and mask is None and strides == strides_for_shape(shape)
        return View(shape, strides, offset, mask, contiguous)

    def expr(self, idxs: list[Node]) -> tuple[Node, Node]:
        """The flat index and the validity condition (Num(1) when always valid) at idxs."""
        idx = sum_nodes([*(i * st for i, st in zip(idxs, self.strides, strict=True) if st != 0), self.offset])
        conds: list[Node] = []
        for i, (lo, hi), s in zip(idxs, self._ranges(), self.shape, strict=True):
            if lo != 0:
                conds.append(lt(lo - 1, i))  # lo <= i (folded away where the bounds prove it)
            if hi != s:  # (a loop over a symbolic dim stops at its size: no condition needed there)
                conds.append(lt(i, hi))
        return idx, ands(conds)

    @functools.cached_property
    def variables(self) -> frozenset:
        """The user's Variables in its shape, offset and mask (computed once: views are shared)."""
        return frozenset(variables((self.shape, self.offset, self.mask)))

    def _ranges(self) -> Mask:
        return self.mask if self.mask is not None else tuple((0, s) for s in self.shape)

    def permute(self, order: tuple[int, ...]) -> View:
        mask = None if self.mask is None else tuple(self.mask[o] for o in order)
        return View.create(tuple(self.shape[o] for o in order), tuple(self.strides[o] for o in order),
                           self.offset, mask)

    def expand(self, new_shape: Shape) -> View:
        # only size-1 dims grow; their stride is already 0, and a masked size-1 dim is valid
        mask = None if self.mask is None else tuple((0, n) if s == 1 and m == (0, 1) else m
                                                    for m, s, n in zip(self.mask, self.shape, new_shape, strict=True))
        return View.create(new_shape, self.strides, self.offset, mask)

    def pad(self, arg: tuple[tuple[int, int], ...]) -> View:
        offset = self.offset - sum(b * st for (b, _), st in zip(arg, self.strides, strict=True))
        shape = tuple(s + b + a for s, (b, a) in zip(self.shape, arg, strict=True))
        mask = tuple((lo + b, hi + b) for (lo, hi), (b, _) in zip(self._ranges(), arg, strict=True))
        return View.create(shape, self.strides, offset, mask)

    def shrink(self, arg: tuple[tuple[int, int], ...]) -> View:
        offset = self.offset + sum(b * st for (b, _), st in zip(arg, self.strides, strict=True))
        mask = tuple((smax(lo, b) - b, smin(hi, e) - b) for (lo, hi), (b, e) in zip(self._ranges(), arg, strict=True))
        return View.create(tuple(e - b for b, e in arg), self.strides, offset, mask)

    def flip(self, axes: tuple[int, ...]) -> View:
        offset = self.offset + sum((self.shape[a] - 1) * self.strides[a] for a in axes)
        strides = tuple(-st if d in axes else st for d, st in enumerate(self.strides))
        mask = tuple((s - hi, s - lo) if d in axes else (lo, hi)
                     for d, ((lo, hi), s) in enumerate(zip(self._ranges(), self.shape, strict=True)))
        return View.create(self.shape, strides, offset, mask)

    def reshape(self, new_shape: Shape) -> View | None:
        """The same elements under new_shape as one view, or None when no single view can say it."""
        if new_shape == self.shape:
            return self
        if 0 in new_shape:
            return View.create(new_shape)
        if is_symbolic(self.shape) or is_symbolic(new_shape):  # regroup the concrete dims, at layout sizes
            if self.mask is not None or variables(self.offset):
                return None
            flat = View(tuple(layout(s) for s in self.shape), self.strides, self.offset, None, False)
            done = flat.reshape(tuple(layout(s) for s in new_shape))
            return None if done is None else View.create(new_shape, done.strides, self.offset)
        if self.mask is not None and self.mask[0] == (0, 0):  # nothing valid
            # a 0-d view has no dim to hold an empty mask: it stays on top of this one instead
            return View.create(new_shape, mask=((0, 0),) * len(new_shape)) if new_shape else None
        old = [d for d, s in enumerate(self.shape) if s != 1]
        new = [d for d, s in enumerate(new_shape) if s != 1]
        strides = [0] * len(new_shape)
        mask = [(0, s) for s in new_shape]
        ranges = self._ranges()
        for go, gn in _groups([self.shape[d] for d in old], [new_shape[d] for d in new]):
            go, gn = [old[g] for g in go], [new[g] for g in gn]
            # the old dims of a group must be one run of memory: stride[d] = stride[d+1] * shape[d+1]
            if any(self.strides[a] != self.strides[b] * self.shape[b] for a, b in itertools.pairwise(go)):
                return None
            acc = self.strides[go[-1]]
            for d in reversed(gn):
                strides[d] = acc
                acc *= new_shape[d]
            if self.mask is None:
                continue
            flat = _flat_interval([self.shape[d] for d in go], [ranges[d] for d in go])
            split = None if flat is None else _split_interval(*flat, [new_shape[d] for d in gn])
            if split is None:
                return None
            for d, m in zip(gn, split, strict=True):
                mask[d] = m
        return View.create(new_shape, tuple(strides), self.offset, tuple(mask))


def _empty(lo, hi) -> bool:
    """Is the range [lo, hi) empty for every value of its variables? (False where it may hold some.)"""
    return lo_hi(hi)[1] <= lo_hi(lo)[0]


def check_symbolic_reshape(old: Shape, new: Shape) -> None:
    """A reshape keeps each symbolic dim as a dim of its own, in order, with equal products of the
    concrete dims between them (see the module docstring); ValueError otherwise."""
    def parts(shape):
        cuts = [d for d, s in enumerate(shape) if isinstance(s, Node)]
        edges = [-1, *cuts, len(shape)]
        return [shape[d] for d in cuts], [math.prod(shape[a + 1:b]) for a, b in itertools.pairwise(edges)]
    (sym_old, runs_old), (sym_new, runs_new) = parts(old), parts(new)
    if sym_old != sym_new or runs_old != runs_new:
        raise ValueError(f"reshape: cannot reshape {old} to {new}: a symbolic dim must stay a dim of its own, "
                         "with the same product of concrete dims between symbolic ones")


def _groups(old: list[int], new: list[int]) -> list[tuple[list[int], list[int]]]:
    """Pair the smallest runs of old and new dims (all > 1) with equal products."""
    out = []
    i = j = 0
    while i < len(old):
        go, gn, po, pn = [i], [j], old[i], new[j]
        while po != pn:
            if po < pn:
                i += 1
                go.append(i)
                po *= old[i]
            else:
                j += 1
                gn.append(j)
                pn *= new[j]
        out.append((go, gn))
        i, j = i + 1, j + 1
    return out


def _flat_interval(sizes: list[int], ranges: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The valid box of a run of dims as one interval of its row-major flat index, if it is one:
    that needs the dims after some p whole and the dims before p single points."""
    partial = [d for d, (r, s) in enumerate(zip(ranges, sizes, strict=True)) if r != (0, s)]
    p = partial[-1] if partial else 0
    if any(ranges[d][1] - ranges[d][0] != 1 for d in range(p)):
        return None
    inner = math.prod(sizes[p + 1:])
    base = sum(ranges[d][0] * math.prod(sizes[d + 1:]) for d in range(p))
    return base + ranges[p][0] * inner, base + ranges[p][1] * inner


def _split_interval(lo: int, hi: int, sizes: list[int]) -> list[tuple[int, int]] | None:
    """The flat interval [lo, hi) over sizes as a box (one range per dim), if it is one."""
    for q in reversed(range(len(sizes))):
        inner = math.prod(sizes[q + 1:])
        if lo % inner or hi % inner:
            return None  # larger inner blocks cannot divide it either
        l, h = lo // inner, hi // inner
        row, n = l // sizes[q], sizes[q]
        if (h - 1) // n != row:
            continue
        outer = [(c, c + 1) for c in _coords(row, sizes[:q])]
        return [*outer, (l % n, (h - 1) % n + 1), *((0, s) for s in sizes[q + 1:])]
    return None


def _coords(flat: int, sizes: list[int]) -> list[int]:
    out = []
    for s in reversed(sizes):
        flat, c = divmod(flat, s)
        out.append(c)
    return out[::-1]


_create = functools.lru_cache(maxsize=1 << 16)(View._create)


@dataclass(frozen=True)
class ShapeTracker:
    views: tuple[View, ...]  # the last one is the shape the user sees

    @staticmethod
    def from_shape(shape: Shape) -> ShapeTracker:
        return ShapeTracker((View.create(tuple(shape)),))

    @property
    def shape(self) -> Shape:
        return self.views[-1].shape

    @property
    def size(self) -> int:
        """How many elements the underlying buffer must hold: the largest index the bottom view
        reaches in its valid area, plus one."""
        v = self.views[0]
        if 0 in v.shape or (v.mask is not None and v.mask[0] == (0, 0)):
            return 0
        reach = (max(st * lo_hi(lo)[0], st * (lo_hi(hi)[1] - 1)) for st, (lo, hi) in zip(v.strides, v._ranges(),
                                                                                          strict=True))
        return lo_hi(v.offset)[1] + sum(reach) + 1

    @property
    def variables(self) -> frozenset:
        """The user's Variables in its shapes, offsets and masks (bound: each holds its value)."""
        return frozenset().union(*(v.variables for v in self.views))

    @property
    def contiguous(self) -> bool:
        return len(self.views) == 1 and self.views[0].contiguous

    def _top(self, view: View) -> ShapeTracker:
        return ShapeTracker(self.views[:-1] + (view,))

    # ---- movement ops: each returns a new tracker ----

    def reshape(self, new_shape: Shape) -> ShapeTracker:
        new_shape = tuple(s if isinstance(s, Node) else int(s) for s in new_shape)
        if is_symbolic(new_shape) or is_symbolic(self.shape):  # products of symbolic dims are not nodes
            check_symbolic_reshape(self.shape, new_shape)
        elif any(s < 0 for s in new_shape) or math.prod(new_shape) != math.prod(self.shape):
            raise ValueError(f"reshape: cannot reshape {self.shape} to {new_shape}: "
                             f"expected non-negative sizes with product {math.prod(self.shape)}")
        view = self.views[-1].reshape(new_shape)
        if view is not None:
            return self._top(view)
        return ShapeTracker(self.views + (View.create(new_shape),)).simplify()

    def permute(self, order: tuple[int, ...]) -> ShapeTracker:
        if sorted(order) != list(range(len(self.shape))):
            raise ValueError(f"permute: order {tuple(order)} is not a permutation of the {len(self.shape)} dims "
                             f"of {self.shape}")
        return self._top(self.views[-1].permute(tuple(order)))

    def expand(self, new_shape: Shape) -> ShapeTracker:
        new_shape = tuple(new_shape)
        ok = len(new_shape) == len(self.shape) and all(s in (n, 1) for s, n in zip(self.shape, new_shape, strict=True))
        if not ok:
            raise ValueError(f"expand: cannot expand {self.shape} to {new_shape}: "
                             f"expected the same number of dims, only size-1 dims changing")
        return self._top(self.views[-1].expand(new_shape))

    def pad(self, arg: tuple[tuple[int, int], ...]) -> ShapeTracker:
        arg = tuple((_int_or_node(b), _int_or_node(a)) for b, a in arg)
        if len(arg) != len(self.shape) or any(b < 0 or a < 0 for b, a in arg):
            raise ValueError(f"pad: got {arg} for shape {self.shape}: expected one non-negative "
                             f"(before, after) pair per dim")
        return self._top(self.views[-1].pad(arg))

    def shrink(self, arg: tuple[tuple[int, int], ...]) -> ShapeTracker:
        arg = tuple((_int_or_node(b), _int_or_node(e)) for b, e in arg)
        if len(arg) != len(self.shape) or any(not 0 <= b <= e <= s for (b, e), s in zip(arg, self.shape, strict=True)):
            raise ValueError(f"shrink: got {arg} for shape {self.shape}: expected one (start, end) pair per dim "
                             f"with 0 <= start <= end <= size")
        return self._top(self.views[-1].shrink(arg))

    def flip(self, axes: tuple[int, ...]) -> ShapeTracker:
        n = len(self.shape)
        if any(not -n <= a < n for a in axes) or len({a % n for a in axes}) != len(axes):
            raise ValueError(f"flip: axes {tuple(axes)} for shape {self.shape}: expected distinct axes in [-{n}, {n})")
        return self._top(self.views[-1].flip(tuple(a % n for a in axes)))

    # ---- index expressions ----

    def expr_idxs(self, idxs: list[Node] | None = None, where_valid: bool = False) -> tuple[Node, Node | None]:
        """The buffer index and the validity condition (None when always valid) at one index per
        dim of shape (by default the variables i0, i1, ...). With `where_valid`, an index that is
        right only where the view is valid: each loop index is narrowed to the range the validity
        allows it (any view's mask) before the views compute with it, so their divisions and
        remainders can fold (one part of a concatenation reads its source at a plain offset, also
        through a packed copy's view above it); elsewhere it is some other number, so the reader
        reads only where the view is valid (a gated load)."""
        idxs = index_vars(self.shape) if idxs is None else list(idxs)
        if len(idxs) != len(self.shape):
            raise ValueError(f"expr_idxs: got {len(idxs)} indices for shape {self.shape}")
        idx, valid = self._expr(idxs)
        if where_valid and valid != Num(1) and (narrow := narrowed(idxs, valid)) != idxs:
            idx, _ = self._expr(narrow)
        return idx, None if valid == Num(1) else valid

    def _expr(self, idxs: list[Node]) -> tuple[Node, Node]:
        idx, valid = self.views[-1].expr(idxs)
        for view in reversed(self.views[:-1]):
            idx, v = view.expr(_unflatten(idx, view.shape))
            valid = ands([valid, v])
        return idx, valid

    def expr_node(self, idx: Node) -> tuple[Node, Node | None]:
        """The same as expr_idxs, from one flat (row-major) index over shape."""
        return self.expr_idxs(_unflatten(idx, self.shape))

    def substitute(self, values: dict[str, int]) -> ShapeTracker:
        """The tracker with its top view's Variables replaced by their values: the same elements at
        the same places (the layout keeps its strides), seen at the bound size. The views below keep
        theirs: the top view indexes their layout, which their symbolic sizes fix."""
        def value(x):
            return evaluate(x, values) if isinstance(x, Node) else x
        top = self.views[-1]
        mask = None if top.mask is None else tuple((value(lo), value(hi)) for lo, hi in top.mask)
        return self._top(View.create(tuple(value(s) for s in top.shape), top.strides, value(top.offset), mask))

    def simplify(self) -> ShapeTracker:
        """Merge the top two views while one view can express them."""
        if len(self.views) >= 2 and (merged := _merge(self.views[-2], self.views[-1])) is not None:
            return ShapeTracker(self.views[:-2] + (merged,)).simplify()
        return self


def narrowed(idxs: list[Node], valid: Node) -> list[Node]:
    """The indices with each loop index in them (a Var, not a user's Variable) cut to the range that
    valid allows it; unchanged where nothing is cut, or where nothing is valid."""
    loop_vars = {v for i in idxs for v in symbolic_vars(i) if type(v) is Var}
    cut = {}
    for v in loop_vars:
        lo, hi = bounds_under(valid, v)
        if lo > hi:
            return idxs
        if (lo, hi) != (v.min, v.max):
            cut[v.name] = Var(v.name, lo, hi)
    return [substitute(i, cut) for i in idxs] if cut else idxs


def _int_or_node(x) -> int | Node:
    return x if isinstance(x, Node) else int(x)


def _merge(below: View, top: View) -> View | None:
    """below and top as one view, or None. Compose them symbolically over top's valid box only
    (outside it the index does not matter): if the index comes out linear in the loop variables
    and the validity as one range per variable, those are the strides, offset and mask. (Views
    with a Variable stay stacked.)"""
    if below.variables or top.variables:
        return None
    if 0 in top.shape or (top.mask is not None and top.mask[0] == (0, 0)):
        return top
    ranges = top._ranges()
    idxs = [Num(lo) if hi - lo == 1 else Var(f"m{d}", lo, hi - 1) for d, (lo, hi) in enumerate(ranges)]
    idx, valid = ShapeTracker((below, top)).expr_idxs(idxs)
    dims = {v: d for d, v in enumerate(idxs) if isinstance(v, Var)}
    strides = [0] * len(top.shape)
    offset = 0
    for t in idx.terms if isinstance(idx, Sum) else (idx,):
        base, k = (t.a, t.k) if isinstance(t, Mul) else (t, 1)
        if isinstance(base, Num):
            offset += base.value * k
        elif base in dims:
            strides[dims[base]] = k
        else:
            return None  # a // or % survived: not a strided view
    mask = list(ranges)
    for cond in () if valid is None else valid.terms if isinstance(valid, And) else (valid,):
        if cond == Num(0):  # nothing valid: a 0-d view has no dim to say so, and stays stacked
            return View.create(top.shape, mask=((0, 0),) * len(top.shape)) if top.shape else None
        if isinstance(cond, Lt) and cond.a in dims and isinstance(cond.b, Num):  # i < n
            d = dims[cond.a]
            mask[d] = (mask[d][0], min(mask[d][1], cond.b.value))
        elif isinstance(cond, Lt) and cond.b in dims and isinstance(cond.a, Num):  # n < i
            d = dims[cond.b]
            mask[d] = (max(mask[d][0], cond.a.value + 1), mask[d][1])
        else:
            return None
    return View.create(top.shape, tuple(strides), offset, tuple(mask))
