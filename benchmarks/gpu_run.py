"""The Python half of benchmarks/gpu_run.sh (issue 27: one prepared run on a lent GPU).

    python benchmarks/gpu_run.py env                      # versions of everything the run depends on
    python benchmarks/gpu_run.py check                    # build the C kernels, one op on each stage's cuda device
    python benchmarks/gpu_run.py subset                   # noxfile.py's STAGE3_CUDA_SUBSET (read, not imported)
    python benchmarks/gpu_run.py nanogpt --impl stage2|stage3|torch [--smoke] [--steps N] [--torch-cpu] --json PATH
    python benchmarks/gpu_run.py merge --json OUT.json IN.json ...
    python benchmarks/gpu_run.py profile --impl stage2|stage3|torch [--smoke] [--torch-cpu]   # where a step goes

nanogpt: one training step of nanoGPT's GPU config (n_layer 6, n_head 6, n_embd 384, block 256, batch 64,
no dropout, no bias, vocab 78 as in benchmarks/test_train.py) on one implementation, in a process of
its own: stage2 on its cuda device (eager), stage3 on its cuda device under TinyJit (call 1 eager,
call 2 captures, then replays), or PyTorch eager on the same GPU. A step is forward, backward, clip
at 1.0 and AdamW with nanoGPT's two groups, from the same initial weights (stage2's, seed 0) and the
same random batches in every implementation, so their losses can be compared step by step. Each
step ends with loss.item(), which waits for the device, so a host clock times it. The JSON is
rewritten after every step: a run stopped by its timeout still leaves the steps it made.

With SITP_CUDA_BACKEND=emulate the stages' cuda devices run on the CPU emulator
(common/cuda_emulation.py), as in the tests: that is how gpu_run.sh is rehearsed without a GPU.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

EMULATE = os.environ.get("SITP_CUDA_BACKEND") == "emulate"


# ---- env ----


def _run(*cmd: str) -> str:
    if shutil.which(cmd[0]) is None:
        return f"{cmd[0]}: not found"
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{' '.join(cmd)}: {e}"
    return (done.stdout + done.stderr).strip()


def _version(module: str) -> str:
    try:
        mod = __import__(module)
    except Exception as e:  # an import can fail in many ways (a missing libcuda, say)
        return f"not importable ({type(e).__name__}: {e})"
    return f"{getattr(mod, '__version__', '?')} at {Path(getattr(mod, '__file__', '?') or '?').parent}"


def cmd_env(args) -> int:
    import sysconfig

    include = sysconfig.get_paths()["include"]
    print(f"python: {sys.version.split()[0]} at {sys.executable}; platform {platform.platform()}")
    print(f"Python.h (cffi builds the C kernels against it): "
          f"{'present' if Path(include, 'Python.h').exists() else 'MISSING'} in {include}")
    print(f"cc: {_run(os.environ.get('CC', 'cc'), '--version').splitlines()[0]}")
    print(f"g++: {_run('g++', '--version').splitlines()[0]}")
    print(f"nvcc: {_run('nvcc', '--version').splitlines()[-1]}")
    for name in ("numpy", "cffi", "pycparser", "setuptools", "pytest", "hypothesis", "pytest_benchmark",
                 "matplotlib", "safetensors", "regex", "tqdm", "tiktoken", "sklearn"):
        print(f"{name}: {_version(name)}")
    env = os.environ
    print(f"SITP_CUDA_BACKEND={env.get('SITP_CUDA_BACKEND', '')!r}  PYTHONPATH={env.get('PYTHONPATH', '')!r}")
    print(f"cupy: {_version('cupy')}")
    try:
        import cupy

        rt = cupy.cuda.runtime
        count = rt.getDeviceCount()
        print(f"  CUDA runtime {rt.runtimeGetVersion()}, driver API {rt.driverGetVersion()}, {count} GPU(s)")
        for i in range(count):
            props = rt.getDeviceProperties(i)
            name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
            print(f"  GPU {i}: {name}, sm_{props['major']}{props['minor']}, {props['multiProcessorCount']} SMs, "
                  f"{props['totalGlobalMem'] / 2**30:.1f} GiB")
    except Exception as e:
        print(f"  skipped: no GPU visible to CuPy ({type(e).__name__}: {e})")
    print(f"torch: {_version('torch')}")
    try:
        import torch

        print(f"  torch.version.cuda {torch.version.cuda}; cuda available: {torch.cuda.is_available()}"
              + (f"; {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "; skipped: no GPU"))
    except Exception as e:
        print(f"  {type(e).__name__}: {e}")
    return 0


# ---- check ----


def cmd_check(args) -> int:
    """Import stage2 and stage3 (building their C kernels on first import), then one small computation
    on each cuda device against the CPU: a broken CuPy, NVRTC or driver shows here, in seconds."""
    import numpy as np

    from common.stages import load_stage  # honours SITP_CUDA_BACKEND=emulate

    failed, lines = 0, []
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    for number in (2, 3):
        start = time.perf_counter()
        stage = load_stage(number)
        built = time.perf_counter() - start
        try:
            t = stage.Tensor(x, device="cuda")
            got = ((t @ t.T).exp() * 2 + 1).sum(axis=1).numpy()
            x64 = x.astype(np.float64)
            want = (np.exp(x64 @ x64.T) * 2 + 1).sum(axis=1)
            ok = np.allclose(got, want, rtol=1e-4)
            rt = __import__(f"{stage.__name__}.cuda.runtime", fromlist=["runtime"]).runtime()
            print(f"{stage.__name__}: import {built:.1f}s; cuda on {type(rt.backend).__name__}: "
                  f"{'ok' if ok else f'WRONG {got} vs {want}'} ({time.perf_counter() - start:.1f}s in all)")
            failed += not ok
            lines.append(f"{stage.__name__} {'ok' if ok else 'WRONG'}")
        except Exception as e:
            print(f"{stage.__name__}: import {built:.1f}s; cuda FAILED: {type(e).__name__}: {e}")
            failed += 1
            lines.append(f"{stage.__name__} FAILED ({type(e).__name__})")
    print("cuda devices: " + ", ".join(lines))
    return 1 if failed else 0


# ---- subset ----


def stage3_cuda_subset() -> str:
    """noxfile.py's STAGE3_CUDA_SUBSET, read without importing nox: the file's top-level string constants are
    evaluated in order (the subset is an f-string over REDUCING_GRADS), anything else is passed over."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    names: dict = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        try:
            value = eval(compile(ast.Expression(node.value), "noxfile.py", "eval"), {"__builtins__": {}}, names)
        except Exception:
            continue
        if isinstance(value, str):
            names[node.targets[0].id] = value
    if "STAGE3_CUDA_SUBSET" not in names:
        raise SystemExit("gpu_run.py: noxfile.py has no STAGE3_CUDA_SUBSET")
    return names["STAGE3_CUDA_SUBSET"]


def cmd_subset(args) -> int:
    print(stage3_cuda_subset())
    return 0


# ---- nanogpt ----


def gpt_config(smoke: bool):
    from common.models.gpt import GPTConfig

    if smoke:  # a 2-layer toy: seconds on the emulator once its kernels are built
        return GPTConfig(block_size=16, vocab_size=78, n_layer=2, n_head=2, n_embd=32, dropout=0.0, bias=False), 4
    return GPTConfig(block_size=256, vocab_size=78, n_layer=6, n_head=6, n_embd=384, dropout=0.0, bias=False), 64


def initial_weights(config) -> dict:
    """stage2's initial weights on the CPU, seed 0 (as benchmarks/test_train.py)."""
    import stage2_autograd as s2
    from common.models.gpt import GPT

    s2.Tensor.manual_seed(0)
    model = GPT(s2, config)
    return {k: t.numpy() for k, t in s2.nn.state.get_state_dict(model).items()}


def batches(config, batch: int):
    import numpy as np

    rng = np.random.default_rng(0)
    while True:
        ids = rng.integers(0, config.vocab_size, (batch, config.block_size + 1))
        yield ids[:, :-1], ids[:, 1:]


def ours_stepper(number: int, config, batch: int, weights: dict, precision: str = "fp32"):
    from common.models.gpt import GPT
    from common.stages import load_stage
    from common.train.checkpoint import load_model_weights
    from common.train.optimizers import build_optimizer

    stage = load_stage(number)
    stage.Device.DEFAULT = "CUDA"  # model, optimizer state and batches all on the device
    T = stage.Tensor
    model = GPT(stage, config)
    load_model_weights(stage, model, weights)
    opt = build_optimizer(stage, model, "adamw", 1e-3, 0.1, (0.9, 0.99))
    data = batches(config, batch)

    def train_step(x, y):
        # bf16: matmuls and attention in bfloat16 (stage2: on the tensor cores)
        with T.autocast(stage.dtypes.bfloat16, enabled=precision == "bf16"):
            loss = model.loss(x, y).realize() if number == 3 else model.loss(x, y)
        loss.backward()
        stage.optim.clip_grad_norm_(opt.params, 1.0)
        opt.step()
        opt.zero_grad()
        return loss

    if number == 3:
        train_step = stage.TinyJit(train_step)

    def step() -> float:
        x, y = next(data)
        return train_step(T(x), T(y)).item()

    return step


def torch_stepper(config, batch: int, weights: dict, device: str, precision: str = "fp32"):
    import torch

    from conformance.models import GPT as TorchGPT
    from conformance.models import load_numpy_state

    model = TorchGPT(config.vocab_size, config.block_size, config.n_layer, config.n_head, config.n_embd, config.bias)
    load_numpy_state(model, weights)
    model.to(device)
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99))
    data = batches(config, batch)

    def step() -> float:
        x, y = next(data)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model.loss(torch.from_numpy(x).to(device), torch.from_numpy(y).to(device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    return step


def device_memory(impl: str, device: str) -> float | None:
    """Peak (torch) or pooled (CuPy) device memory in MiB, where it can be read."""
    try:
        if impl == "torch":
            import torch

            return torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None
        if EMULATE:
            return None
        import cupy

        return cupy.get_default_memory_pool().total_bytes() / 2**20
    except Exception:
        return None


def cmd_nanogpt(args) -> int:
    config, batch = gpt_config(args.smoke)
    warmup, steps = (2, 2) if args.smoke else (3, args.steps)
    out = Path(args.json)
    record = {"impl": args.impl, "precision": args.precision, "config": vars(config) | {"batch": batch},
              "smoke": args.smoke,
              "backend": "emulate" if EMULATE else "cupy", "warmup": warmup, "steps_timed": steps,
              "tokens_per_step": batch * config.block_size, "complete": False}
    start = time.perf_counter()
    weights = initial_weights(config)
    if args.impl == "torch":
        import torch

        device = "cpu" if args.torch_cpu else "cuda"
        if device == "cuda" and not torch.cuda.is_available():
            print("skipped: no GPU (torch.cuda.is_available() is False)")
            return 3
        record |= {"torch": torch.__version__, "device": device,
                   "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                   "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None}
        step = torch_stepper(config, batch, weights, device, args.precision)
        sync = (lambda: torch.cuda.synchronize()) if device == "cuda" else (lambda: None)
    else:
        step = ours_stepper(2 if args.impl == "stage2" else 3, config, batch, weights, args.precision)
        record["device"] = "CUDA (emulated)" if EMULATE else "CUDA"
        sync = lambda: None  # noqa: E731 (loss.item() already waited for the device)
    record["setup_s"] = time.perf_counter() - start
    losses, first, times = [], [], []
    for _ in range(warmup):  # stage3: eager, capture, (first replay)
        t0 = time.perf_counter()
        losses.append(step())
        first.append(time.perf_counter() - t0)
    record |= {"warmup_s": first, "losses": losses}
    sync()
    for _ in range(steps):
        t0 = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        record |= {"step_s": times, "median_ms": med * 1e3, "tokens_per_s": batch * config.block_size / med,
                   "device_mem_mib": device_memory(args.impl, record["device"])}
        out.write_text(json.dumps(record, indent=1))
    record["complete"] = True
    out.write_text(json.dumps(record, indent=1))
    print(f"{args.impl}: median {record['median_ms']:.1f} ms/step over {steps} ({record['tokens_per_s']:,.0f} tok/s); "
          f"warm-up {', '.join(f'{s:.1f}' for s in first)} s; loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    return 0


def cmd_matmul(args) -> int:
    """A square matmul through the API on the device, median of `--calls` after 2 warm-ups: stage2's
    `Tensor.matmul` (bfloat16: the top tensor-core rung; float32: the top SIMT rung) or torch's (cuBLAS).
    Prints and writes GFLOP/s (2n^3 / median)."""
    import numpy as np

    n, calls = args.n, args.calls
    host = np.random.default_rng(0).standard_normal((2, n, n)).astype(np.float32)
    if args.impl == "torch":
        import torch

        if not torch.cuda.is_available():
            print("skipped: no GPU (torch.cuda.is_available() is False)")
            return 3
        a, b = (torch.from_numpy(h).cuda().to(getattr(torch, args.dtype)) for h in host)
        product, sync = (lambda: a @ b), torch.cuda.synchronize
    else:
        from common.stages import load_stage

        stage = load_stage(2)
        a, b = (stage.Tensor(h, device="CUDA").cast(getattr(stage.dtypes, args.dtype)) for h in host)
        product = lambda: a @ b  # noqa: E731
        sync = lambda: (a @ b)[0, 0].item()  # noqa: E731 (a read waits for every launch before it)
    times = []
    for i in range(calls + 2):
        sync()
        t0 = time.perf_counter()
        product()
        sync()
        if i >= 2:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    record = {"impl": args.impl, "dtype": args.dtype, "n": n, "calls": calls, "median_s": med,
              "gflops": 2 * n**3 / med / 1e9, "backend": "emulate" if EMULATE else "cupy"}
    Path(args.json).write_text(json.dumps(record, indent=1))
    print(f"{args.impl} {args.dtype} n={n}: {record['gflops']:,.0f} GFLOP/s (median of {calls})")
    return 0


def cmd_merge(args) -> int:
    runs = {}
    for path in args.inputs:
        p = Path(path)
        if p.exists():
            data = json.loads(p.read_text())
            runs[data["impl"]] = data
    merged: dict = {"runs": runs, "missing": [i for i in ("stage2", "stage3", "torch") if i not in runs]}
    med = {k: v["median_ms"] for k, v in runs.items() if "median_ms" in v}
    ratios = {f"{a}/{b}": med[a] / med[b] for a, b in (("stage2", "torch"), ("stage3", "torch"), ("stage3", "stage2"))
              if a in med and b in med}
    merged["median_ms"], merged["ratios"] = med, ratios
    # the same weights and batches: losses agree step by step up to float32 reduction order
    if "stage2" in runs:
        ref = runs["stage2"]["losses"]
        merged["loss_rel_diff_vs_stage2"] = {
            k: max((abs(a - b) / abs(b) for a, b in zip(v["losses"], ref, strict=False)), default=None)
            for k, v in runs.items() if k != "stage2"}
    Path(args.json).write_text(json.dumps(merged, indent=1))
    line = "; ".join(f"{k} {v:.1f} ms" for k, v in med.items()) or "no timings"
    line += "".join(f"; {k} {v:.3g}x" for k, v in ratios.items())
    if merged.get("loss_rel_diff_vs_stage2"):
        line += "; loss vs stage2: " + ", ".join(f"{k} {v:.1e}" for k, v in merged["loss_rel_diff_vs_stage2"].items()
                                                 if v is not None)
    print(line)
    return 0 if med else 1


def cmd_profile(args) -> int:
    """Where one nanoGPT step's time goes: the device kernels (CUPTI through torch.profiler, which sees every
    kernel of the process, CuPy's and NVRTC's too) against the wall clock, then the host side (cProfile)."""
    import cProfile
    import pstats

    import torch
    from torch.profiler import ProfilerActivity, profile

    config, batch = gpt_config(args.smoke)
    weights = initial_weights(config)
    device = "cpu" if args.torch_cpu else "cuda"
    if args.impl == "torch":
        step = torch_stepper(config, batch, weights, device, args.precision)
    else:
        step = ours_stepper(2 if args.impl == "stage2" else 3, config, batch, weights, args.precision)
    for _ in range(3):
        step()
    steps = 3
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        wall = (time.perf_counter() - t0) / steps
    events = prof.key_averages()
    kernel_us = sum(e.self_device_time_total for e in events) / steps
    print(f"{args.impl}: wall {wall * 1e3:.1f} ms/step; device kernels {kernel_us / 1e3:.1f} ms/step "
          f"({len(events)} distinct names)")
    print(events.table(sort_by="self_device_time_total", row_limit=30, max_name_column_width=70))
    host = cProfile.Profile()
    host.enable()
    step()
    host.disable()
    pstats.Stats(host).sort_stats("tottime").print_stats(25)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("env")
    sub.add_parser("check")
    sub.add_parser("subset")
    p = sub.add_parser("nanogpt")
    p.add_argument("--impl", choices=("stage2", "stage3", "torch"), required=True)
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--steps", type=int, default=10, help="timed steps after the 3 warm-ups (--smoke: 2)")
    p.add_argument("--torch-cpu", action="store_true", help="torch on the CPU (rehearsing without a GPU)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="bf16: the step under autocast (stage2's matmuls on the tensor cores; torch's autocast)")
    p.add_argument("--json", required=True)
    p = sub.add_parser("matmul")
    p.add_argument("--impl", choices=("stage2", "torch"), required=True)
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16")
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--json", required=True)
    p = sub.add_parser("profile")
    p.add_argument("--impl", choices=("stage2", "stage3", "torch"), required=True)
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--torch-cpu", action="store_true", help="torch on the CPU (rehearsing without a GPU)")
    p = sub.add_parser("merge")
    p.add_argument("--json", required=True)
    p.add_argument("inputs", nargs="*")
    args = parser.parse_args(argv)
    return {"env": cmd_env, "check": cmd_check, "subset": cmd_subset, "nanogpt": cmd_nanogpt,
            "matmul": cmd_matmul, "merge": cmd_merge, "profile": cmd_profile}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
