"""Vectorizing an upcast kernel's lanes (codegen/vectorize.py): which lanes become vectors, and that a
vectorized kernel computes the same bits as its lanes computed one by one. The kernels are lowered and
rendered for AVX-512's registers (32 of 16 floats) whatever this CPU has, so every machine checks that
path (gcc splits a vector wider than the CPU's registers); a matmul tile is checked at every width."""

import numpy as np
import pytest

from .. import Tensor
from ..codegen.heuristics import heuristic_opts
from ..codegen.lower import lower
from ..codegen.opts import Opt, OptOps
from ..codegen.uops import UOps
from ..codegen.vectorize import dead_code_removed, vectorize
from ..cpu import renderer
from ..device import buffer_class
from ..dtype import dtypes
from .test_opts import last_item, launch, rand
from .test_opts import run_with as run_on

CPU = renderer.CRenderer(16, 32)  # AVX-512's registers: 16 float32 lanes a vector


def run_with(item, opts):
    return run_on(item, opts, CPU)


def vectors(kernel) -> dict[UOps, set[int]]:
    """UOp kind -> the lane counts of its vector UOps in the kernel."""
    found: dict[UOps, set[int]] = {}
    for u in kernel.uops:
        if u.lanes > 1:
            found.setdefault(u.op, set()).add(u.lanes)
    return found


def scalar_bits(item, opts):
    """The kernel's output with these options and its lanes left scalar."""
    width, CPU.vector_width = CPU.vector_width, 0
    try:
        return run_with(item, opts)
    finally:
        CPU.vector_width = width


@pytest.mark.parametrize("width,registers", [(16, 32), (8, 16), (4, 16)], ids=["avx512", "avx2", "sse2"])
def test_a_matmul_tile_is_one_vector_accumulator_a_row_per_register(width, registers):
    target = renderer.CRenderer(width, registers)
    item = last_item(rand(48, 64) @ rand(64, 64, seed=1))  # 48 rows: 8 or 6 of them a tile
    opts = heuristic_opts(item, target, 1)
    assert opts[:2] == (Opt(OptOps.UPCAST, 1, 2 * width), Opt(OptOps.UPCAST, 0, 8 if registers == 32 else 6))
    kernel = lower(item, target, tuple(opts))
    found = vectors(kernel)
    assert found[UOps.ACC] == {width} and found[UOps.LOAD] == {width} and found[UOps.STORE] == {width}
    assert found[UOps.VEC] == {width}  # the row operand, one value for the row's columns
    assert sum(u.op is UOps.ACC for u in kernel.uops) == target.tile[0] * 2  # two registers a row
    plain = renderer.CRenderer(width, registers)
    plain.vector_width = 0
    assert np.array_equal(run_on(item, opts, target), run_on(item, opts, plain))


def test_a_one_row_tile_of_64_columns_is_four_vectors():
    item = last_item(rand(8, 32) @ rand(32, 64, seed=1))
    opts = [Opt(OptOps.UPCAST, 1, 64)]
    kernel = lower(item, CPU, tuple(opts))
    assert vectors(kernel)[UOps.ACC] == {16} and sum(u.op is UOps.ACC for u in kernel.uops) == 4
    assert np.array_equal(run_with(item, opts), scalar_bits(item, opts))


def test_lanes_stored_apart_are_read_out_of_their_vector():
    # lanes along axis 0 load side by side (x is a permuted view) but store 4 apart: the sums are
    # vectors, each store reads its lane out (GEP)
    y = rand(4, 64, 16)
    item = last_item(y.permute(2, 1, 0).sum(1))
    opts = [Opt(OptOps.UPCAST, 0, 16)]
    kernel = lower(item, CPU, tuple(opts))
    found = vectors(kernel)
    assert found[UOps.ACC] == {16} and UOps.STORE not in found
    assert sum(u.op is UOps.GEP for u in kernel.uops) == 16
    assert np.array_equal(run_with(item, opts), scalar_bits(item, opts))


def test_lanes_that_gather_or_take_a_max_stay_scalar():
    x = rand(64, 64)
    for t, opts in [(x.sum(1), [Opt(OptOps.UPCAST, 0, 16)]),  # loads 64 apart: a gather
                    (x.max(0), [Opt(OptOps.UPCAST, 1, 16)])]:  # side by side, but a max: no operator
        item = last_item(t)
        kernel = lower(item, CPU, tuple(opts))
        assert UOps.ACC not in vectors(kernel)
        assert np.array_equal(run_with(item, opts), scalar_bits(item, opts))


def test_an_embedding_lookup_loads_its_row_as_vectors():
    # sum_r where(idx[t] == r, w[r, c], 0) with r arange's: no loop over r, one vector load a 16 columns
    # of w's row idx[t] (codegen/lookup.picked), by the index the kernel loaded
    w = rand(32, 64)
    idx = Tensor(np.random.default_rng(1).integers(0, 32, (16,)))
    item = last_item(w[idx])
    kernel = lower(item, CPU, None)
    found = vectors(kernel)
    assert kernel.name.endswith("_lookup") and not any(u.op is UOps.RANGE and u.arg.var.startswith("ridx")
                                                        for u in kernel.uops)
    assert UOps.ACC not in found and found[UOps.LOAD] == {16} and found[UOps.STORE] == {16}
    assert np.array_equal(run_with(item, kernel.opts), scalar_bits(item, kernel.opts))
    np.testing.assert_array_equal(w[idx].numpy(), w.numpy()[idx.numpy()])


def test_an_embedding_gradient_selects_whole_vectors():
    # sum_t where(idx[t] == r, g[t, c], 0): the index varies along the sum, so it stays a loop, a matmul
    # with a one-hot operand; the row's condition is one for its 16 columns, so each row of the tile
    # selects a vector of g's row (or zeros) into one vector accumulator
    g = rand(16, 64)
    idx = Tensor(np.random.default_rng(1).integers(0, 32, (16,)))
    hit = idx.reshape(16, 1, 1) == Tensor.arange(32).reshape(1, 32, 1)
    item = last_item(hit.where(g.reshape(16, 1, 64), 0.0).sum(0))
    kernel = lower(item, CPU, None)  # the heuristics' options: a matmul's tile
    found = vectors(kernel)
    assert found[UOps.ACC] == {16} and found[UOps.LOAD] == {16} and found[UOps.STORE] == {16}
    where = [u for u in kernel.uops if u.op is UOps.ALU and u.lanes == 16 and u.arg.name == "WHERE"]
    assert where and all(u.srcs[0].lanes == 1 for u in where)  # a scalar condition picks the vector
    assert np.array_equal(run_with(item, kernel.opts), scalar_bits(item, kernel.opts))


def test_no_upcast_no_change_and_dead_code_goes():
    item = last_item(rand(64, 64).sum(1))
    kernel = lower(item, CPU, ())
    assert vectorize(list(kernel.uops), 1, 1, 16) == kernel.uops
    assert dead_code_removed(kernel.uops) == kernel.uops  # the lowering writes nothing unread


def test_matmul_results_match_numpy_through_the_vectors():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((48, 40)).astype(np.float32), rng.standard_normal((40, 80)).astype(np.float32)
    out = (Tensor(a) @ Tensor(b) + 1).relu().numpy()
    np.testing.assert_allclose(out, np.maximum(a.astype(np.float64) @ b + 1, 0), rtol=1e-5, atol=1e-5)


def relu_input(rows: int, cols: int):
    """Normal floats with a NaN, a -0.0 and a +0.0 in the first row: relu's select keeps their bits."""
    x = np.random.default_rng(2).standard_normal((rows, cols)).astype(np.float32)
    x[0, :3] = [np.nan, -0.0, 0.0]
    return Tensor(x)


def test_a_panel_copy_transposes_its_lanes_in_registers():
    # relu(x) * y written as panels of 8 rows, (rows / 8, cols, 8): its loads run along the columns,
    # its stores along the panel's rows. Both are vectors: each store's vector takes one lane of
    # each of 8 loaded ones (VEC of GEPs), and relu's select is a comparison's mask
    x, y = relu_input(32, 64), rand(32, 64, seed=1)
    panels = (x.relu() * y).reshape(4, 8, 64).permute(0, 2, 1).contiguous()
    item = last_item(panels)
    opts = heuristic_opts(item, CPU, 1)
    assert opts == (Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 2, 8))
    kernel = lower(item, CPU, opts)
    found = vectors(kernel)
    assert found[UOps.LOAD] == {16} and found[UOps.STORE] == {8} and 16 in found[UOps.ALU]
    stores = [u for u in kernel.uops if u.op is UOps.STORE]
    assert len(stores) == 16 and all(u.srcs[1].op is UOps.VEC and len(u.srcs[1].srcs) == 8 and
                                     all(s.op is UOps.GEP for s in u.srcs[1].srcs) for u in stores)
    assert np.array_equal(run_with(item, opts), scalar_bits(item, opts))
    want = (np.where(x.numpy() <= 0, 0, x.numpy()) * y.numpy()).reshape(4, 8, 64).transpose(0, 2, 1)
    np.testing.assert_array_equal(panels.numpy(), want)


def test_a_panel_copy_of_a_transposed_matrix_reads_runs_of_64_floats():
    # entry [p, k, r] is x[k, 8p + r] (x.T packed as the A of x.T @ y): side by side along r, and
    # the run of memory goes on along p. Both upcast: a pass reads 64 floats of one row of x
    x = relu_input(16, 128)
    panels = x.relu().reshape(16, 16, 8).permute(1, 0, 2).contiguous()
    item = last_item(panels)
    opts = heuristic_opts(item, CPU, 1)
    assert opts == (Opt(OptOps.UPCAST, 2, 8), Opt(OptOps.UPCAST, 0, 8))
    found = vectors(lower(item, CPU, opts))
    assert found[UOps.LOAD] == {8} and found[UOps.STORE] == {8}
    assert np.array_equal(run_with(item, opts), scalar_bits(item, opts))
    want = np.where(x.numpy() <= 0, 0, x.numpy()).reshape(16, 16, 8).transpose(1, 0, 2)
    np.testing.assert_array_equal(panels.numpy(), want)


def test_a_tile_stored_along_its_second_axis_keeps_a_scalar_epilogue_scalar():
    # the tile's lanes load side by side along its first axis (x's columns, 16) and store side by side
    # along its second (8): its accumulators are vectors, but the epilogue (a square root of a value of
    # each row, libm's: no vector of it) is not, so its stores stay scalars that read their lanes out of
    # the accumulators (the transposed stores had read the replaced scalar accumulators, which no
    # longer exist: nanochat's prefill, an RMSNorm's scale in a product's epilogue)
    x, y = rand(64, 32), rand(64, 64, seed=1)
    w = Tensor(np.arange(1, 33, dtype=np.float32).reshape(32, 1))
    item = last_item((x.T @ y.T) + w.sqrt())
    opts = [Opt(OptOps.UPCAST, 0, 16), Opt(OptOps.UPCAST, 1, 8)]
    kernel = lower(item, CPU, tuple(opts))
    assert vectors(kernel)[UOps.ACC] == {16} and UOps.STORE not in vectors(kernel)
    assert np.array_equal(run_with(item, opts), scalar_bits(item, opts))


def test_a_transposing_copy_is_a_16_by_16_block_in_registers():
    # x.T copied: 16 vector loads along x's rows, 16 vector stores along the copy's, each store built
    # from one lane of every load (one Zen 5 core, a 1024 x 256 weight: 0.54 -> 0.12 ms)
    x = rand(64, 48)
    item = last_item(x.T.contiguous())
    opts = heuristic_opts(item, CPU, 1)
    found = vectors(lower(item, CPU, opts))
    assert found[UOps.LOAD] == {16} and found[UOps.STORE] == {16}
    assert np.array_equal(run_with(item, opts), x.numpy().T.copy().view(np.uint32).reshape(-1))


def test_a_nested_sums_lanes_add_by_halves_in_the_scalar_trees_order(monkeypatch):
    # attention's scores over a head of 16, nested in the online softmax's loop (the online pass): one vector
    # product, then its lanes summed a level of the pairwise tree at a time (8, 4, 2 lanes wide). The
    # same bits as the scalar tree where products and adds stay apart (the renderer fuses them in
    # FlashAttention's kernels unless the fma pass is off, codegen/fma.py, as gcc finds them in either code)
    monkeypatch.setenv("PASSES", "+online,-fma")
    q, k, v = rand(2, 2, 8, 16), rand(2, 2, 8, 16, seed=1), rand(2, 2, 8, 16, seed=2)
    item = last_item(q.scaled_dot_product_attention(k, v, is_causal=True))
    opts = heuristic_opts(item, CPU, 1)
    kernel = lower(item, CPU, opts)
    assert vectors(kernel)[UOps.SHUFFLE] == {8, 4, 2}
    assert sum(u.op is UOps.GEP for u in kernel.uops) == 2  # the last two lanes out, not 16
    assert np.array_equal(run_with(item, opts), scalar_bits(item, opts))


def half_bits(item, opts, target):
    """The kernel's output with these options for `target`, as the half type's 16-bit patterns."""
    kernel = lower(item, target, tuple(opts))
    n = int(np.prod(item.root.shape))
    out = buffer_class("test", "CPU")(2 * n)
    launch(kernel, out, target)
    return out.to_numpy(0, n, dtypes.uint16).copy()


SPECIALS = [np.inf, -np.inf, np.nan, -0.0, 3e-6, -7e-8, 1 + 2**-8, 65520.0]  # (subnormals and ties in both)


@pytest.mark.parametrize("half", ["bfloat16", "float16"])
def test_half_lanes_load_as_widened_vectors_and_store_rounded(half):
    """Half-type lanes (autocast's activations): 16 lanes of `x * 3 + 1` read a vector of 16-bit patterns
    and widen it to floats, round each op's lanes into the half type (lower.py's casts) and store them
    rounded: the bits of the lanes computed one by one, through inf, NaN, subnormals, -0.0 and ties."""
    x = np.random.default_rng(4).standard_normal((4, 48)).astype(np.float32)
    x[0, :8] = SPECIALS
    item = last_item(Tensor(x).cast(half).realize() * 3 + 1)
    opts = [Opt(OptOps.UPCAST, 1, 16)]
    kernel = lower(item, CPU, tuple(opts))
    halves = [u for u in kernel.uops if u.lanes == 16 and u.op in (UOps.LOAD, UOps.CAST, UOps.STORE)]
    assert {u.op for u in halves} == {UOps.LOAD, UOps.CAST, UOps.STORE}
    plain = renderer.CRenderer(16, 32)
    plain.vector_width = 0
    exponent = 0x7C00 if half == "float16" else 0x7F80

    def canonical(bits):  # a NaN's sign aside: inf - inf's is the instruction's (x86's default NaN is negative)
        nan = ((bits & exponent) == exponent) & ((bits & (0x7FFF ^ exponent)) != 0)
        return np.where(nan, exponent | 1, bits)

    assert np.array_equal(canonical(half_bits(item, opts, CPU)), canonical(half_bits(item, opts, plain)))
