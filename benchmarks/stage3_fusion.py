"""stage3's kernel counts per realize for the graphs the compiler issue names, and the time of a
warm nanoGPT CPU-config training step against stage2's, each stage in this one process on one
thread (the stages share no thread pool: stage3's kernels are single-threaded); stage2's kernel
calls in the same step against stage3's kernels; and the first step of a fresh process with an
empty kernel cache (every kernel compiled) and with the cache that run left on disk.

    OMP_NUM_THREADS=1 python -m benchmarks.stage3_fusion > benchmarks/results/stage3_fusion.txt
"""

from __future__ import annotations

import time

import numpy as np

from common.models.gpt import GPT, GPTConfig
from common.stages import load_stage


def kernel_counts(s3) -> dict[str, int]:
    T, counters, rng = s3.Tensor, s3.GlobalCounters, np.random.default_rng(0)

    def rand(*shape):
        return T(rng.standard_normal(shape).astype(np.float32))

    def count(out) -> int:
        counters.reset()
        out.realize()
        return counters.kernel_count

    x, y, t = rand(64, 65), rand(64, 65), T(rng.integers(0, 65, (64,)))
    q, k, v, w, b = rand(2, 4, 16, 8), rand(2, 4, 16, 8), rand(2, 4, 16, 8), rand(65, 32), rand(32)
    out = {"elementwise chain (7 ops)": count(((x * y + 1).exp() * x - y).sqrt().relu() * 2 + x),
           "(x*y).sum()": count((x * y).sum()), "softmax": count(x.softmax(-1)), "layernorm": count(x.layernorm()),
           "cross_entropy": count(x.cross_entropy(t)),
           "causal attention": count(q.scaled_dot_product_attention(k, v, is_causal=True)),
           "relu(x @ w + b)": count((x @ w + b).relu())}
    p = rand(32, 16).requires_grad_()
    opt = s3.optim.AdamW([p], lr=1e-3, weight_decay=0.1)
    p.grad = rand(32, 16)
    counters.reset()
    opt.step()
    out["AdamW step, one parameter"] = counters.kernel_count
    return out


def make_step(stage, jit: bool = False):
    """One nanoGPT CPU-config training step (forward, backward, clip, AdamW, the loss read back) as
    a function; with jit, the step's work runs under stage3's TinyJit."""
    T = stage.Tensor
    T.manual_seed(0)
    model = GPT(stage, GPTConfig(block_size=64, vocab_size=78, n_layer=4, n_head=4, n_embd=128, dropout=0.0))
    opt = stage.optim.AdamW(stage.nn.state.get_parameters(model), lr=1e-3, weight_decay=0.1)
    rng = np.random.default_rng(0)

    def work(x, y):
        loss = model.loss(x, y).realize()  # as the training loop does: the forward once, for loss and backward
        loss.backward()
        stage.optim.clip_grad_norm_(opt.params, 1.0)
        opt.step()
        opt.zero_grad()
        return loss

    run = stage.TinyJit(work) if jit else work

    def step() -> None:
        run(T(rng.integers(0, 78, (12, 64))), T(rng.integers(0, 78, (12, 64)))).item()

    step.jitted = run if jit else None
    return step


def step_time(stage, steps: int = 7, jit: bool = False) -> tuple[float, int | None]:
    """Median seconds of a warm nanoGPT CPU-config step, and for stage3 its kernel count. The first
    step compiles (stage3) and warms the caches, and a jitted step's second call captures: neither
    is timed."""
    step, counters = make_step(stage, jit), getattr(stage, "GlobalCounters", None)
    step()
    if jit:
        step()
    times = []
    for _ in range(steps):
        if counters:
            counters.reset()
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    if jit:
        print(f"  (the jitted step's temporaries take {step.jitted.peak_bytes / 2**20:.1f} MiB after its memory "
              f"plan; replay: {step.jitted.plan.kernels} kernels)")
    return float(np.median(times)), counters.kernel_count if counters else None


def replay_overhead_us(stage3) -> tuple[float, float]:
    """A replayed nanoGPT step's Python cost per kernel, in microseconds: the replay with every
    launch stubbed out (the table, the slots, the call's checks and outputs; bounds-check steps
    left out, their buffers would hold stale values), and one ctypes launch of an empty
    four-buffer kernel."""
    from stage3_compiler.buffer import Buffer
    from stage3_compiler.codegen.program import Program
    from stage3_compiler.cpu.compiler import compile_c
    from stage3_compiler.cpu.runtime import CPURuntime, cpu_runtime
    from stage3_compiler.engine.capture import CheckStep

    step = make_step(stage3, jit=True)
    for _ in range(3):
        step()
    plan, T = step.jitted.plan, stage3.Tensor
    plan.steps[:] = [s for s in plan.steps if not isinstance(s, CheckStep)]
    x, y = T(np.zeros((12, 64), np.int64)), T(np.zeros((12, 64), np.int64))
    real, CPURuntime.launch = CPURuntime.launch, lambda self, program, buffers, values=(): None
    try:
        times = []
        for _ in range(20):
            start = time.perf_counter()
            step.jitted(x, y)
            times.append(time.perf_counter() - start)
    finally:
        CPURuntime.launch = real
    empty = compile_c("void empty(float *a, const float *b, const float *c, const float *d) {}", "empty")
    buffers = [Buffer(64) for _ in range(4)]
    program = Program(None, "", empty, [])
    start = time.perf_counter()
    for _ in range(20000):
        cpu_runtime.launch(program, buffers)
    return float(np.median(times)) / plan.kernels * 1e6, (time.perf_counter() - start) / 20000 * 1e6


def c_calls_per_step(stage2) -> int:
    """stage2's kernel calls in one warm nanoGPT step: every C (or CUDA) call's status goes through
    device.check, which each module imported by name, so each module's name is wrapped here."""
    import sys

    calls = [0]
    original = stage2.device.check

    def counting(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    modules = [m for name, m in sys.modules.items() if name.startswith(stage2.__name__) and
               getattr(m, "check", None) is original]
    step = make_step(stage2)
    step()  # warm, and the model built: neither is counted
    for m in modules:
        m.check = counting
    try:
        step()
    finally:
        for m in modules:
            m.check = original
    return calls[0]


def first_step_seconds(cache: str) -> float:
    """The first nanoGPT step of a fresh process whose kernel cache lives in `cache`: with an empty
    one it compiles every kernel (cold); run again, it finds them on disk (warm)."""
    import os
    import subprocess
    import sys

    code = ("import time; from benchmarks.stage3_fusion import make_step; from common.stages import load_stage;"
            "s = load_stage(3); t = time.perf_counter(); make_step(s)(); print(time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "SITP_CACHE": cache},
                         capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def main() -> None:
    s2, s3 = load_stage(2), load_stage(3)
    print("stage3 kernels per realize:")
    for name, n in kernel_counts(s3).items():
        print(f"  {name:<28} {n}")
    print("nanoGPT CPU-config step (4 layers, 128 wide, batch 12 x 64), median of 7 warm steps, one thread:")
    t2, _ = step_time(s2)
    t3, kernels = step_time(s3)
    tj, _ = step_time(s3, jit=True)
    print(f"  stage2 {t2 * 1e3:.1f} ms; stage3 eager {t3 * 1e3:.1f} ms ({t3 / t2:.2f}x), jitted {tj * 1e3:.1f} ms "
          f"({tj / t2:.2f}x); stage3 kernels per eager step {kernels}")
    book, launch = replay_overhead_us(s3)
    print(f"  a replay's Python per kernel: {book:.1f} us of bookkeeping + {launch:.1f} us a ctypes launch "
          "(goal <= 10 us)")
    calls = c_calls_per_step(s2)
    print(f"  stage2 kernel calls per step {calls}: stage3's kernels are {kernels / calls:.2f} of them (goal <= 1/3)")
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        cold, warm = first_step_seconds(cache), first_step_seconds(cache)
    print(f"  stage3 first step of a process (model built, forward, backward, AdamW): cold kernel cache "
          f"{cold:.1f} s (compiles every kernel), warm disk cache {warm:.1f} s")


if __name__ == "__main__":
    main()
