"""Mixed precision on the CPU: nanoGPT's step, its forward's memory and its whole run in fp32, bf16 and fp16.

- `python -m benchmarks.mixed_precision step LIB PRECISION --threads N`: the median of 30 steps of nanoGPT's CPU
  config (benchmarks/test_train.py's: batch 12, block 64) after 5 warm-ups; stage2 and stage3 through the
  training loop's own step (common/train/loop.py: autocast, loss scaling for fp16, stage3 jitted), torch
  eager under `torch.autocast("cpu")` (and its GradScaler for fp16).
- `... memory LIB PRECISION`: the peak RSS a forward at batch 64 adds (the activations the backward keeps),
  over the process's peak after the model, its inputs and a forward at batch 1.
- `... table`: both, each cell in its own process, at 1 and 2 threads; `... runs` adds the whole
  `sitp train nanogpt --precision P` run of stages 2 and 3 (2000 steps each; its final val loss).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import resource
import subprocess
import sys
import time

import numpy as np
import torch

import benchmarks.test_train as B
from benchmarks.cpu_step import cpu_name, median_ms
from common.models.gpt import GPT
from common.train.loop import step_function
from common.train.optimizers import build_optimizer
from common.train.precision import grad_scaler, mixed
from common.train.tasks import TrainConfig
from conformance.models import GPT as TorchGPT

LIBRARIES = ("torch", "stage2", "stage3")
PRECISIONS = ("fp32", "bf16", "fp16")
MEMORY_BATCH = 64


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def stage_parts(library: str, batch_size: int):
    """(stage, model, the model's loss under the precision's autocast, a batch maker) on our stage."""
    stage = importlib.import_module({"stage2": "stage2_autograd", "stage3": "stage3_compiler"}[library])
    stage.Tensor.manual_seed(0)
    model = GPT(stage, B.CONFIG)
    rng = np.random.default_rng(0)

    def make_batch():
        ids = rng.integers(0, B.CONFIG.vocab_size, (batch_size, B.CONFIG.block_size + 1))
        return stage.Tensor(ids[:, :-1]), stage.Tensor(ids[:, 1:])

    return stage, model, make_batch


def our_step(library: str, precision: str, threads: int):
    stage, model, make_batch = stage_parts(library, B.BATCH)
    stage.Tensor.set_num_threads(threads)
    cfg = TrainConfig(precision=precision, grad_clip=1.0, weight_decay=0.1)
    opt = build_optimizer(stage, model, "adamw", 1e-3, 0.1, (0.9, 0.99))
    step = step_function(stage, model, opt, cfg, scaler=grad_scaler(stage, precision))
    return lambda: step([make_batch()]).tolist()


def torch_step(precision: str, threads: int):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    c = B.CONFIG
    model = TorchGPT(c.vocab_size, c.block_size, c.n_layer, c.n_head, c.n_embd, c.bias)
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99))
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler("cpu", enabled=precision == "fp16")
    rng = np.random.default_rng(0)

    def step():
        ids = torch.from_numpy(rng.integers(0, c.vocab_size, (B.BATCH, c.block_size + 1)))
        with torch.autocast("cpu", dtype=half or torch.bfloat16, enabled=half is not None):
            loss = model.loss(ids[:, :-1], ids[:, 1:])
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    return step


def median_step_ms(library: str, precision: str, threads: int) -> float:
    step = torch_step(precision, threads) if library == "torch" else our_step(library, precision, threads)
    return median_ms(step)


def forward_memory_mb(library: str, precision: str) -> float:
    """The peak RSS a training-mode forward at batch MEMORY_BATCH adds, with the graph kept for a backward."""
    if library == "torch":
        c = B.CONFIG
        model = TorchGPT(c.vocab_size, c.block_size, c.n_layer, c.n_head, c.n_embd, c.bias)
        half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)

        def forward(batch):
            ids = torch.from_numpy(np.random.default_rng(0).integers(0, c.vocab_size, (batch, c.block_size + 1)))
            with torch.autocast("cpu", dtype=half or torch.bfloat16, enabled=half is not None):
                return model.loss(ids[:, :-1], ids[:, 1:])
    else:
        stage, model, _ = stage_parts(library, 1)
        def forward(batch):
            ids = np.random.default_rng(0).integers(0, B.CONFIG.vocab_size, (batch, B.CONFIG.block_size + 1))
            with stage.Tensor.train(), mixed(stage, precision):
                return model.loss(stage.Tensor(ids[:, :-1]), stage.Tensor(ids[:, 1:])).realize()
    forward(1)
    before = peak_mb()
    kept = forward(MEMORY_BATCH)
    grown = peak_mb() - before
    del kept
    return grown


def run_in_process(*args: str, threads: int | None = None) -> str:
    env = {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
    return subprocess.run([sys.executable, "-m", "benchmarks.mixed_precision", *args], capture_output=True,
                          text=True, check=True, env=env).stdout.strip().splitlines()[-1]


def table() -> None:
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores, SITP_ISA={os.environ.get('SITP_ISA') or 'native'}; "
          f"{time.strftime('%Y-%m-%d')}; each cell its own process")
    print("\nnanoGPT step, median of 30 (ms)\n")
    print("| threads | library | fp32 | bf16 | fp16 | bf16 / fp32 | fp16 / fp32 |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for threads in (2, 1):
        for library in LIBRARIES:
            ms = {p: float(run_in_process("step", library, p, "--threads", str(threads), threads=threads).split()[-2])
                  for p in PRECISIONS}
            print(f"| {threads} | {library} | {ms['fp32']:.1f} | {ms['bf16']:.1f} | {ms['fp16']:.1f} | "
                  f"{ms['bf16'] / ms['fp32']:.2f}x | {ms['fp16'] / ms['fp32']:.2f}x |", flush=True)
    print(f"\nPeak RSS a forward at batch {MEMORY_BATCH} adds (MiB)\n")
    print("| library | fp32 | bf16 | fp16 | fp32 / bf16 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for library in LIBRARIES:
        mb = {p: float(run_in_process("memory", library, p).split()[-2]) for p in PRECISIONS}
        print(f"| {library} | {mb['fp32']:.0f} | {mb['bf16']:.0f} | {mb['fp16']:.0f} | "
              f"{mb['fp32'] / mb['bf16']:.2f}x |", flush=True)


def runs() -> None:
    print("\n`sitp train nanogpt --stage S --precision P` (2000 steps, the default config), 2 threads\n")
    print("| stage | precision | final val loss | seconds | skipped steps |")
    print("| ---: | --- | ---: | ---: | ---: |")
    for stage in (2, 3):
        for precision in PRECISIONS:
            out = subprocess.run([sys.executable, "-m", "common.cli", "train", "nanogpt", "--stage", str(stage),
                                  "--precision", precision, "--out", f"/tmp/mixed-{stage}-{precision}", "--quiet",
                                  "--tokens", "0"], capture_output=True, text=True, check=True).stdout
            val, seconds = re.search(r"val loss ([0-9.]+) \(([0-9.]+)s\)", out).groups()
            skipped = re.search(r"(\d+) steps skipped", out)
            print(f"| {stage} | {precision} | {val} | {seconds} | {skipped.group(1) if skipped else '-'} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["step", "memory", "table", "runs"])
    parser.add_argument("library", nargs="?", choices=LIBRARIES)
    parser.add_argument("precision", nargs="?", choices=PRECISIONS)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.what == "step":
        print(f"{args.library} {args.precision} {args.threads} threads: "
              f"{median_step_ms(args.library, args.precision, args.threads):.2f} ms")
    elif args.what == "memory":
        print(f"{args.library} {args.precision}: {forward_memory_mb(args.library, args.precision):.1f} MiB")
    elif args.what == "table":
        table()
    else:
        table()
        runs()


if __name__ == "__main__":
    main()
