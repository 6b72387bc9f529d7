"""Every rung of the float32 GEMM ladder (csrc/gemm_NN_*.c) against float64 numpy: odd shapes
(1, primes, non-multiples of the 6 x 16 tile, more than one cache block in each of M, N, K),
transposed, stepped, flipped and broadcast operands, alpha and beta (beta == 0 must not read C),
1 and 2 threads; then the registry (discovery, SITP_GEMM, use() and the thread setting), the route from
Tensor.matmul, and the errors bad input gets. Relative error: max |ours - ref| / max |ref| < 1e-5."""

import ml_dtypes
import numpy as np
import pytest

from .. import Tensor, gemm, isa
from ..ckernels import gemm_variants, lib

RUNGS = list(gemm.variants())
THREADED = [name for name, v in gemm.variants().items() if v.threaded]
# (M, N, K): single elements, primes, one tile, tile edges, and shapes that cross the rungs' block
# sizes (K past KC = 256 and 512, M past MC = 144, N past NC = 4096) while staying cheap for the naive rung.
SHAPES = [(1, 1, 1), (1, 9, 1), (5, 1, 7), (6, 16, 8), (7, 17, 3), (13, 31, 29), (61, 67, 71),
          (5, 33, 600), (301, 19, 11), (4, 4099, 3), (2, 3, 0), (0, 5, 3), (4, 0, 2),
          (29, 4099, 600), (230, 40, 1030)]  # the AVX-512 rung's 14-row tiles past its KC = 512 and NC = 4096


def operands(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)


def assert_close(ours: np.ndarray, ref: np.ndarray, what: str) -> None:
    assert ours.shape == ref.shape, what
    assert np.isfinite(ours).all(), f"{what}: non-finite values"
    scale = max(float(np.abs(ref).max(initial=0.0)), 1e-30)
    err = float(np.abs(ours.astype(np.float64) - ref).max(initial=0.0)) / scale
    assert err < 1e-5, f"{what}: relative error {err:.2e}"


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("rung", RUNGS)
def test_rung_matches_float64_numpy(rung, M, N, K):
    a, b = operands(M, N, K, seed=M + N + K)
    c = Tensor(np.full((M, N), np.nan, dtype=np.float32))  # beta == 0: the NaNs must never be read
    out = gemm.gemm(Tensor(a), Tensor(b), c, variant=rung, threads=1)
    assert out is c
    assert_close(c.numpy(), a.astype(np.float64) @ b, f"{rung} {M}x{N}x{K}")


@pytest.mark.parametrize("rung", RUNGS)
def test_rung_alpha_beta(rung):
    M, N, K = 31, 45, 23
    a, b = operands(M, N, K, seed=1)
    c0 = np.random.default_rng(2).standard_normal((M, N)).astype(np.float32)
    c = Tensor(c0)
    gemm.gemm(Tensor(a), Tensor(b), c, alpha=0.5, beta=-2.0, variant=rung)
    assert_close(c.numpy(), 0.5 * (a.astype(np.float64) @ b) - 2.0 * c0, f"{rung} alpha/beta")
    c = Tensor(c0)
    gemm.gemm(Tensor(a), Tensor(b), c, alpha=0.0, beta=1.0, variant=rung)
    np.testing.assert_array_equal(c.numpy(), c0)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rung", RUNGS)
def test_rung_over_a_batch_of_views(rung, threads):
    """gemm_batched: per-head products of permuted, sliced, flipped and broadcast views, no copies."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 9, 3, 5)).astype(np.float32)  # (B, T, H, D), like attention's q and k
    w = rng.standard_normal((1, 3, 9, 4)).astype(np.float32)
    q, k = Tensor(x).permute(0, 2, 1, 3), Tensor(x).permute(0, 2, 3, 1)  # (B, H, T, D), (B, H, D, T)
    qn, kn = x.transpose(0, 2, 1, 3).astype(np.float64), x.transpose(0, 2, 3, 1).astype(np.float64)
    with gemm.use(rung, threads=threads):
        cases = {"q @ k": (q @ k, qn @ kn),
                 "flipped, stepped": (q[:, :, ::-2].flip(-1) @ k[:, ::-1, :, 1::2],
                                      qn[:, :, ::-2, ::-1] @ kn[:, ::-1, :, 1::2]),
                 "broadcast batch": (Tensor(w).transpose(-1, -2) @ q, w.astype(np.float64).swapaxes(-1, -2) @ qn)}
        for what, (ours, ref) in cases.items():
            assert_close(ours.numpy(), ref, f"{rung} {threads} threads, {what}")


@pytest.mark.parametrize("M", [23, 3])  # 3: under one 6-row sliver, the top rung's unpacked path
@pytest.mark.parametrize("rung", RUNGS)
def test_rung_on_strided_views(rung, M):
    N, K = 37, 19
    rng = np.random.default_rng(3)
    at = rng.standard_normal((K, M)).astype(np.float32)  # A is the transpose of this
    big_b = rng.standard_normal((2 * K, 3 * N)).astype(np.float32)  # B is every 2nd row, every 3rd column
    flip_b = rng.standard_normal((K, N)).astype(np.float32)
    row = rng.standard_normal((1, N)).astype(np.float32)
    a_view, a_ref = Tensor(at).T, at.T.astype(np.float64)
    cases = {"A transposed, B stepped": (a_view, Tensor(big_b)[::2, ::3], big_b[::2, ::3]),
             "B flipped both ways": (a_view, Tensor(flip_b).flip((0, 1)), flip_b[::-1, ::-1]),
             "B broadcast down K (stride 0)": (a_view, Tensor(row).expand(K, N), np.broadcast_to(row, (K, N)))}
    for what, (a, b, b_ref) in cases.items():
        assert_close(gemm.gemm(a, b, variant=rung).numpy(), a_ref @ b_ref, f"{rung} {what}")


@pytest.mark.parametrize("rung", RUNGS)
def test_rung_writes_a_strided_c_in_place(rung):
    M, N, K = 9, 14, 5
    a, b = operands(M, N, K, seed=4)
    base = np.random.default_rng(5).standard_normal((N, M)).astype(np.float32)
    c = Tensor(base).T  # column-major C
    gemm.gemm(Tensor(a), Tensor(b), c, alpha=1.0, beta=0.5, variant=rung)
    assert_close(c.numpy(), a.astype(np.float64) @ b + 0.5 * base.T, f"{rung} column-major C")


@pytest.mark.skipif(not lib.gemm_has_openmp(), reason="built without OpenMP: threaded rungs run serially")
@pytest.mark.parametrize("M,N,K", [(1, 50, 40), (11, 70, 30), (301, 150, 300)])
@pytest.mark.parametrize("rung", THREADED)
def test_threaded_rung_on_two_threads(rung, M, N, K):
    a, b = operands(M, N, K, seed=6)
    ref = a.astype(np.float64) @ b
    for threads in (1, 2):
        c0 = np.random.default_rng(7).standard_normal((M, N)).astype(np.float32)
        c = Tensor(c0)
        gemm.gemm(Tensor(a), Tensor(b), c, alpha=1.5, beta=0.25, variant=rung, threads=threads)
        assert_close(c.numpy(), 1.5 * ref + 0.25 * c0, f"{rung} {threads} threads {M}x{N}x{K}")


# ---- the registry ----


def test_registry_finds_every_file_in_order():
    entries = gemm_variants()
    assert entries == sorted(p.stem for p in gemm.CSRC.glob("gemm_[0-9][0-9]_*.c"))
    assert [v.entry for v in gemm.variants().values()] == entries
    assert len(entries) >= 6 and entries[0] == "gemm_01_naive"
    assert gemm.best() == RUNGS[-1]
    for v in gemm.variants().values():
        assert v.title and all(v.fields[key] for key in gemm.HEADER_FIELDS)


def test_env_var_picks_the_rung(monkeypatch):
    monkeypatch.delenv("SITP_GEMM", raising=False)
    assert gemm.current().name == gemm.best()
    monkeypatch.setenv("SITP_GEMM", "03_blocked")
    assert gemm.current().name == "03_blocked"
    monkeypatch.setenv("SITP_GEMM", "gemm_02_reorder")
    assert gemm.current().name == "02_reorder"
    monkeypatch.setenv("SITP_GEMM", "99_magic")
    with pytest.raises(ValueError, match="unknown variant '99_magic'"):
        gemm.current()


def test_use_sets_and_restores(monkeypatch):
    monkeypatch.delenv("SITP_GEMM", raising=False)
    before = Tensor.get_num_threads()
    with gemm.use("04_microkernel", threads=1):
        assert gemm.current().name == "04_microkernel" and gemm.thread_count() == 1
        with gemm.use(threads=2):
            assert gemm.current().name == "04_microkernel" and gemm.thread_count() == 2
        assert gemm.thread_count() == 1
    assert gemm.current().name == gemm.best()
    assert gemm.thread_count() == before == Tensor.get_num_threads()


def test_tensor_matmul_runs_the_chosen_rung(monkeypatch):
    seen = []
    real_call = gemm._call
    real_batched = gemm._call_batched
    monkeypatch.setattr(gemm, "_call", lambda v, *args: (seen.append(v.name), real_call(v, *args)))
    monkeypatch.setattr(gemm, "_call_batched", lambda v, *args: (seen.append(v.name), real_batched(v, *args)))
    a, b = operands(3, 4, 5, seed=8)
    batch_a, batch_b = np.stack([a, 2 * a]), np.stack([b, -b])
    with gemm.use("02_reorder"):
        out = (Tensor(batch_a) @ Tensor(batch_b)).numpy()
        folded = (Tensor(batch_a) @ Tensor(b)).numpy()
    # one batched call, then one plain call: a 2-D right operand folds the batch into the rows
    assert seen == ["02_reorder", "02_reorder"]
    assert_close(out, batch_a.astype(np.float64) @ batch_b, "batched matmul through 02_reorder")
    assert_close(folded, batch_a.astype(np.float64) @ b, "folded batched matmul through 02_reorder")
    seen.clear()
    Tensor(a) @ Tensor(b)
    assert seen == [gemm.best()]


def test_other_dtypes_keep_the_first_gemm():
    a, b = np.arange(12).reshape(3, 4), np.arange(8).reshape(4, 2)
    np.testing.assert_array_equal((Tensor(a) @ Tensor(b)).numpy(), a @ b)
    np.testing.assert_allclose((Tensor(a * 0.5) @ Tensor(b * 0.25)).numpy(), (a * 0.5) @ (b * 0.25))


# ---- the bfloat16 rung (csrc/gemm_bf16.c) ----

BF16_SHAPES = [(1, 1, 1), (7, 17, 3), (33, 45, 64), (61, 67, 71), (64, 300, 100), (100, 33, 257), (0, 5, 3),
               (3, 4, 0), (130, 260, 600)]  # edges of the 32 x 32 blocks, K past 32-tiles and 8-tile blocks


def bf16_ints(shape, seed):
    """Small integers as bfloat16: every product and partial sum is exact in float32 (|sum| < 2^24), so the
    only rounding is the one at the end, whatever order the rung sums in."""
    return np.random.default_rng(seed).integers(-8, 9, size=shape).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("M,N,K", BF16_SHAPES)
@pytest.mark.parametrize("threads", [1, 2])
def test_bf16_rung_rounds_the_exact_sum_once(M, N, K, threads):
    a, b = bf16_ints((M, K), M + K), bf16_ints((K, N), N + 1)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    with gemm.use(threads=threads):
        ours = (Tensor(a) @ Tensor(b)).numpy()
    assert ours.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(ours.view(np.uint16), exact.astype(np.float32).astype(ml_dtypes.bfloat16)
                                  .view(np.uint16))


def test_bf16_rung_reads_views_and_batches():
    rng = np.random.default_rng(3)
    a = rng.integers(-8, 9, size=(3, 40, 70)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-8, 9, size=(70, 3, 50)).astype(ml_dtypes.bfloat16)
    at, bt = Tensor(a), Tensor(b).permute(1, 0, 2)  # b's batch dim is its middle one: a strided view
    exact = a.astype(np.float64) @ b.transpose(1, 0, 2).astype(np.float64)
    want = exact.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
    np.testing.assert_array_equal((at @ bt).numpy().view(np.uint16), want)
    np.testing.assert_array_equal((at[:, ::2] @ bt).numpy().view(np.uint16), want[:, ::2])
    flipped = Tensor(np.ascontiguousarray(a[0].T)).transpose(0, 1)  # column-major A
    np.testing.assert_array_equal((flipped @ bt[0]).numpy().view(np.uint16), want[0])


def test_bf16_rung_on_random_values_and_specials():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((50, 90)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((90, 40)).astype(ml_dtypes.bfloat16)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ours = (Tensor(a) @ Tensor(b)).numpy().astype(np.float64)
    # one rounding to bfloat16 (unit roundoff 2^-8, relative) plus float32 sums (K * 2^-24 of the sum of
    # magnitudes, the first-order bound on any order of summation)
    bound = 2.0**-8 * np.abs(a64 @ b64) + 90 * 2.0**-24 * (np.abs(a64) @ np.abs(b64))
    assert (np.abs(ours - a64 @ b64) <= bound).all()
    a[3, 5], b[7, 2] = np.inf, np.nan
    ours = (Tensor(a) @ Tensor(b)).numpy().astype(np.float64)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(ours), np.isinf(want))


def test_bf16_rung_uses_amx_where_the_cpu_has_it():
    """Where the CPU lists AMX-BF16 and the build is native, the tiles run (else every test above ran the
    float32 path; the ISA reruns test that one on such a machine)."""
    if "amx_bf16" not in isa.cpu_flags() or isa.requested() is not isa.ISA.NATIVE:
        pytest.skip("no AMX-BF16 on this CPU, or a lowered build")
    assert gemm.bf16_uses_amx()


# ---- bad input ----


def test_bad_input_raises_clear_errors():
    a, b = Tensor(np.ones((3, 4), np.float32)), Tensor(np.ones((4, 5), np.float32))
    with pytest.raises(ValueError, match=r"gemm: A \(3, 4\) @ B \(3, 4\) are not aligned"):
        gemm.gemm(a, a)
    with pytest.raises(TypeError, match="gemm: B must be float32, got dtypes.float64"):
        gemm.gemm(a, Tensor(np.ones((4, 5))))
    with pytest.raises(ValueError, match=r"gemm: A must be 2-D, got shape \(4,\)"):
        gemm.gemm(Tensor(np.ones(4, np.float32)), b)
    with pytest.raises(TypeError, match="gemm: A must be a Tensor"):
        gemm.gemm(np.ones((3, 4), np.float32), b)
    with pytest.raises(ValueError, match=r"gemm: C must have shape \(3, 5\)"):
        gemm.gemm(a, b, Tensor(np.ones((5, 3), np.float32)))
    with pytest.raises(ValueError, match="broadcast view"):
        gemm.gemm(a, b, Tensor(np.ones((1, 5), np.float32)).expand(3, 5))
    square = Tensor(np.ones((4, 4), np.float32))
    with pytest.raises(ValueError, match="must not share memory"):
        gemm.gemm(square, square, square)
    with pytest.raises(ValueError, match="unknown variant 'fastest'"):
        gemm.gemm(a, b, variant="fastest")
    with pytest.raises(ValueError, match="threads must be a positive int"):
        gemm.gemm(a, b, threads=0)
    with pytest.raises(ValueError, match="unknown variant"):
        gemm.use("nope")
