"""Upcasting: a reduce kernel computes several outputs a pass of its loop (codegen/heuristics.upcast_axes), a
matmul a tile of them (8 x 32 or 6 x 16 on a CPU, by its vector registers). Which axes it
picks, the transposed copy the scheduler makes of a weight read along K (x @ w.T), and that every
shape still computes the right numbers: sizes the tile divides, sizes it does not, and transposed
operands."""

import dataclasses

import numpy as np
import pytest

from .. import Tensor
from ..codegen import layouts
from ..codegen.heuristics import across_axes, heuristic_opts, lanes_of, upcast_axes
from ..codegen.lower import lower
from ..codegen.opts import Opt, OptOps
from ..codegen.uops import UOps
from ..cpu.runtime import cpu_runtime
from ..engine.schedule import create_schedule
from ..ops import Ops

CPU = cpu_runtime.renderer
ROWS, COLS = CPU.tile  # 8 x 32 with AVX-512's 32 vector registers, 6 x 16 with AVX2's 16, 6 x 8 with SSE2's


def rows(m: int) -> int:
    """The rows a tile takes of a product of m rows: the renderer's where they divide, else a power of two."""
    return lanes_of(m, ROWS)


def cols(n: int) -> int:
    return lanes_of(n, COLS)


def rand(*shape, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def only_item(t: Tensor):
    items = create_schedule([t.lazydata])
    assert len(items) == 1, items
    return items[0]


def test_a_matmul_takes_a_tile_of_sixteen_columns():
    a, b = rand(16, 12), rand(12, 32, seed=1)
    # the product's shape is (16, 32, 1): COLS along the columns (axis 1), ROWS along the rows (axis 0)
    assert upcast_axes(only_item(a @ b), CPU) == {1: COLS, 0: rows(16)}


def test_a_tile_shrinks_to_what_divides_the_axes():
    a, b = rand(12, 12), rand(12, 48, seed=1)
    assert upcast_axes(only_item(a @ b), CPU) == {1: cols(48), 0: rows(12)}  # AVX-512: 32 does not divide 48, 8 not 12
    # no power of two from 16 up divides 24 columns (or a vocabulary of 78): all of them a pass, one row
    # (SSE2's tile is 8 columns wide, which divide 24: a plain tile)
    want = {1: 24} if COLS >= 16 else {1: 8, 0: rows(12)}
    assert upcast_axes(only_item(a @ rand(12, 24, seed=1)), CPU) == want
    np.testing.assert_allclose((a @ rand(12, 78)).numpy(), a.numpy() @ rand(12, 78).numpy(), rtol=1e-5, atol=1e-5)


def test_a_weight_read_transposed_is_copied_once_and_the_product_is_tiled():
    x, w = rand(64, 24), rand(48, 24, seed=1)  # a Linear layer: x @ w.T, w stored (out, in), read by 64 rows
    items = create_schedule([(x @ w.T).lazydata])
    assert [it.root.op for it in items] == [Ops.CONTIGUOUS, Ops.REDUCE_ADD]
    assert items[0].root.shape == (1, 24, 48)  # w transposed (its output axis innermost), a row of 1 in front
    assert upcast_axes(items[1], CPU) == {1: cols(48), 0: rows(64)}
    out = x @ w.T
    np.testing.assert_allclose(out.numpy(), x.numpy() @ w.numpy().T, rtol=1e-5, atol=1e-5)


def test_an_expression_read_transposed_is_copied_as_it_is_computed():
    x = rand(32, 64)
    y = x * 2.0  # Muon's X @ X.T, with X an expression: the copy computes it, then the product is tiled
    items = create_schedule([(y @ y.T).lazydata])
    assert [it.root.op for it in items] == [Ops.CONTIGUOUS, Ops.REDUCE_ADD]
    unknown = dataclasses.replace(items[1], stored=None)  # the plain tile (y, computed in the loop: one row)
    assert upcast_axes(unknown, CPU) == {1: cols(32), 0: rows(32)}
    a = x.numpy() * 2.0
    np.testing.assert_allclose((y @ y.T).numpy(), a @ a.T, rtol=1e-5, atol=1e-4)


def test_small_products_are_not_copied_and_a_batch_of_big_ones_is(monkeypatch):
    monkeypatch.setenv("PASSES", "-online")  # (with the online pass batched products get no copy: schedule.py)
    x, w = rand(8, 24), rand(12, 24, seed=1)  # each operand is read by 12 rows at most: not worth a copy
    assert len(create_schedule([(x @ w.T).lazydata])) == 1
    q, k = rand(2, 3, 12, 8), rand(2, 3, 12, 8, seed=1)  # attention's q @ k.T, 12 queries a head
    assert len(create_schedule([(q @ k.transpose(-1, -2)).lazydata])) == 1
    q, k = rand(2, 3, 32, 8), rand(2, 3, 32, 8, seed=1)  # 32 queries: k copied, each head's keys innermost
    items = create_schedule([(q @ k.transpose(-1, -2)).lazydata])
    assert [it.root.op for it in items] == [Ops.CONTIGUOUS, Ops.REDUCE_ADD]
    assert upcast_axes(items[1], CPU) == {3: cols(32), 2: rows(32)}  # a register tile per head
    np.testing.assert_allclose((q @ k.transpose(-1, -2)).numpy(), q.numpy() @ k.numpy().transpose(0, 1, 3, 2),
                               rtol=1e-5, atol=1e-5)


def test_a_residual_add_after_the_product_keeps_the_tile():
    x, w, r = rand(2, 16, 24), rand(32, 24, seed=1), rand(2, 16, 32, seed=2)
    out = x @ w.T + r  # the kernel's root is the add, shaped (2, 16, 32); the sum is (32, 32, 1)
    items = create_schedule([out.lazydata])
    assert upcast_axes(items[-1], CPU) == {2: cols(32), 1: rows(16)}
    np.testing.assert_allclose(out.numpy(), x.numpy() @ w.numpy().T + r.numpy(), rtol=1e-5, atol=1e-5)


def test_a_plain_sum_takes_one_axis():
    x = rand(16, 12)
    assert upcast_axes(only_item(x.sum(1)), CPU) == {0: 8}
    assert upcast_axes(only_item((x * x).sum(1)), CPU) == {0: 8}  # both operands vary along the rows


def test_nothing_divides_nothing_is_upcast():
    assert upcast_axes(only_item(rand(7, 5).sum(1)), CPU) == {}
    assert upcast_axes(only_item(rand(5).sum()), CPU) == {}


@pytest.mark.parametrize("m,k,n", [(16, 12, 24), (8, 3, 8), (12, 7, 4), (5, 9, 16), (7, 5, 3), (32, 64, 8),
                                   (40, 17, 48), (24, 32, 80)])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn"])
def test_matmuls_with_and_without_a_tile_match_numpy(m, k, n, layout):
    a = rand(m, k) if layout[0] == "n" else rand(k, m).T
    b = rand(k, n, seed=1) if layout[1] == "n" else rand(n, k, seed=1).T
    out = (a @ b).numpy()
    np.testing.assert_allclose(out, a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-5)


def test_a_batched_matmul_with_a_fused_bias_and_relu():
    x, w, bias = rand(2, 8, 12), rand(12, 16, seed=1), rand(16, seed=2)
    out = (x @ w + bias).relu().numpy()
    np.testing.assert_allclose(out, np.maximum(x.numpy() @ w.numpy() + bias.numpy(), 0), rtol=1e-5, atol=1e-5)


def test_an_operand_computed_in_the_loop_is_computed_once_a_pass():
    # a cheap operand is recomputed inside the product (engine/schedule.CHEAP): all 32 columns a pass
    # compute each of its values once, not once per tile of columns
    a, b = rand(2, 3, 16, 16), rand(2, 3, 16, 32, seed=1)
    out = (a * 0.5) @ b
    items = create_schedule([out.lazydata])
    assert upcast_axes(items[-1], CPU) == {3: 32}
    unknown = dataclasses.replace(items[-1], stored=None)  # without knowing what is stored: the plain tile
    assert upcast_axes(unknown, CPU) == {3: cols(32), 2: rows(16)}
    np.testing.assert_allclose(out.numpy(), (a.numpy() * 0.5) @ b.numpy(), rtol=1e-5, atol=1e-5)


PACKS = pytest.mark.skipif(COLS < layouts.MIN_PANEL, reason="a tile narrower than a panel (SSE2's 8 columns) "
                           "reads its operands as they are (layouts.MIN_PANEL)")


@PACKS
def test_a_big_matmul_reads_its_operands_packed_in_panels_of_its_tile(monkeypatch):
    x, dy = rand(256, 64), rand(256, 96, seed=1)  # a weight gradient x.T @ dy: both read along the rows of K
    out = x.T @ dy
    items = create_schedule([out.lazydata])
    copies = [it.root.shape for it in items if it.reduce is None]
    # (panels, K, tile width)
    assert sorted(copies) == sorted([(96 // cols(96), 256, cols(96)), (64 // rows(64), 256, rows(64))])
    assert upcast_axes(items[-1], CPU) == {1: cols(96), 0: rows(64)}
    packed = (x.T @ dy).numpy()
    monkeypatch.setattr(layouts, "MIN_PACKED", 1 << 40)
    assert len(create_schedule([(x.T @ dy).lazydata])) == 1
    assert packed.tobytes() == (x.T @ dy).numpy().tobytes()  # the same sums in the same order, from other memory
    want = x.numpy().astype(np.float64).T @ dy.numpy().astype(np.float64)
    np.testing.assert_allclose(packed, want, rtol=1e-4, atol=1e-4)  # float32 sums of 256 products
    small = rand(16, 24) @ rand(24, 32, seed=1)  # 768 values of B: not worth a copy
    assert len(create_schedule([small.lazydata])) == 1


def test_a_matrix_vector_product_takes_its_columns_in_one_wide_pass():
    x, w = rand(1, 64), rand(64, 1024, seed=1)  # w's rows 4 KiB apart, read by one row of x
    items = create_schedule([(x @ w).lazydata])
    assert len(items) == 1  # no padded copy: each of w's values is read once
    assert upcast_axes(items[0], CPU) == {1: lanes_of(1024, ROWS * COLS)}  # the whole tile's outputs along the columns
    np.testing.assert_allclose((x @ w).numpy(), x.numpy() @ w.numpy(), rtol=1e-5, atol=1e-5)


def test_a_matmul_too_big_for_the_caches_is_read_in_blocks_of_both_operands():
    def opts(n):
        items = create_schedule([(rand(n, n) @ rand(n, n, seed=1)).lazydata])
        return heuristic_opts(items[-1], CPU, 1)
    small = opts(512)  # B is 1 MiB: no blocks
    assert [o.op for o in small] == [OptOps.UPCAST, OptOps.UPCAST]
    big = opts(2048)  # B and A are 16 MiB each: B in column panels, A in row blocks
    assert [o.op for o in big] == [OptOps.UPCAST, OptOps.UPCAST, OptOps.BLOCK, OptOps.BLOCK]
    assert [o.axis for o in big[2:]] == [1, 0]
    # a column panel within 512 KiB, a row block of A within 4 MiB (K = 2048 floats a row)
    assert big[2].amount * COLS * 2048 * 4 <= 512 << 10 and big[3].amount * rows(2048) * 2048 * 4 <= 4 << 20


@PACKS
def test_a_product_of_this_schedule_is_packed_as_it_is_computed():
    # a weight gradient whose operands are themselves computed in the same schedule (under TinyJit a
    # whole step is one): the packed copies compute them, then the product reads its panels
    x, dy = rand(256, 64), rand(256, 96, seed=1)
    out = (x * 2.0).T @ (dy + 1.0)
    items = create_schedule([out.lazydata])
    copies = [it.root.shape for it in items if it.reduce is None]
    assert sorted(copies) == sorted([(96 // cols(96), 256, cols(96)), (64 // rows(64), 256, rows(64))])
    want = (x.numpy().astype(np.float64) * 2).T @ (dy.numpy().astype(np.float64) + 1)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)


def test_a_transposing_copy_writes_sixteen_rows_a_pass():
    x = rand(64, 48)
    item, = create_schedule([x.T.contiguous().lazydata])
    # 16 of x's columns (one line read), and 16 of its rows where they divide: a 16 x 16 block a pass,
    # loaded as 16 vectors and stored as 16, transposed in registers (codegen/vectorize.py)
    assert heuristic_opts(item, CPU, 1) == (Opt(OptOps.UPCAST, 0, 16), Opt(OptOps.UPCAST, 1, 16))
    np.testing.assert_array_equal(x.T.contiguous().numpy(), x.numpy().T)
    y = rand(40, 64)  # 40 rows: 16 does not divide them, 8 does: a 16 x 8 block, stored as 16 vectors of 8
    item, = create_schedule([y.T.contiguous().lazydata])
    assert heuristic_opts(item, CPU, 1) == (Opt(OptOps.UPCAST, 0, 16), Opt(OptOps.UPCAST, 1, 8))
    np.testing.assert_array_equal(y.T.contiguous().numpy(), y.numpy().T)
    z = rand(36, 64)  # 36 rows: neither divides them, so 16 columns a pass and scalar stores
    item, = create_schedule([z.T.contiguous().lazydata])
    assert heuristic_opts(item, CPU, 1) == (Opt(OptOps.UPCAST, 0, 16),)
    np.testing.assert_array_equal(z.T.contiguous().numpy(), z.numpy().T)
    # a matmul operand's panels 8 wide, (rows / 8, cols, 8) from a row-major (rows, cols): the same block
    panels = y.reshape(5, 8, 64).permute(0, 2, 1).contiguous()
    item, = create_schedule([panels.lazydata])
    assert heuristic_opts(item, CPU, 1) == (Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 2, 8))
    kernel = lower(item, CPU)
    if CPU.vector_width >= 8:  # (with SSE2's registers of 4 floats the vectorizer leaves this block scalar)
        assert any(u.op is UOps.STORE and u.srcs[1].lanes == 8 for u in kernel.uops)  # the block's rows as vectors
    np.testing.assert_array_equal(panels.numpy(), y.numpy().reshape(5, 8, 64).transpose(0, 2, 1))
    for computed in (x.T * 2.0, x + 1.0):  # a kernel that computes, or reads in its own order: no lanes
        assert heuristic_opts(create_schedule([computed.lazydata])[0], CPU, 1) == ()


def test_an_expression_written_across_a_short_axis_takes_lanes_along_the_long_one():
    """A layernorm-like expression, x * rstd per row, written in (rows / 8, cols, 8) order: its last
    loop (8 entries) reads x 64 floats apart, its middle one side by side. across_axes upcasts the
    middle one by 16 (vector loads, the per-row value computed once a pass) and the short one whole
    (vector stores, test_vectorize.py); written in plain order it keeps its loop."""
    x, r = rand(64, 64), rand(64, 1, seed=1)
    y = x * (r * r + 1.0).sqrt().reciprocal()
    tiled = y.reshape(8, 8, 64).permute(0, 2, 1).contiguous()  # (8, 64, 8): entry [i, c, j] is y[8i + j, c]
    item = only_item(tiled)
    assert item.root.shape == (8, 64, 8) and across_axes(item) == {1: 16, 2: 8}  # (stores: the 8)
    assert Opt(OptOps.UPCAST, 1, 16) in heuristic_opts(item, CPU, 1)
    assert across_axes(only_item(y.contiguous())) == {}
    want = (x.numpy() / np.sqrt(r.numpy() ** 2 + 1)).reshape(8, 8, 64).transpose(0, 2, 1)
    np.testing.assert_allclose(tiled.numpy(), want, rtol=1e-6)
