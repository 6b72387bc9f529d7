"""Running a schedule: lower each kernel, render it, compile it (or find it cached), give it its
buffers and call it. `GlobalCounters` counts what ran; `DEBUG` shows it:

    DEBUG=1  kernels and time per realize        DEBUG=3  each kernel's UOps as well
    DEBUG=2  one line per kernel (shape, time,    DEBUG=4  and its generated source
             GFLOP/s, GB/s)

debug.py adds `GRAPH=1` (the lazy and kernel graphs as Graphviz files), `NANCHECK=1` (stop at the
first kernel that wrote a NaN) and the user's line in compile errors, through three marked hooks.
A graph scheduled before (by its structure) is not scheduled again (schedule_cache.py), and a
kernel seen before (by its structure: lower.structure) is neither lowered nor rendered again.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace

from . import checks, debug, jit, schedule_cache, search
from .device import buffer_class
from .lazy import LazyBuffer, numel
from .lower import Kernel, lower, structure
from .ops import Ops
from .runtime import CompileError
from .schedule import ScheduleItem
from .schedule_cache import create_schedule
from .threads import get_num_threads


class GlobalCounters:
    kernel_count: int = 0
    global_ops: int = 0  # ALU ops run, summed over kernels (an estimate: ops per iteration x iterations)
    global_mem: int = 0  # bytes the kernels wrote and read
    time_sum: float = 0.0  # seconds spent in kernels

    @staticmethod
    def reset() -> None:
        GlobalCounters.kernel_count = GlobalCounters.global_ops = GlobalCounters.global_mem = 0
        GlobalCounters.time_sum = 0.0


def debug_level() -> int:
    return int(os.environ.get("DEBUG", "0") or 0)


@dataclass
class CompiledKernel:
    """A lowered, rendered and compiled kernel, kept by its structure (lower.structure). It holds no
    buffers (they would stay alive with it): `slots` says which of a kernel's loaded inputs, in
    structure order, each argument after the output is."""

    kernel: Kernel
    source: str
    fn: object
    slots: list[int]


KERNELS: dict[tuple, CompiledKernel] = {}  # by (structure, thread setting, BEAM width)


def device_kernels(device: str):
    """A device's renderer, compiler and launcher (the `kernels` of its Buffers), before any buffer exists."""
    if device == "CPU":
        from .runtime import host_kernels

        return host_kernels
    from .cuda.runtime import runtime

    return runtime("realize")


def kernel_key(key: tuple) -> tuple:
    """What picks a kernel's options besides its structure: the thread setting and BEAM."""
    return key, get_num_threads(), search.beam_width()


def prepare(items: list[ScheduleItem], stored: set[int]) -> list[tuple]:
    """Lower and render every kernel of a schedule that was not compiled before, and compile them
    together (runtime.compile_kernels: one file per core, in parallel). Under BEAM a kernel whose
    search is not on disk yet is left for run_item: the search times it on the real buffers.
    Returns each item's (key, loaded inputs) for run_item."""
    todo: dict[tuple, tuple] = {}
    keys: list[tuple | None] = []
    for item in items:
        if numel(item.root.shape) == 0:
            keys.append(None)
            continue
        key, inputs = structure(item, stored)
        full = kernel_key(key)
        keys.append((full, inputs))
        if full in KERNELS or full in todo:
            continue
        device = device_kernels(item.root.device)
        opts = search.cached_opts(item, stored, device) if search.beam_width() else None
        if search.beam_width() and opts is None:
            continue
        kernel = lower(item, stored, opts)
        todo[full] = (item, inputs, kernel, device.renderer.render(kernel), device)
    by_device: dict[int, list[tuple]] = {}
    for full, entry in todo.items():
        by_device.setdefault(id(entry[4]), []).append((full, *entry))
    for group in by_device.values():
        device = group[0][5]
        try:
            fns = device.compile_many([(source, kernel.name) for _, _, _, kernel, source, _ in group])
        except CompileError as err:  # debug.py: say which kernel, its UOps and the user's line that built it
            _, item, _, kernel, _, _ = next((g for g in group if g[4] == getattr(err, "source", None)), group[0])
            raise debug.compile_error(err, kernel, item.root, stored) from err
        for (full, _, inputs, kernel, source, _), fn in zip(group, fns, strict=True):
            KERNELS[full] = compiled_kernel(kernel, source, fn, inputs)
    return keys


def compiled_kernel(kernel: Kernel, source: str, fn, inputs: list[LazyBuffer]) -> CompiledKernel:
    slots = [next(i for i, b in enumerate(inputs) if b is buf) for buf in kernel.buffers[kernel.outputs:]]
    return CompiledKernel(replace(kernel, buffers=[]), source, fn, slots)


def run_item(item: ScheduleItem, stored: set[int], keyed: tuple | None = None) -> None:
    root = item.root
    new = []
    for out in item.outputs:  # a new buffer, or the memory an assign writes in place (schedule.place_in_memory)
        if out.target is not None:
            out.buffer, out.target = out.target.buffer, None
            out.buffer.version += 1
        else:
            out.buffer = buffer_class("realize", out.device)(numel(out.shape) * out.dtype.itemsize)
            new.append((out.buffer, f"{out.dtype.name} {out.shape}"))
    # The device seam: the output buffer's `kernels` render, compile and launch for its device
    # (runtime.py's HostKernels on the CPU, cuda/runtime.py's Runtime on the GPU).
    device = root.buffer.kernels
    if numel(root.shape) == 0:
        return
    if keyed is None:
        key, inputs = structure(item, stored)
        keyed = kernel_key(key), inputs
    full, inputs = keyed
    compiled = KERNELS.get(full)
    if compiled is None:  # BEAM's first sight of this kernel: search on the real buffers, keep the winner
        opts = search.beam_search(item, stored, device, inputs) if search.beam_width() else None
        kernel = lower(item, stored, opts)
        source = device.renderer.render(kernel)
        try:
            fn = device.compile(source, kernel.name)
        except CompileError as err:  # debug.py: say which kernel, its UOps and the user's line that built it
            raise debug.compile_error(err, kernel, root, stored) from err
        compiled = KERNELS[full] = compiled_kernel(kernel, source, fn, inputs)
    kernel = replace(compiled.kernel, buffers=[*item.outputs, *(inputs[i] for i in compiled.slots)])
    source, fn = compiled.source, compiled.fn
    buffers = [b.base.buffer for b in kernel.buffers]
    start = time.perf_counter()
    device.launch(fn, kernel, buffers)  # on a GPU: the launch, not the run
    elapsed = time.perf_counter() - start
    iterations = numel(kernel.reduce_shape or kernel.shape)  # output entries times reduction steps
    nbytes = sum(numel(b.shape) * b.dtype.itemsize for b in kernel.buffers)
    if jit.CAPTURING:  # jit.py: a TinyJit is capturing this call's kernels
        jit.note_kernel(device, fn, compiled.kernel, buffers, new, kernel.ops * iterations, nbytes)
    for out in item.outputs:
        debug.kernel_ran(kernel, out, stored)  # debug.py: NANCHECK, and kernel names for GRAPH
    GlobalCounters.kernel_count += 1
    GlobalCounters.global_ops += kernel.ops * iterations
    GlobalCounters.global_mem += nbytes
    GlobalCounters.time_sum += elapsed
    level = debug_level()
    if level >= 2:
        gflops, gbs = kernel.ops * iterations / max(elapsed, 1e-9) / 1e9, nbytes / max(elapsed, 1e-9) / 1e9
        print(f"*** {GlobalCounters.kernel_count:4d} {kernel.name:<40} {elapsed * 1e6:9.1f} us "
              f"{gflops:8.2f} GFLOP/s {gbs:8.2f} GB/s  {' '.join(str(o) for o in kernel.opts)}")
    if level >= 3:
        print("\n".join(repr(u) for u in kernel.uops))
    if level >= 4:
        print(source)


def copy_back(outs: list[LazyBuffer]) -> None:
    """Assigns that wrote a new buffer (schedule.drop_target): one copy kernel each puts the values
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
    stored = {id(out) for item in items for out in item.outputs}
    start, count = time.perf_counter(), GlobalCounters.kernel_count
    for item, keyed in zip(items, prepare(items, stored), strict=True):
        run_item(item, stored, keyed)
    if debug.enabled("GRAPH"):  # debug.py: before the computed bases forget their sources
        debug.write_graphs(outs, items, stored)
    for out in (out for item in items for out in item.outputs):
        out.op, out.srcs, out.arg = Ops.BUFFER, (), None
    copy_back([out for item in items for out in item.outputs if out.copy_back is not None])
    for check in pending:
        checks.verify(check)
    if debug_level() >= 1 and items:
        stats = schedule_cache.STATS
        print(f"realize: {GlobalCounters.kernel_count - count} kernels in {(time.perf_counter() - start) * 1e3:.2f} ms "
              f"(schedule cache: {stats.hits} hits, {stats.misses} misses)")
