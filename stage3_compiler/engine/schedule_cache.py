"""The schedule cache: a graph scheduled before is not scheduled again.

A training step without the JIT builds the same graph every step: the same ops on the same shapes
over the same parameters, with new batches. Deciding which bases to realize, which to fuse, which
kernels merge and where an assign writes (schedule.fuse) walks that graph several times in Python.
This cache keys the graph by its structure and keeps the decisions:

- the key is every unrealized base in the scheduler's order (op, arg, dtype, shape, forced, the
  views and positions of its sources, its assign target), with the realized buffers it reads
  numbered by first appearance (two reads of one buffer get one number: the scheduler's in-place
  rules depend on which reads are the same tensor); the matmul operands' copies are put in first
  (schedule.rewrite_graph), so the key sees the graph the scheduler sees;
- the value is the schedule in positions of that order: each kernel's root, reduction and merged
  outputs, and the assigns that had to write a new buffer instead of their target.

A hit makes the ScheduleItems from the new graph's bases at those positions. What the key leaves out
the scheduler never reads: the buffers' contents, and which Python objects they are beyond the
numbering. `STATS` counts hits and misses (`DEBUG=1` prints them per realize).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import passes
from ..codegen.item import OnlineSoftmax, ScheduleItem
from ..graph.lazy import LazyBuffer
from .identity import const_key
from .memory import drop_target
from .schedule import fuse, rewrite_graph, with_stored

MAX_ENTRIES = 512  # graphs kept; the oldest goes first (sampling makes one graph per prompt length)


@dataclass
class Template:
    """A schedule in positions of the graph's bases (schedule.graph's order)."""

    items: list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...] | None]]
    # (outputs, reduces, the online softmax's bases or None)
    dropped: tuple[int, ...]  # bases whose assign writes a new buffer, not its target


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0


STATS = CacheStats()
SCHEDULES: dict[tuple, Template] = {}


def graph_key(outs: list[LazyBuffer], bases: list[LazyBuffer]) -> tuple:
    position = {id(b): i for i, b in enumerate(bases)}
    inputs: dict[int, int] = {}  # id of a realized base -> its number

    def ref(b: LazyBuffer) -> tuple:
        if id(b) in position:
            return ("b", position[id(b)])
        return ("in", inputs.setdefault(id(b), len(inputs)), b.dtype.name, b.shape, b.device)

    records = []
    for b in bases:
        srcs = tuple((None if s.is_base else s.st, ref(s.base)) for s in b.srcs)
        target = None if b.target is None else ref(b.target)
        records.append((b.op, const_key(b.arg), b.dtype.name, b.shape, b.device, b.forced, b.kept, b.recomputed, target,
                        srcs))
    return tuple(records), tuple(ref(o.base) for o in outs), passes.key()  # (the passes change the schedule)


def template_of(items: list[ScheduleItem], bases: list[LazyBuffer], asked: list[LazyBuffer]) -> Template:
    """The schedule in positions; `asked`: the bases that had an assign target before fuse ran."""
    position = {id(b): i for i, b in enumerate(bases)}
    shaped = [(tuple(position[id(b)] for b in it.outputs), tuple(position[id(b)] for b in it.reduces),
               None if it.online is None else tuple(position[id(b)] for b in it.online.bases))
              for it in items]
    return Template(shaped, tuple(position[id(b)] for b in asked if b.target is None))


def create_schedule(outs: list[LazyBuffer]) -> list[ScheduleItem]:
    """schedule.create_schedule, answered from the cache when this graph's structure was scheduled before."""
    bases = rewrite_graph(outs)
    if not bases:  # everything asked for is realized already (a loss read back with item())
        return []
    key = graph_key(outs, bases)
    template = SCHEDULES.get(key)
    if template is None:
        STATS.misses += 1
        asked = [b for b in bases if b.target is not None]
        items = fuse(outs, bases)
        SCHEDULES[key] = template_of(items, bases, asked)
        if len(SCHEDULES) > MAX_ENTRIES:
            del SCHEDULES[next(iter(SCHEDULES))]
        return with_stored(items)
    STATS.hits += 1
    for i in template.dropped:
        drop_target(bases[i])
    return with_stored([ScheduleItem([bases[i] for i in outputs], [bases[i] for i in reduces],
                                     None if online is None else OnlineSoftmax(*(bases[i] for i in online)))
                        for outputs, reduces, online in template.items])
