"""stage3's online softmax (engine/online.py) timed against the kernels it replaces, on nanoGPT's CPU
config (benchmarks/test_train.py: 4 layers, 4 heads of 32, block 64, batch 12).

`python -m benchmarks.attention_online --threads N` runs each measurement in its own process, with
the rule off and on (PASSES=+online) in turn, twice, and prints a table; torch's eager time of the same
work is its own process too. The measurements (`--one WHAT`):
- attention: causal scaled_dot_product_attention's forward alone, (12, 4, 64, 32), under TinyJit;
- forward: the model's forward and loss without gradients (an evaluation batch), under TinyJit;
- decode: nanochat's KV-cache decode (benchmarks/decode_tree.py's model and prompt), tokens/s;
- attention_grad: the attention's forward and backward (dq, dk, dv from a given output gradient), under
  TinyJit: with PASSES=+online, FlashAttention (one kernel forward, two at most backward: autograd.attention_grads);
- step: nanoGPT's whole training step (benchmarks/test_train.py's steppers), jitted.

`--heads B,H,T,D` times the attention alone (attention, attention_grad) at other sizes: where the (T, T)
probabilities the unfused kernels store leave the cache (T = 1024: 4 MiB a head of them).

`--paired` times nanoGPT's step both ways in one process: two jitted steps, one scheduled with the rule
off and one with it on, called in turn (off-on, then on-off, ...) 60 times each, so that a noisy host
slows both alike (separate processes minutes apart differed by 15% on the same tree); medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from benchmarks.cpu_step import cpu_name, median_ms

WHAT = ("attention", "forward", "decode", "attention_grad", "step")
HEADS = (12, 4, 64, 32)  # nanoGPT's CPU config: batch 12, 4 heads, block 64, head 32


def stage3_call(what: str):
    import benchmarks.test_train as B
    import stage3_compiler as s3
    from common.models.gpt import GPT
    from common.train.checkpoint import load_model_weights
    from stage3_compiler.autograd import no_grad

    rng = np.random.default_rng(0)
    if what == "attention":
        q, k, v = (s3.Tensor(rng.standard_normal(HEADS).astype(np.float32)) for _ in range(3))
        attend = s3.TinyJit(lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True).realize())
        return lambda: attend(q, k, v).numpy()
    if what == "attention_grad":
        q, k, v, g = (s3.Tensor(rng.standard_normal(HEADS).astype(np.float32)) for _ in range(4))

        @s3.TinyJit
        def grads(q, k, v, g):
            q, k, v = (t.requires_grad_() for t in (q, k, v))
            q.scaled_dot_product_attention(k, v, is_causal=True).backward(g)
            found = (q.grad, k.grad, v.grad)
            q.grad = k.grad = v.grad = None
            return found[0].realize(*found[1:])
        return lambda: grads(q, k, v, g).numpy()
    _, weights = B.stage2_stepper()
    if what == "step":
        return B.stage3_stepper(weights)
    model = GPT(s3, B.CONFIG)
    load_model_weights(s3, model, weights)

    @s3.TinyJit
    def evaluate(x, y):
        return model.loss(x, y).realize()

    def call():
        x, y = B.batch(rng)
        with no_grad():
            return evaluate(s3.Tensor(x), s3.Tensor(y)).item()
    return call


def torch_call(what: str):
    import torch

    import benchmarks.test_train as B
    from conformance.models import GPT as TorchGPT

    rng = np.random.default_rng(0)
    if what == "attention":
        q, k, v = (torch.tensor(rng.standard_normal(HEADS).astype(np.float32)) for _ in range(3))
        return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    if what == "attention_grad":
        q, k, v = (torch.tensor(rng.standard_normal(HEADS).astype(np.float32), requires_grad=True) for _ in range(3))
        g = torch.tensor(rng.standard_normal(HEADS).astype(np.float32))

        def grads():
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)
            q.grad = k.grad = v.grad = None
        return grads
    if what == "step":
        return B.torch_stepper(B.stage2_stepper()[1])
    c = B.CONFIG
    model = TorchGPT(c.vocab_size, c.block_size, c.n_layer, c.n_head, c.n_embd, c.bias)

    def call():
        x, y = B.batch(rng)
        with torch.no_grad():
            logits = model(torch.tensor(x))
            return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                     torch.tensor(y).reshape(-1)).item()
    return call


def one(what: str, library: str, threads: int) -> str:
    os.environ["OMP_NUM_THREADS"] = str(threads)  # before any library starts its pool
    import torch

    torch.set_num_threads(threads)
    if what == "decode":
        out = subprocess.run([sys.executable, "benchmarks/decode_tree.py", "3"], capture_output=True, text=True,
                             check=True, env={**os.environ, "PYTHONPATH": "."})
        return out.stdout.split()[1] + " tok/s"
    call = torch_call(what) if library == "torch" else stage3_call(what)
    return f"{median_ms(call, runs=50):.3f} ms"


def paired(threads: int, runs: int = 60) -> None:
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import benchmarks.test_train as B
    from stage3_compiler.threads import set_num_threads

    set_num_threads(threads)
    _, weights = B.stage2_stepper()
    steps = {}
    for flag in ("-online", "+online"):  # the rule is read when a step is scheduled: at its eager call and its capture
        os.environ["PASSES"] = flag
        steps[flag] = B.stage3_stepper(weights)
        for _ in range(5):
            steps[flag]()
    times: dict[str, list[float]] = {"-online": [], "+online": []}
    for r in range(runs):
        for flag in ("-online", "+online") if r % 2 == 0 else ("+online", "-online"):
            start = time.perf_counter()
            steps[flag]()
            times[flag].append(time.perf_counter() - start)
    print(f"CPU: {cpu_name()}; {threads} thread(s); nanoGPT's step, both in one process, in turn, {runs} each")
    for flag, name in (("-online", "unfused"), ("+online", "PASSES=+online")):
        ts = sorted(times[flag])
        print(f"{name}: median {statistics.median(ts) * 1e3:.2f} ms "
              f"(quartiles {ts[runs // 4] * 1e3:.2f}-{ts[3 * runs // 4] * 1e3:.2f})")


def table(threads: int, heads: str | None) -> None:
    print(f"CPU: {cpu_name()}; {threads} thread(s); each cell its own process, "
          f"the rule off and on (PASSES=+online) in turn, twice{f'; heads {heads}' if heads else ''}")
    print("| what | torch eager | stage3, unfused | stage3, online |")
    print("| --- | ---: | ---: | ---: |")
    for what in WHAT if heads is None else ("attention", "attention_grad"):
        cells = {}
        runs = [("stage3", "-online"), ("stage3", "+online")] * 2
        for library, flag in ([("torch", "-online")] if what != "decode" else []) + runs:
            out = subprocess.run([sys.executable, "-m", "benchmarks.attention_online", "--one", what, "--library",
                                  library, "--threads", str(threads), *(["--heads", heads] if heads else [])],
                                 capture_output=True, text=True, check=True, env={**os.environ, "PASSES": flag})
            cells.setdefault((library, flag), []).append(out.stdout.strip())
        keys = (("torch", "-online"), ("stage3", "-online"), ("stage3", "+online"))
        row = [", ".join(cells.get(key, ["-"])) for key in keys]
        print(f"| {what} | {' | '.join(row)} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--one", choices=WHAT)
    parser.add_argument("--library", choices=("torch", "stage3"), default="stage3")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--heads", help="B,H,T,D: the attention alone at these sizes (default: nanoGPT's)")
    parser.add_argument("--paired", action="store_true", help="the step with the rule off and on, in one process")
    args = parser.parse_args()
    if args.paired:
        return paired(args.threads)
    if args.heads:
        global HEADS
        HEADS = tuple(int(n) for n in args.heads.split(","))
        if len(HEADS) != 4 or args.one not in (None, "attention", "attention_grad"):
            parser.error("--heads takes B,H,T,D, for attention and attention_grad")
    if args.one:
        print(one(args.one, args.library, args.threads))
    else:
        table(args.threads, args.heads)


if __name__ == "__main__":
    main()
