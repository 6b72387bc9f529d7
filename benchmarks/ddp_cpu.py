"""Data-parallel nanoGPT on this machine's cores: 1 rank x 2 threads against 2 ranks x 1 thread (all-reduce,
then ZeRO-1), back to back in separate processes, with the losses and parameters compared to the one
rank's. Writes what it ran and measured to stdout:

    python benchmarks/ddp_cpu.py --stage 2 [--steps 200] [--jit-off] > benchmarks/results/ddp_cpu.txt

Each run is one `sitp train nanogpt` (the default CPU config, global batch 12); tokens/s and the
time in collectives are the CLI's own report (rank 0's time inside collectives, waiting for the
slower rank included). `--jit-off` adds stage3's eager 2-rank run (JIT=0), to show what the jitted
halves of a data-parallel step buy.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.train.checkpoint import load_checkpoint  # noqa: E402


def run(label: str, out: Path, stage: int, steps: int, ranks: int, *flags: str, env: dict | None = None) -> Path:
    cmd = [sys.executable, "-m", "common.cli", "train", "nanogpt", "--stage", str(stage), "--steps", str(steps),
           "--eval-every", "0", "--eval-batches", "4", "--samples", "0", "--tokens", "0", "--quiet",
           "--out", str(out), "--batch-size", str(12 // ranks), *flags]
    threads = "2" if ranks == 1 else "1"
    if ranks > 1:
        mpiexec = shutil.which("mpiexec") or str(Path(sys.executable).parent / "mpiexec")
        cmd = [mpiexec, "-n", str(ranks), *cmd, "--ddp"]
    print(f"== {label}", flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": threads, **(env or {})},
                          capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{label} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    for line in proc.stdout.splitlines():
        if re.match(r"(  data-parallel|final train loss|data-parallel:|ZeRO-1:)", line):
            print(line, flush=True)
        found = re.match(r"final train loss .*\(([\d.]+)s\)", line)
        if found and ranks == 1:  # (as the CLI's data-parallel figure: the rows over the loop's time)
            print(f"one rank: {12 * 64 * steps / float(found.group(1)):.0f} tokens/s", flush=True)
    return out


def compare(label: str, one: Path, other: Path) -> None:
    a, b = load_checkpoint(one / "ckpt.safetensors"), load_checkpoint(other / "ckpt.safetensors")
    la, lb = np.array(a.train_losses), np.array(b.train_losses)
    scale = max(np.abs(a.model[k]).max() for k in a.model.keys())
    diff = max(np.abs(a.model[k] - b.model[k]).max() for k in a.model.keys())
    print(f"{label}: {len(la)} losses max rel diff {np.max(np.abs(lb - la) / np.abs(la)):.2e}; final loss "
          f"{la[-1]:.6f} vs {lb[-1]:.6f}; parameters max diff / max |w| {diff / scale:.2e}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", type=int, default=2, choices=[2, 3])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--jit-off", action="store_true", help="stage3: also the 2-rank run with JIT=0")
    args = parser.parse_args()
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    flags = {f for f in ("avx512f", "avx2") if f in Path("/proc/cpuinfo").read_text()}
    print(f"# nanoGPT (default CPU config), {args.steps} steps on stage{args.stage}, global batch 12; "
          f"{cpu}, {os.cpu_count()} cores, {'/'.join(sorted(flags))}")
    print(f"# command: python benchmarks/ddp_cpu.py --stage {args.stage} --steps {args.steps}"
          f"{' --jit-off' if args.jit_off else ''}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        one = run("1 rank x batch 12, 2 threads", tmp / "one", args.stage, args.steps, 1)
        two = run("2 ranks x batch 6, 1 thread each, all-reduce", tmp / "two", args.stage, args.steps, 2)
        zero = run("2 ranks x batch 6, 1 thread each, ZeRO-1", tmp / "zero", args.stage, args.steps, 2, "--zero")
        if args.jit_off:
            eager = run("2 ranks x batch 6, all-reduce, JIT=0", tmp / "eager", args.stage, args.steps, 2,
                        env={"JIT": "0"})
        compare("two vs one", one, two)
        compare("zero vs one", one, zero)
        if args.jit_off:
            compare("eager two vs one", one, eager)


if __name__ == "__main__":
    main()
