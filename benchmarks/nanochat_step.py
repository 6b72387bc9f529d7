"""Median step time of nanochat's default model (depth 4, 16 rows of 128 tokens, vocab 4096) with Muon and
AdamW, on one stage per process (stage3 under TinyJit), from the same seed:
`python -m benchmarks.nanochat_step 2` and then `python -m benchmarks.nanochat_step 3`, back to back.
Prints the median of steps 5-12 and the last loss (the stages agree on it)."""
import sys
import time

import numpy as np

from common.models.nanochat import NanoChat, NanoChatConfig
from common.stages import load_stage


def stepper(stage):
    """A function that runs one training step on fresh random tokens and returns its loss; on stage3 the
    step is a TinyJit (call 1 eager, call 2 captures, then replays), reachable as `stepper.jit`."""
    T = stage.Tensor
    T.manual_seed(0)
    cfg = NanoChatConfig.from_depth(4, vocab_size=4096, sequence_len=128)
    model = NanoChat(stage, cfg)
    opt = model.optimizers(stage)
    rng = np.random.default_rng(0)

    def train_step(x, y):
        with T.train():
            loss = model.loss(x, y).realize()
            loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    run = stage.TinyJit(train_step) if hasattr(stage, "TinyJit") else train_step

    def step() -> float:
        d = rng.integers(0, 4096, (16, 129))
        return run(T(d[:, :-1]), T(d[:, 1:])).item()

    step.jit = run
    return step


def main() -> None:
    step = stepper(load_stage(int(sys.argv[1])))
    times = []
    for _ in range(12):
        start = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - start)
    print(f"stage{sys.argv[1]}: median step {np.median(times[4:])*1e3:.0f} ms (steps 5-12), loss {loss:.4f}")


if __name__ == "__main__":
    main()
