"""A capture made replayable (engine/capture.py records a call; this module plans and replays it).

Every buffer the captured steps touch becomes a slot of a table that a replay fills: the call's
inputs swapped in, new buffers for the outputs it returns, the persistent state it read and wrote
in place, and the buffers that lived only inside the call, which share memory where their
lifetimes do not overlap (`plan_memory`). `run_plan` runs the steps on the table.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass, field, replace
from typing import Any

from ..settings import debug_level, where
from .capture import Capture, CheckStep, FixedStep, JitError, KernelStep, Step
from .realize import GlobalCounters


@dataclass
class Plan:
    """A capture made replayable: every buffer a slot of a table filled per call."""

    steps: list[Step]  # capture.py's steps, each buffer a slot of the table
    fixed: list  # the table's entries that stay: persistent buffers and the plan's own intermediates
    inputs: dict[int, int]  # slot -> input index
    fresh: dict[int, tuple[int, type]]  # slot -> (nbytes, class): an output, new every call
    outputs: Any  # the return value's structure, tensors as (slot, shape tracker, base shape, dtype, device)
    kernels: int
    ops: int
    mem: int
    peak_bytes: int
    state_slots: list[int]  # the slots of earlier state (parameters, moments): written in place, never swapped
    kept_slots: list[int]  # buffers the call made and left held (gradients): each replay writes them again
    state: list[tuple[int, list, str]] = field(default_factory=list)  # their holders (find_holders)


def buffers_of(step: Step) -> list:
    return [step.buffer] if isinstance(step, FixedStep) else step.buffers


def with_slots(step: Step, slot_of: dict) -> Step:
    """The step with each weak reference replaced by its slot."""
    if isinstance(step, KernelStep):
        return replace(step, buffers=[slot_of[r] for r in step.buffers])
    if isinstance(step, CheckStep):
        return replace(step, low=slot_of[step.low], top=slot_of[step.top])
    return replace(step, buffer=slot_of[step.buffer])


def run_plan(plan: Plan, inputs: list, values: dict[str, int] | None = None) -> list:
    """Run the plan's steps with `inputs` swapped in and the call's Variables' `values` (by name)
    passed to the kernels that take them; returns the filled table."""
    start = time.perf_counter()
    table = list(plan.fixed)
    for slot, i in plan.inputs.items():
        table[slot] = inputs[i]
    for slot, (nbytes, cls) in plan.fresh.items():
        table[slot] = cls(nbytes)
    for step in plan.steps:
        if isinstance(step, KernelStep):
            takes = step.program.kernel.variables  # (a symbolic kernel's Variables: the call's values)
            bound = tuple(values[v.name] for v in takes) if takes else ()
            step.runtime.launch(step.program, [table[s] for s in step.buffers], bound)
        elif isinstance(step, FixedStep):
            step.rerun(table[step.buffer])
        else:  # a range check reads the bounds this call's kernels computed
            low = int(table[step.low].to_numpy(0, 1, step.dtype)[0])
            top = int(table[step.top].to_numpy(0, 1, step.dtype)[0])
            if low < 0 or top >= step.high:
                raise step.fail(low, top)
    elapsed = time.perf_counter() - start
    GlobalCounters.kernel_count += plan.kernels
    GlobalCounters.global_ops += plan.ops
    GlobalCounters.global_mem += plan.mem
    GlobalCounters.time_sum += elapsed
    if debug_level() >= 1:
        print(f"jit: replayed {plan.kernels} kernels in {elapsed * 1e3:.2f} ms")
    return table


def make_plan(cap: Capture, inputs: list, structure, name: str) -> Plan:
    """The capture as slots. A buffer the call read is one of: an input (swapped in per call); one a
    kernel of the call made that is returned (new per call), that died with the call (the plan's
    own, planned by lifetime) or that something still holds (gradients the step leaves on the
    parameters: kept, and written again by every replay, so its holder sees each call's values); or
    one from before the call that is still alive (persistent state, written in place). A buffer of
    earlier state that the call dropped makes a replay wrong, and raises. (Whether a kept buffer
    replaced state the call read, x = x + 1, is for the caller to check: jit.py's check_rebinding.)"""
    if cap.readback is not None:
        raise JitError(f"TinyJit({name}): reads a value back to Python (.item(), .numpy()) at {cap.readback}; "
                       "a replay runs no Python, so that value and whatever it decided would be frozen. "
                       "Return the tensor and read it after the call")
    for r in cap.assigns:
        node = r()
        if node is not None and node.buffer is None and node.target is not None:
            raise JitError(f"TinyJit({name}): an assign made at {where(node)} was not realized inside the "
                           "call; a replay runs only what the call ran. Realize the assigned tensor before returning")
    slot_of: dict[weakref.ref, int] = {}
    first, last = {}, {}
    steps = []
    for i, step in enumerate(cap.steps):
        refs = buffers_of(step)
        for r in refs:
            if r in cap.uploads:
                raise JitError(f"TinyJit({name}): uses data copied in from Python inside the call ({cap.uploads[r]}); "
                               "a replay would use the captured copy forever. Pass it as an argument, or keep it "
                               "in a tensor made outside and updated with assign")
            slot = slot_of.setdefault(r, len(slot_of))
            first.setdefault(slot, i)
            last[slot] = i
        steps.append(with_slots(step, slot_of))
    returned = set()
    collect_buffers(structure, returned)
    input_ids = {id(b): i for i, b in reversed(list(enumerate(inputs)))}
    fixed: list = [None] * len(slot_of)
    plan_inputs, fresh, temporary, state, kept = {}, {}, {}, [], []
    for r, slot in slot_of.items():
        buf = r()
        if buf is not None and id(buf) in input_ids:
            plan_inputs[slot] = input_ids[id(buf)]
        elif r in cap.made and buf is not None and id(buf) in returned:
            fresh[slot] = cap.made[r]
        elif r in cap.made and buf is None:
            temporary[slot] = cap.made[r]
        elif r in cap.made:
            fixed[slot] = buf
            kept.append(slot)
        elif buf is None:
            step = cap.steps[first[slot]]
            by = f" (first read by {step.program.name})" if isinstance(step, KernelStep) else ""
            raise JitError(f"TinyJit({name}): the call dropped a buffer of earlier state that its kernels read{by} "
                           "(state replaced instead of updated with assign); a replay would read stale values")
        else:
            fixed[slot] = buf
            state.append(slot)
    peak = plan_memory(temporary, first, last, fixed)
    kernels = sum(isinstance(s, KernelStep) for s in cap.steps)
    outputs = map_structure(structure, {id(r()): s for r, s in slot_of.items() if r() is not None})
    return Plan(steps, fixed, plan_inputs, fresh, outputs, kernels, cap.ops, cap.mem, peak, state, kept)


def collect_buffers(frozen, out: set) -> None:
    if frozen is None:
        return
    if frozen[0] == "tensor":
        out.add(id(frozen[1]))
        return
    for v in (frozen[1].values() if frozen[0] is dict else frozen[1]):
        collect_buffers(v, out)


def map_structure(frozen, slots: dict):
    """The frozen return value with each buffer replaced by its slot (or kept, when no kernel of the
    call touched it: a returned input or parameter that nothing wrote)."""
    if frozen is None:
        return None
    if frozen[0] == "tensor":
        _, buf, *rest = frozen
        return ("tensor", slots.get(id(buf), Kept(buf)), *rest)
    kind, items = frozen
    if kind is dict:
        return (kind, {k: map_structure(v, slots) for k, v in items.items()})
    return (kind, [map_structure(v, slots) for v in items])


class Kept:
    """A returned buffer outside the plan's table."""

    def __init__(self, buf):
        self.buf = buf


def plan_memory(temporary: dict, first: dict, last: dict, fixed: list) -> int:
    """Give each buffer that lives only inside a call memory of its own or memory a finished one of
    the same size and class gave back (greedy, in the order the buffers appear); returns the bytes
    allocated. The steps run in order, so a buffer whose last use came before another's first can
    hand it over."""
    free: dict[tuple[int, type], list] = {}
    ending: list[tuple[int, int]] = sorted((last[s], s) for s in temporary)
    held: dict[int, Any] = {}
    total = 0
    for slot in sorted(temporary, key=lambda s: first[s]):
        while ending and ending[0][0] < first[slot]:
            _, done = ending.pop(0)
            if done in held:
                free.setdefault(temporary[done], []).append(held.pop(done))
        nbytes, cls = temporary[slot]
        pool = free.get((nbytes, cls))
        if pool:
            buf = pool.pop()
        else:
            buf = cls(nbytes)
            total += nbytes
        held[slot] = buf
        fixed[slot] = buf
    return total
