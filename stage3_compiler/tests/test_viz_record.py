"""VIZ's recording (viz/record.py): each realize's graph and kernels, each kernel pass by pass, each launch's
time, a TinyJit's replays timed kernel by kernel; nothing recorded or timed while no recording is on."""

import numpy as np

from .. import GlobalCounters, Tensor, TinyJit, nn, optim
from ..engine.capture import KernelStep
from ..passes import TABLE, Phase
from ..viz.record import TimedRuntime, current, recording
from . import test_cuda

KERNEL_PHASES = (Phase.OPTIONS, Phase.LOWER, Phase.UOPS, Phase.RENDER)
cuda = test_cuda.cuda  # the fixture: the cuda device (real, or emulated under SITP_CUDA_BACKEND=emulate), or a skip


def rand(*shape, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_a_realize_is_recorded_with_its_graph_kernels_and_lines():
    x, w = rand(64, 32).realize(), rand(32, 48, seed=1).realize()
    with recording() as r:
        out = (x @ w).relu().sum(-1)  # the line every base below names
        GlobalCounters.reset()
        out.realize()
    (realize,) = r.realizes
    assert len(realize["kernels"]) == GlobalCounters.kernel_count >= 1
    nodes, edges = realize["graph"]["nodes"], realize["graph"]["edges"]
    ops = {n["op"] for n in nodes}
    assert {"REDUCE_ADD", "MUL", "VIEW", "BUFFER"} <= ops
    assert sum(n.get("before", False) for n in nodes) == 2  # x and w, realized before
    assert all(0 <= a < len(nodes) and 0 <= b < len(nodes) for a, b in edges)
    computed = [n for n in nodes if n["op"] not in ("VIEW", "BUFFER")]
    assert all(n["kernel"] is not None for n in computed)
    lines = {n["site"]["code"] for n in computed}
    assert "out = (x @ w).relu().sum(-1)  # the line every base below names" in lines
    assert all(k["seconds"] > 0 and k["program"] in r.programs for k in realize["kernels"])


def test_a_kernel_is_recorded_pass_by_pass_up_to_the_source_that_ran():
    x, w = rand(64, 32).realize(), rand(32, 48, seed=1).realize()
    with recording() as r:
        (x @ w).realize()
    matmul = next(p for p in r.programs.values() if p["name"].startswith("r_"))
    steps = matmul["steps"]
    kernel_passes = [p.value for p in TABLE if TABLE[p].phase in KERNEL_PHASES and p.value in matmul["passes"]]
    assert [s["pass"] for s in steps] == ["core", *kernel_passes]  # no "beam" step: the last is what ran
    assert "heuristics" in kernel_passes and "vectorize" in kernel_passes
    assert steps[0]["opts"] == [] and "source" in steps[0] and "uops" in steps[0]
    heuristics = steps[1 + kernel_passes.index("heuristics")]
    assert heuristics["opts"] == matmul["opts"] != []
    assert any(tag == "+" for tag, _ in heuristics["source_diff"])  # its register tile rewrote the loops
    assert any(tag in "+-" for tag, _ in steps[1 + kernel_passes.index("vectorize")]["source_diff"])
    assert len(matmul["why"]) == len(matmul["opts"]) and "register tile" in matmul["why"][0]
    assert matmul["flops"] == 2 * 64 * 48 * 32 and matmul["bytes"] > 4 * (64 * 32 + 32 * 48 + 64 * 48) - 1


def training(jitted_steps: int):
    Tensor.manual_seed(0)
    lin = nn.Linear(16, 8)
    opt = optim.SGD([lin.weight, lin.bias], lr=0.1)

    @TinyJit
    def step(x):
        loss = lin(x).relu().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.realize()

    for _ in range(jitted_steps):
        step(rand(4, 16))
    return step


def test_a_tinyjits_replays_are_timed_kernel_by_kernel():
    with recording() as r:
        step = training(5)  # eager, capture, then three replays
    (jit,) = r.jits
    kernels = [s for s in step.plan.steps if isinstance(s, KernelStep)]
    assert jit["name"] == "step" and len(jit["kernels"]) == len(kernels)
    assert all(key in r.programs for key in jit["kernels"])
    assert len(jit["replays"]) == 3 and all(len(t) == len(kernels) and all(s > 0 for s in t) for t in jit["replays"])


def test_nothing_is_recorded_or_timed_without_a_recording():
    assert current() is None
    step = training(3)
    assert not any(isinstance(s.runtime, TimedRuntime) for s in step.plan.steps if isinstance(s, KernelStep))


def test_a_cuda_kernel_is_recorded_pass_by_pass_in_cuda_c(cuda):
    x, w = rand(64, 32).to(cuda).realize(), rand(32, 48, seed=1).to(cuda).realize()
    with recording() as r:
        (x @ w).realize()
    (matmul,) = [p for p in r.programs.values() if p["name"].startswith("r_")]
    assert matmul["device"] == "CUDA" and "__global__" in matmul["source"]
    assert [s["pass"] for s in matmul["steps"]][0] == "core" and matmul["steps"][-1]["pass"] != "beam"
    assert "__global__" in matmul["steps"][0]["source"]
