"""Compile every CUDA source of the project to PTX with nvcc and assemble it with ptxas, so a
syntax, type or inline-asm error fails CI on a machine without a GPU.

    python -m benchmarks.ptx_check [--jobs 2] [--keep DIR]

Checks every ``.cu`` under stage2_autograd/cuda/ (for the arch its header's ``arch=`` names,
sm_80 when it names none) and every kernel of the runtime catalogue of
stage2_autograd/cuda/elementwise_src.py, bundled into one translation unit per kernel kind.
The generator is loaded from its file, not imported through the package, so tooling never runs
a stage's import-time work. stage3 has no catalogue of its own (it renders each kernel from a
graph), so one is made here: the kernels of a list of graphs (STAGE3_GRAPHS), lowered and rendered
by stage3's CUDARenderer without running anything, plus its device's fixed kernels, in one
translation unit. nvcc alone leaves inline asm unchecked (it is pasted into the PTX verbatim);
ptxas reads it. Exit status 0 when everything compiles, 1 otherwise, 2 without nvcc.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CUDA_DIR = ROOT / "stage2_autograd" / "cuda"
DEFAULT_ARCH = "sm_80"  # Ampere: cp.async, ldmatrix and bf16 mma.sync all exist there
NVCC_FLAGS = ["--std=c++17", "-Werror", "all-warnings"]


def load_generator():
    """elementwise_src.py as a standalone module (it imports only the standard library)."""
    spec = importlib.util.spec_from_file_location("sitp_elementwise_src", CUDA_DIR / "elementwise_src.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def source_arch(text: str) -> str:
    found = re.search(r"\barch=(sm_\w+)", text)
    return found.group(1) if found else DEFAULT_ARCH


def _stage3_graphs(T, np, dtypes) -> list:
    """Graphs whose kernels cover what stage3's renderer writes: each dtype through the elementwise
    ops, casts and reductions; views that pad (clamped loads) and flip; non-finite constants;
    one-element and upcast reductions; the composites (softmax, layernorm, conv2d, attention); LOCAL's
    matmuls staged through shared memory (float32, float64 and the half types); the half types and the small ints."""
    f = T(np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6))
    graphs = []
    for dt in (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64, dtypes.bool):
        x = f.cast(dt)
        graphs += [x + x, x * x.T.T, x.maximum(x.flip(1)), (x < x.flip(0)).where(x, x.flip(1)), x == x.flip(1),
                   x.sum(1), x.max(0), x.sum(), x.prod(1), x.pad(((1, 1), (2, 0))), x.cumsum(1), x.argmax(1)]
        graphs += [x.cast(other) for other in (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64, dtypes.bool)
                   if other is not dt]
        if dt.is_float:
            graphs += [x.exp(), x.log(), x.sqrt(), x.sin(), x.cos(), x.tanh(), x.gelu(), x / x.flip(0), x.reciprocal(),
                       x.softmax(-1), x.layernorm(), x.logsumexp(1), (x > 0).where(x, float("-inf")).max(1),
                       (x > 0).where(x, float("nan")), x @ x.T, x.reshape(1, 1, 4, 6).conv2d(x.reshape(4, 1, 2, 3)[:2]),
                       x.reshape(1, 1, 4, 6).max_pool2d()]
        else:
            graphs += [x & x.flip(1), x | x.flip(0), x ^ x]
    q = f.reshape(1, 4, 6)
    graphs.append(q.scaled_dot_product_attention(q, q, is_causal=True))
    m = T(np.ones((2, 128, 32), np.float32))  # a matmul of whole 16 x 16 blocks of tiles: LOCAL's shared memory
    graphs += [m @ m.transpose(-1, -2), m.cast(dtypes.float64) @ m.cast(dtypes.float64).transpose(-1, -2)]
    for half in (dtypes.float16, dtypes.bfloat16):  # storage widened by the device functions, LOCAL's copies too
        h, mh = f.cast(half), T(np.ones((2, 128, 32), half.np))
        graphs += [h * h.flip(0) + 1, h.sum(1), h.softmax(-1), h.cast(dtypes.float32), (h > 0).where(h, float("inf")),
                   mh @ mh.transpose(-1, -2)]
    graphs += [f.cast(dt) + 1 for dt in (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.uint32,
                                          dtypes.uint64)]
    return graphs


def stage3_sources() -> list[str]:
    """CUDA C of every kernel of _stage3_graphs, renamed apart (two graphs can give kernels of one
    name), and the device's fixed kernels (the random stream, iota)."""
    import numpy as np

    from stage3_compiler import Tensor, dtypes
    from stage3_compiler.codegen.lower import lower
    from stage3_compiler.cuda.renderer import CUDARenderer
    from stage3_compiler.cuda.runtime import FIXED_SOURCE
    from stage3_compiler.engine.schedule import create_schedule

    renderer, sources = CUDARenderer(), {}
    for graph in _stage3_graphs(Tensor, np, dtypes):
        items = create_schedule([graph.lazydata])
        for item in items:
            kernel = lower(item, renderer)
            text = renderer.render(kernel)
            sources.setdefault(text, f"{kernel.name}_k{len(sources)}")
    renamed = [text.replace(f" {name.rsplit('_k', 1)[0]}(", f" {name}(", 1) for text, name in sources.items()]
    return [*renamed, FIXED_SOURCE]


def jobs(workdir: Path) -> list[tuple[str, Path, str]]:
    """(label, .cu path, arch) for every hand-written source and one bundle per generated kind."""
    out = [(str(p.relative_to(ROOT)), p, source_arch(p.read_text())) for p in sorted(CUDA_DIR.rglob("*.cu"))]
    generator = load_generator()
    bundles: dict[str, list[str]] = {}
    for entry in generator.catalogue():
        _, text = generator.source(*entry)
        bundles.setdefault(entry[0], []).append(text)
    for kind, texts in bundles.items():
        path = workdir / f"generated_{kind}.cu"
        path.write_text("\n".join(texts))
        out.append((f"generated {kind} ({len(texts)} kernels)", path, DEFAULT_ARCH))
    stage3 = stage3_sources()
    path = workdir / "stage3_generated.cu"
    path.write_text("\n".join(stage3))
    out.append((f"stage3 generated ({len(stage3) - 1} kernels and the fixed ones)", path, DEFAULT_ARCH))
    return out


def compile_one(nvcc: str, ptxas: str, path: Path, arch: str, outdir: Path) -> tuple[bool, str]:
    ptx = outdir / (path.stem + ".ptx")
    steps = ([nvcc, "-ptx", f"-arch={arch}", *NVCC_FLAGS, "-o", str(ptx), str(path)],
             [ptxas, f"-arch={arch}", "-o", str(ptx.with_suffix(".cubin")), str(ptx)])
    for cmd in steps:
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            return False, f"$ {' '.join(cmd)}\n{result.stdout}{result.stderr}"
    return True, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="write the PTX here instead of a temp dir")
    args = parser.parse_args(argv)
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        print("ptx_check: nvcc is not on PATH; nothing compiled")
        return 2
    ptxas = shutil.which("ptxas") or str(Path(nvcc).resolve().with_name("ptxas"))
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        outdir = args.keep or Path(tmp)
        outdir.mkdir(parents=True, exist_ok=True)
        todo = jobs(Path(tmp))
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda job: compile_one(nvcc, ptxas, job[1], job[2], outdir), todo))
    failures = 0
    for (label, _, arch), (ok, log) in zip(todo, results, strict=True):
        print(f"{'ok  ' if ok else 'FAIL'} {arch:7} {label}")
        if not ok:
            failures += 1
            print(log)
    print(f"ptx_check: {len(todo) - failures}/{len(todo)} compiled in {time.perf_counter() - start:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
