"""The cuda device: the CUDA renderer's output, tensors on the device, moves between devices, and
the error contract.

The renderer tests need no device: they check the CUDA C the renderer writes, and run a rendered
kernel under a grid of several blocks and threads on the CPU (every (block, thread) in turn, with
g++), which is what the one-thread emulator cannot show. The device tests run on the CPU emulator
when SITP_CUDA_BACKEND=emulate (the same CUDA source built with g++, common/cuda_emulation.py), on
CuPy and a GPU where there is one, and skip with the reason otherwise. The op-by-op check of the
device is the conformance suite's (`CUDA` in its ids).
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from .. import Device, GlobalCounters, Tensor, TinyJit, Variable, dtypes, nn, optim
from ..autograd import attention_grads
from ..codegen.lower import lower
from ..codegen.program import CompileError
from ..codegen.uops import UOps
from ..cuda.group import output_loops
from ..cuda.renderer import CUDARenderer
from ..cuda.runtime import launch_shape
from ..engine import schedule
from ..engine.schedule import create_schedule

REPO = Path(__file__).resolve().parents[2]
STAGE = Path(__file__).resolve().parents[1].name


@pytest.fixture(scope="module")
def cuda() -> str:
    """The device name, once the device works here (real or emulated); else a skip saying why."""
    if os.environ.get("SITP_CUDA_BACKEND") == "emulate":
        sys.path.insert(0, str(REPO))
        from common.cuda_emulation import EmulatedBackend

        from ..cuda import runtime

        runtime.use_backend(EmulatedBackend())
    try:
        Tensor([0.0], device="cuda")
    except RuntimeError as e:
        pytest.skip(f"no cuda device here ({e}); SITP_CUDA_BACKEND=emulate runs it on the CPU emulator")
    return "cuda"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "SITP_CUDA_BACKEND": ""}, timeout=300)


def _kernel(t: Tensor):
    """The last kernel of t's schedule, lowered for the GPU (rendering needs no device)."""
    items = create_schedule([t.lazydata])
    return lower(items[-1], CUDARenderer())


# ---- the renderer: no device needed ----


def test_a_kernel_is_declared_for_the_gpu_and_walks_its_output_by_grid_stride():
    x = Tensor(np.ones((3, 4, 5), np.float32))
    source = CUDARenderer().render(_kernel((x.permute(2, 0, 1) * 2).exp2()))
    assert 'extern "C" __global__ void E_5_3_4(' in source
    assert "#include" not in source and "restrict __restrict__" in source
    assert "gid < 60; gid += (long long)blockDim.x * gridDim.x" in source
    assert "long long gidx0 = gid / 12;" in source and "long long gidx2 = gid % 4;" in source
    assert "exp2f(" in source


def test_index_lines_recover_every_loop_index():
    source = CUDARenderer().render(_kernel(Tensor(np.ones((2, 3, 4), np.float32)) * 2))
    lines = [line.strip() for line in source.splitlines() if line.strip().startswith("long long gidx")]
    assert lines == ["long long gidx0 = gid / 12;", "long long gidx1 = (gid / 4) % 3;", "long long gidx2 = gid % 4;"]
    seen = set()
    for gid in range(24):  # the C expressions read as Python on non-negative ints
        scope = {"gid": gid}
        for line in lines:
            name, value = line.removeprefix("long long ").rstrip(";").split(" = ")
            scope[name] = eval(value.replace("/", "//"), {}, scope)
        seen.add((scope["gidx0"], scope["gidx1"], scope["gidx2"]))
    assert seen == {(i, j, k) for i in range(2) for j in range(3) for k in range(4)}


def test_reduce_loops_stay_inside_the_thread():
    x = Tensor(np.ones((5, 7), np.float32))  # odd sizes: no axis is upcast (lower.py), one loop per dim
    kernel = _kernel(x.sum(1))
    assert [(loop.var, loop.extent) for loop in output_loops(kernel)] == [("gidx0", 5)]
    assert [u.arg.var for u in kernel.uops if u.op is UOps.RANGE] == ["ridx1"]
    assert sum(u.op is UOps.ENDRANGE for u in kernel.uops) == 1
    assert "for (long long ridx1 = 0; ridx1 < 7; ridx1++) {" in CUDARenderer().render(kernel)


def test_a_symbolic_size_is_an_argument_and_bounds_the_grid_stride_loop():
    n = Variable("n", 1, 16).bind(3)
    x = Tensor(np.ones((4, 16), np.float32)).realize()
    source = CUDARenderer().render(_kernel(x[:, :n] * 2))
    assert "const long long n)" in source and "gid < 4*(n);" in source
    assert "long long gidx0 = gid / (n);" in source and "long long gidx1 = gid % (n);" in source


@pytest.mark.parametrize("online", ["-online", "+online"])  # the attention unfused, and in one online-softmax kernel
def test_symbolic_sizes_and_tinyjit_replays_run_on_the_device(cuda, online, monkeypatch):
    monkeypatch.setenv("PASSES", online)
    rng = np.random.default_rng(1)
    keys = rng.standard_normal((1, 2, 12, 8)).astype(np.float32)
    k = Tensor(keys, device=cuda).realize()
    pos = Variable("start_pos", 0, 11)

    @TinyJit
    def step(q, start_pos):
        cached = k[:, :, :start_pos + 1]
        return q.scaled_dot_product_attention(cached, cached)

    for p in (0, 11, 4, 7):
        q = rng.standard_normal((1, 2, 1, 8)).astype(np.float32)
        want = Tensor(q).scaled_dot_product_attention(Tensor(keys[:, :, :p + 1]), Tensor(keys[:, :, :p + 1]))
        np.testing.assert_allclose(step(Tensor(q, device=cuda), start_pos=pos.bind(p)).numpy(), want.numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_causal_attention_is_one_online_kernel_on_the_device(cuda, monkeypatch):
    monkeypatch.setenv("PASSES", "+online")
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 2, 40, 16)).astype(np.float32) for _ in range(3))
    out = Tensor(q, device=cuda).scaled_dot_product_attention(Tensor(k, device=cuda), Tensor(v, device=cuda),
                                                              is_causal=True)
    GlobalCounters.reset()
    got = out.numpy()
    assert GlobalCounters.kernel_count == 1
    monkeypatch.setenv("PASSES", "-online")
    want = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def flash_attention(device: str, lowered: list | None = None) -> tuple[list, list, list[Tensor]]:
    """The schedules of FlashAttention's forward (the output and its log-sum-exp) and backward
    (autograd.attention_grads) for causal heads on the device, and the three gradients. `lowered`
    receives each kernel lowered for the GPU, before it runs."""
    rng = np.random.default_rng(3)
    q, k, v, g = (Tensor(rng.standard_normal((2, 2, n, 8)).astype(np.float32), device=device).requires_grad_()
                  for n in (24, 16, 16, 24))
    out = q.scaled_dot_product_attention(k, v, is_causal=True)
    lse = out._ctx.saved["lse"]
    def scheduled(items: list) -> list:
        if lowered is not None:
            lowered.extend(lower(item, CUDARenderer()) for item in items)
        return items

    forward = scheduled(create_schedule([out.lazydata, lse.lazydata]))
    out.realize(lse)
    with Tensor.no_grad():
        grads = attention_grads(g, out, q, k, v, **out._ctx.saved)
    return forward, scheduled(create_schedule([t.lazydata for t in grads])), grads


def test_flash_attention_is_three_kernels_on_the_device(cuda, monkeypatch):
    monkeypatch.setenv("PASSES", "+online")
    forward, backward, grads = flash_attention(cuda)
    assert len(forward) == 1  # the output and the log-sum-exp
    assert len(backward) == 2  # dq; dk and dv together
    want = flash_attention("CPU")[2]
    for ours, theirs in zip(grads, want, strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (nox -s ptx compiles the catalogue)")
def test_flash_attention_backward_compiles_to_ptx(tmp_path, monkeypatch):
    monkeypatch.setenv("PASSES", "+online")
    kernels: list = []
    flash_attention("CPU", kernels)
    assert len(kernels) == 3
    done = nvcc_ptx(kernels, tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_reductions_multiply_add_is_one_fmaf(cuda):
    # (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11 as a product; fused with the first step's
    # -(1 + 2^-11), the 2^-24 survives
    x = np.array([[-(1 + 2.0**-11), 1 + 2.0**-12]], np.float32)
    y = np.array([[1.0], [1 + 2.0**-12]], np.float32)
    source = CUDARenderer().render(_kernel(Tensor(x) @ Tensor(y)))
    assert "= fmaf(" in source
    assert not re.search(r"= \(v\d+\*v\d+\);", source), "the product has no line of its own (nvcc: unused)"
    assert (Tensor(x, device=cuda) @ Tensor(y, device=cuda)).numpy().tolist() == [[2.0**-24]]


def test_one_output_element_is_computed_by_one_thread():
    source = CUDARenderer().render(_kernel(Tensor(np.ones(9, np.float32)).sum()))
    assert "gid < 1;" in source  # every other thread of the grid skips the loop


def test_non_finite_constants_are_bit_patterns():
    r = CUDARenderer()
    assert r.const(float("inf"), dtypes.float32) == "__int_as_float(0x7f800000)"
    assert r.const(float("-inf"), dtypes.float32) == "(-__int_as_float(0x7f800000))"
    assert r.const(float("nan"), dtypes.float32) == "__int_as_float(0x7fc00000)"
    assert r.const(float("-inf"), dtypes.float64) == "(-__longlong_as_double(0x7ff0000000000000LL))"
    assert r.const(1.5, dtypes.float32) == "0x1.8000000000000p+0f"  # finite ones are C's hex literals


GRID_SHIM = """#include <cmath>
#include <cstring>
struct sitp_dim3 { unsigned x, y, z; };
static sitp_dim3 blockIdx, threadIdx, blockDim, gridDim;
#define __global__
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the kernel")
def test_a_rendered_kernel_under_a_grid_of_many_threads_writes_each_output_once(tmp_path):
    """3 blocks of 4 threads over 5 x 7 outputs: each thread strides over its share; together they
    must write every entry exactly once (the data counts the writes)."""
    x = Tensor(np.zeros((5, 7), np.float32))
    kernel = _kernel((x + 1).contiguous())
    source = CUDARenderer().render(kernel).replace("data0[gidx0*7+gidx1] = v", "data0[gidx0*7+gidx1] += v")
    driver = ("\nextern \"C\" void run(float *out, const float *x) {\n"
              "  gridDim = {3, 1, 1}; blockDim = {4, 1, 1};\n"
              "  for (unsigned b = 0; b < 3; b++) for (unsigned t = 0; t < 4; t++) {\n"
              f"    blockIdx = {{b, 0, 0}}; threadIdx = {{t, 0, 0}}; {kernel.name}(out, x);\n  }}\n}}\n")
    if "+= v" not in source:
        pytest.fail(f"the store line changed; the test needs a new way to count writes:\n{source}")
    (tmp_path / "k.cpp").write_text(GRID_SHIM + source + driver)
    subprocess.run(["g++", "-std=c++17", "-shared", "-fPIC", "-o", str(tmp_path / "k.so"), str(tmp_path / "k.cpp")],
                   check=True)
    out, zeros = np.zeros(35, np.float32), np.zeros(35, np.float32)
    ctypes.CDLL(str(tmp_path / "k.so")).run(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(zeros.ctypes.data))
    assert out.tolist() == [1.0] * 35


BLOCK_SHIM = """#include <barrier>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>
struct sitp_dim3 { unsigned x, y, z; };
static thread_local sitp_dim3 threadIdx;
static sitp_dim3 blockIdx, blockDim, gridDim;
static std::barrier<> *sitp_barrier;
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __syncthreads() sitp_barrier->arrive_and_wait()
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
"""


def _run_blocks(kernel, x: np.ndarray, blocks: int, threads: int, tmp_path) -> np.ndarray:
    """Run a rendered float32 kernel `out = f(x)` on the CPU as a GPU would: blocks one after another,
    a block's threads as OS threads that meet at each __syncthreads (a barrier). A kernel of several
    inputs (x.T @ x) reads x for each."""
    source = CUDARenderer().render(kernel)
    inputs = ", ".join(["x"] * (len(kernel.buffers) - 1))
    driver = (f"\nextern \"C\" void run(float *out, const float *x) {{\n"
              f"  gridDim = {{{blocks}, 1, 1}}; blockDim = {{{threads}, 1, 1}};\n"
              f"  for (unsigned b = 0; b < {blocks}; b++) {{\n"
              f"    blockIdx = {{b, 0, 0}}; std::barrier<> barrier({threads}); sitp_barrier = &barrier;\n"
              "    std::vector<std::thread> team;\n"
              f"    for (unsigned t = 0; t < {threads}; t++)\n"
              f"      team.emplace_back([=] {{ threadIdx = {{t, 0, 0}}; {kernel.name}(out, {inputs}); }});\n"
              "    for (auto &th : team) th.join();\n  }\n}\n")
    (tmp_path / "k.cpp").write_text(BLOCK_SHIM + source + driver)
    subprocess.run(["g++", "-std=c++20", "-pthread", "-shared", "-fPIC", "-o", str(tmp_path / "k.so"),
                    str(tmp_path / "k.cpp")], check=True)
    out = np.full(math.prod(kernel.shape), np.nan, np.float32)
    x = np.ascontiguousarray(x, np.float32)
    ctypes.CDLL(str(tmp_path / "k.so")).run(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(x.ctypes.data))
    return out


def test_a_reduction_of_few_outputs_is_folded_by_a_block_of_threads():
    """GROUP: a sum of 600 x 70 terms into one output shares its innermost reduce loop across the
    block's threads, folds the accumulator across the block, and one thread stores."""
    source = CUDARenderer().render(_kernel((Tensor(np.ones((600, 70), np.float32)) ** 2).sum()))
    assert "for (long long gid = blockIdx.x; gid < 1; gid += gridDim.x) {" in source
    assert "for (long long ridx1 = threadIdx.x; ridx1 < 70; ridx1 += blockDim.x) {" in source
    assert "= group_reduce_add_float32(acc" in source and "if (threadIdx.x == 0)" in source
    assert "__shared__ float part[128];" in source


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the kernel")
@pytest.mark.parametrize("blocks,threads", [(1, 8), (3, 32), (2, 128)])
@pytest.mark.parametrize("case", ["sum", "max_nan", "sum_axis0", "wide_sum_axis0", "wide_xtx", "row_sum"])
def test_group_reductions_under_blocks_of_many_threads(tmp_path, case, blocks, threads):
    rng = np.random.default_rng(threads)
    if case == "sum":
        x = rng.standard_normal((600, 70)).astype(np.float32)
        kernel, want = _kernel((Tensor(x) ** 2).sum()), (x.astype(np.float64) ** 2).sum()
    elif case == "max_nan":  # max keeps a NaN wherever the block's tree meets it
        x = rng.standard_normal((20, 1500)).astype(np.float32)
        x[3, 1417] = np.nan
        kernel, want = _kernel(Tensor(x).max(axis=1)), x.max(axis=1)
    elif case == "sum_axis0":  # the reduced axis is the outer one: the block shares the loop over rows
        x = rng.standard_normal((1500, 6)).astype(np.float32)
        kernel, want = _kernel(Tensor(x).sum(axis=0)), x.astype(np.float64).sum(axis=0)
    elif case == "wide_sum_axis0":  # 70 outputs, none of whose loads lie along the rows: wide, 32 a block
        x = rng.integers(-4, 5, (1500, 70)).astype(np.float32)  # small integers: every order of sums is exact
        kernel, want = _kernel(Tensor(x).sum(axis=0)), x.astype(np.float64).sum(axis=0)
    elif case == "row_sum":  # 300 outputs of 400 terms side by side: a warp an output
        x = rng.integers(-4, 5, (300, 400)).astype(np.float32)
        kernel, want = _kernel(Tensor(x).sum(axis=1)), x.astype(np.float64).sum(axis=1)
        assert "__shared__ float part[128]" in CUDARenderer().render(kernel) and launch_shape(kernel).threads == 32
    else:  # a weight's gradient: 50 tiles of 4 x 8 outputs, 2048 terms each, the last block's lanes past the end
        x = rng.integers(-4, 5, (2048, 40)).astype(np.float32)
        kernel, want = _kernel(Tensor(x).T @ Tensor(x)), x.T.astype(np.float64) @ x
    source = CUDARenderer().render(kernel)
    assert "group_reduce_" in source
    assert ("mine == gid" in source) == case.startswith("wide"), source  # which GROUP it is
    got = _run_blocks(kernel, x, blocks, threads, tmp_path)
    if case.startswith(("wide", "row")):
        np.testing.assert_array_equal(got, np.ravel(want))
    else:
        np.testing.assert_allclose(got, np.ravel(want), rtol=1e-5, atol=1e-5)  # float32 sums of ~1500 terms


@pytest.fixture
def gpu_layouts(monkeypatch):
    """Schedule CPU tensors as the cuda device does: its renderer decides the operands' copies (a GPU
    thread's tile needs no operand side by side, so attention's q @ k.T keeps k as it is)."""
    gpu = type("Runtime", (), {"renderer": CUDARenderer()})()
    monkeypatch.setattr(schedule, "runtime_of", lambda op, device: gpu)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the kernel")
@pytest.mark.parametrize("blocks", [1, 3])
@pytest.mark.parametrize("case", ["batched", "k48", "epilogue"])
def test_local_matmuls_under_blocks_of_256_threads(tmp_path, case, blocks, gpu_layouts):
    """LOCAL: a block of 16 x 16 threads stages each 16 steps of A and B in shared memory; run as a GPU
    would (256 OS threads meeting at each __syncthreads, fewer blocks than block tiles: the grid-stride
    loop takes the rest), on small integers, so every order of the sums is exact. The batch axis is
    the block's: its tiles stay inside one matrix. (Shapes whose schedule is the one kernel reading x.)"""
    x = np.random.default_rng(1).integers(-4, 5, (3, 128, 48) if case == "k48" else (2, 128, 32))
    x = x.astype(np.float32)
    t = Tensor(x)
    out, want = t @ t.transpose(-1, -2), x.astype(np.float64) @ x.transpose(0, 2, 1)
    if case == "epilogue":  # an op after the sum, on the thread's own outputs (attention's scale)
        out, want = out * 0.125, want * 0.125
    assert len(create_schedule([out.lazydata])) == 1
    kernel = _kernel(out)
    source = CUDARenderer().render(kernel)
    assert "if (blockDim.x == 256) {  // LOCAL" in source and launch_shape(kernel).threads == 256, source
    assert source.count("__syncthreads()") == 2  # after the copies, after their last use
    np.testing.assert_array_equal(_run_blocks(kernel, x, blocks, 256, tmp_path), np.ravel(want))
    np.testing.assert_array_equal(_run_blocks(kernel, x, 2, 32, tmp_path), np.ravel(want))  # the plain twin


def test_the_renderers_passes_are_named_on_the_kernels_they_change(monkeypatch):
    """DEBUG=2 names the passes that changed a kernel: GROUP's and LOCAL's too, applied as the CUDA
    renderer writes it, and neither where the pass is off."""
    def passes(t: Tensor) -> tuple[str, ...]:
        kernel = _kernel(t)
        CUDARenderer().render(kernel)
        return kernel.passes
    matmul = lambda: Tensor(np.ones((128, 64), np.float32)) @ np.ones((64, 128))  # noqa: E731
    folded = lambda: (Tensor(np.ones((600, 70), np.float32)) ** 2).sum()  # noqa: E731
    assert "local" in passes(matmul()) and "group" not in passes(matmul())
    assert "group" in passes(folded()) and "local" not in passes(folded())
    monkeypatch.setenv("PASSES", "-local,-group")
    assert not {"local", "group"} & set(passes(matmul()) + passes(folded()))


def test_local_needs_whole_block_tiles():
    """LOCAL takes a matmul whose tile counts LOCAL_SIDE divides and whose K LOCAL_K divides; others
    keep the plain kernel only."""
    assert "LOCAL" not in CUDARenderer().render(_kernel(Tensor(np.ones((128, 64), np.float32)) @ np.ones((64, 72))))
    assert "LOCAL" not in CUDARenderer().render(_kernel(Tensor(np.ones((128, 60), np.float32)) @ np.ones((60, 128))))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (nox -s ptx compiles the catalogue)")
def test_rendered_kernels_compile_to_ptx(tmp_path):
    x = Tensor(np.ones((4, 6), np.float32))
    kernels = [_kernel(x.softmax(-1)), _kernel((x < 0).where(float("-inf"), x).max(0)),
               _kernel(x.cast(dtypes.int64) * 3), _kernel(x.pad(((1, 1), (0, 0))).sum(0)),
               _kernel(x.cast(dtypes.float64).exp()),  # POW2 of doubles: ldexp
               _kernel(x @ x.T), _kernel(x.cast(dtypes.float64) @ x.cast(dtypes.float64).T),  # fmaf, fma
               _kernel(x[Tensor([3, 0, -1])]),  # a lookup: a load at an index the kernel loaded
               _kernel((Tensor([[3], [0], [5]]) == Tensor.arange(6).reshape(1, 6)).reshape(3, 6, 1)
                       .where(x[:3].reshape(3, 1, 6), 0.0).sum(0))]  # a one-hot product: its IF
    assert "if (" in CUDARenderer().render(kernels[-1])
    done = nvcc_ptx(kernels, tmp_path)
    assert done.returncode == 0, done.stderr


def nvcc_ptx(kernels: list, tmp_path: Path) -> subprocess.CompletedProcess:
    """The kernels' CUDA C compiled to PTX by nvcc, as one translation unit: kernels renamed apart (two
    may share a name), the prelude repeated identically."""
    path = tmp_path / "kernels.cu"
    path.write_text("\n".join(CUDARenderer().render(k).replace(f" {k.name}(", f" {k.name}_{i}(")
                              for i, k in enumerate(kernels)))
    return subprocess.run(["nvcc", "-ptx", "-arch=sm_80", "--std=c++17", "-o", str(tmp_path / "k.ptx"), str(path)],
                          capture_output=True, text=True)


# ---- no device needed: what a machine without CuPy sees ----


def test_the_cpu_needs_neither_cupy_nor_a_gpu():
    done = _run(f"""
        import sys
        import {STAGE} as s
        x = s.Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        (x @ x).sum().backward()
        assert x.device == "CPU" and x.grad.tolist() == [[7.0, 11.0], [9.0, 13.0]]
        assert "cupy" not in sys.modules, "CuPy was imported by the CPU path"
    """)
    assert done.returncode == 0, done.stderr


def test_cuda_without_cupy_says_what_to_install():
    done = _run(f"""
        import sys
        sys.modules["cupy"] = None  # what an environment without CuPy looks like to `import cupy`
        import {STAGE} as s
        try:
            s.Tensor([1.0], device="cuda")
        except RuntimeError as e:
            print(e)
        else:
            raise SystemExit("no error")
    """)
    assert done.returncode == 0, done.stderr
    assert "CuPy" in done.stdout and "pip install -e '.[cuda]'" in done.stdout and "Tensor" in done.stdout


def test_an_unknown_device_is_refused():
    with pytest.raises(RuntimeError, match=r"Tensor: device 'tpu' is not available.*\['cpu', 'cuda'\]"):
        Tensor([1.0], device="tpu")
    with pytest.raises(RuntimeError, match=r"to: device 'metal'"):
        Tensor([1.0]).to("metal")


# ---- on the device ----


def test_device_names_and_moves(cuda):
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = Tensor(host, device=cuda)
    assert x.device == "CUDA" and Tensor(host).device == "CPU" and Tensor(host, device="gpu").device == "CUDA"
    back = x.to("cpu")
    assert back.device == "CPU" and back.tolist() == host.tolist()
    assert x.to("cuda") is x and back.to("CPU") is back
    assert Tensor(back, device=cuda).device == "CUDA" and Tensor(x).device == "CUDA"
    assert x.T.to("cpu").tolist() == host.T.tolist()  # a view moves as its values
    assert repr(x) == "<Tensor (2, 3) float32 on CUDA>"


def test_mixing_devices_raises_at_the_op_naming_both(cuda):
    a, b = Tensor.ones(2, 3, device=cuda), Tensor.ones(3)
    before = GlobalCounters.kernel_count
    for op, call in (("add", lambda: a + b), ("matmul", lambda: a @ Tensor.ones(3, 2)),
                     ("where", lambda: (b > 0).where(a, 0.0)), ("cat", lambda: a.cat(Tensor.ones(2, 3)))):
        with pytest.raises(RuntimeError, match=rf"{op}: .*CUDA \(2, 3\).*CPU|{op}: .*CPU.*CUDA \(2, 3\)"):
            call()
    assert GlobalCounters.kernel_count == before  # raised while building the graph: nothing ran


def test_results_stay_on_the_device_and_match_the_cpu(cuda):
    rng = np.random.default_rng(0)
    host = rng.standard_normal((4, 6)).astype(np.float32)
    g, c = Tensor(host, device=cuda), Tensor(host)
    cases = {
        "fused chain on views": lambda t: (t[::-1, ::2] * t[:1, 1::2]).exp() + t[:, :3].sqrt().relu(),
        "reductions": lambda t: t.sum(1) + t.max(0).sum() - t.min(),
        "argmax": lambda t: t.argmax(1),
        "cumsum": lambda t: t.cumsum(1),
        "softmax": lambda t: t.softmax(-1),
        "int ops": lambda t: (t * 10).int() * 3 - (t > 0).int() + (t * 10).int().maximum(2),
        "matmul": lambda t: t @ t.T,
        "float64 matmul": lambda t: t.cast(dtypes.float64) @ t.T.cast(dtypes.float64),
        "gather": lambda t: t[[3, 0, 3], 1:4],
        "pad": lambda t: t.pad(((1, 0), (0, 2)), value=-1.0),
        "-inf and nan": lambda t: ((t > 0).where(t, float("-inf")).max(1, keepdim=True)
                                   + (t < -5).where(float("nan"), 0.0)),
        "arange": lambda t: Tensor.arange(5, device=t.device) * 2,
        "one element": lambda t: t.sum(),
        "size 0": lambda t: t[:, :0].sum(1),
    }
    for name, f in cases.items():
        ours, cpu = f(g), f(c)
        assert ours.device == "CUDA", name
        np.testing.assert_allclose(ours.numpy(), cpu.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_one_graph_on_both_devices_is_two_programs(cuda):
    """The kernel cache is keyed by device too: a structure first seen on the CPU runs CUDA C on the GPU."""
    host = np.arange(6, dtype=np.float32)
    cpu, gpu = (Tensor(host) * 3 + 1).realize(), (Tensor(host, device=cuda) * 3 + 1).realize()
    assert type(gpu.lazydata.realized).__name__ == "CudaBuffer" and type(cpu.lazydata.realized).__name__ == "Buffer"
    assert gpu.numpy().tolist() == cpu.numpy().tolist() == (host * 3 + 1).tolist()


def test_pow2_and_the_formulas_on_it_match_the_cpu_bit_for_bit(cuda):
    # POW2 renders as the device library's ldexp on the GPU, as exponent bits on the CPU
    n = np.concatenate([np.arange(-160, 140), [np.nan, np.inf, -np.inf, 2.5]]).astype(np.float32)
    assert Tensor(n, device=cuda).pow2().numpy().tobytes() == Tensor(n).pow2().numpy().tobytes()
    x = np.linspace(-110, 90, 4001).astype(np.float32)
    for op in ("exp", "gelu", "erf"):  # EXP2 differs: the device library's exp2f, 2 ulp, against our 1
        got, want = getattr(Tensor(x, device=cuda), op)().numpy(), getattr(Tensor(x), op)().numpy()
        ulps = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
        assert ulps.max() <= 2, (op, x[ulps.argmax()], got[ulps.argmax()], want[ulps.argmax()])


def test_the_same_seed_draws_the_same_numbers_on_both_devices(cuda):
    Tensor.manual_seed(7)
    on_gpu = Tensor.randn(3, 5, device=cuda).numpy()
    Tensor.manual_seed(7)
    on_cpu = Tensor.randn(3, 5).numpy()
    np.testing.assert_allclose(on_gpu, on_cpu, rtol=1e-6, atol=1e-6)
    Tensor.manual_seed(7)
    doubles_gpu = Tensor.rand(4, dtype=dtypes.float64, device=cuda).tolist()
    Tensor.manual_seed(7)
    assert doubles_gpu == Tensor.rand(4, dtype=dtypes.float64).tolist()


def test_a_cuda_compile_error_names_the_kernel_and_shows_its_source(cuda):
    from ..cuda.runtime import runtime

    with pytest.raises(CompileError, match=r"(?s)compile of kernel broken failed.*this is not CUDA"):
        runtime().compile('extern "C" __global__ void broken() { this is not CUDA; }', "broken")


def test_gradients_on_the_device_and_across_moves(cuda):
    w = Tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)  # a CPU leaf
    x = Tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], device=cuda)
    loss = (x @ w.to(cuda)).relu()[[2, 0, 2]].sum()  # gather, matmul, relu on the GPU; the rule of `to` back
    loss.backward()
    assert w.grad.device == "CPU"
    rows = x.numpy()[[2, 0, 2]]
    np.testing.assert_allclose(w.grad.numpy(), rows.T @ (rows @ w.numpy() > 0), rtol=1e-6)


def test_a_training_step_matches_the_cpu(cuda):
    rng = np.random.default_rng(1)
    x0, w0 = rng.standard_normal((8, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    out = {}
    for dev in ("CPU", "CUDA"):
        w = Tensor(w0, device=dev, requires_grad=True)
        opt = optim.AdamW([w], lr=0.05, weight_decay=0.1)
        for _ in range(3):
            opt.zero_grad()
            (Tensor(x0, device=dev) @ w).gelu().square().mean().backward()
            opt.step()
        out[dev] = (w.numpy(), opt.state["m"][0].numpy(), opt.state["v"][0].numpy())
    for a, b, name in zip(out["CPU"], out["CUDA"], ("param", "m", "v"), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_jitted_training_step_replays_on_the_device(cuda):
    """TinyJit on the device: the replayed launches go through the cuda runtime's launch, with the
    device's buffers swapped in; the parameters match an eager run on the CPU."""
    from .. import TinyJit

    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((8, 5)).astype(np.float32) for _ in range(5)]
    w0 = rng.standard_normal((5, 3)).astype(np.float32)
    out = {}
    for dev, jit in (("CPU", False), ("CUDA", True)):
        w = Tensor(w0, device=dev, requires_grad=True)
        opt = optim.AdamW([w], lr=0.05, weight_decay=0.1)

        def step(x, w=w, opt=opt):  # (bound now: the loop rebinds both)
            loss = (x @ w).gelu().square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        run = TinyJit(step) if jit else step
        losses = [run(Tensor(x, device=dev)).item() for x in xs]
        out[dev] = (w.numpy(), np.array(losses))
    np.testing.assert_allclose(out["CUDA"][0], out["CPU"][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["CUDA"][1], out["CPU"][1], rtol=1e-5, atol=1e-6)


def test_device_default_moves_a_model(cuda):
    before = Device.DEFAULT
    Device.DEFAULT = "CUDA"
    try:
        layer = nn.Linear(3, 2)
        out = layer(Tensor.ones(4, 3))
        assert layer.weight.device == "CUDA" and out.device == "CUDA"
        out.sum().backward()
        assert layer.weight.grad.device == "CUDA"
    finally:
        Device.DEFAULT = before
    assert Tensor([1.0]).device == "CPU"
