"""VIZ=1: a recording of what the compiler did, for `sitp viz`'s page (common/viz) and its JSON.

Told of each realize (engine/realize.WATCHERS) while a recording is on, it keeps, before the computed
bases forget their sources:
- the lazy graph of the realize (graph.py);
- each kernel the first time its program runs: its options and why (the heuristics' rules, or BEAM), the
  passes that changed it, its buffers, its steps from the core alone through each of those passes
  (steps.py) and the source that ran;
- each launch's time.
A TinyJit's replays run no realize: told of each plan a TinyJit makes (jit.JIT_WATCHERS), the recording
times its kernels' launches from then on, replay by replay.

Nothing of this runs while no recording is on: the watchers return at their first line, and a TinyJit
made then replays untimed.
"""

from __future__ import annotations

import atexit
import json
import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..codegen.heuristics import heuristic_choice
from ..device import runtime_of
from ..engine.capture import KernelStep
from ..engine.debug import fused_bases
from ..engine.realize import Ran
from ..graph.lazy import numel
from ..passes import TABLE, Pass, active, on
from ..settings import beam_width, enabled
from ..threads import get_num_threads
from .graph import graph_of, site_of
from .steps import cached_steps


@dataclass
class Recording:
    """What the watchers saw, as plain data (`to_json`)."""

    realizes: list[dict] = field(default_factory=list)
    programs: dict[str, dict] = field(default_factory=dict)  # by key: "p0", "p1", ... in order of first run
    jits: list[dict] = field(default_factory=list)
    keys: dict[int, str] = field(default_factory=dict)  # id(Program) -> its key
    held: list = field(default_factory=list)  # the programs keyed, kept alive so that no id is reused

    def to_json(self) -> dict:
        return {"realizes": self.realizes, "programs": self.programs, "jits": self.jits,
                "passes": {p.value: {"phase": info.phase.name.lower(), "what": info.what, "where": list(info.where)}
                           for p, info in TABLE.items()}}


_active: list[Recording] = []  # the recording on now, if any


def current() -> Recording | None:
    return _active[-1] if _active else None


@contextmanager
def recording():
    """`with recording() as r:` records every realize and TinyJit of the block into r."""
    r = Recording()
    _active.append(r)
    try:
        yield r
    finally:
        _active.remove(r)


def buffer_of(b, role: str) -> dict:
    return {"role": role, "shape": [str(n) for n in b.shape], "dtype": b.dtype.name,
            "bytes": numel(b.shape) * b.dtype.itemsize}


def loaded(item) -> list:
    """The bases the kernel loads: realized before, or written by another kernel of its schedule."""
    stored, found = item.stored or frozenset(), {}
    for b in fused_bases(item.root, stored):
        for s in b.srcs:
            if s.base is not item.root and (s.base.buffer is not None or id(s.base) in stored) \
                    and s.base.op.name != "CONST":
                found[id(s.base)] = s.base
    return list(found.values())


def program_record(item, program) -> dict:
    kernel = program.kernel
    runtime = runtime_of("realize", item.root.device)
    why = options_why(item, runtime.renderer)
    buffers = [buffer_of(o, "output") for o in item.outputs] + [buffer_of(b, "input") for b in loaded(item)]
    return {"name": kernel.name, "device": item.root.device, "source": program.source,
            "opts": [str(o) for o in kernel.opts], "why": why, "passes": list(kernel.passes),
            "threads": kernel.threads, "buffers": buffers, "bytes": sum(b["bytes"] for b in buffers),
            "flops": kernel.ops * numel(kernel.reduce_shape or kernel.shape),
            "site": site_of(item.root), "steps": cached_steps(item, program, runtime.renderer)}


def options_why(item, renderer) -> list[str]:
    """Why the kernel has its options: BEAM's search, or each rule of the heuristics pass that chose one."""
    if beam_width():
        return [f"BEAM={beam_width()}: the fastest options of a search, timed on the real buffers"]
    if not on(Pass.HEURISTICS):
        return ["none: the heuristics pass is off (PASSES)"]
    choice = heuristic_choice(item, renderer, get_num_threads())
    if not choice.opts:
        return ["none: no rule of the heuristics pass applies to this kernel"]
    return [f"{o}: {why}" for o, why in zip(choice.opts, choice.why, strict=True)]


# ---- the watchers ----

def watch_realize(outs: list, items: list, ran: list[Ran]) -> None:
    r = current()
    if r is None:
        return
    kernels = []
    for one in ran:
        key = r.keys.get(id(one.program))
        if key is None:
            key = r.keys[id(one.program)] = f"p{len(r.programs)}"
            r.held.append(one.program)
            r.programs[key] = program_record(one.item, one.program)
        kernels.append({"program": key, "item": items.index(one.item), "seconds": one.seconds})
    r.realizes.append({"graph": graph_of(outs, items), "items": len(items), "kernels": kernels,
                       "passes": sorted(p.value for p in active()), "at": time.time()})


class TimedRuntime:
    """A runtime whose launches a recording times, for one kernel step of a TinyJit's plan."""

    def __init__(self, runtime, jit: dict, index: int):
        self.runtime, self.jit, self.index = runtime, jit, index

    def __getattr__(self, name: str):  # everything but launch is the runtime's own
        return getattr(self.runtime, name)

    def launch(self, program, buffers, bound):
        start = time.perf_counter()
        self.runtime.launch(program, buffers, bound)
        self.runtime.synchronize()  # (a GPU's launch returns before its kernel has run)
        seconds = time.perf_counter() - start
        if self.index == 0:
            self.jit["replays"].append([0.0] * len(self.jit["kernels"]))
        if self.jit["replays"]:
            self.jit["replays"][-1][self.index] = seconds


def watch_jit(name: str, plan) -> None:
    r = current()
    if r is None:
        return
    steps = [s for s in plan.steps if isinstance(s, KernelStep)]
    jit = {"name": name, "kernels": [r.keys.get(id(s.program)) for s in steps], "replays": []}
    r.jits.append(jit)
    for i, s in enumerate(steps):
        s.runtime = TimedRuntime(s.runtime, jit, i)


# ---- VIZ=1 in any program ----

def save(r: Recording, path: Path) -> Path:
    path.write_text(json.dumps(r.to_json()))
    return path


def start_from_environment() -> None:
    """VIZ=1: record the whole program and write the recording when it exits, to $VIZ_FILE (default: a
    file in the temp directory), printing where and how to see it."""
    if not enabled("VIZ"):
        return
    r = Recording()
    _active.append(r)
    path = Path(os.environ.get("VIZ_FILE") or Path(tempfile.gettempdir()) / f"sitp-viz-{os.getpid()}.json")

    def at_exit() -> None:
        save(r, path)
        print(f"VIZ: recorded {len(r.realizes)} realizes, {len(r.programs)} kernels in {path}; "
              f"see them with: sitp viz --load {path}")

    atexit.register(at_exit)

