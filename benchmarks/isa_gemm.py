"""stage3's generated GEMM (by its heuristics) against stage1's best hand-written rung, for one instruction
set: the machine's own or a lower one (SITP_ISA, stage1_ndarray/isa.py), so an AVX-512 machine measures
the AVX2 path too. Each implementation, size and thread count runs in a process of its own, in turn,
`--rounds` times; each process times `--calls` calls after a warm-up and prints its median.

    SITP_ISA=avx2 python -m benchmarks.isa_gemm [--sizes 1024,2048] [--threads 1,2] [--rounds 2]

Prints a markdown table: GFLOP/s (2n^3 / median time) of each side and stage3's share of the rung.
The rung is the ladder's best for the ISA: 08_avx512 where the build has AVX-512, else 07_tuned.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np

from benchmarks.cpu_step import median_ms


def rung_runner(n: int, threads: int):
    from stage1_ndarray import Tensor, gemm
    from stage1_ndarray.ckernels import lib

    name = "08_avx512" if lib.gemm_has_avx512() else "07_tuned"
    rng = np.random.default_rng(n)
    a, b = (Tensor(rng.standard_normal((n, n), dtype=np.float32)) for _ in range(2))
    c = Tensor(np.empty((n, n), np.float32))
    return name, lambda: gemm.gemm(a, b, c, variant=name, threads=threads)


def stage3_runner(n: int, threads: int):
    import stage3_compiler as s3
    from stage3_compiler.threads import set_num_threads

    set_num_threads(threads)
    rng = np.random.default_rng(n)
    a, b = (s3.Tensor(rng.standard_normal((n, n), dtype=np.float32)).realize() for _ in range(2))
    matmul = s3.TinyJit(lambda x, y: x @ y)
    box = {}
    return "stage3_heuristic", lambda: box.__setitem__("c", matmul(a, b))


def one(impl: str, n: int, threads: int, calls: int) -> None:
    name, run = (rung_runner if impl == "rung" else stage3_runner)(n, threads)
    seconds = median_ms(run, warmup=2, runs=calls) / 1e3
    print(f"{name} {2 * n**3 / seconds / 1e9:.1f}")


def measure(impl: str, n: int, threads: int, calls: int) -> tuple[str, float]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, "-m", "benchmarks.isa_gemm", "--one", impl, str(n), str(threads),
                          "--calls", str(calls)], env=env, capture_output=True, text=True, check=True).stdout
    name, gflops = out.split()[-2:]
    return name, float(gflops)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1024,2048")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--one", nargs=3, metavar=("IMPL", "N", "THREADS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one[0], int(args.one[1]), int(args.one[2]), args.calls)
        return
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"CPU: {cpu}; SITP_ISA={os.environ.get('SITP_ISA', 'native')}; median of {args.calls} calls a process")
    print("\n| n | threads | rung | rung GFLOP/s | stage3 GFLOP/s | stage3 / rung |")
    print("| ---: | ---: | --- | ---: | ---: | ---: |")
    for n in (int(s) for s in args.sizes.split(",")):
        for threads in (int(t) for t in args.threads.split(",")):
            rungs, mine, rung = [], [], "?"
            for _ in range(args.rounds):  # the two sides alternate, so a noisy minute slows both
                rung, gflops = measure("rung", n, threads, args.calls)
                rungs.append(gflops)
                mine.append(measure("stage3", n, threads, args.calls)[1])
            best_rung, best_mine = max(rungs), max(mine)
            print(f"| {n} | {threads} | {rung} | {', '.join(map(str, rungs))} | {', '.join(map(str, mine))} | "
                  f"{best_mine / best_rung:.0%} |", flush=True)


if __name__ == "__main__":
    main()
