"""stage3's compile-time table and the step's memory: what a nanoGPT CPU-config training step costs
before its kernels run, each case in a fresh process.

- The jitted step (benchmarks.stage3_fusion.make_step: forward, backward, clip, AdamW under TinyJit)
  with an empty kernel cache (cold: every kernel compiled), then in a new process with the cache
  that run left on disk (warm). Per step: wall time, compiler runs (runtime.build), new programs
  (new entries of realize.PROGRAMS: lowered and rendered, or found lowered on disk by
  engine/program_cache.py), graphs scheduled (schedule cache misses) and schedules answered from the
  cache (hits). Step 1 compiles, step 2 captures, step 3 on replay.
- The eager step (no JIT), in one process: the median of warm steps with the schedule cache and
  with it turned off, and a replayed step's Python per kernel (stage3_fusion.replay_overhead_us).
- Peak memory: the maximum resident set of a process that builds the model and runs 10 steps,
  stage2 against jitted stage3, and what the process held before its first step; and the jitted
  step's planned temporaries (TinyJit.peak_bytes).

    python -m benchmarks.stage3_compile > benchmarks/results/stage3_compile.md
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks.stage3_fusion import make_step, replay_overhead_us
from common.stages import load_stage

STEPS = 5


def child_compile() -> None:
    """One process's jitted steps, each with its counts, as JSON on stdout."""
    s3 = load_stage(3)
    from stage3_compiler.cpu import compiler as runtime
    from stage3_compiler.engine import realize, schedule_cache

    builds, real_build = [0], runtime.build

    def counting_build(sources, out):
        builds[0] += 1
        real_build(sources, out)

    runtime.build = counting_build
    step = make_step(s3, jit=True)
    rows, stats = [], schedule_cache.STATS
    for i in range(STEPS):
        before = builds[0], len(realize.PROGRAMS), stats.misses, stats.hits
        start = time.perf_counter()
        step()
        rows.append({"step": i + 1, "seconds": time.perf_counter() - start, "compiler_runs": builds[0] - before[0],
                     "kernels_lowered": len(realize.PROGRAMS) - before[1], "scheduled": stats.misses - before[2],
                     "schedule_hits": stats.hits - before[3]})
    print(json.dumps(rows))


def child_memory(stage_number: int) -> None:
    """Max RSS of building the model and running 10 steps (stage3 jitted), and the RSS before step 1."""
    stage = load_stage(stage_number)
    step = make_step(stage, jit=stage_number == 3)
    with open("/proc/self/statm") as f:
        before = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    for _ in range(10):
        step()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    planned = step.jitted.peak_bytes if step.jitted is not None else None
    print(json.dumps({"before": before, "peak": peak, "planned": planned}))


def run_child(args: list[str], cache: str) -> object:
    out = subprocess.run([sys.executable, "-m", "benchmarks.stage3_compile", *args],
                         env={**os.environ, "SITP_CACHE": cache}, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def eager_steps(s3, steps: int = 7) -> tuple[float, float]:
    """Median seconds of a warm eager step with the schedule cache, then without it."""
    from stage3_compiler.engine import schedule_cache

    def median(step) -> float:
        for _ in range(3):
            step()
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        return float(np.median(times))

    cached = median(make_step(s3))

    class NoCache(dict):
        def __setitem__(self, key, value):
            pass

    kept, schedule_cache.SCHEDULES = schedule_cache.SCHEDULES, NoCache()
    try:
        uncached = median(make_step(s3))
    finally:
        schedule_cache.SCHEDULES = kept
    return cached, uncached


def main() -> None:
    if sys.argv[1:2] == ["--child-compile"]:
        return child_compile()
    if sys.argv[1:2] == ["--child-memory"]:
        return child_memory(int(sys.argv[2]))
    from stage3_compiler.threads import get_num_threads

    print(f"# python -m benchmarks.stage3_compile, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
          f"{get_num_threads()} kernel threads\n")
    print("## The jitted nanoGPT CPU-config step in a fresh process (steps 1, 2: run, capture; 3 on: replay)\n")
    print("| kernel cache | step | seconds | compiler runs | new programs | graphs scheduled | cache hits |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as cache:
        for label in ("cold (empty)", "warm (on disk)"):
            for row in run_child(["--child-compile"], cache):
                print(f"| {label} | {row['step']} | {row['seconds']:.3f} | {row['compiler_runs']} | "
                      f"{row['kernels_lowered']} | {row['scheduled']} | {row['schedule_hits']} |")
    s3 = load_stage(3)
    cached, uncached = eager_steps(s3)
    book, launch = replay_overhead_us(s3)
    print("\n## Eager (un-jitted) steps, median of 7 warm steps in one process\n")
    print(f"- with the schedule cache {cached * 1e3:.1f} ms, without {uncached * 1e3:.1f} ms "
          f"({uncached / cached:.2f}x)")
    print(f"- a replayed step's Python per kernel: {book:.1f} us of bookkeeping + {launch:.1f} us a ctypes launch "
          "(goal <= 10 us)")
    print("\n## Peak memory: building the model and 10 steps, one process each\n")
    print("| stage | RSS before step 1 | max RSS | growth | planned temporaries (TinyJit) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as cache:
        run_child(["--child-compile"], cache)  # compile first: the memory runs find their kernels on disk
        for n in (2, 3):
            m = run_child(["--child-memory", str(n)], cache)
            planned = f"{m['planned'] / 2**20:.1f} MiB" if m["planned"] is not None else "-"
            print(f"| stage{n}{' (jitted)' if n == 3 else ''} | {m['before'] / 2**20:.0f} MiB | "
                  f"{m['peak'] / 2**20:.0f} MiB | {(m['peak'] - m['before']) / 2**20:.0f} MiB | {planned} |")


if __name__ == "__main__":
    main()
