"""Rung 08's tile shape and pipeline depth swept on a GPU, and stage2's matmul on nanoGPT's shapes
against torch (issue 27). Runs only where CuPy sees a GPU; gpu_run.sh calls it as its `gemm_sweep` part.

    python benchmarks/gemm_sweep.py [--sizes 2048,4096] [--json PATH] [--no-shapes]

1. sweep: gemm_08_double_buffer.cu compiled once per configuration (its tile macros overridden with
   -D), checked against cuBLAS on an awkward shape and at every size (output poisoned with NaN first,
   fresh random inputs), then timed against cuBLAS SGEMM (FP32, TF32 off) at each size and on the
   forward shapes of nanoGPT's GPU config. Prints GFLOP/s and % of cuBLAS per configuration.
2. shapes: what stage2's cuda device spends on each matmul of a nanoGPT step, transposes and split-K
   included (a weight's gradient is x.T @ g), against torch.matmul on the same GPU.

Times are medians of rounds of back-to-back launches between CUDA events, after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
SOURCE = ROOT / "stage2_autograd" / "cuda" / "gemm" / "gemm_08_double_buffer.cu"
ENTRY = "gemm_08_double_buffer"
DEFAULTS = {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 32, "TM": 4, "STAGES": 3, "MIN_BLOCKS": 2}
CONFIGS = {  # name -> the macros that differ from the file's defaults
    "default": {},
    "bk16_s2": {"BK": 16, "STAGES": 2},  # the classic double buffer, the rung's first version
    "bk32_s2": {"STAGES": 2},
    "bk16_s3": {"BK": 16},
    "bk16_s4": {"BK": 16, "STAGES": 4},
    "w32x64": {"WM": 32, "WN": 64},
    "tm8": {"TM": 8},
    "one_block_s4": {"STAGES": 4, "MIN_BLOCKS": 1},
    "bn256_tm8": {"BN": 256, "WN": 64, "TM": 8, "BK": 16, "MIN_BLOCKS": 1},
    # not yet run on a GPU (written after the sweep of 2026-11-27):
    "tm8_bk32_s3": {"TM": 8},
    "bk32_s4_one_block": {"STAGES": 4, "MIN_BLOCKS": 1},
    "bk64_s2_one_block": {"BK": 64, "STAGES": 2, "MIN_BLOCKS": 1},
    "bm64": {"BM": 64, "WM": 32},  # more blocks for n = 1024 (64 tiles of 128 x 128 on 132 SMs)
}
TOKENS, WIDTH = 64 * 256, 384  # nanoGPT's GPU config: batch 64 x block 256, n_embd 384, 6 heads of 64
FORWARD = {"qkv": (TOKENS, 3 * WIDTH, WIDTH), "attn_proj": (TOKENS, WIDTH, WIDTH),
           "fc": (TOKENS, 4 * WIDTH, WIDTH), "mlp_proj": (TOKENS, WIDTH, 4 * WIDTH)}  # (M, N, K)


def median_ms(launch, new_event, elapsed_ms, rounds: int = 7, per_round: int = 5) -> float:
    """Median ms of `launch` over rounds of back-to-back calls between two events (CuPy's or torch's:
    `new_event()` makes one with record() and synchronize(), `elapsed_ms(start, end)` reads them)."""
    start, end = new_event(), new_event()
    launch()  # the warm-up: a first launch may compile or allocate
    end.record()
    end.synchronize()
    times = []
    for _ in range(rounds):
        start.record()
        for _ in range(per_round):
            launch()
        end.record()
        end.synchronize()
        times.append(elapsed_ms(start, end) / per_round)
    return statistics.median(times)


def cupy_clock(cupy) -> tuple:
    return cupy.cuda.Event, cupy.cuda.get_elapsed_time


class Config:
    def __init__(self, cupy, name: str, macros: dict):
        self.name, self.m = name, {**DEFAULTS, **macros}
        options = ("--std=c++17", *(f"-D{k}={v}" for k, v in macros.items()))
        self.fn = cupy.RawModule(code=SOURCE.read_text(), options=options).get_function(ENTRY)
        m = self.m
        self.smem = m["STAGES"] * (m["BM"] * (m["BK"] + 4) + m["BK"] * m["BN"]) * 4
        if self.smem > 48 * 1024:  # above the static limit a kernel must opt in
            self.fn.max_dynamic_shared_size_bytes = self.smem

    def launcher(self, A, B, C):
        (M, K), N = A.shape, B.shape[1]
        grid = (-(-N // self.m["BN"]), -(-M // self.m["BM"]), 1)
        args = (C, A, B, np.int32(M), np.int32(N), np.int32(K), np.float32(1.0), np.float32(0.0))
        return lambda: self.fn(grid, (256, 1, 1), args, shared_mem=self.smem)


def operands(cupy, M: int, N: int, K: int, seed: int):
    rng = cupy.random.RandomState(seed)
    A = rng.standard_normal((M, K), dtype=cupy.float32)
    B = rng.standard_normal((K, N), dtype=cupy.float32)
    return A, B, cupy.full((M, N), cupy.nan, dtype=cupy.float32)


def checked(cupy, config: Config, M: int, N: int, K: int, seed: int) -> float:
    A, B, C = operands(cupy, M, N, K, seed)
    config.launcher(A, B, C)()
    ref = A.astype(cupy.float64) @ B.astype(cupy.float64)
    err = float(cupy.linalg.norm(C - ref) / cupy.linalg.norm(ref))
    if not err < 1e-5:  # NaN fails too: an unwritten element
        raise RuntimeError(f"{config.name}: ({M}, {K}) @ ({K}, {N}) relative error {err:.3g}")
    return err


def sweep(cupy, sizes: list[int], results: dict) -> None:
    cases = {f"n{n}": (n, n, n) for n in sizes} | FORWARD
    cublas = {}
    for label, (M, N, K) in cases.items():
        A, B, C = operands(cupy, M, N, K, 1)
        cublas[label] = median_ms(lambda A=A, B=B, C=C: cupy.matmul(A, B, out=C), *cupy_clock(cupy))
    results["cublas_ms"] = cublas
    print(f"{'config':16} {'regs':>4} " + " ".join(f"{label:>16}" for label in cases))
    print(f"{'cuBLAS':16} {'':>4} " + " ".join(
        f"{2 * M * N * K / cublas[label] / 1e9:8.1f} TF/s   " for label, (M, N, K) in cases.items()))
    for name, macros in CONFIGS.items():
        row = {"macros": macros}
        try:
            config = Config(cupy, name, macros)
            row["registers"] = getattr(config.fn, "num_regs", -1)
            checked(cupy, config, 1000, 777, 333, 2)
            for label, (M, N, K) in cases.items():
                row.setdefault("error", {})[label] = checked(cupy, config, M, N, K, 3)
                A, B, C = operands(cupy, M, N, K, 1)
                row.setdefault("ms", {})[label] = median_ms(config.launcher(A, B, C), *cupy_clock(cupy))
            cells = " ".join(f"{2 * M * N * K / row['ms'][label] / 1e9:8.1f} TF "
                             f"{100 * cublas[label] / row['ms'][label]:4.0f}%" for label, (M, N, K) in cases.items())
            print(f"{name:16} {row['registers']:4} {cells}", flush=True)
        except Exception as e:  # one configuration that fails to build or check must not end the sweep
            row["failed"] = f"{type(e).__name__}: {e}"
            print(f"{name:16} FAILED {row['failed'][:200]}", flush=True)
        results.setdefault("configs", {})[name] = row


def stage2_shapes(cupy, results: dict) -> None:
    """Every matmul of one nanoGPT layer as stage2 runs it (forward, input and weight gradients, attention),
    against torch.matmul with TF32 off."""
    import torch

    import stage2_autograd as s2

    torch.backends.cuda.matmul.allow_tf32 = False
    heads, T, hd = 64 * 6, 256, 64
    cases = {}
    for name, (M, N, K) in FORWARD.items():
        cases[f"{name} x@w"] = ((M, K), (K, N), False)
        cases[f"{name} g@w.T"] = ((M, N), (K, N), "b")   # the input's gradient: g (M, N) @ w.T (N, K)
        cases[f"{name} x.T@g"] = ((M, K), (M, N), "a")   # the weight's gradient: x.T (K, M) @ g (M, N)
    cases["att q@k.T"] = ((heads, T, hd), (heads, T, hd), "b")
    cases["att p@v"] = ((heads, T, T), (heads, T, hd), False)
    rng = np.random.default_rng(0)
    print(f"{'matmul':20} {'stage2 ms':>10} {'torch ms':>9} {'ratio':>6}")
    total = [0.0, 0.0]
    for name, (sa, sb, transpose) in cases.items():
        a_np, b_np = (rng.standard_normal(s).astype(np.float32) for s in (sa, sb))
        a2, b2 = s2.Tensor(a_np, device="CUDA"), s2.Tensor(b_np, device="CUDA")
        at, bt = torch.from_numpy(a_np).cuda(), torch.from_numpy(b_np).cuda()

        def ours(a=a2, b=b2, transpose=transpose):
            return (a.transpose(-1, -2) if transpose == "a" else a) @ (b.transpose(-1, -2) if transpose == "b" else b)

        def theirs(a=at, b=bt, transpose=transpose):
            return (a.transpose(-1, -2) if transpose == "a" else a) @ (b.transpose(-1, -2) if transpose == "b" else b)

        ref = theirs().double()
        got = torch.from_numpy(ours().numpy()).cuda().double()
        err = float((got - ref).norm() / ref.norm())
        if not err < 1e-5:
            raise RuntimeError(f"stage2 matmul {name}: relative error {err:.3g} against torch")
        ms2 = median_ms(ours, *cupy_clock(cupy))
        mst = median_ms(theirs, lambda: torch.cuda.Event(enable_timing=True), lambda a, b: a.elapsed_time(b))
        total[0] += ms2
        total[1] += mst
        results.setdefault("stage2_shapes", {})[name] = {"stage2_ms": ms2, "torch_ms": mst, "error": err}
        print(f"{name:20} {ms2:10.3f} {mst:9.3f} {ms2 / mst:6.2f}", flush=True)
    print(f"{'one layer, total':20} {total[0]:10.3f} {total[1]:9.3f} {total[0] / total[1]:6.2f}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2048,4096")
    parser.add_argument("--json")
    parser.add_argument("--no-shapes", action="store_true")
    parser.add_argument("--no-sweep", action="store_true")
    args = parser.parse_args(argv)
    import cupy

    results: dict = {"gpu": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), "defaults": DEFAULTS}
    try:
        if not args.no_sweep:
            sweep(cupy, [int(n) for n in args.sizes.split(",")], results)
        if not args.no_shapes:
            stage2_shapes(cupy, results)
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
