"""VIZ=1: a recording of what the compiler did, for `sitp viz`'s page (common/viz) and its JSON.

Told of each realize (engine/realize.WATCHERS) while a recording is on, it keeps, before the computed
bases forget their sources:
- the lazy graph of the realize: every base and view it computed, with its op, shape, dtype and the
  user's line that made it, the buffers it read, and which kernel computed each base;
- each kernel the first time its program runs: its options, the passes that changed it, its buffers,
  and its UOps and source after the core alone, then after each of those passes in the table's order
  (passes.py), the kernel lowered again with the passes so far, each step stored as a diff of the one
  before; the source that ran (BEAM's options, where BEAM chose them);
- each launch's time.
A TinyJit's replays run no realize: told of each plan a TinyJit makes (jit.JIT_WATCHERS), the recording
times its kernels' launches from then on, replay by replay.

Nothing of this runs while no recording is on: the watchers return at their first line, and a TinyJit
made then replays untimed.
"""

from __future__ import annotations

import atexit
import difflib
import json
import linecache
import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..codegen.heuristics import heuristic_choice
from ..codegen.lower import lower
from ..device import runtime_of
from ..engine import program_cache
from ..engine.capture import KernelStep
from ..engine.debug import fused_bases
from ..engine.identity import kernel_key
from ..engine.realize import Ran
from ..graph.lazy import numel
from ..passes import TABLE, Pass, Phase, active, on
from ..settings import beam_width, cache_dir, enabled
from ..threads import get_num_threads

KERNEL_PHASES = (Phase.OPTIONS, Phase.LOWER, Phase.UOPS, Phase.RENDER)  # the passes that act on one kernel
CONTEXT = 3  # unchanged lines shown around each change of a step's diff
MAX_LINES = 400  # of a step's UOps, source or diff kept (a large kernel's vectorized UOps run to thousands)


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


# ---- the graph of a realize ----

def site_of(b) -> dict | None:
    """The user's line that made a node: file, line number and the line's text."""
    site = getattr(b, "site", None)
    if site is None:
        return None
    return {"file": site[0], "line": site[1], "code": linecache.getline(site[0], site[1]).strip()}


def describe_arg(b) -> str:
    if b.arg is None or b.op.name == "CAST":
        return ""
    text = str(b.arg)
    return text if len(text) <= 40 else text[:37] + "..."


def graph_of(outs: list, items: list) -> dict:
    """The realize's lazy graph (every view and base down to the buffers realized before) and each base's
    kernel: nodes by index, edges as [source, reader] index pairs."""
    kernel_of: dict[int, int] = {}
    for i, item in enumerate(items):
        for b in fused_bases(item.root, item.stored or frozenset()):
            kernel_of.setdefault(id(b), i)
    index: dict[int, int] = {}
    order, stack = [], list(outs)
    while stack:
        v = stack.pop()
        if id(v) in index:
            continue
        index[id(v)] = len(order)
        order.append(v)
        stack.extend(sources(v))
    nodes = [node_of(v, kernel_of) for v in order]
    edges = [[index[id(s)], i] for i, v in enumerate(order) for s in sources(v)]
    return {"nodes": nodes, "edges": edges}


def sources(v) -> list:
    """What a node of the drawn graph reads: a view its base, a base its sources (a buffer nothing)."""
    if not v.is_base:
        return [v.base]
    return [] if v.op.name == "BUFFER" else list(v.srcs)


def node_of(v, kernel_of: dict[int, int]) -> dict:
    node = {"op": "VIEW" if not v.is_base else v.op.name, "shape": [str(n) for n in v.shape], "dtype": v.dtype.name}
    if v.is_base:
        node.update(arg=describe_arg(v), site=site_of(v), before=v.op.name == "BUFFER", kernel=kernel_of.get(id(v)))
    return node


# ---- a kernel, pass by pass ----

@contextmanager
def passes_set(names: list[str]):
    """PASSES set to exactly these passes (none: the core alone) inside the block."""
    before = os.environ.get("PASSES")
    os.environ["PASSES"] = ",".join(names) or "none"
    try:
        yield
    finally:
        if before is None:
            del os.environ["PASSES"]
        else:
            os.environ["PASSES"] = before


def capped(text: str) -> str:
    lines = text.splitlines()
    if len(lines) <= MAX_LINES:
        return text
    return "\n".join([*lines[:MAX_LINES], f"... {len(lines) - MAX_LINES} more lines (the recording keeps {MAX_LINES})"])


def diff(before: str, after: str) -> list[list[str]]:
    """The lines that changed from before to after, with CONTEXT lines around each change: [tag, line]
    with tag "+" (added), "-" (removed), " " (kept) or "@" (a gap of unchanged lines); at most MAX_LINES."""
    out = []
    for group in difflib.SequenceMatcher(None, before.splitlines(), after.splitlines()).get_grouped_opcodes(CONTEXT):
        out.append(["@", f"lines {group[0][1] + 1}.. / {group[0][3] + 1}.."])
        a, b = before.splitlines(), after.splitlines()
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend([" ", line] for line in a[i1:i2])
                continue
            out.extend(["-", line] for line in a[i1:i2])
            out.extend(["+", line] for line in b[j1:j2])
    if len(out) > MAX_LINES:
        out = [*out[:MAX_LINES], ["@", f"... {len(out) - MAX_LINES} more lines of this diff (the recording keeps "
                                       f"{MAX_LINES})"]]
    return out


def pass_steps(item, program, renderer) -> list[dict]:
    """The kernel after the core alone (with the passes that shaped its schedule item, which lowering
    reads), then after each pass that changed it, added in the table's order: its options, UOps and
    source at each step, the first in full and each next one as a diff of the one before."""
    on_now = active()
    shaping = [p.value for p in TABLE if p in on_now and TABLE[p].phase not in KERNEL_PHASES]
    changed = [p.value for p in TABLE if p.value in program.kernel.passes and TABLE[p].phase in KERNEL_PHASES]
    steps, names, last = [], list(shaping), None
    for added in [None, *changed]:
        names += [added] if added else []
        with passes_set(names):
            kernel = lower(item, renderer)
            source = renderer.render(kernel)
        uops = "\n".join(repr(u) for u in kernel.uops)
        step = {"pass": added or "core", "opts": [str(o) for o in kernel.opts]}
        if last is None:
            step.update(uops=capped(uops), source=capped(source))
        else:
            step.update(uops_diff=diff(last[0], uops), source_diff=diff(last[1], source))
        steps.append(step)
        last = (uops, source)
    if last[1] != program.source:  # BEAM's options, not the heuristics'
        steps.append({"pass": "beam", "opts": [str(o) for o in program.kernel.opts],
                      "uops_diff": [], "source_diff": diff(last[1], program.source)})
    return steps


def cached_steps(item, program, renderer) -> list[dict]:
    """pass_steps, kept on disk beside the lowered kernels (engine/program_cache.py, under its key: the kernel's
    identity, the renderer, the machine and this package's code): lowering a kernel once per pass is most of
    what a recording costs, and a second recording of a program finds its kernels' steps there. (Not under
    BEAM, whose options the key does not hold.)"""
    if beam_width():
        return pass_steps(item, program, renderer)
    path = cache_dir() / "viz" / f"{program_cache.disk_key(kernel_key(item)[0], renderer).name}.json"
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        pass
    steps = pass_steps(item, program, renderer)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as tmp:  # renamed into place: all or none
        json.dump(steps, tmp)
    os.replace(tmp.name, path)
    return steps


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

