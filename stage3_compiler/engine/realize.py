"""Running a schedule: each kernel is lowered, rendered and compiled into a Program (or found, by its
identity: engine/identity.py), given its buffers and launched on its device's runtime.
`GlobalCounters` counts what ran; `DEBUG` shows it:

    DEBUG=1  kernels and time per realize        DEBUG=3  each kernel's UOps as well
    DEBUG=2  one line per kernel (shape, time,    DEBUG=4  and its generated source
             GFLOP/s, GB/s)

debug.py adds `NANCHECK=1` (stop at the first kernel that wrote a NaN) and the user's line in compile
errors; the tools in WATCHERS are told of each realize (viz/: GRAPH=1, VIZ=1); a capturing TinyJit is told
of each launch (capture.py); the range checks waiting for a realize are computed with it
(checks.py). A graph scheduled before (by its structure) is not scheduled again (schedule_cache.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from ..codegen.item import ScheduleItem
from ..codegen.lower import lower
from ..codegen.program import CompileError, Program
from ..codegen.uops import Kernel
from ..device import buffer_class, runtime_of
from ..graph.lazy import LazyBuffer, numel
from ..ops import Ops
from ..settings import beam_width, debug_level
from . import capture, checks, debug, program_cache, schedule_cache, search
from .identity import kernel_key
from .schedule_cache import create_schedule


class GlobalCounters:
    kernel_count: int = 0
    global_ops: int = 0  # ALU ops run, summed over kernels (an estimate: ops per iteration x iterations)
    global_mem: int = 0  # bytes the kernels wrote and read
    time_sum: float = 0.0  # seconds spent in kernels

    @staticmethod
    def reset() -> None:
        GlobalCounters.kernel_count = GlobalCounters.global_ops = GlobalCounters.global_mem = 0
        GlobalCounters.time_sum = 0.0


PROGRAMS: dict[tuple, Program] = {}  # by kernel_key: a kernel seen before is not lowered again


@dataclass
class Ran:
    """A kernel of a realize that ran: its item, the program and the seconds its launch took."""

    item: ScheduleItem
    program: Program
    seconds: float


# Tools watching the realizes (viz/: GRAPH=1's files, VIZ=1's page): each `watcher(outs, items, ran)` is
# called after the kernels ran, before the computed bases forget their sources.
WATCHERS: list = []


@dataclass
class Job:
    """One kernel of a schedule on its way to run."""

    item: ScheduleItem
    key: tuple | None  # engine/identity.kernel_key; None for an empty output (nothing to run)
    inputs: list[LazyBuffer]  # the bases it loads, in identity order
    values: dict[str, int]  # its Variables' bound values, by name (identity.bound_values)


@dataclass
class Lowered:
    """A kernel lowered and rendered, waiting to be compiled with the others of its realize."""

    job: Job
    kernel: Kernel
    source: str
    runtime: object
    disk: program_cache.DiskKey | None  # where it is kept lowered on disk (None under BEAM)
    slots: list[int] | None = None  # known when it came from the disk


def make_program(kernel: Kernel, source: str, fn, inputs: list[LazyBuffer]) -> Program:
    slots = [next(i for i, b in enumerate(inputs) if b is buf) for buf in kernel.buffers[kernel.outputs:]]
    return Program(replace(kernel, buffers=[]), source, fn, slots)


def identify(items: list[ScheduleItem]) -> list[Job]:
    jobs = []
    for item in items:
        if numel(item.root.shape) == 0:
            jobs.append(Job(item, None, [], {}))
        else:
            jobs.append(Job(item, *kernel_key(item)))
    return jobs


def prepare(jobs: list[Job]) -> None:
    """Lower and render every kernel of a schedule that has no Program yet (or find it lowered on disk:
    program_cache.py), and compile them together (cpu/compiler.compile_kernels: one file per core, in
    parallel). Under BEAM a kernel whose search is not on disk yet is left for run_job: the search
    times it on the real buffers."""
    todo: dict[tuple, Lowered] = {}
    for job in jobs:
        if job.key is None or job.key in PROGRAMS or job.key in todo:
            continue
        runtime = runtime_of("realize", job.item.root.device)
        opts = search.cached_opts(job.item, runtime) if beam_width() else None
        if beam_width() and opts is None:
            continue
        disk = None if beam_width() else program_cache.disk_key(job.key, runtime.renderer)
        found = None if disk is None else program_cache.load(disk)
        if found is not None:
            todo[job.key] = Lowered(job, found.kernel, found.source, runtime, disk, found.slots)
            continue
        kernel = lower(job.item, runtime.renderer, opts)
        todo[job.key] = Lowered(job, kernel, runtime.renderer.render(kernel), runtime, disk)
    by_runtime: dict[int, list[Lowered]] = {}
    for entry in todo.values():
        by_runtime.setdefault(id(entry.runtime), []).append(entry)
    for group in by_runtime.values():
        try:
            fns = group[0].runtime.compile_many([(e.source, e.kernel.name) for e in group])
        except CompileError as err:  # debug.py: say which kernel, its UOps and the user's line that built it
            bad = next((e for e in group if e.source == getattr(err, "source", None)), group[0])
            raise debug.compile_error(err, bad.kernel, bad.job.item) from err
        for e, fn in zip(group, fns, strict=True):
            if e.slots is not None:
                PROGRAMS[e.job.key] = Program(e.kernel, e.source, fn, e.slots)
                continue
            program = PROGRAMS[e.job.key] = make_program(e.kernel, e.source, fn, e.job.inputs)
            if e.disk is not None:
                program_cache.store(e.disk, program)


def search_program(job: Job, runtime) -> Program:
    """BEAM's first sight of this kernel: search its options on the real buffers, keep the winner."""
    opts = search.beam_search(job.item, runtime, job.inputs) if beam_width() else None
    kernel = lower(job.item, runtime.renderer, opts)
    source = runtime.renderer.render(kernel)
    try:
        fn = runtime.compile(source, kernel.name)
    except CompileError as err:
        raise debug.compile_error(err, kernel, job.item) from err
    program = PROGRAMS[job.key] = make_program(kernel, source, fn, job.inputs)
    return program


def allocate(item: ScheduleItem) -> list[tuple]:
    """Each output's memory: a new buffer, or the one an assign writes in place (memory.py). Returns
    the new ones, with what they hold (a capturing TinyJit plans their memory)."""
    new = []
    for out in item.outputs:
        if out.target is not None:
            out.buffer, out.target = out.target.buffer, None
            out.buffer.version += 1
        else:
            out.buffer = buffer_class("realize", out.device)(numel(out.shape) * out.dtype.itemsize)
            new.append((out.buffer, f"{out.dtype.name} {out.shape}"))
    return new


def run_job(job: Job) -> Ran | None:
    item = job.item
    new = allocate(item)
    if job.key is None:
        return None
    runtime = runtime_of("realize", item.root.device)  # the device seam
    program = PROGRAMS.get(job.key) or search_program(job, runtime)
    kernel = replace(program.kernel, buffers=[*item.outputs, *(job.inputs[i] for i in program.slots)])
    buffers = [b.base.buffer for b in kernel.buffers]
    values = tuple(job.values[v.name] for v in kernel.variables)
    start = time.perf_counter()
    runtime.launch(program, buffers, values)  # on a GPU: the launch, not the run
    elapsed = time.perf_counter() - start
    ops = kernel.ops * numel(kernel.reduce_shape or kernel.shape)  # per step x output entries x reduction steps
    nbytes = sum(numel(b.shape) * b.dtype.itemsize for b in kernel.buffers)
    if capture.CAPTURING:  # a TinyJit is capturing this call's kernels
        capture.note_kernel(runtime, program, buffers, new, ops, nbytes)
    for out in item.outputs:
        debug.kernel_ran(kernel, out, item.stored)  # NANCHECK
    count(kernel, program.source, elapsed, ops, nbytes)
    return Ran(item, program, elapsed)


def count(kernel: Kernel, source: str, elapsed: float, ops: int, nbytes: int) -> None:
    GlobalCounters.kernel_count += 1
    GlobalCounters.global_ops += ops
    GlobalCounters.global_mem += nbytes
    GlobalCounters.time_sum += elapsed
    level = debug_level()
    if level >= 2:
        gflops, gbs = ops / max(elapsed, 1e-9) / 1e9, nbytes / max(elapsed, 1e-9) / 1e9
        print(f"*** {GlobalCounters.kernel_count:4d} {kernel.name:<40} {elapsed * 1e6:9.1f} us "
              f"{gflops:8.2f} GFLOP/s {gbs:8.2f} GB/s  {' '.join(str(o) for o in kernel.opts)}"
              + (f"  passes: {','.join(kernel.passes)}" if kernel.passes else ""))
    if level >= 3:
        print("\n".join(repr(u) for u in kernel.uops))
    if level >= 4:
        print(source)


def copy_back(outs: list[LazyBuffer]) -> None:
    """Assigns that wrote a new buffer (memory.drop_target): one copy kernel each puts the values
    into the target's buffer, which the assigned tensor then holds again."""
    if not outs:
        return
    copies = [LazyBuffer.from_buffer(o.buffer, o.shape, o.dtype, o.device).copy(o.copy_back) for o in outs]
    realize(copies)
    for o, c in zip(outs, copies, strict=True):
        o.buffer, o.copy_back = c.buffer, None


def realize(outs: list[LazyBuffer]) -> None:
    """Compute every base the outputs need, in order; afterwards each computed base holds a Buffer and
    forgets its sources, so the graph behind it can be freed."""
    pending = checks.take_pending()  # index checks left for this realize: their bounds join its kernels
    items = create_schedule(outs + [b for c in pending for b in (c.low, c.top)])
    start, kernels_before = time.perf_counter(), GlobalCounters.kernel_count
    jobs = identify(items)
    prepare(jobs)
    ran = [r for r in (run_job(job) for job in jobs) if r is not None]
    for watcher in WATCHERS:
        watcher(outs, items, ran)
    for out in (out for item in items for out in item.outputs):
        out.op, out.srcs, out.arg = Ops.BUFFER, (), None
    copy_back([out for item in items for out in item.outputs if out.copy_back is not None])
    for check in pending:
        checks.verify(check)
    if debug_level() >= 1 and items:
        stats = schedule_cache.STATS
        print(f"realize: {GlobalCounters.kernel_count - kernels_before} kernels in "
              f"{(time.perf_counter() - start) * 1e3:.2f} ms "
              f"(schedule cache: {stats.hits} hits, {stats.misses} misses)")
