"""Index arithmetic of a row-major buffer: one index per dim to the flat one, and back."""

from __future__ import annotations

from ..graph.symbolic import Node, Num, layout


def strides_of(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides, a symbolic dim at its layout size (graph/shapetracker.py)."""
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= layout(n)
    return tuple(reversed(out))


def flat_index(idxs: list[Node], shape: tuple[int, ...]) -> Node:
    total: Node = Num(0)
    for idx, stride, n in zip(idxs, strides_of(shape), shape, strict=True):
        if n != 1:
            total = total + idx * stride
    return total


def unflatten(flat: Node, shape: tuple[int, ...]) -> list[Node]:
    return [Num(0) if n == 1 else (flat // stride) % layout(n)
            for stride, n in zip(strides_of(shape), shape, strict=True)]


def passes_of(size: int, lanes: int) -> int:
    """The passes an axis of `size` outputs takes at `lanes` a pass (where they do not divide it, the
    last pass is shifted back: codegen/overlap.py)."""
    return -(-size // lanes)
