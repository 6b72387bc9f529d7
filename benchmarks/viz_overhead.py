"""What VIZ's recording costs: nanoGPT's CPU training step on stage3 (benchmarks/test_train.py's jitted step),
with the recording off and on, each in its own process.

- the jitted step (from the third call on, TinyJit replays): the median of 30 replays after 3 warm-ups; with
  the recording on, each launch is timed (the page's time chart);
- the first two calls (eager, then the capture), which realize: with the recording on, each new kernel is
  lowered again once per pass that changed it (its steps on the page; kept on disk, so a second recording
  finds them: "on, steps cold" runs with that part of the cache emptied first) and each realize's graph kept.

    python -m benchmarks.viz_overhead [--threads N]      the table (each cell its own process)
    python -m benchmarks.viz_overhead one on|off         one process's figures
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import time

import benchmarks.test_train as B
from benchmarks.cpu_step import cpu_name, median_ms
from stage3_compiler.settings import cache_dir
from stage3_compiler.threads import set_num_threads
from stage3_compiler.viz.record import recording


def one(record: bool) -> tuple[float, float]:
    """(ms of the first two calls, the median ms of a replay)."""
    _, weights = B.stage2_stepper()
    step = B.stage3_stepper(weights)
    with recording() if record else contextlib.nullcontext():
        start = time.perf_counter()
        step()
        step()
        first = (time.perf_counter() - start) * 1e3
        return first, median_ms(step, warmup=3, runs=30)


def table(threads: int) -> None:
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores, {threads} thread(s); {time.strftime('%Y-%m-%d')}; "
          "each row its own process, the same cache of compiled kernels (warmed by a first process)\n")
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    run = [sys.executable, "-m", "benchmarks.viz_overhead", "one"]
    subprocess.run([*run, "off", "--threads", str(threads)], env=env, capture_output=True, check=True)  # warm
    print("| recording | first two calls (ms) | a jitted step (ms) |")
    print("| --- | ---: | ---: |")
    rows = {}
    for mode, label in (("off", "off"), ("on", "on, steps cold"), ("on", "on"), ("off", "off"), ("on", "on")):
        if label == "on, steps cold":
            shutil.rmtree(cache_dir() / "viz", ignore_errors=True)
        out = subprocess.run([*run, mode, "--threads", str(threads)], env=env, capture_output=True, text=True,
                             check=True).stdout.split()
        rows.setdefault(mode, []).append((float(out[-2]), float(out[-1])))
        print(f"| {label} | {out[-2]} | {out[-1]} |", flush=True)
    off, on = (min(r[1] for r in rows[m]) for m in ("off", "on"))
    print(f"\njitted step, the best process of each: on / off = {on / off:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="?", default="table", choices=["table", "one"])
    parser.add_argument("mode", nargs="?", choices=["on", "off"])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.what == "table":
        table(args.threads)
        return
    set_num_threads(args.threads)
    first, step = one(args.mode == "on")
    print(f"{args.mode} {first:.1f} {step:.2f}")


if __name__ == "__main__":
    main()
