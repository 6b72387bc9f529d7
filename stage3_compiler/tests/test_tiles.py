"""The tiles pass (codegen/tiles.py): a bfloat16 matmul on the CPU's matrix tiles. The emulation of AMX's
instructions (cpu/tiles.py, what a CPU without AMX runs) sums each output's products in order of K with
every add rounded, so it gives the core's bits exactly; AMX itself rounds its dot products its own way, so
it is checked against the core within two float32 sums' rounding (run where the CPU has AMX)."""

import contextlib

import ml_dtypes
import numpy as np
import pytest

from .. import Tensor, dtypes, nn
from ..cpu.runtime import cpu_runtime
from ..engine import realize
from ..isa import TileUnit, matrix_unit

U = 2.0**-24  # a float32 add's relative rounding error at most


@contextlib.contextmanager
def kernels_run():
    """The names of the kernels the realizes inside run."""
    names: list[str] = []

    def watch(outs, items, ran):
        names.extend(r.program.kernel.name for r in ran)

    realize.WATCHERS.append(watch)
    try:
        yield names
    finally:
        realize.WATCHERS.remove(watch)


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setattr(cpu_runtime.renderer, "matrix_tiles", TileUnit.EMULATED)


def bf16(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(ml_dtypes.bfloat16)


def product(a: np.ndarray, b: np.ndarray, transposed: bool) -> np.ndarray:
    """a @ b of bfloat16 tensors, summed in float32 (b given as b.T where `transposed`: x @ w.T's layout)."""
    x, w = Tensor(a), Tensor(b)
    return (x.float() @ (w.float().T if transposed else w.float())).numpy()


SHAPES = [(64, 64, 64, False), (100, 70, 50, False), (64, 96, 50, True), (96, 200, 128, True)]


@pytest.mark.parametrize("m,k,n,transposed", SHAPES)
def test_emulated_tiles_give_the_cores_bits(emulated, monkeypatch, m, k, n, transposed):
    a, b = bf16((m, k), 0), bf16((n, k) if transposed else (k, n), 1)
    with kernels_run() as names:
        tiled = product(a, b, transposed)
    assert any(name.startswith("r_tiles_") for name in names), names
    monkeypatch.setenv("PASSES", "none")
    with kernels_run() as names:
        core = product(a, b, transposed)
    assert not any(name.startswith("r_tiles_") for name in names)
    np.testing.assert_array_equal(tiled.view(np.uint32), core.view(np.uint32))


def test_a_bfloat16_matmul_rounds_as_it_stores(emulated, monkeypatch):
    """bfloat16 @ bfloat16 returns bfloat16: the tiled kernel rounds its sums as it stores them (no float32
    output and kernel after it), the same bits as the core's."""
    a, b = Tensor(bf16((64, 96), 2)), Tensor(bf16((96, 80), 3))
    with kernels_run() as names:
        tiled = (a @ b).numpy()
    assert tiled.dtype == ml_dtypes.bfloat16 and sum(name.startswith("r_tiles_") for name in names) == 1
    assert len(names) == 3, names  # A's copy, B's copy, the tiles
    monkeypatch.setenv("PASSES", "none")
    np.testing.assert_array_equal(tiled.view(np.uint16), (a @ b).numpy().view(np.uint16))


def test_a_training_step_under_autocast_gets_the_cores_gradients(emulated, monkeypatch):
    """x @ w.T forward, dy @ w and dy.T @ x backward: every layout of operand the pass copies."""
    def grads():
        Tensor.manual_seed(0)
        model = nn.Linear(96, 64)
        x = Tensor(np.random.default_rng(4).standard_normal((128, 96)).astype(np.float32), requires_grad=True)
        with Tensor.autocast(dtypes.bfloat16):
            loss = model(x).float().square().mean()
        loss.backward()
        return [t.grad.numpy() for t in (x, model.weight, model.bias)]

    with kernels_run() as names:
        tiled = grads()
    assert sum(name.startswith("r_tiles_") for name in names) == 3, names
    monkeypatch.setenv("PASSES", "-tiles")
    for got, want in zip(tiled, grads(), strict=True):
        np.testing.assert_array_equal(got, want)


def test_small_products_and_a_cpu_without_tiles_run_as_before(monkeypatch):
    a, b = bf16((8, 64), 5), bf16((64, 64), 6)  # 8 rows: under a block of 32
    monkeypatch.setattr(cpu_runtime.renderer, "matrix_tiles", TileUnit.EMULATED)
    with kernels_run() as names:
        product(a, b, False)
    assert not any(name.startswith("r_tiles_") for name in names)
    monkeypatch.setattr(cpu_runtime.renderer, "matrix_tiles", None)
    with kernels_run() as names:
        product(bf16((64, 64), 7), b, False)
    assert not any(name.startswith("r_tiles_") for name in names)


@pytest.mark.skipif(matrix_unit() is not TileUnit.AMX, reason="the CPU has no AMX (or SITP_ISA is lowered)")
@pytest.mark.parametrize("m,k,n,transposed", SHAPES + [(256, 1024, 96, False)])
def test_amx_within_two_sums_rounding_of_the_core(monkeypatch, m, k, n, transposed):
    """AMX's dot products round otherwise than a loop of float32 adds (measured: about a quarter of the
    outputs differ in the last bits). Both are float32 sums of the same exact products, each within
    (k - 1) u sum|products| of the true sum, so they differ by at most twice that."""
    a, b = bf16((m, k), 8), bf16((n, k) if transposed else (k, n), 9)
    with kernels_run() as names:
        tiled = product(a, b, transposed)
    assert any(name.startswith("r_tiles_") for name in names)
    monkeypatch.setenv("PASSES", "none")
    core = product(a, b, transposed)
    wide = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64).T if transposed else b.astype(np.float64))
    assert np.all(np.abs(tiled.astype(np.float64) - core) <= 2 * (k - 1) * U * wide)


def test_an_operand_already_in_its_layout_is_read_where_it_is(emulated, monkeypatch):
    """K = 32: A's panels are its rows as they are (no copy kernel; its buffer is read in place)."""
    a, b = bf16((256, 32), 10), bf16((32, 64), 11)
    with kernels_run() as names:
        tiled = product(a, b, False)
    assert any(name.startswith("r_tiles_") for name in names) and len(names) == 2, names
    monkeypatch.setenv("PASSES", "none")
    np.testing.assert_array_equal(tiled.view(np.uint32), product(a, b, False).view(np.uint32))
