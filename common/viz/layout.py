"""A layered drawing of a directed acyclic graph, for the page's SVG (no Graphviz): each node gets a
layer (its longest path from a source, so every edge points down), an order within its layer
(by the mean position of the nodes it reads, swept down and up a few times: the barycenter heuristic of
Sugiyama, Tagawa and Toda, 1981, which uncrosses most edges), and then x and y.

Nodes of one group (the kernel that computes them) are kept side by side within a layer, so that a
kernel's outline stays narrow. Sizes are in the page's pixels.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

NODE_HEIGHT = 40
LAYER_GAP = 36  # between a layer's bottom and the next one's top
NODE_GAP = 16  # between two nodes of a layer
CHAR_WIDTH = 7  # of the page's 12px monospace font
SWEEPS = 4  # barycenter passes, each one down and one up


@dataclass
class Box:
    x: float  # the left edge
    y: float  # the top edge
    width: float
    height: float = NODE_HEIGHT


def layers_of(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """Each node's layer: one more than the deepest node it reads; a node that reads nothing (a buffer, a
    constant) just above its first reader, rather than in one wide top row with all the others."""
    readers, indegree = defaultdict(list), [0] * n
    for src, dst in edges:
        readers[src].append(dst)
        indegree[dst] += 1
    sources = [i for i in range(n) if indegree[i] == 0]
    layer, ready = [0] * n, list(sources)
    while ready:
        i = ready.pop()
        for j in readers[i]:
            layer[j] = max(layer[j], layer[i] + 1)
            indegree[j] -= 1
            if indegree[j] == 0:
                ready.append(j)
    if any(indegree):
        raise ValueError("layout: the graph has a cycle; only a DAG has layers")
    for i in sources:
        if readers[i]:
            layer[i] = min(layer[j] for j in readers[i]) - 1
    return layer


def order_layers(layer: list[int], edges: list[tuple[int, int]], group: list) -> list[list[int]]:
    """The nodes of each layer, left to right, by the barycenter heuristic; a group's nodes kept together."""
    rows: list[list[int]] = [[] for _ in range(max(layer, default=-1) + 1)]  # (a layer may end up empty)
    for i, k in enumerate(layer):
        rows[k].append(i)
    above, below = defaultdict(list), defaultdict(list)
    for src, dst in edges:
        above[dst].append(src)
        below[src].append(dst)
    position = {i: p for row in rows for p, i in enumerate(row)}
    for sweep in range(2 * SWEEPS):
        neighbours = above if sweep % 2 == 0 else below
        for row in (rows[1:] if sweep % 2 == 0 else rows[-2::-1]):
            centre = {i: sum(position[j] for j in neighbours[i]) / len(neighbours[i]) if neighbours[i]
                      else position[i] for i in row}
            by_group = defaultdict(list)
            for i in row:
                by_group[group[i]].append(centre[i])
            group_centre = {g: sum(c) / len(c) for g, c in by_group.items()}
            row.sort(key=lambda i: (group_centre[group[i]], str(group[i]), centre[i]))
            position.update({i: p for p, i in enumerate(row)})
    return rows


def layout(labels: list[str], edges: list[tuple[int, int]], group: list | None = None) -> list[Box]:
    """A box for each node (a label's width), in layers from the graph's sources down."""
    group = group if group is not None else [None] * len(labels)
    rows = [row for row in order_layers(layers_of(len(labels), edges), edges, group) if row]
    boxes: list[Box | None] = [None] * len(labels)
    widths = [max(60, CHAR_WIDTH * len(label) + 16) for label in labels]
    row_widths = [sum(widths[i] for i in row) + NODE_GAP * (len(row) - 1) for row in rows]
    widest = max(row_widths, default=0)
    for k, row in enumerate(rows):
        x = (widest - row_widths[k]) / 2  # each layer centred
        for i in row:
            boxes[i] = Box(x, k * (NODE_HEIGHT + LAYER_GAP), widths[i])
            x += widths[i] + NODE_GAP
    return boxes


def outline(boxes: list[Box], members: list[int], margin: float = 6) -> Box:
    """The rectangle around a group's boxes."""
    left = min(boxes[i].x for i in members) - margin
    top = min(boxes[i].y for i in members) - margin
    right = max(boxes[i].x + boxes[i].width for i in members) + margin
    bottom = max(boxes[i].y + boxes[i].height for i in members) + margin
    return Box(left, top, right - left, bottom - top)
