"""BEAM search: pick a kernel's options (opts.py) by timing them, not by rule.

With `BEAM=n` set, the first time a kernel is met its options are searched on the real input
buffers (the outputs go to scratch buffers, so nothing the program holds is written):

- round 0 times no options and the heuristic ones (codegen/heuristics.py);
- each round extends every one of the n best lists found so far by one more option (every UPCAST,
  UNROLL, SPLIT, BLOCK and THREAD that fits the kernel), drops the ones that render to a source
  already timed, compiles the rest together in batches (cpu/compiler.compile_kernels: one file per core,
  in parallel) and times each: the least of 3 runs, stopping after one run when that one is 3x the
  best so far;
- it stops after two rounds in a row find nothing 1% faster, or when the kernel's budget (`BEAM_BUDGET`
  seconds, default 30) is spent: the budget is checked before each batch of a round, so a search
  overruns it by one batch's compile and runs at most;
- a winner that is not the heuristic options must then beat them by 1% again in a duel: the two
  run in turns, CONFIRM_RUNS each, the least of each counted. A machine whose other programs come
  and go (a shared VM, where one kernel's runs vary widely from one process to the next) crowns a
  candidate by a lucky run; in the GEMM leaderboard such winners had lost to the heuristics
  (benchmarks/results/stage3_rule_measurements.md).

The winner is written to disk (under `$SITP_CACHE/stage3/beam`) by a hash of the kernel's
unoptimized source (engine/identity.search_key), the device, the compiler and CPU, and the thread
setting: a second run of the same program searches nothing. Every option but SPLIT keeps each
output's sum in the same order; a winner with SPLIT folds a sum in another order (a max gives the
same bits). `STATS` sums what the searches cost.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from ..codegen.heuristics import heuristic_opts
from ..codegen.item import ScheduleItem
from ..codegen.lower import lower
from ..codegen.opts import Opt, OptError, OptOps, apply_opts, reduce_axes
from ..codegen.program import Program
from ..codegen.tiles import tiled_item
from ..codegen.uops import Kernel
from ..cpu.compiler import compile_jobs
from ..device import buffer_class
from ..graph.lazy import LazyBuffer, numel
from ..passes import Pass, on
from ..settings import beam_width, cache_dir, debug_level
from ..threads import get_num_threads
from .identity import search_key

RUNS = 3
EARLY_STOP = 3.0  # a first run this many times the best so far is not run again
MIN_GAIN = 0.99  # a round that does not beat the best by 1% is idle
PATIENCE = 2  # idle rounds in a row that end the search (an option can pay only with the next one)
BATCH_PER_JOB = 4  # candidates a compile job builds between two looks at the budget
CONFIRM_RUNS = 7  # runs each of the winner and the heuristic options take, in turns, in the final duel


def budget_s() -> float:
    return float(os.environ.get("BEAM_BUDGET", "30"))


@dataclass
class SearchStats:
    kernels: int = 0  # kernels searched (not found on disk)
    candidates: int = 0  # option lists timed
    seconds: float = 0.0  # wall time searching (compiles and runs)
    cached: int = 0  # kernels whose winner came from disk


STATS = SearchStats()


def cache_path(key: str):
    return cache_dir() / "beam" / f"{key}.json"


def cached_opts(item: ScheduleItem, runtime) -> tuple[Opt, ...] | None:
    """The options an earlier search picked for this kernel, or None."""
    path = cache_path(search_key(item, runtime))
    if not path.exists():
        return None
    try:
        opts = tuple(Opt(OptOps[op], axis, amount) for op, axis, amount in json.loads(path.read_text())["opts"])
        apply_opts(item, opts, runtime.renderer)
    except (ValueError, KeyError, TypeError):  # written by another version: search again
        return None
    STATS.cached += 1
    return opts


def actions(item: ScheduleItem, renderer) -> list[Opt]:
    """Every single option a search may add (apply_opts says which fit a given list)."""
    out = [Opt(OptOps.UPCAST, axis, amount) for axis, n in enumerate(item.root.shape) if n > 1
           for amount in (2, 4, 8, 16)]
    if reduce_axes(item):
        out += [Opt(OptOps.UNROLL, reduce_axes(item)[-1], amount) for amount in (2, 4, 8)]
        out += [Opt(OptOps.SPLIT, reduce_axes(item)[-1], amount) for amount in (4, 8, 16)]
    if renderer.loop_blocks:
        out += [Opt(OptOps.BLOCK, axis, amount) for axis, n in enumerate(item.root.shape) if n > 1
                for amount in (4, 8, 16, 32, 64)]
    if renderer.threads and get_num_threads() > 1:
        out.append(Opt(OptOps.THREAD, 0, get_num_threads()))
    return out


def fits(item: ScheduleItem, opts: tuple[Opt, ...], renderer) -> bool:
    try:
        apply_opts(item, opts, renderer)
    except OptError:
        return False
    return True


class Timer:
    """Compiles and times option lists of one kernel on its real inputs and scratch outputs."""

    def __init__(self, item: ScheduleItem, runtime, inputs: list[LazyBuffer], deadline: float):
        self.item, self.runtime, self.inputs = item, runtime, inputs
        self.deadline = deadline  # perf_counter time after which no new batch starts
        self.scratch = [buffer_class("beam", o.device)(numel(o.shape) * o.dtype.itemsize) for o in item.outputs]
        self.sources: set[str] = set()
        self.best = float("inf")
        self.sync = getattr(getattr(runtime, "backend", None), "synchronize", lambda: None)

    def time(self, candidates: list[tuple[Opt, ...]]) -> dict[tuple[Opt, ...], float]:
        lowered = []
        for opts in candidates:
            found = self.lowered(opts)
            if found[2] not in self.sources:  # two lists that render alike are timed once
                self.sources.add(found[2])
                lowered.append(found)
        times: dict[tuple[Opt, ...], float] = {}
        batch = BATCH_PER_JOB * compile_jobs()
        for first in range(0, len(lowered), batch):
            if first and time.perf_counter() > self.deadline:
                break  # the budget is spent: the rest of the round is not compiled
            self.time_batch(lowered[first:first + batch], times)
        return times

    def lowered(self, opts: tuple[Opt, ...]) -> tuple[tuple[Opt, ...], Kernel, str]:
        kernel = lower(self.item, self.runtime.renderer, opts)
        return opts, kernel, self.runtime.renderer.render(kernel)

    def compile(self, lowered: list[tuple]) -> list[Program]:
        """Each (opts, kernel, source) compiled, all together."""
        fns = self.runtime.compile_many([(source, kernel.name) for _, kernel, source in lowered])
        return [Program(kernel, source, fn, []) for (_, kernel, source), fn in zip(lowered, fns, strict=True)]

    def run(self, program: Program) -> float:
        """One run's seconds, on the real inputs and the scratch outputs."""
        buffers = self.scratch + [b.base.buffer for b in program.kernel.buffers[program.kernel.outputs:]]
        start = time.perf_counter()
        self.runtime.launch(program, buffers)
        self.sync()
        return time.perf_counter() - start

    def time_batch(self, lowered: list[tuple], times: dict) -> None:
        for (opts, _, _), program in zip(lowered, self.compile(lowered), strict=True):
            best = float("inf")
            for run in range(RUNS):
                best = min(best, self.run(program))
                if run == 0 and best > EARLY_STOP * self.best:
                    break
            times[opts] = best
            self.best = min(self.best, best)

    def duel(self, first: tuple[Opt, ...], second: tuple[Opt, ...], runs: int) -> tuple[float, float]:
        """The least of `runs` runs of each of two option lists, run in turns so that both meet the
        same moments of a machine whose load changes."""
        programs = self.compile([self.lowered(first), self.lowered(second)])
        best = [float("inf"), float("inf")]
        for _ in range(runs):
            for i, program in enumerate(programs):
                best[i] = min(best[i], self.run(program))
        return best[0], best[1]


def beam_search(item: ScheduleItem, runtime, inputs: list[LazyBuffer]) -> tuple[Opt, ...]:
    """The fastest option list found for this kernel (see the module's docstring), written to disk."""
    if on(Pass.TILES) and tiled_item(item):
        return ()  # its loops are the tiles pass's own: no option applies (codegen/tiles.py)
    start = time.perf_counter()
    width, budget = beam_width(), budget_s()
    key = search_key(item, runtime)
    timer = Timer(item, runtime, inputs, start + budget)
    renderer = runtime.renderer
    heuristic = heuristic_opts(item, renderer, get_num_threads())
    timed = timer.time(list(dict.fromkeys([heuristic, ()])))
    steps = actions(item, renderer)
    beam = sorted(timed, key=timed.get)[:width]
    idle = 0  # rounds in a row that found nothing faster
    while time.perf_counter() - start < budget and idle < PATIENCE:
        best_before = min(timed.values())
        grown = [opts + (a,) for opts in beam for a in steps if fits(item, opts + (a,), renderer)]
        grown = [opts for opts in dict.fromkeys(grown) if opts not in timed]
        if not grown:
            break
        timed.update(timer.time(grown))
        beam = sorted(timed, key=timed.get)[:width]
        idle = idle + 1 if min(timed.values()) > MIN_GAIN * best_before else 0
    winner = min(timed, key=timed.get)
    if winner != heuristic and heuristic in timed:
        timed[winner], timed[heuristic] = timer.duel(winner, heuristic, CONFIRM_RUNS)
        if timed[winner] > MIN_GAIN * timed[heuristic]:  # not 1% faster when both run at the same moments
            winner = heuristic
    seconds = time.perf_counter() - start
    STATS.kernels += 1
    STATS.candidates += len(timed)
    STATS.seconds += seconds
    path = cache_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"opts": [[o.op.name, o.axis, o.amount] for o in winner], "us": timed[winner] * 1e6,
              "heuristic_us": timed[heuristic] * 1e6 if heuristic in timed else None,
              "candidates": len(timed), "seconds": seconds}
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)
    if debug_level() >= 1:
        print(f"BEAM {width}: {len(timed)} candidates in {seconds:.2f} s: "
              f"{' '.join(map(str, winner)) or '(no options)'} {timed[winner] * 1e6:.1f} us "
              f"(heuristic {record['heuristic_us'] or float('nan'):.1f} us)")
    return winner
