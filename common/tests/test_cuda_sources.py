"""The CUDA sources, checked without CuPy or a GPU: the GEMM registry finds every rung and reads
its header, host-side validation rejects bad operands with a clear message, the runtime kernel
generator writes a kernel for every entry of its op catalogue (and refuses combinations it has no
kernel for), and neither module imports CuPy. Compiling them is the `ptx` nox session's job.
Running them on the CPU is test_cuda_emulation.py's; the GPU section at the end (skipped without
CuPy and a GPU) runs a sample of generated kernels on the device against numpy."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
CUDA_DIR = REPO / "stage2_autograd" / "cuda"


def load(name: str):
    """A module of stage2_autograd/cuda/ by path: these tests must not depend on the stage's import."""
    spec = importlib.util.spec_from_file_location(f"sitp_test_{name}", CUDA_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gemm = load("gemm")
gen = load("elementwise_src")


# ---- the GEMM registry ----


def test_registry_finds_every_cu_file_in_ladder_order():
    files = sorted(p.stem for p in (CUDA_DIR / "gemm").glob("*.cu"))
    names = list(gemm.variants())
    assert names == files
    numbers = [int(re.match(r"gemm_(\d\d)_\w+$", n).group(1)) for n in names]
    assert numbers == list(range(1, len(numbers) + 1)), "rungs are numbered 01, 02, ... without gaps"
    assert len(names) >= 9


@pytest.mark.parametrize("name", list(gemm.variants()))
def test_variant_header_and_launch(name):
    v = gemm.variants()[name]
    for field in gemm.HEADER_FIELDS:
        assert v.fields[field], f"{name}: empty '{field}:'"
    assert v.fields["measured"] == "(pending a GPU run)" or re.search(r"\d", v.fields["measured"])
    assert v.title and not v.title.startswith(name)
    assert v.threads % 32 == 0 and 32 <= v.threads <= 1024
    assert v.bm > 0 and v.bn > 0 and v.smem >= 0
    assert v.arch in ("sm_80", "sm_90a") and v.precision in gemm.PRECISIONS
    text = v.path.read_text()
    assert "#include" not in text, "rungs compile under NVRTC without the host headers"
    assert "(float *C, const" in text.replace("\n", " ").replace("  ", " ")


@pytest.mark.parametrize("M,N", [(1, 1), (127, 129), (4096, 4096), (1000, 3)])
def test_grid_covers_c(M, N):
    for v in gemm.variants().values():
        gx, gy, gz = v.grid(M, N, 5)
        assert gx * v.bn >= N > (gx - 1) * v.bn and gy * v.bm >= M > (gy - 1) * v.bm and gz == 5
        assert v.grid(M, N)[2] == 1


def test_arch_specific_rungs_run_only_on_their_arch():
    v80, v90a = gemm.get_variant(FP32), gemm.get_variant("gemm_10_wgmma_bf16")
    assert (v80.arch, v90a.arch) == ("sm_80", "sm_90a")
    assert gemm.runs_on(v80, 80) and gemm.runs_on(v80, 90) and not gemm.runs_on(v80, 75)
    assert gemm.runs_on(v90a, 90) and not gemm.runs_on(v90a, 80) and not gemm.runs_on(v90a, 100)


def test_header_without_a_field_is_refused(tmp_path):
    bad = tmp_path / "gemm_99_bad.cu"
    bad.write_text('/* gemm_99_bad: no fields\n\n   idea: x\n*/\nextern "C" __global__ void gemm_99_bad(float *C) {}\n')
    with pytest.raises(ValueError, match="gemm_99_bad.*fixes"):
        gemm.load_variant(bad)


# ---- host-side validation (numpy arrays stand in for CuPy's: same .shape/.dtype/.flags) ----

FP32 = "gemm_05_blocktile_2d"
BF16 = "gemm_09_mma_bf16"


def operands(M, N, K, dtype=np.float32):
    return np.zeros((M, K), dtype), np.zeros((K, N), dtype)


def test_check_operands_accepts_and_returns_sizes():
    A, B = operands(3, 5, 7)
    assert gemm.check_operands(gemm.get_variant(FP32), A, B) == (3, 5, 7)
    A16, B16 = operands(3, 5, 7, np.uint16)
    C = np.zeros((3, 5), np.float32)
    assert gemm.check_operands(gemm.get_variant(BF16), A16, B16, C, beta=0.5) == (3, 5, 7)


@pytest.mark.parametrize("make,error,pattern", [
    (lambda: (*operands(3, 5, 7)[:1], np.zeros((6, 5), np.float32)), ValueError, r"\(3, 7\) @ B \(6, 5\).*7 vs 6"),
    (lambda: (np.zeros(7, np.float32), np.zeros((7, 5), np.float32)), ValueError, r"A must be 2-D.*\(7,\)"),
    (lambda: operands(3, 5, 7, np.float64), TypeError, r"float32.*float64"),
    (lambda: (np.zeros((7, 3), np.float32).T, np.zeros((7, 5), np.float32)), ValueError, r"C-contiguous"),
    (lambda: operands(0, 5, 7), ValueError, r">= 1"),
    (lambda: operands(2**16, 2**16, 1), ValueError, r"2\^31"),
])
def test_check_operands_refuses(make, error, pattern):
    A, B = make()
    with pytest.raises(error, match=rf"gemm {FP32}: .*{pattern}"):
        gemm.check_operands(gemm.get_variant(FP32), A, B)


def test_bf16_rung_wants_uint16_bits_and_beta_wants_c():
    A, B = operands(3, 5, 7)
    with pytest.raises(TypeError, match="uint16 for precision bf16"):
        gemm.check_operands(gemm.get_variant(BF16), A, B)
    with pytest.raises(ValueError, match=r"beta = 0.5 needs an input C of shape \(3, 5\)"):
        gemm.check_operands(gemm.get_variant(FP32), A, B, beta=0.5)
    with pytest.raises(ValueError, match=r"C must be .* \(3, 5\), got \(5, 3\)"):
        gemm.check_operands(gemm.get_variant(FP32), A, B, np.zeros((5, 3), np.float32), beta=1.0)
    with pytest.raises(TypeError, match="C must be float32, got float64"):
        gemm.check_operands(gemm.get_variant(FP32), A, B, np.zeros((3, 5)), beta=1.0)


def test_unknown_variant_lists_the_ladder():
    with pytest.raises(ValueError, match="unknown variant 'gemm_00_magic'.*gemm_01_naive"):
        gemm.get_variant("gemm_00_magic")


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_launch_without_cupy_says_what_is_missing():
    A, B = operands(2, 2, 2)
    with pytest.raises(RuntimeError, match="needs CuPy"):
        gemm.gemm(FP32, A, B)


def test_modules_import_without_cupy():
    code = (f"import importlib.util, sys; sys.path.insert(0, {str(CUDA_DIR)!r}); "
            "import gemm, elementwise_src; gemm.variants(); elementwise_src.catalogue(); "
            "assert 'cupy' not in sys.modules, 'imported cupy'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# ---- the runtime kernel generator ----

CATALOGUE = gen.catalogue()


def test_catalogue_covers_every_kind_and_dtype():
    assert {entry[0] for entry in CATALOGUE} == set(gen.KIND_OPS)
    for kind in ("where", "cast", "copy", "gather"):  # every dtype moves; the core ones and uint64 compute
        assert {e[2] for e in CATALOGUE if e[0] == kind} == set(gen.DTYPES), kind
    for kind in ("unary", "binary", "reduce", "arg_reduce"):
        assert {e[2] for e in CATALOGUE if e[0] == kind} == {*gen.CORE, "uint64"}, kind
    assert ("cast", None, "bfloat16", "float32", 1) in CATALOGUE
    assert ("cast", None, "float32", "float16", 0) in CATALOGUE
    assert ("cast", None, "bfloat16", "float64", 1) not in CATALOGUE  # (through float32: dtype.cast_hub)
    assert {e[1] for e in CATALOGUE if e[0] == "binary"} >= {"add", "sub", "mul", "div", "pow", "max", "cmplt", "cmpeq"}
    assert ("binary", "cmplt", "float32", "bool", 4) in CATALOGUE
    assert ("cast", None, "int64", "float32", 1) in CATALOGUE


def test_every_catalogue_entry_has_a_kernel_with_a_unique_name():
    names = set()
    for entry in CATALOGUE:
        name, text = gen.source(*entry)
        assert re.search(rf'extern "C" __global__ void {name}\(', text), entry
        assert "#include" not in text and text.count("__global__") == 1
        names.add(name)
    assert len(names) == len(CATALOGUE)


def test_elementwise_signature_follows_ndim():
    _, text = gen.source("binary", "add", "float32", "float32", 3)
    params = re.search(r"\((.*?)\)", text[text.index("__global__"):]).group(1).split(", ")
    assert params[:4] == ["float *out", "const float *a", "const float *b", "i64 n"]
    assert params[4:] == [f"i64 {p}{d}" for p in ("n", "sa", "sb") for d in range(3)]
    _, text0 = gen.source("unary", "exp", "float64", "float64", 0)
    assert "exp(x)" in text0 and "rem" not in text0.split("#endif")[1]


def test_comparison_writes_bool_and_ints_wrap():
    name, text = gen.source("binary", "cmplt", "int64", "bool", 2)
    assert name == "binary_cmplt_int64_bool_nd2" and "u8 *out" in text
    assert "(T)((U)x + (U)y)" in gen.source("binary", "add", "int32", "int32", 1)[1]


@pytest.mark.parametrize("args,error,pattern", [
    (("fused", None, "float32", "float32", 1), ValueError, "unknown kernel kind 'fused'"),
    (("unary", "cube", "float32", "float32", 1), ValueError, "unknown op 'cube'"),
    (("unary", "exp", "complex64", "complex64", 1), TypeError, "unknown dtype 'complex64'"),
    (("unary", "exp", "float16", "float16", 1), TypeError, "the others are storage"),
    (("cast", None, "bfloat16", "int64", 1), TypeError, "bfloat16 -> int64 is not supported"),
    (("unary", "exp", "int32", "int32", 1), TypeError, "int32 -> int32 is not supported"),
    (("binary", "cmplt", "float32", "float32", 1), TypeError, "expected output bool"),
    (("reduce", "reduce_add", "float32", "float32", 2), ValueError, "takes ndim = 3"),
    (("reduce", "reduce_add", "bool", "bool", 3), TypeError, "bool with"),
    (("copy", None, "float32", "float32", 65), ValueError, "ndim 65 outside 0..64"),
])
def test_generator_refuses(args, error, pattern):
    with pytest.raises(error, match=pattern):
        gen.source(*args)


# ---- the leaderboard renderer, on a made-up run ----


def fake_run() -> dict:
    def bench(impl, precision, n, seconds):
        return {"stats": {"median": seconds * 4}, "extra_info": {
            "impl": impl, "precision": precision, "n": n, "flops": 2.0 * n**3, "launches_per_round": 4,
            "gpu": "Test GPU", "compute_capability": 90, "sms": 132, "peak_fp32_measured": 60e12,
            "peak_bf16_spec": 1000e12}}
    return {"datetime": "today", "benchmarks": [
        bench("gemm_01_naive", "fp32", 4096, 2 * 4096**3 / 1e12),  # 1 TFLOP/s
        bench("cublas_fp32", "fp32", 4096, 2 * 4096**3 / 50e12),  # 50 TFLOP/s
        bench("gemm_09_mma_bf16", "bf16", 4096, 2 * 4096**3 / 300e12),
        bench("cublas_bf16", "bf16", 4096, 2 * 4096**3 / 600e12),
    ]}


def test_leaderboard_ratios_come_from_the_same_run():
    from benchmarks.gemm_cuda_leaderboard import render

    table = render(fake_run())
    assert "Test GPU (sm_90, 132 SMs)" in table
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| ")}
    assert rows["gemm_01_naive"].endswith("| 1,000 (2%) | 2.0% | 1.7% |")
    assert rows["gemm_09_mma_bf16"].endswith("| 300,000 (50%) | 50.0% | 30.0% |")
    assert list(rows)[2:] == ["gemm_01_naive", "gemm_09_mma_bf16", "cublas_fp32", "cublas_bf16"]


def test_leaderboard_replaces_only_the_marked_block():
    from benchmarks.gemm_cuda_leaderboard import replace_between_markers

    text = "intro\n<!-- gemm-cuda:start -->\nold\n<!-- gemm-cuda:end -->\nafter\n"
    assert replace_between_markers(text, "| new |\n") == (
        "intro\n<!-- gemm-cuda:start -->\n| new |\n<!-- gemm-cuda:end -->\nafter\n")
    with pytest.raises(ValueError, match="no <!-- gemm-cuda:start -->"):
        replace_between_markers("no markers", "x")


# ---- the generated kernels on a GPU (skipped without CuPy and a GPU): each against numpy ----


def _cupy_with_gpu():
    try:
        import cupy
    except ImportError:
        return None
    try:
        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except cupy.cuda.runtime.CUDARuntimeError:
        return None


cp = _cupy_with_gpu()
needs_gpu = pytest.mark.skipif(cp is None, reason="needs CuPy and a CUDA GPU")
i64 = np.int64


def run(entry: tuple, args: tuple, n: int, block: int = 256) -> None:
    name, text = gen.source(*entry)
    kernel = cp.RawModule(code=text, options=("--std=c++17",)).get_function(name)
    kernel((max(1, min(-(-n // block), 1024)),), (block,), args)


def strides(x) -> list:
    return [i64(s // x.itemsize) for s in x.strides]


@needs_gpu
def test_gpu_binary_broadcasts_through_zero_strides():
    a = cp.asarray(np.random.default_rng(0).standard_normal((3, 1, 5)).astype(np.float32))
    b = cp.asarray(np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32))
    shape = (3, 4, 5)
    av, bv = cp.broadcast_to(a, shape), cp.broadcast_to(b, shape)
    out = cp.empty(shape, cp.float32)
    run(("binary", "add", "float32", "float32", 3), (out, av, bv, i64(out.size), *map(i64, shape),
                                                        *strides(av), *strides(bv)), out.size)
    np.testing.assert_array_equal(out.get(), a.get() + b.get())


@needs_gpu
def test_gpu_compare_and_unary_on_reversed_and_transposed_views():
    x = cp.arange(-6, 6, dtype=cp.int64).reshape(3, 4)[:, ::-1]  # a negative stride
    w = cp.asarray(np.random.default_rng(3).integers(-6, 6, (4, 3))).T  # a transposed view
    out = cp.empty((3, 4), cp.uint8)
    run(("binary", "cmplt", "int64", "bool", 2), (out, x, w, i64(12), i64(3), i64(4), *strides(x), *strides(w)), 12)
    np.testing.assert_array_equal(out.get(), x.get() < w.get())
    y = cp.asarray(np.linspace(-3, 3, 12).reshape(3, 4)).T
    o2 = cp.empty((4, 3), cp.float64)
    run(("unary", "exp", "float64", "float64", 2), (o2, y, i64(12), i64(4), i64(3), *strides(y)), 12)
    np.testing.assert_allclose(o2.get(), np.exp(y.get()), rtol=1e-15)
    z = cp.asarray(np.array([np.iinfo(np.int32).min, -5, 0, 7], np.int32))
    o3 = cp.empty(4, cp.int32)
    run(("unary", "neg", "int32", "int32", 1), (o3, z, i64(4), i64(4), i64(1)), 4)
    np.testing.assert_array_equal(o3.get(), -z.get())  # numpy wraps INT32_MIN too


@needs_gpu
def test_gpu_where_cast_and_strided_copy():
    cond = cp.asarray(np.array([[1, 0, 1]], np.uint8))
    a, b = cp.arange(6, dtype=cp.float32).reshape(2, 3), cp.full((1, 1), -1.0, cp.float32)
    av, bv, cv = a, cp.broadcast_to(b, (2, 3)), cp.broadcast_to(cond, (2, 3))
    out = cp.empty((2, 3), cp.float32)
    run(("where", None, "float32", "float32", 2), (out, cv, av, bv, i64(6), i64(2), i64(3), *strides(cv),
                                                   *strides(av), *strides(bv)), 6)
    np.testing.assert_array_equal(out.get(), np.where(cond.get().astype(bool), a.get(), -1.0))
    x = cp.asarray(np.array([0.0, -0.0, 2.5, np.nan, -3.7], np.float32))
    ob, oi = cp.empty(5, cp.uint8), cp.empty(5, cp.int32)
    run(("cast", None, "float32", "bool", 1), (ob, x, i64(5), i64(5), i64(1)), 5)
    run(("cast", None, "float32", "int32", 1), (oi, x[[0, 1, 2, 4]], i64(4), i64(4), i64(1)), 4)
    np.testing.assert_array_equal(ob.get(), [0, 0, 1, 1, 1])
    np.testing.assert_array_equal(oi.get()[:4], [0, 0, 2, -3])
    src = cp.arange(12, dtype=cp.int64).reshape(3, 4)
    dst = cp.zeros((4, 3), cp.int64)
    dv = dst.T  # write through the transposed view
    run(("copy", None, "int64", "int64", 2), (dv, src, i64(12), i64(3), i64(4), *strides(dv), *strides(src)), 12)
    np.testing.assert_array_equal(dst.get(), src.get().T)


def _oir(x):  # (O, R, I) sizes and strides of a 3-d view, reducing the middle axis
    return (*map(i64, x.shape), *strides(x))


@needs_gpu
def test_gpu_reductions_over_the_middle_axis():
    rng = np.random.default_rng(2)
    host = rng.standard_normal((3, 1000, 5)).astype(np.float32)
    host[1, 17, 2] = np.nan
    x = cp.asarray(host)
    out = cp.empty((3, 5), cp.float32)
    run(("reduce", "reduce_add", "float32", "float32", 3), (out, x, *_oir(x)), 15, gen.REDUCE_THREADS)
    expect = host.astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(out.get(), expect, rtol=1e-5, atol=1e-4)
    run(("reduce", "reduce_max", "float32", "float32", 3), (out, x, *_oir(x)), 15, gen.REDUCE_THREADS)
    np.testing.assert_array_equal(out.get(), host.max(axis=1))  # the NaN propagates, like numpy
    ties = cp.asarray(np.array([[[3], [7], [7], [1]], [[2], [np.nan], [9], [np.nan]]], np.float64))
    arg = cp.empty((2, 1), cp.int64)
    run(("arg_reduce", "argmax", "float64", "int64", 3), (arg, ties, *_oir(ties)), 2, gen.REDUCE_THREADS)
    np.testing.assert_array_equal(arg.get().ravel(), np.argmax(ties.get(), axis=1).ravel())  # [1, 1]
    ints = cp.asarray(np.full((1, 3, 1), 2**31 - 1, np.int32))
    cs = cp.empty((1, 3, 1), cp.int32)
    run(("cumsum", "sum", "int32", "int32", 3), (cs, ints, *_oir(ints)), 1)
    np.testing.assert_array_equal(cs.get(), np.cumsum(ints.get(), axis=1, dtype=np.int32))


@needs_gpu
def test_gpu_gather_and_scatter_add_with_repeated_rows():
    table = cp.arange(20, dtype=cp.float64).reshape(5, 4)
    rows = np.array([3, 0, 3])
    offsets = cp.asarray(rows * 4, dtype=cp.int64)
    out = cp.empty((3, 4), cp.float64)
    run(("gather", None, "float64", "float64", 1), (out, table, offsets, i64(3), i64(4), i64(4), i64(1)), 12)
    np.testing.assert_array_equal(out.get(), table.get()[rows])
    grad = cp.zeros((5, 4), cp.float64)
    run(("scatter_add", None, "float64", "float64", 1), (grad, out, offsets, i64(3), i64(4), i64(4), i64(1)), 12)
    expect = np.zeros((5, 4))
    np.add.at(expect, rows, table.get()[rows])
    np.testing.assert_array_equal(grad.get(), expect)


def _mix64(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@needs_gpu
def test_gpu_rand_is_the_cpu_stream_and_fill_iota():
    n, seed, counter = 1000, 1234, 77
    out = cp.empty(n, cp.float32)
    run(("rand", "uniform", "float32", "float32", 1), (out, i64(n), np.uint64(seed), np.uint64(counter)), n)
    with np.errstate(over="ignore"):
        key = _mix64(np.array([seed], np.uint64))[0]
        i = np.arange(n, dtype=np.uint64) + np.uint64(counter) + np.uint64(1)
        bits = _mix64(key + i * np.uint64(0x9E3779B97F4A7C15))
    np.testing.assert_array_equal(out.get(), (bits >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-24))
    filled, idx = cp.empty(7, cp.int32), cp.empty(9, cp.int64)
    run(("fill", None, "int32", "int32", 1), (filled, i64(7), np.int32(-3)), 7)
    run(("iota", None, "int64", "int64", 1), (idx, i64(9)), 9)
    assert filled.get().tolist() == [-3] * 7 and idx.get().tolist() == list(range(9))


def test_leaderboard_fills_the_measured_header_lines(tmp_path):
    from benchmarks.gemm_cuda_leaderboard import write_headers

    for rung in ("gemm_01_naive", "gemm_09_mma_bf16"):
        (tmp_path / f"{rung}.cu").write_text((CUDA_DIR / "gemm" / f"{rung}.cu").read_text())
    assert sorted(write_headers(fake_run(), tmp_path)) == ["gemm_01_naive", "gemm_09_mma_bf16"]
    text = (tmp_path / "gemm_09_mma_bf16.cu").read_text()
    assert "   measured: 300,000 GFLOP/s at n=4096 on Test GPU, 50% of cuBLAS bf16 (today)\n" in text
    assert gemm.parse_header(text, "gemm_09_mma_bf16")["launch"].startswith("threads=256")
