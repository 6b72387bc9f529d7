"""The merge pass: kernels of one shape become one kernel with several outputs.

A schedule of small kernels pays each kernel's fixed cost of a call, and reads what they share once
each. AdamW's update is the example: its new parameter, m and v are three kernels that each read the
gradient, and the parameter's needs m and v back from memory. Merged, one loop reads the gradient
once and computes all three, the parameter's update using m and v as they are computed.
"""

from __future__ import annotations

from ..codegen.item import ScheduleItem
from ..codegen.layouts import matmul_product, reads_recomputed
from ..graph.lazy import numel
from .memory import reads


def merge_outputs(items: list[ScheduleItem]) -> list[ScheduleItem]:
    """Kernels of one shape (size-1 dims aside) become one kernel with several outputs: AdamW's new parameter, m and v
    are computed in one loop that reads the gradient once, and the parameter's update uses m and v
    as they are computed instead of loading them back; the updates of same-shaped parameters are
    one kernel too (fewer, larger kernels: each call costs the same fixed overhead). Reduce kernels
    join when they reduce the same shape over the same axes: one loop folds every accumulator
    (cross_entropy's row max and its picked logit). The merged kernel runs where its first part
    was, so a part joins only if everything else it reads was written before that; an output it
    reads at another index, or inside its reduction loop, would race with the loop writing it, so
    that part stays out. Matmuls do not merge: each computes a register tile, and n tiles in one loop
    need n times the registers (on AVX2's 16, the four weight gradients of one shape ran slower
    merged than as four kernels: the tiles spilled)."""
    produced = {id(o) for it in items for o in it.outputs}
    position = {id(o): i for i, it in enumerate(items) for o in it.outputs}
    kept: list[ScheduleItem] = []
    for item in items:
        item_reads = reads(item.root, produced)
        group = next((g for g in kept if _joins(g, item, item_reads, position)), None)
        if group is None:
            kept.append(item)
        else:
            group.outputs.append(item.root)
            group.reduces.extend(item.reduces)
            position[id(item.root)] = position[id(group.root)]  # written when the group runs
    return kept


def squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape without its size-1 dims: shapes equal so walk their elements in the same loops
    (a loss's mean, shape (), and a count of the same rows, shape (1,))."""
    return tuple(n for n in shape if n != 1)


def _joins(group: ScheduleItem, item: ScheduleItem, item_reads, position) -> bool:
    if squeezed(group.root.shape) != squeezed(item.root.shape) or group.root.device != item.root.device \
            or numel(item.root.shape) == 0 or (group.reduce is None) != (item.reduce is None) \
            or group.online is not None or item.online is not None:
        return False
    if group.reduce is not None and (group.reduce.srcs[0].shape != item.reduce.srcs[0].shape
                                     or group.reduce.arg != item.reduce.arg):
        return False  # one reduction loop: the same reduced shape and axes
    if group.reduce is not None and any(matmul_product(r) is not None and not reads_recomputed(r)
                                        for r in (*group.reduces, *item.reduces)):
        return False  # a register tile each: merged, they would not fit the registers
    start = position[id(group.root)]
    outs = {id(o) for o in group.outputs}
    for s, direct in item_reads:
        if id(s) in outs and not direct:
            return False  # read at another index: a race with the loop that writes it
        if id(s) not in outs and position.get(id(s), -1) >= start:
            return False  # written after the group's kernel runs
    return True
