"""The machine's FP32 peak, measured: compiles benchmarks/peak.c (FMA chains) and runs it.

    python -m benchmarks.peak [threads ...]      # prints "threads GFLOP/s" lines; default 1 and 2

The GEMM leaderboard reports each rung as a percentage of this number, taken in the same run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("peak.c")


def build(workdir: Path) -> Path:
    """Compile peak.c with the flags the stage kernels use (-O2 is enough: the loop is intrinsics)."""
    compiler = os.environ.get("CC", "cc")
    binary = workdir / "peak"
    flags = ["-O2", "-march=native", "-fopenmp"]
    built = subprocess.run([compiler, *flags, str(SOURCE), "-o", str(binary)], capture_output=True, text=True)
    if built.returncode != 0:
        raise RuntimeError(f"peak: {compiler} {' '.join(flags)} peak.c failed:\n{built.stderr}")
    return binary


def measure(threads: tuple[int, ...] = (1, 2)) -> dict[int, float]:
    """{threads: peak FLOP/s} for each thread count, best of a few repeats each."""
    with tempfile.TemporaryDirectory() as tmp:
        binary = build(Path(tmp))
        run = subprocess.run([str(binary), *map(str, threads)], capture_output=True, text=True, check=True)
    peaks = {}
    for line in run.stdout.split("\n"):
        if line.strip():
            t, gflops = line.split()
            peaks[int(t)] = float(gflops) * 1e9
    return peaks


if __name__ == "__main__":
    counts = tuple(int(t) for t in sys.argv[1:]) or (1, 2)
    for t, flops in measure(counts).items():
        print(f"{t} thread(s): {flops / 1e9:.1f} GFLOP/s")
