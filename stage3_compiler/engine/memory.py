"""Where each kernel writes: a new buffer, or (an assign) its target's memory, in place. An update
in place keeps a parameter's buffer, which a TinyJit captured and an optimizer's state lives in; it
is safe only in the order and under the conditions `place_in_memory` checks, and when it is not the
value goes to a new buffer that realize copies back afterwards (`drop_target`).
"""

from __future__ import annotations

from ..codegen.item import ScheduleItem
from ..graph.lazy import LazyBuffer
from ..ops import IR_REDUCE


def reads(root: LazyBuffer, produced: set[int]) -> list[tuple[LazyBuffer, bool]]:
    """(base, read at the kernel's own index after its reduction loop?) for every base the output
    `root` of a kernel loads or that is another output. The walk stops at realized bases and at the
    ones this schedule produces. A read is at the kernel's own index when every step on the way is a
    base, not a view, and none is a reduction (what a reduction reads, it reads inside its loop)."""
    out, seen, stack = [], set(), [(root, True)]
    while stack:
        b, direct = stack.pop()
        for v in b.srcs:
            s, here = v.base, direct and v.is_base and b.op not in IR_REDUCE
            if s.buffer is not None or id(s) in produced:
                out.append((s, here))
            elif (id(s), here) not in seen:
                seen.add((id(s), here))
                stack.append((s, here))
    return out


def drop_target(o: LazyBuffer) -> None:
    """An assign that cannot write its target in place writes a new buffer instead; once the kernels
    that read the target's old values have run, realize copies the values into the target, so the
    tensor keeps its buffer (a parameter that a TinyJit captured stays the buffer it captured)."""
    if o.target is not None and o.target.buffer is not None:
        o.copy_back = o.target
    o.target = None


def place_in_memory(items: list[ScheduleItem]) -> list[ScheduleItem]:
    """Where an assign writes: into its target's memory (an update in place, so a parameter keeps
    its buffer) when that is safe, else into a new buffer, copied into the target after the schedule
    (drop_target). It is safe when
    - only the output's own expression reads the target, and only at the output's own index (the
      kernel then loads each element before it stores that element: no race, even though the C
      declares its pointers `restrict`), and
    - no kernel after it reads the old values: a kernel that does (the backward of x @ w reads w) is
      run first, by moving the writer after it, unless a kernel between them needs the writer's
      outputs."""
    produced = {id(o) for item in items for o in item.outputs}
    walked: dict[int, list] = {}  # each output's reads, walked once (every target asks about every kernel)

    def reads_of(o: LazyBuffer) -> list:
        if id(o) not in walked:
            walked[id(o)] = reads(o, produced)
        return walked[id(o)]

    def readers_of(target: LazyBuffer, start: int) -> list[int]:
        return [j for j in range(start, len(items))
                if any(s is target for o in items[j].outputs for s, _ in reads_of(o))]

    for item in [it for it in items if any(o.target is not None for o in it.outputs)]:
        for o in item.outputs:
            target = o.target
            if target is None:
                continue
            others = [s for p in item.outputs if p is not o for s, _ in reads_of(p)]
            own = [direct for s, direct in reads_of(o) if s is target]
            if target.buffer is None or not all(own) or any(s is target for s in others):
                drop_target(o)
                continue
            i = items.index(item)
            later = readers_of(target, i + 1)
            if later:
                outs = {id(p) for p in item.outputs}
                if any(id(s) in outs for j in range(i + 1, later[-1] + 1) for p in items[j].outputs
                       for s, _ in reads_of(p)):
                    drop_target(o)
                    continue
                items.insert(later[-1], items.pop(i))
    for i, item in enumerate(items):  # one writer moved past another's reader: that one writes a new buffer
        for o in item.outputs:
            if o.target is not None and readers_of(o.target, i + 1):
                drop_target(o)
    return items
