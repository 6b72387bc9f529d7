"""Training-step benchmark: the nanoGPT CPU config on stage2 and stage3 (jitted) against PyTorch eager CPU.

Config (the issue's): n_layer 4, n_head 4, n_embd 128, block 64, batch 12, no dropout, no bias,
vocab 78 (the characters of our Shakespeare text); one step = forward, backward, clip at 1.0,
AdamW with nanoGPT's two groups. Batches are random token ids (the time of a step does not depend
on the text). All sides start from the same weights; stage3's step runs under its TinyJit, as the
training loop runs it. Memory: peak RSS of the process (ru_maxrss) and a leak check: the stage2 process's
current RSS and the Python heap (tracemalloc) must not keep growing once training is warm.

Run: `nox -s bench_train` (or `pytest benchmarks/test_train.py --benchmark-only`); torch is
needed (the `torch` extra), so the module skips where it is absent (the kernel `bench` session).
The ratio test prints the step-time ratio and checks the issue's goal (stage2 within 3x torch); the
stage3 test times stage2 and jitted stage3 each in its own block and prints their ratio (the stage3 speed
issue's goal is <= 0.8x; not met yet, so it is reported, not asserted).
"""

from __future__ import annotations

import gc
import resource
import statistics
import time
import tracemalloc

import numpy as np
import pytest

torch = pytest.importorskip("torch")
s2 = pytest.importorskip("stage2_autograd")

from common.models.gpt import GPT, GPTConfig  # noqa: E402
from common.train.checkpoint import load_model_weights  # noqa: E402
from common.train.optimizers import build_optimizer  # noqa: E402
from common.train.precision import mixed  # noqa: E402
from conformance.models import GPT as TorchGPT  # noqa: E402
from conformance.models import load_numpy_state  # noqa: E402

CONFIG = GPTConfig(block_size=64, vocab_size=78, n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=False)
BATCH = 12
GOAL_RATIO = 3.0
ROUNDS, BLOCK = 4, 5  # test_stage3_step_time: rounds of one block of steps per library


def batch(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    ids = rng.integers(0, CONFIG.vocab_size, (BATCH, CONFIG.block_size + 1))
    return ids[:, :-1], ids[:, 1:]


def stage2_stepper():
    T = s2.Tensor
    T.manual_seed(0)
    model = GPT(s2, CONFIG)
    opt = build_optimizer(s2, model, "adamw", 1e-3, 0.1, (0.9, 0.99))
    rng = np.random.default_rng(0)
    weights = {k: t.numpy() for k, t in s2.nn.state.get_state_dict(model).items()}

    def step() -> float:
        x, y = batch(rng)
        loss = model.loss(T(x), T(y))
        loss.backward()
        s2.optim.clip_grad_norm_(opt.params, 1.0)
        opt.step()
        opt.zero_grad()
        return loss.item()

    return step, weights


def stage3_stepper(weights: dict[str, np.ndarray], precision: str = "fp32"):
    """stage2's step on stage3, from the same weights: forward, backward, clip and AdamW under TinyJit
    (call 1 runs eagerly, call 2 captures the kernels, from call 3 on they replay); the forward under
    autocast for precision bf16 or fp16 (without fp16's loss scaling: the kernels are the same)."""
    s3 = pytest.importorskip("stage3_compiler")
    T = s3.Tensor
    model = GPT(s3, CONFIG)
    load_model_weights(s3, model, weights)
    opt = build_optimizer(s3, model, "adamw", 1e-3, 0.1, (0.9, 0.99))
    rng = np.random.default_rng(0)

    @s3.TinyJit
    def train_step(x, y):
        with mixed(s3, precision):
            loss = model.loss(x, y).realize()  # the forward's kernels once, for the loss and backward
        loss.backward()
        s3.optim.clip_grad_norm_(opt.params, 1.0)
        opt.step()
        opt.zero_grad()
        return loss

    def step() -> float:
        x, y = batch(rng)
        return train_step(T(x), T(y)).item()

    return step


def torch_stepper(weights: dict[str, np.ndarray]):
    model = TorchGPT(CONFIG.vocab_size, CONFIG.block_size, CONFIG.n_layer, CONFIG.n_head, CONFIG.n_embd, CONFIG.bias)
    load_numpy_state(model, weights)
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99))
    rng = np.random.default_rng(0)

    def step() -> float:
        x, y = batch(rng)
        loss = model.loss(torch.from_numpy(x), torch.from_numpy(y))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    return step


@pytest.mark.parametrize("impl", ["stage2", "stage3", "torch"])
def test_nanogpt_step(benchmark, impl):
    step, weights = stage2_stepper()
    if impl == "stage3":
        step = stage3_stepper(weights)
    if impl == "torch":
        step = torch_stepper(weights)
    first = step()
    assert abs(first - np.log(CONFIG.vocab_size)) < 0.5  # a sane start: about ln(vocab)
    benchmark.group = "nanogpt-cpu-step"
    benchmark.extra_info.update(impl=impl, batch=BATCH, tokens_per_step=BATCH * CONFIG.block_size,
                                torch_threads=torch.get_num_threads())
    benchmark.pedantic(step, rounds=10, iterations=1, warmup_rounds=2)
    benchmark.extra_info["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_step_time_ratio(record_property):
    """Median step time of stage2 over torch's, interleaved in one run so both see the same load."""
    ours, weights = stage2_stepper()
    theirs = torch_stepper(weights)
    times: dict[str, list[float]] = {"stage2": [], "torch": []}
    for _ in range(2):
        ours(), theirs()
    for _ in range(10):
        for name, step in (("stage2", ours), ("torch", theirs)):
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["stage2"] / med["torch"]
    print(f"\nnanoGPT CPU step: stage2 {med['stage2'] * 1e3:.1f} ms, torch {med['torch'] * 1e3:.1f} ms "
          f"({torch.get_num_threads()} threads), ratio {ratio:.2f}x (goal <= {GOAL_RATIO}x)")
    record_property("stage2_ms", med["stage2"] * 1e3)
    record_property("torch_ms", med["torch"] * 1e3)
    record_property("ratio", ratio)
    assert ratio <= GOAL_RATIO, f"stage2 step is {ratio:.2f}x torch's, the goal is {GOAL_RATIO}x"


def test_stage3_step_time(record_property):
    """Jitted stage3 against stage2 and torch from the same weights: the same losses step for step
    (float32 reduction-order noise), then the median step time of each. Each library runs in blocks
    of its own (BLOCK steps, so no two thread pools interleave call by call), and the blocks take
    turns over ROUNDS rounds, so a machine whose speed drifts during the run slows all three alike;
    the ratios are also taken round by round, and their median is reported."""
    ours, weights = stage2_stepper()
    lazy = stage3_stepper(weights)
    theirs = torch_stepper(weights)
    for _ in range(3):  # stage3: eager, capture, first replay
        assert lazy() == pytest.approx(ours(), rel=1e-4)
    theirs()
    steps = {"stage2": ours, "stage3": lazy, "torch": theirs}
    times: dict[str, list[list[float]]] = {name: [] for name in steps}
    for _ in range(ROUNDS):
        for name, step in steps.items():
            block = []
            for _ in range(BLOCK):
                start = time.perf_counter()
                step()
                block.append(time.perf_counter() - start)
            times[name].append(block)
    med = {name: statistics.median(t for block in blocks for t in block) for name, blocks in times.items()}
    rounds = [{name: statistics.median(blocks[r]) for name, blocks in times.items()} for r in range(ROUNDS)]
    ratio = statistics.median(r["stage3"] / r["stage2"] for r in rounds)
    vs_torch = statistics.median(r["stage3"] / r["torch"] for r in rounds)
    print(f"\nnanoGPT CPU step: stage2 {med['stage2'] * 1e3:.1f} ms, stage3 jitted {med['stage3'] * 1e3:.1f} ms, "
          f"torch {med['torch'] * 1e3:.1f} ms; stage3/stage2 {ratio:.2f}x (goal <= 0.8x), stage3/torch "
          f"{vs_torch:.2f}x (stretch goal <= 1.0x); per round: "
          + ", ".join(f"{r['stage3'] / r['stage2']:.2f}" for r in rounds))
    record_property("stage3_ms", med["stage3"] * 1e3)
    record_property("stage3_over_stage2", ratio)
    record_property("stage3_over_torch", vs_torch)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def test_no_memory_growth():
    """After warm-up, 20 more stage2 steps grow neither the process's RSS nor the Python heap.

    The two are measured over separate runs of 20 steps: tracemalloc's own tables live in the
    process's memory and grow while it traces, so RSS is read with tracing off."""
    step, _ = stage2_stepper()
    for _ in range(5):
        step()
    gc.collect()
    rss_before = _rss_mb()
    for _ in range(20):
        step()
    gc.collect()
    rss_growth = _rss_mb() - rss_before
    tracemalloc.start()
    heap_before = tracemalloc.get_traced_memory()[0]
    for _ in range(20):
        step()
    gc.collect()
    heap_growth = (tracemalloc.get_traced_memory()[0] - heap_before) / 2**20
    peak_heap = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS {peak_rss:.0f} MB; over 20 steps: RSS {rss_growth:+.1f} MB, Python heap {heap_growth:+.2f} MB "
          f"(traced peak {peak_heap:.1f} MB)")
    assert heap_growth < 1.0, f"the Python heap grew by {heap_growth:.2f} MB over 20 steps"
    assert rss_growth < 20.0, f"RSS grew by {rss_growth:.1f} MB over 20 steps"
