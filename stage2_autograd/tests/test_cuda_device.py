"""The cuda device: tensors on it, moves between devices, and the error contract.

Without a GPU these run on the CPU emulator when SITP_CUDA_BACKEND=emulate (the same generated
CUDA source built with g++, common/cuda_emulation.py), and skip with the reason otherwise; with
CuPy and a GPU they run there. Three tests need no device at all: the stage imports and computes
on the CPU without CuPy, asking for "cuda" without CuPy says what to install, and an unknown device
is refused. The op-by-op check of the device is the conformance suite's (`CUDA` in its ids).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from .. import Device, Tensor, dtypes, nn, optim
from .. import __all__ as exported

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cuda() -> str:
    """The device name, once the device works here (real or emulated); else a skip saying why."""
    if os.environ.get("SITP_CUDA_BACKEND") == "emulate":
        sys.path.insert(0, str(REPO))
        from common.cuda_emulation import EmulatedBackend

        from ..cuda import elementwise_src, runtime

        runtime.use_backend(EmulatedBackend(elementwise_src))
    try:
        Tensor([0.0], device="cuda")
    except RuntimeError as e:
        pytest.skip(f"no cuda device here ({e}); SITP_CUDA_BACKEND=emulate runs it on the CPU emulator")
    return "cuda"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "SITP_CUDA_BACKEND": ""})


# ---- no device needed ----


def test_the_cpu_needs_neither_cupy_nor_a_gpu():
    done = _run("""
        import sys
        import stage2_autograd as s
        x = s.Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        (x @ x).sum().backward()
        assert x.device == "CPU" and x.grad.tolist() == [[7.0, 11.0], [9.0, 13.0]]
        assert "cupy" not in sys.modules, "CuPy was imported by the CPU path"
    """)
    assert done.returncode == 0, done.stderr


def test_cuda_without_cupy_says_what_to_install():
    done = _run("""
        import sys
        sys.modules["cupy"] = None  # what an environment without CuPy looks like to `import cupy`
        import stage2_autograd as s
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
    assert x.device == "CUDA" and Tensor(host).device == "CPU"
    assert Tensor(host, device="gpu").device == "CUDA"
    back = x.to("cpu")
    assert back.device == "CPU" and back.tolist() == host.tolist()
    assert x.to("cuda") is x and back.to("CPU") is back
    assert Tensor(back, device=cuda).device == "CUDA" and Tensor(x).device == "CUDA"
    assert x.T.to("cpu").tolist() == host.T.tolist()  # a strided view moves as its values
    assert repr(x) == "<Tensor (2, 3) float32 on CUDA>"


def test_mixing_devices_names_the_op_both_devices_and_shapes(cuda):
    a, b = Tensor.ones(2, 3, device=cuda), Tensor.ones(3)
    for op, call in (("add", lambda: a + b), ("matmul", lambda: a @ Tensor.ones(3, 2)),
                     ("where", lambda: (b > 0).where(a, 0.0)), ("cat", lambda: a.cat(Tensor.ones(2, 3)))):
        with pytest.raises(RuntimeError, match=rf"{op}: .*CUDA \(2, 3\).*CPU|{op}: .*CPU.*CUDA \(2, 3\)"):
            call()


def test_scalars_and_index_lists_follow_the_tensor(cuda):
    x = Tensor([[1.0, 2.0], [3.0, 4.0]], device=cuda)
    assert (x * 2 + 1).device == "CUDA" and (2 - x).tolist() == [[1.0, 0.0], [-1.0, -2.0]]
    assert x[[1, 0]].tolist() == [[3.0, 4.0], [1.0, 2.0]]
    assert x[Tensor([1])].device == "CUDA"  # a CPU index tensor moves to the data, like a list


def test_ops_match_the_cpu(cuda):
    rng = np.random.default_rng(0)
    host = rng.standard_normal((4, 6)).astype(np.float32)
    g, c = Tensor(host, device=cuda), Tensor(host)
    cases = {
        "broadcast view": lambda t: (t[::-1, ::2] * t[:1, 1::2]).exp(),
        "reductions": lambda t: t.sum(1) + t.max(0).sum() - t.min(),
        "argmax": lambda t: t.argmax(1),
        "cumsum": lambda t: t.cumsum(1),
        "softmax": lambda t: t.softmax(-1),
        "int ops": lambda t: (t * 10).int() * 3 - (t > 0).int() + (t * 10).int().maximum(2),
        "float32 matmul": lambda t: t @ t.T,
        "float64 matmul": lambda t: t.cast(dtypes.float64) @ t.T.cast(dtypes.float64),
        "int64 matmul": lambda t: (t * 4).cast(dtypes.int64) @ (t * 4).T.cast(dtypes.int64),
        "batched matmul": lambda t: t.reshape(2, 2, 6) @ t.reshape(2, 6, 2),
        "gather": lambda t: t[[3, 0, 3], 1:4],
        "pad": lambda t: t.pad(((1, 0), (0, 2)), value=-1.0),
        "arange": lambda t: Tensor.arange(5, device=t.device) * 2,
        "solve": lambda t: (t[:, :4] + Tensor.eye(4, device=t.device) * 5).solve(t[:, 4]),
    }
    for name, f in cases.items():
        ours, cpu = f(g), f(c)
        assert ours.device == "CUDA", name
        np.testing.assert_allclose(ours.numpy(), cpu.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_bfloat16_matmul_runs_on_the_tensor_cores(cuda):
    """A bfloat16 matmul on the device runs the top bf16 rung (mma.sync or wgmma), sums in float32 and rounds
    once: on small integers, whose sums are exact, it equals the exact product rounded, bit for bit, as the
    CPU's bfloat16 rung does. Batched, edges past the 128 x 128 tiles, and the half types' casts and copies
    on the way."""
    from ..cuda.runtime import runtime

    assert runtime().gemm_bf16_variant is not None and runtime().gemm_bf16_variant.precision == "bf16"
    rng = np.random.default_rng(1)
    a = rng.integers(-8, 9, size=(3, 130, 70)).astype(np.float32)
    b = rng.integers(-8, 9, size=(3, 70, 140)).astype(np.float32)
    exact = (a.astype(np.float64) @ b).astype(np.float32)
    for dtype in (dtypes.bfloat16, dtypes.float16):
        ours = (Tensor(a, device=cuda).cast(dtype) @ Tensor(b, device=cuda).cast(dtype)).numpy()
        cpu = (Tensor(a).cast(dtype) @ Tensor(b).cast(dtype)).numpy()
        want = Tensor(exact).cast(dtype).numpy()
        np.testing.assert_array_equal(ours.view(np.uint16), want.view(np.uint16), err_msg=dtype.name)
        np.testing.assert_array_equal(cpu.view(np.uint16), want.view(np.uint16), err_msg=dtype.name)


def test_split_work_matches_the_cpu(cuda, monkeypatch):
    """A reduction to a few outputs from many terms, and a matmul of few C tiles with a long K, are cut
    across blocks (runtime.py: _reduce_split, _matmul_split_k); the emulator poses as a 2-SM GPU, so
    these small shapes are cut too. Each case checks that it was cut, then the answer."""
    from ..cuda import runtime as rt

    runtime = rt.runtime()
    rng = np.random.default_rng(2)
    big = rng.standard_normal((3, 10007)).astype(np.float32)  # 30021 terms: 8 slices of 3752 and 5 over
    a, b = rng.standard_normal((40, 2048)).astype(np.float32), rng.standard_normal((2048, 24)).astype(np.float32)
    assert runtime._reduce_slices(1, big.size, 1) == 8 and runtime._reduce_slices(1, 3, 10007) == 1
    assert runtime._reduce_slices(1, big.size, 5) == 2 and runtime._reduce_slices(3, 10007, 1) == 1
    assert runtime._k_slices(runtime.gemm_variant, 1, 40, 24, 2048) == 4
    assert runtime._k_slices(runtime.gemm_variant, 2, 40, 24, 2048) == 1  # batched: not cut
    assert runtime._k_slices(runtime.gemm_variant, 1, 40, 24, 2047) == 1  # K has no factor 2
    cut = []  # the split paths taken, by name

    def record(method: str) -> None:
        original = getattr(runtime, method)

        def wrapped(*args):
            cut.append(method)
            return original(*args)
        monkeypatch.setattr(runtime, method, wrapped)

    record("_reduce_split")
    record("_matmul_split_k")
    g, c = Tensor(big, device=cuda), Tensor(big)
    cases = {
        "sum": lambda t: t.sum(),
        "float64 sum": lambda t: t.cast(dtypes.float64).square().sum(),
        "max": lambda t: t.max(),
        "min of a column-major view": lambda t: t.T.reshape(-1)[:30000].min(),
        "sum over the leading axis": lambda t: t.reshape(3, 1, 10007).T.sum(0),
        "int sum": lambda t: (t * 100).cast(dtypes.int64).sum(),
        "any": lambda t: (t > 4.5).any(),
    }
    for name, f in cases.items():
        cut.clear()
        np.testing.assert_allclose(f(g).numpy(), f(c).numpy(), rtol=2e-5, err_msg=name)
        assert "_reduce_split" in cut, name
    for name, (x, y) in {"A @ B": (a, b), "A.T @ B.T (views)": (a.T.copy().T, b.T.copy().T),
                         "odd tile edges": (a[:33], b[:, :17])}.items():
        cut.clear()
        ours = (Tensor(x, device=cuda) @ Tensor(y, device=cuda)).numpy()
        assert cut == ["_matmul_split_k"], name
        np.testing.assert_allclose(ours, x.astype(np.float64) @ y, rtol=1e-4, atol=1e-4, err_msg=name)


def test_the_same_seed_draws_the_same_numbers_on_both_devices(cuda):
    Tensor.manual_seed(7)
    on_gpu = Tensor.randn(3, 5, device=cuda).numpy()
    Tensor.manual_seed(7)
    on_cpu = Tensor.randn(3, 5).numpy()
    np.testing.assert_allclose(on_gpu, on_cpu, rtol=1e-6, atol=1e-6)


def test_gradients_on_the_device_and_across_moves(cuda):
    w = Tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)  # a CPU leaf
    x = Tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], device=cuda)
    idx = Tensor([2, 0, 2], device=cuda)
    loss = (x @ w.to(cuda)).relu()[idx].sum()  # gather, matmul, relu on the GPU; the rule of `to` back
    loss.backward()
    assert w.grad.device == "CPU"
    expect = x.numpy()[[2, 0, 2]].T @ (x.numpy()[[2, 0, 2]] @ w.numpy() > 0)
    np.testing.assert_allclose(w.grad.numpy(), expect, rtol=1e-6)


def test_the_optimizers_fused_kernels_match_the_cpu(cuda):
    """AdamW's fused step (csrc/adam.c, elementwise_src's adam) and GELU's kernels, both devices."""
    rng = np.random.default_rng(1)
    x0, w0 = rng.standard_normal((8, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    out = {}
    for dev in ("CPU", cuda):
        w = Tensor(w0, device=dev, requires_grad=True)
        opt = optim.AdamW([w], lr=0.05, weight_decay=0.1)
        for _ in range(3):
            opt.zero_grad()
            (Tensor(x0, device=dev) @ w).gelu().square().mean().backward()
            opt.step()
        out[dev] = (w.numpy(), opt.state["m"][0].numpy(), opt.state["v"][0].numpy())
    for a, b, name in zip(out["CPU"], out[cuda], ("param", "m", "v"), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, err_msg=name)


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


def test_the_package_exports_device():
    assert "Device" in exported
