"""The bfloat16 rung (stage1_ndarray/csrc/gemm_bf16.c) against torch's bfloat16 matmul on the same CPU, with both
float32 products beside them. Each library, dtype, size and thread count runs in a process of its own, in turn,
`--rounds` times (so a noisy minute slows each of them); each process times `--calls` products after a warm-up
and prints its median; the table keeps each cell's best round.

    python -m benchmarks.gemm_bf16 [--sizes 1024,2048] [--threads 1,2] [--rounds 3]

GFLOP/s = 2n^3 / median. "ours / torch" is the bfloat16 rung's speed over torch's bfloat16 matmul (the dtypes
issue's goal: 90% or more). "stage3" is stage3's `a @ b` of bfloat16 Tensors realized each call (its tiles pass
where the CPU has AMX: two operand copies and the tiled kernel); "stage3-jit" the same under TinyJit, which
replays the kernels without realize's scheduling in Python. The CPU's half-precision features are printed
first, and whether the rung ran on AMX tiles or on the float32 ladder.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from benchmarks.cpu_step import median_ms
from benchmarks.torch_half_gemm import best_of_rounds, cpu_features

IMPLS = ("torch float32", "torch bfloat16", "ours float32", "ours bfloat16", "stage3 bfloat16", "stage3-jit bfloat16")


def one(impl: str, n: int, threads: int, calls: int) -> None:
    import ml_dtypes
    import numpy as np

    library, dtype = impl.split()
    rng = np.random.default_rng(n)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    if library == "torch":
        import torch

        torch.set_num_threads(threads)
        ta, tb = (torch.from_numpy(x).to(getattr(torch, dtype)) for x in (a, b))
        product = lambda: torch.mm(ta, tb)  # noqa: E731
    elif library == "ours":
        from stage1_ndarray import Tensor

        Tensor.set_num_threads(threads)
        cast = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32
        ta, tb = Tensor(a.astype(cast)), Tensor(b.astype(cast))
        product = lambda: ta @ tb  # noqa: E731
    else:  # stage3's generated kernels (the tiles pass where the CPU has AMX), each call realized
        from stage3_compiler import Tensor, TinyJit

        Tensor.set_num_threads(threads)
        ta, tb = Tensor(a.astype(ml_dtypes.bfloat16)).realize(), Tensor(b.astype(ml_dtypes.bfloat16)).realize()
        product = lambda: (ta @ tb).realize()  # noqa: E731
        if library == "stage3-jit":  # replayed: the kernels alone, without realize's Python
            jitted = TinyJit(lambda x, y: (x @ y).realize())
            product = lambda: jitted(ta, tb)  # noqa: E731
    seconds = median_ms(product, warmup=2, runs=calls) / 1e3
    print(f"{2 * n**3 / seconds / 1e9:.1f}")


def measure(impl: str, n: int, threads: int, calls: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, "-m", "benchmarks.gemm_bf16", "--one", impl, str(n), str(threads),
                          "--calls", str(calls)], env=env, capture_output=True, text=True, check=True).stdout
    return float(out.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1024,2048")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--one", nargs=3, metavar=("IMPL", "N", "THREADS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one[0], int(args.one[1]), int(args.one[2]), args.calls)
        return
    import torch

    from stage1_ndarray import gemm

    model, features = cpu_features()
    path = "AMX tiles" if gemm.bf16_uses_amx() else "the float32 ladder on widened copies"
    print(f"CPU: {model}; features: {', '.join(features)}; torch {torch.__version__}; the bfloat16 rung runs on "
          f"{path}; median of {args.calls} products a process, best of {args.rounds} rounds")
    print("\n| n | threads | " + " | ".join(f"{i} GFLOP/s" for i in IMPLS)
          + " | ours / torch bf16 | stage3 / torch bf16 | stage3-jit / torch bf16 |")
    print("| ---: | ---: | " + " | ".join("---:" for _ in IMPLS) + " | ---: | ---: | ---: |")
    for n in (int(s) for s in args.sizes.split(",")):
        for threads in (int(t) for t in args.threads.split(",")):
            best = best_of_rounds(measure, IMPLS, n, threads, args.calls, args.rounds)
            ratios = [best[f"{lib} bfloat16"] / best["torch bfloat16"] for lib in ("ours", "stage3", "stage3-jit")]
            print(f"| {n} | {threads} | " + " | ".join(f"{best[i]:.1f}" for i in IMPLS) + " | "
                  + " | ".join(f"{r:.0%}" for r in ratios) + " |", flush=True)


if __name__ == "__main__":
    main()
