"""The jitted nanoGPT CPU step of benchmarks/test_train.py on stage3: kernels per replay and the losses of
8 steps from stage2's initial weights, for comparing two trees of the repository (the losses must agree):
`python benchmarks/jit_plan.py PATH_TO_TREE` (run from that tree's root or any other)."""

import sys

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else ".")

import benchmarks.test_train as B  # noqa: E402  (from the tree named above)

_, weights = B.stage2_stepper()
step = B.stage3_stepper(weights)
losses = [step() for _ in range(8)]
jit = next(c.cell_contents for c in step.__closure__ if type(c.cell_contents).__name__ == "TinyJit")
print(f"{B.__file__}: {jit.plan.kernels} kernels per replay; losses {[round(v, 5) for v in losses]}")
