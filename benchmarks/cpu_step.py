"""nanoGPT's CPU step (benchmarks/test_train.py's config and steppers) for one library in this process:
`python -m benchmarks.cpu_step torch|stage2|stage3 --threads N` prints the median of 30 steps after 5
warm-ups (stage3 under TinyJit: eager, capture, then replays). Run each library in its own process, one
after another, so no two thread pools share the cores; `--all` does that for the three, at 1 and 2
threads, and prints the table of benchmarks/results/stage3_cpu_step.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

LIBRARIES = ("torch", "stage2", "stage3")


def median_ms(step, warmup: int = 5, runs: int = 30) -> float:
    # (step_time_tree.py keeps its own: it imports a given tree's benchmarks package, maybe an older one)
    for _ in range(warmup):
        step()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


# SITP_ISA lowers our kernels' instruction set (stage1_ndarray/isa.py); these lower torch's to match, so
# that an AVX-512 machine compares the AVX2 (or SSE) paths of both
TORCH_ISA = {"avx2": {"ATEN_CPU_CAPABILITY": "avx2", "DNNL_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
             "generic": {"ATEN_CPU_CAPABILITY": "default", "DNNL_MAX_CPU_ISA": "SSE41",
                         "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}}


def one(library: str, threads: int) -> float:
    os.environ["OMP_NUM_THREADS"] = str(threads)  # before any library starts its pool
    os.environ.update(TORCH_ISA.get(os.environ.get("SITP_ISA", ""), {}))
    import torch

    import benchmarks.test_train as B

    torch.set_num_threads(threads)
    step, weights = B.stage2_stepper()
    if library == "torch":
        step = B.torch_stepper(weights)
    elif library == "stage3":
        step = B.stage3_stepper(weights)
    return median_ms(step)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            fields = {k.strip(): v for k, v in (line.split(":", 1) for line in f if ":" in line)}
        name, family, model = (fields[k].strip() for k in ("model name", "cpu family", "model"))
        return f"{name} (family {family}, model {model})"
    except (OSError, KeyError):
        return platform.processor() or "unknown CPU"


def table() -> None:
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores, SITP_ISA={os.environ.get('SITP_ISA') or 'native'}; "
          "each cell its own process, median of 30 steps (ms)")
    print("| threads | torch eager | stage2 | stage3 jitted | stage3 / torch | stage3 / stage2 |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for threads in (2, 1):
        ms = {}
        for library in LIBRARIES:
            out = subprocess.run([sys.executable, "-m", "benchmarks.cpu_step", library, "--threads", str(threads)],
                                 capture_output=True, text=True, check=True)
            ms[library] = float(out.stdout.split()[-2])
        print(f"| {threads} | {ms['torch']:.1f} | {ms['stage2']:.1f} | {ms['stage3']:.1f} | "
              f"{ms['stage3'] / ms['torch']:.2f}x | {ms['stage3'] / ms['stage2']:.2f}x |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("library", nargs="?", choices=LIBRARIES)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--all", action="store_true", help="every library at 1 and 2 threads, each in its own process")
    args = parser.parse_args()
    if args.all or args.library is None:
        table()
    else:
        print(f"{args.library} {args.threads} threads: {one(args.library, args.threads):.2f} ms")


if __name__ == "__main__":
    main()
