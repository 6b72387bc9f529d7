"""The overlap pass (codegen/overlap.py): a register tile whose rows do not divide the matmul's rows
takes them anyway, each pass starting where the pass table puts it, and computes the same bits as the
tile that divides; a kernel that writes in place keeps the core's rule; the starts cover every row."""

import numpy as np
import pytest

from .. import Tensor
from ..codegen.heuristics import heuristic_opts
from ..codegen.opts import Opt, OptError, OptOps, apply_opts
from ..codegen.overlap import pass_start, passes_of
from ..graph.symbolic import Var, evaluate
from ..threads import get_num_threads
from .test_opts import CPU, last_item, run_with


@pytest.mark.parametrize("size,lanes", [(7, 6), (13, 6), (100, 6), (1024, 6), (131, 8), (2050, 8), (17, 16)])
def test_the_passes_start_at_zero_end_at_the_last_row_and_leave_no_row_out(size, lanes):
    passes = passes_of(size, lanes)
    g = Var("g", 0, passes - 1)
    start = pass_start(g, size, lanes)
    starts = [evaluate(start, {"g": i}) for i in range(passes)]
    assert starts[0] == 0 and starts[-1] == size - lanes
    # each pass starts after the one before and at most a tile later: no row is left out
    assert all(0 < b - a <= lanes for a, b in zip(starts[:-1], starts[1:], strict=True))
    assert (start.min, start.max) == (0, size - lanes)  # exact bounds: no load needs clamping


def matmul(rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((rows, 24), (24, 32)))
    return Tensor(a) @ Tensor(b), a @ b


@pytest.mark.parametrize("rows", [7, 13, 50, 131])
def test_a_tile_that_does_not_divide_the_rows_computes_the_bits_of_one_that_does(rows):
    out, _ = matmul(rows)
    item = last_item(out)
    whole = run_with(item, [Opt(OptOps.UPCAST, 1, 16)])
    for lanes in (3, 5, 6):
        shifted = run_with(item, [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, lanes)])
        np.testing.assert_array_equal(shifted, whole)
    threaded = run_with(item, [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 6), Opt(OptOps.THREAD, 0, 2)])
    np.testing.assert_array_equal(threaded, whole)


def test_the_heuristics_take_the_renderers_row_tile_on_rows_it_does_not_divide():
    out, expected = matmul(131)
    item = last_item(out)
    opts = heuristic_opts(item, CPU, get_num_threads())
    assert Opt(OptOps.UPCAST, 0, CPU.tile[0]) in opts
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_without_the_pass_a_tile_must_divide_its_axis(monkeypatch):
    out, _ = matmul(131)
    item = last_item(out)
    apply_opts(item, [Opt(OptOps.UPCAST, 0, 6)], CPU)
    monkeypatch.setenv("PASSES", "-overlap")
    with pytest.raises(OptError, match="do not divide axis 0"):
        apply_opts(item, [Opt(OptOps.UPCAST, 0, 6)], CPU)


def test_a_kernel_that_writes_in_place_keeps_to_tiles_that_divide():
    """acc += a @ b writes acc's memory while reading it: a row computed twice would read the value the
    first pass stored (the overlap pass is off for it, and its kernel is another than the plain one's)."""
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((131, 24), (24, 32), (131, 32)))
    acc = Tensor(c).realize()
    acc.assign(acc + Tensor(a) @ Tensor(b))
    item = last_item(acc)
    assert item.in_place
    with pytest.raises(OptError, match="do not divide axis 0"):
        apply_opts(item, [Opt(OptOps.UPCAST, 0, 6)], CPU)
    assert all(o.op is not OptOps.UPCAST or o.axis != 0 or 131 % o.amount == 0
               for o in heuristic_opts(item, CPU, get_num_threads()))
    np.testing.assert_allclose(acc.numpy(), c + a @ b, rtol=1e-5, atol=1e-5)
