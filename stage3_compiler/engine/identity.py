"""What makes two kernels the same, in one place. A kernel seen before is found, not redone:

- `structure`: a kernel's identity read from the graph without lowering it (every base it
  computes, with its op, views and constants, and every base it loads as a numbered input);
- `kernel_key`: that, plus what picks its options besides its structure (the thread setting and
  BEAM's width): the key of realize's Program cache, in memory. A user's Variable is part of a
  structure without its bound value (one Program for every value); `bound_values` reads the values
  this graph holds, which the launch passes;
- `search_key`: a kernel's source without options, its device, compiler and CPU, and the thread
  setting: the key of a BEAM search's winner, on disk.

(A compiled library's own key is its source, flags and machine: cpu/compiler.source_key. A whole
schedule's is the graph's structure: engine/schedule_cache.graph_key.)
"""

from __future__ import annotations

import hashlib

from .. import passes
from ..codegen.item import ScheduleItem
from ..codegen.lower import lower
from ..cpu.compiler import machine_key
from ..graph.lazy import LazyBuffer, holds_iota
from ..graph.shapetracker import is_symbolic
from ..graph.symbolic import variables
from ..ops import Ops
from ..settings import beam_width
from ..threads import get_num_threads


def const_key(value) -> tuple:
    """A constant as a dict key: 0.0 == -0.0 and NaN != NaN as floats, yet each renders its own C."""
    return (type(value).__name__, value.hex() if isinstance(value, float) else value)


def structure(item: ScheduleItem, found: set | None = None) -> tuple[tuple, list[LazyBuffer]]:
    """A kernel's identity, without lowering it: every base the kernel computes, as (op, arg, dtype,
    shape, its sources as (view, record number)), and every base it loads as a numbered input. Two
    kernels with equal structures lower to the same source, so the second is found in a dict (see
    engine/realize.py) instead of lowered and rendered again; `inputs` are the second one's loaded bases,
    in record order. It reads the graph exactly as Lowerer does. `found` collects the user's
    Variables of the views it reads (see bound_values)."""
    records: list[tuple] = []
    stored = item.stored or frozenset()
    number: dict[int, int] = {}
    inputs: list[LazyBuffer] = []

    def visit(b: LazyBuffer) -> int:
        if id(b) in number:
            return number[id(b)]
        if id(b) not in outputs and (b.buffer is not None or id(b) in stored):
            inputs.append(b)
            record: tuple = ("LOAD", b.dtype.name, b.shape, const_key(b.arg) if b.op is Ops.CONST else None,
                             holds_iota(b))  # (an index compared with an iota is a lookup: codegen/lookup.picked)
        elif b.op is Ops.CONST:
            record = ("CONST", const_key(b.arg), b.dtype.name, b.shape)
        else:
            srcs = tuple((None if s.is_base else s.st, visit(s.base)) for s in b.srcs)
            if found is not None:
                found.update(*(s.st.variables for s in b.srcs if not s.is_base))
            record = (b.op, b.arg, b.dtype.name, b.shape, srcs)
        number[id(b)] = len(records)
        records.append(record)
        return number[id(b)]

    outputs = {id(o) for o in item.outputs}
    for o in item.outputs:
        visit(o)
    reduces = tuple(number[id(r)] if id(r) in number else visit(r) for r in item.reduces)
    tiled = tuple(r.tiles and r.tiles.unit for r in item.reduces)  # (codegen/tiles.py: a kernel of its own)
    return (item.root.device, reduces, tuple(records), item.online is not None, item.in_place, tiled), inputs


def kernel_key(item: ScheduleItem) -> tuple[tuple, list[LazyBuffer], dict[str, int]]:
    """The Program cache's key of a kernel, its loaded inputs in structure order, and the values of
    its Variables."""
    found: set = set()
    key, inputs = structure(item, found)
    return (key, get_num_threads(), beam_width(), passes.key()), inputs, bound_values(item, found)


def bound_values(item: ScheduleItem, found: set) -> dict[str, int]:
    """The values of the user's Variables in the kernel's loops and views (`found`: those of its views,
    which `structure` collects), by name; a variable left unbound, or bound to two values, raises."""
    if is_symbolic(item.root.shape):
        found |= variables(item.root.shape)
    if item.reduce is not None and is_symbolic(item.reduce.srcs[0].shape):
        found |= variables(item.reduce.srcs[0].shape)
    values: dict[str, int] = {}
    for v in found:
        if v.value is None:
            raise ValueError(f"realize: Variable {v.name!r} in [{v.min}, {v.max}] is not bound; "
                             f"use {v.name}.bind(value)")
        if values.setdefault(v.name, v.value) != v.value:
            raise ValueError(f"realize: Variable {v.name!r} is bound to both {values[v.name]} and {v.value} "
                             "in one kernel")
    return values


def search_key(item: ScheduleItem, runtime) -> str:
    """The disk key of a kernel's search: its source without options, where and how it runs."""
    source = runtime.renderer.render(lower(item, runtime.renderer, ()))
    where = (f"{item.root.device}|{type(runtime.renderer).__name__}|{machine_key()}|threads={get_num_threads()}"
             f"|passes={passes.key()}")
    return hashlib.sha256((source + where).encode()).hexdigest()[:24]
