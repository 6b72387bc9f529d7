"""The training step of tinygrad's MNIST example on stage3, eager against TinyJit, each in its own process:
`python -m benchmarks.mnist_step eager|jit --threads N --batch B` prints the median of 10 steps after 3
warm-ups; `--all` runs both at 1 and 2 threads, one process after another, and prints a table.

The step is tinygrad's as written (inside Tensor.train(): opt.zero_grad(), a Tensor.randint batch, the
model, sparse_categorical_crossentropy(...).backward(), opt.step(), return the loss), and so is the
model (two 5x5 and two 3x3 convolutions, BatchNorm, max_pool2d, a Linear) and its Adam. The images are
random 28x28 (no MNIST download): the kernels, not the accuracy, are timed here; the test that the
jitted step trains as the eager one does is stage3_compiler/tests/test_jit.py.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def one(mode: str, threads: int, batch: int) -> float:
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import numpy as np

    from stage3_compiler import Tensor, TinyJit, nn, optim

    Tensor.manual_seed(0)
    layers = [nn.Conv2d(1, 32, 5), Tensor.relu, nn.Conv2d(32, 32, 5), Tensor.relu, nn.BatchNorm(32),
              lambda t: t.max_pool2d(2), nn.Conv2d(32, 64, 3), Tensor.relu, nn.Conv2d(64, 64, 3), Tensor.relu,
              nn.BatchNorm(64), lambda t: t.max_pool2d(2), lambda t: t.flatten(1), nn.Linear(576, 10)]
    opt = optim.Adam(nn.state.get_parameters(layers))
    rng = np.random.default_rng(0)
    X = Tensor(rng.standard_normal((1024, 1, 28, 28)).astype(np.float32)).realize()
    Y = Tensor(rng.integers(0, 10, 1024)).realize()

    def train_step():
        with Tensor.train():
            opt.zero_grad()
            samples = Tensor.randint(batch, high=X.shape[0])
            loss = X[samples].sequential(layers).sparse_categorical_crossentropy(Y[samples]).backward()
            opt.step()
            return loss

    step = TinyJit(train_step) if mode == "jit" else train_step
    for _ in range(3):
        step().item()
    times = []
    for _ in range(10):
        start = time.perf_counter()
        step().item()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=("eager", "jit"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--all", action="store_true")
    args = parser.parse_args()
    if not args.all:
        print(f"{one(args.mode, args.threads, args.batch):.1f}")
        return
    from benchmarks.cpu_step import cpu_name

    print(f"CPU: {cpu_name()}; batch {args.batch}; median of 10 steps after 3 warm-ups, each mode in its own process")
    print("| threads | eager ms | TinyJit ms | eager / jit |\n| ---: | ---: | ---: | ---: |")
    for threads in (1, 2):
        ms = [float(subprocess.run([sys.executable, "-m", "benchmarks.mnist_step", mode, "--threads", str(threads),
                                    "--batch", str(args.batch)], capture_output=True, text=True, check=True)
                    .stdout.split()[-1]) for mode in ("eager", "jit")]
        print(f"| {threads} | {ms[0]:.1f} | {ms[1]:.1f} | {ms[0] / ms[1]:.2f}x |")


if __name__ == "__main__":
    main()
