"""What each of stage3's speed passes (stage3_compiler/passes.py) buys: nanoGPT's jitted CPU step and the
generated GEMM with the default passes, with each pass switched off in turn, and with every pass off
(the core alone). Each cell runs in its own process (benchmarks.cpu_step's stage3 step, median of 30;
benchmarks.isa_gemm's jitted n x n product, median of 10 calls), one after another.

    python -m benchmarks.passes_effect --threads 2 [--gemm 1024] [--passes heuristics,vectorize]

prints the table of benchmarks/results/stage3_passes.md. A pass that only a GPU or FlashAttention uses
(group, local, online) is left out unless named.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from benchmarks.cpu_step import cpu_name
from stage3_compiler.passes import DEFAULT, Pass

CPU_PASSES = [p.value for p in Pass if p in DEFAULT and p not in (Pass.GROUP, Pass.LOCAL)]


def step_ms(spec: str, threads: int) -> float:
    out = subprocess.run([sys.executable, "-m", "benchmarks.cpu_step", "stage3", "--threads", str(threads)],
                         env={**os.environ, "PASSES": spec}, capture_output=True, text=True, check=True).stdout
    return float(out.split()[-2])


def gemm_gflops(spec: str, n: int, threads: int) -> float:
    env = {**os.environ, "PASSES": spec, "OMP_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, "-m", "benchmarks.isa_gemm", "--one", "stage3", str(n), str(threads)],
                         env=env, capture_output=True, text=True, check=True).stdout
    return float(out.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--gemm", type=int, default=1024, help="the GEMM's n")
    parser.add_argument("--passes", default=",".join(CPU_PASSES), help="the passes to switch off one at a time")
    args = parser.parse_args()
    print(f"CPU: {cpu_name()}; {args.threads} thread(s); SITP_ISA={os.environ.get('SITP_ISA') or 'native'}; "
          f"each cell its own process")
    print(f"| PASSES | nanoGPT step (ms) | step / default | GEMM n={args.gemm} (GFLOP/s) | GEMM / default |")
    print("| --- | ---: | ---: | ---: | ---: |")
    base_ms, base_gflops = step_ms("", args.threads), gemm_gflops("", args.gemm, args.threads)
    print(f"| (default) | {base_ms:.1f} | 1.00x | {base_gflops:.1f} | 1.00x |", flush=True)
    for spec in [f"-{name}" for name in args.passes.split(",")] + ["none"]:
        ms, gflops = step_ms(spec, args.threads), gemm_gflops(spec, args.gemm, args.threads)
        print(f"| `{spec}` | {ms:.1f} | {ms / base_ms:.2f}x | {gflops:.1f} | {gflops / base_gflops:.2f}x |",
              flush=True)


if __name__ == "__main__":
    main()
