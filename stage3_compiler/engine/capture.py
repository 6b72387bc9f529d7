"""What a TinyJit call ran, recorded as it runs: the engine's leaf that the rest reports to.

While a capture is under way (`CAPTURING` holds it), realize reports each kernel it launches, the
API reports each fixed kernel (a random draw, an arange), each upload from Python and each value
read back, the range checks report the bounds they read, and the graph's assign nodes and the
tensors an assign rebinds are noted. engine/replay.py turns the record into a plan; jit.py
(TinyJit) decides when to capture. Buffers are held by weak reference, so the ones the call let go
of can be told from the ones something still holds.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..codegen.program import Program
from ..graph import lazy
from ..settings import user_line


class JitError(RuntimeError):
    pass


@dataclass
class KernelStep:
    runtime: Any  # the device's runtime (cpu/runtime.py, cuda/runtime.py)
    program: Program
    buffers: list  # weak references while capturing; slots in a plan


@dataclass
class FixedStep:
    """A fixed kernel (random numbers, iota): `rerun(buffer)` runs it again into a buffer."""

    rerun: Callable[[Any], None]
    buffer: Any  # a weak reference while capturing; a slot in a plan


@dataclass
class CheckStep:
    """A range check (engine/checks.py): the bounds it read, read again after the kernels made them."""

    fail: Callable[[int, int], Exception]
    low: Any  # weak references while capturing; slots in a plan
    top: Any
    high: int
    dtype: Any

    @property
    def buffers(self) -> list:
        return [self.low, self.top]


Step = KernelStep | FixedStep | CheckStep


@dataclass
class Capture:
    steps: list[Step] = field(default_factory=list)
    made: dict[weakref.ref, tuple[int, type]] = field(default_factory=dict)  # allocated in the call: nbytes, class
    what: dict[weakref.ref, str] = field(default_factory=dict)  # what each of those holds, for errors
    uploads: dict[weakref.ref, str] = field(default_factory=dict)  # copied in from Python in the call: its line
    readback: str | None = None  # the line of the first value read back to Python
    assigns: list[weakref.ref] = field(default_factory=list)  # the in-place writes the call asked for
    rebound: list[weakref.ref] = field(default_factory=list)  # tensors an assign pointed at new values
    ops: int = 0  # GlobalCounters' sums over the kernels
    mem: int = 0


CAPTURING: list[Capture] = []  # the capture under way


def start() -> Capture:
    cap = Capture()
    CAPTURING.append(cap)
    lazy.assign_watchers.append(note_assign)
    return cap


def stop() -> None:
    CAPTURING.pop()
    lazy.assign_watchers.remove(note_assign)


def held(buf) -> weakref.ref:
    """A weak reference to buf, hashed now: a dead one cannot be hashed, and the plan looks them up."""
    ref = weakref.ref(buf)
    hash(ref)
    return ref


def note_kernel(runtime, program: Program, buffers: list, new: list, ops: int, nbytes: int) -> None:
    """A kernel ran on `buffers`; `new` are the (buffer, what it holds) it wrote that were allocated for it."""
    cap = CAPTURING[0]
    for b, what in new:
        cap.made[weakref.ref(b)] = (b.nbytes, type(b))
        cap.what[weakref.ref(b)] = f"{what}, written by {program.name}"
    cap.steps.append(KernelStep(runtime, program, [held(b) for b in buffers]))
    cap.ops += ops
    cap.mem += nbytes


def note_fixed(buf, what: str, rerun: Callable[[Any], None]) -> None:
    """A fixed kernel's output (random numbers, iota), and how to run it again into another buffer."""
    cap = CAPTURING[0]
    cap.made[weakref.ref(buf)] = (buf.nbytes, type(buf))
    cap.what[weakref.ref(buf)] = what
    cap.steps.append(FixedStep(rerun, held(buf)))


def note_check(fail, low_buf, top_buf, high: int, dtype) -> None:
    """A range check read these bounds: a replay reads them again, right where the call did."""
    CAPTURING[0].steps.append(CheckStep(fail, held(low_buf), held(top_buf), high, dtype))


def note_upload(buf) -> None:
    CAPTURING[0].uploads[weakref.ref(buf)] = user_line()


def note_readback() -> None:
    cap = CAPTURING[0]
    cap.readback = cap.readback or user_line()


def note_assign(node) -> None:
    """An assign node of the graph (graph/lazy.py's assign_watchers): the call must realize it."""
    CAPTURING[0].assigns.append(weakref.ref(node))


def note_rebound(tensor) -> None:
    """A tensor an assign pointed at new values: realized at the end of the call, as a replay would."""
    CAPTURING[0].rebound.append(weakref.ref(tensor))
