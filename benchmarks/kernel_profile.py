"""Where a jitted CPU training step's time goes, kernel by kernel: nanoGPT's step of
benchmarks/test_train.py (or, with `--model nanochat`, benchmarks/nanochat_step.py's) on stage3, warmed up,
then replayed with every kernel launch timed on its own.
`python -m benchmarks.kernel_profile [--model M] [--threads N] [--steps N] [--top N]` prints each kernel's
summed time per step (kernels of one name are told apart by their program, as two kernels may share
a name), its share of the step and its GFLOP/s, largest first.

The timing wraps each launch in `time.perf_counter`, so a kernel's time includes its call overhead
(a few microseconds); the sum is close to a plain replay's time, not equal to it.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import defaultdict

import benchmarks.test_train as B
import stage3_compiler
from benchmarks.nanochat_step import stepper as nanochat_stepper
from stage3_compiler.engine.capture import KernelStep
from stage3_compiler.threads import set_num_threads


class TimedLaunch:
    """A runtime's launch, timed per program into `times`."""

    def __init__(self, runtime, times: dict, launches: dict):
        self.runtime, self.times, self.launches = runtime, times, launches

    def launch(self, program, buffers, bound):
        start = time.perf_counter()
        self.runtime.launch(program, buffers, bound)
        self.times[id(program)] += time.perf_counter() - start
        self.launches[id(program)] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["nanogpt", "nanochat"], default="nanogpt")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--source", default="", help="print the source of the kernels of this name")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"],
                        help="nanogpt: the forward under autocast in this type")
    args = parser.parse_args()
    set_num_threads(args.threads)
    if args.model == "nanochat":
        step = nanochat_stepper(stage3_compiler)
        jit = step.jit
    else:
        _, weights = B.stage2_stepper()
        step = B.stage3_stepper(weights, args.precision)
        jit = next(c.cell_contents for c in step.__closure__ if type(c.cell_contents).__name__ == "TinyJit")
    for _ in range(5):  # eager, capture, replays
        step()
    times: dict[int, float] = defaultdict(float)
    launches: dict[int, int] = defaultdict(int)
    programs = {}
    for s in jit.plan.steps:
        if isinstance(s, KernelStep):
            programs[id(s.program)] = s.program
            s.runtime = TimedLaunch(s.runtime, times, launches)
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    wall = (time.perf_counter() - start) / args.steps
    total = sum(times.values()) / args.steps
    print(f"{args.threads} thread(s): {wall * 1e3:.1f} ms a step, {total * 1e3:.1f} ms in "
          f"{len(programs)} kernels' launches")
    by_time = sorted(times.items(), key=lambda kv: -kv[1])
    for pid, t in by_time[:args.top]:
        program = programs[pid]
        kernel = program.kernel
        ms = t / args.steps * 1e3
        # ALU ops per entry and reduction step, times the entries (the reduced shape where it has one)
        flops = kernel.ops * math.prod(kernel.reduce_shape or kernel.shape) * launches[pid]
        gflops = flops / t / 1e9 if t else 0.0
        print(f"{ms:7.3f} ms {ms / (total * 1e3):6.1%} {gflops:7.1f} GFLOP/s  {kernel.name}")
        if kernel.name == args.source:
            print(program.source)


if __name__ == "__main__":
    main()
