"""The jitted nanoGPT CPU step of benchmarks/test_train.py on stage3 from one tree of the repository:
the median of 30 replayed steps, for comparing two trees in back-to-back processes:
`python benchmarks/step_time_tree.py PATH_TO_TREE [--eager]` (the tree, kernels per replay, median ms;
with --eager also an eager step without the JIT, benchmarks/stage3_fusion.make_step's, median of 10)."""

import statistics
import sys
import time

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else ".")

import benchmarks.test_train as B  # noqa: E402  (from the tree named above)


def median_ms(step, warmup: int, runs: int) -> float:
    for _ in range(warmup):
        step()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


_, weights = B.stage2_stepper()
step = B.stage3_stepper(weights)
median = median_ms(step, 5, 30)  # warm-up: eager, capture, replays
jit = next(c.cell_contents for c in step.__closure__ if type(c.cell_contents).__name__ == "TinyJit")
print(f"{sys.argv[1] if len(sys.argv) > 1 else '.'}: {jit.plan.kernels} kernels per replay, "
      f"median step {median:.1f} ms")

if "--eager" in sys.argv:  # the same model's step without the JIT: the graph built and scheduled every step
    from benchmarks.stage3_fusion import make_step  # noqa: E402
    from common.stages import load_stage  # noqa: E402

    eager = make_step(load_stage(3), jit=False)
    print(f"{sys.argv[1]}: eager step median {median_ms(eager, 3, 10):.1f} ms")
