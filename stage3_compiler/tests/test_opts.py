"""Kernel options (codegen/opts.py), BEAM search (engine/search.py) and compiling a realize's kernels
together (cpu/compiler.compile_kernels): every option list computes the same bits as no options (SPLIT: the
same bits for a max, a reordered sum for a sum), a list that does not fit the kernel is refused
by name, the heuristics' choices, a second BEAM run searches nothing, and a batch of kernels
builds as one library per core."""

import ctypes
import json
import re

import numpy as np
import pytest

from .. import Tensor
from ..codegen.heuristics import heuristic_opts
from ..codegen.lower import lower
from ..codegen.opts import Opt, OptError, OptOps, apply_opts
from ..codegen.program import Program
from ..cpu import compiler as runtime
from ..cpu.renderer import CRenderer
from ..cpu.runtime import cpu_runtime
from ..cuda.renderer import CUDARenderer
from ..device import buffer_class
from ..dtype import dtypes
from ..engine import realize, schedule, search
from ..engine.schedule import create_schedule
from ..settings import beam_width
from ..threads import get_num_threads, set_num_threads

CPU, CUDA = cpu_runtime.renderer, CUDARenderer()


def rand(*shape, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def last_item(t: Tensor):
    items = create_schedule([t.lazydata])
    for job in realize.identify(items[:-1]):  # realize what the last kernel reads (a transposed copy)
        realize.run_job(job)
    return items[-1]


def launch(kernel, out, renderer=CPU) -> None:
    """Compile the kernel on the CPU and run it into `out`, on the buffers it loads."""
    source = renderer.render(kernel)
    program = Program(kernel, source, cpu_runtime.compile(source, kernel.name), [])
    cpu_runtime.launch(program, [out] + [b.base.buffer for b in kernel.buffers[kernel.outputs:]])


def run_with(item, opts, renderer=CPU):
    """The kernel's output with these options (lowered and rendered for `renderer`), as float32 bits."""
    kernel = lower(item, renderer, tuple(opts))
    out = buffer_class("test", "CPU")(4 * int(np.prod(item.root.shape)))
    launch(kernel, out, renderer)
    return out.to_numpy(0, int(np.prod(item.root.shape)), dtypes.float32).view(np.uint32).copy()


MATMUL_OPTS = [
    [Opt(OptOps.UPCAST, 1, 4)],
    [Opt(OptOps.UPCAST, 0, 8), Opt(OptOps.UPCAST, 1, 16)],
    [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UPCAST, 0, 2)],  # two on one axis compose
    [Opt(OptOps.UNROLL, 2, 4)],
    [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UNROLL, 2, 8), Opt(OptOps.BLOCK, 1, 2)],
    [Opt(OptOps.BLOCK, 0, 4), Opt(OptOps.BLOCK, 1, 8), Opt(OptOps.THREAD, 0, 2)],
    [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.BLOCK, 1, 1), Opt(OptOps.BLOCK, 0, 4)],  # the column loop outermost
    # 3 threads over 8 passes: uneven slices
    [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.THREAD, 0, 3)],
]


@pytest.mark.parametrize("opts", MATMUL_OPTS, ids=lambda o: "_".join(map(str, o)))
def test_every_option_list_computes_the_same_bits(opts):
    a, b = rand(32, 48), rand(48, 64, seed=1)
    item = last_item(a @ b)
    assert run_with(item, opts).tolist() == run_with(item, ()).tolist()


def test_options_on_a_reduction_with_a_fused_elementwise_reader():
    x = rand(6, 40, 24)
    item = last_item((x.exp() * 2).sum(axis=1).sqrt())  # the sum over 40 sits inside the sqrt's kernel
    plain = run_with(item, ())
    for opts in ([Opt(OptOps.UNROLL, 1, 8)], [Opt(OptOps.UPCAST, 1, 8), Opt(OptOps.UNROLL, 1, 5)],
                 [Opt(OptOps.THREAD, 0, 2)]):
        assert run_with(item, opts).tolist() == plain.tolist(), opts


@pytest.mark.parametrize("opts", [[Opt(OptOps.SPLIT, 2, 8)], [Opt(OptOps.SPLIT, 2, 4), Opt(OptOps.UNROLL, 2, 2)],
                                  [Opt(OptOps.SPLIT, 2, 16), Opt(OptOps.THREAD, 0, 2)],
                                  [Opt(OptOps.SPLIT, 2, 2), Opt(OptOps.UPCAST, 1, 4)],
                                  [Opt(OptOps.SPLIT, 2, 5)], [Opt(OptOps.SPLIT, 2, 7), Opt(OptOps.UPCAST, 1, 2)]],
                         ids=lambda o: "_".join(map(str, o)))
def test_split_partials_give_a_max_bit_for_bit_and_a_sum_reordered(opts):
    x = rand(6, 8, 48)
    x = x.where(x < 2.5, float("nan")) if opts[0].amount == 16 else x  # a NaN in a partial still wins the max
    for t in (x.max(axis=-1), (x * x).max(axis=-1)):
        item = last_item(t)
        assert run_with(item, opts).tolist() == run_with(item, ()).tolist()
    item = last_item((x.exp() * 2).sum(axis=-1).sqrt())
    got = run_with(item, opts).view(np.float32).reshape(6, 8)
    want = np.sqrt((np.exp(x.numpy().astype(np.float64)) * 2).sum(axis=-1))
    np.testing.assert_allclose(got, want, rtol=2e-6)
    assert f"_S{opts[0].amount}" in lower(item, CPU, tuple(opts)).name


@pytest.mark.parametrize("n", [64, 61])  # 61: 7 passes of 8 partials, then 5 terms left over
def test_split_sums_ints_and_bools_exactly(n):
    x = Tensor(np.random.default_rng(0).integers(-2**40, 2**40, (5, n)))
    item = last_item(x.sum(axis=-1))
    want = x.numpy().sum(axis=-1)
    kernel = lower(item, CPU, (Opt(OptOps.SPLIT, 1, 8),))
    out = buffer_class("test", "CPU")(8 * 5)
    launch(kernel, out)
    assert out.to_numpy(0, 5, dtypes.int64).tolist() == want.tolist()
    flags = Tensor(np.arange(5 * 64).reshape(5, 64) % 97 == 3)
    assert flags.max(axis=-1).numpy().tolist() == (np.arange(5 * 64).reshape(5, 64) % 97 == 3).any(axis=-1).tolist()


@pytest.mark.parametrize("opts,message", [
    ([Opt(OptOps.SPLIT, 0, 2)], "not the innermost reduced axis"),
    ([Opt(OptOps.SPLIT, 2, 64)], "exceed the reduce axis"),
    ([Opt(OptOps.SPLIT, 2, 5), Opt(OptOps.UNROLL, 2, 2)], "do not divide the reduce axis"),
    ([Opt(OptOps.SPLIT, 2, 2), Opt(OptOps.SPLIT, 2, 2)], "split already"),
    ([Opt(OptOps.SPLIT, 2, 16), Opt(OptOps.UPCAST, 1, 32)], "more than 256 accumulators"),

    ([Opt(OptOps.UPCAST, 1, 80)], "do not divide"),  # (more lanes than the axis: not even the overlap pass)
    ([Opt(OptOps.UPCAST, 0, 8), Opt(OptOps.UPCAST, 1, 64)], "exceed 256"),
    ([Opt(OptOps.UNROLL, 0, 2)], "not the innermost reduced axis"),
    ([Opt(OptOps.UNROLL, 2, 5)], "do not divide the reduce axis"),
    ([Opt(OptOps.BLOCK, 1, 64)], "must divide the loop"),
    ([Opt(OptOps.BLOCK, 1, 0)], "at least 1"),
    ([Opt(OptOps.UPCAST, 1, 1)], "at least 2"),
    ([Opt(OptOps.THREAD, 0, 2), Opt(OptOps.THREAD, 0, 2)], "threaded already"),
    ([Opt(OptOps.UPCAST, 0, 32), Opt(OptOps.UPCAST, 1, 8), Opt(OptOps.THREAD, 0, 16)], "fewer than its threads"),
    ([Opt(OptOps.LOCAL, 0, 4)], "not options"),
    ([Opt(OptOps.UPCAST, 3, 2)], "outside the output's 3 axes"),
])
def test_an_option_that_does_not_fit_is_refused_by_name(opts, message):
    item = last_item(rand(32, 48) @ rand(48, 64, seed=1))
    with pytest.raises(OptError, match=message):
        apply_opts(item, opts, CPU)


def test_an_option_is_an_optops_member():
    with pytest.raises(OptError, match="unknown option 'UPCAST'"):
        Opt("UPCAST", 0, 2)  # a string, not OptOps.UPCAST


def test_the_gpu_takes_no_cpu_loop_options():
    item = last_item(rand(32, 48) @ rand(48, 64, seed=1))
    for opt in (Opt(OptOps.THREAD, 0, 2), Opt(OptOps.BLOCK, 0, 2)):
        with pytest.raises(OptError, match="CUDA"):
            apply_opts(item, [opt], CUDA)
    assert apply_opts(item, [Opt(OptOps.UPCAST, 1, 8)], CUDA).upcast == {1: 8}


def test_heuristics_tile_a_matmul_and_thread_only_big_kernels():
    big = last_item(rand(128, 64) @ rand(64, 128, seed=1))
    opts = heuristic_opts(big, CPU, 2)
    assert [o.op for o in opts] == [OptOps.UPCAST, OptOps.UPCAST, OptOps.THREAD]
    assert heuristic_opts(big, CPU, 1)[-1].op is OptOps.UPCAST  # one thread: no THREAD
    small = last_item(rand(8, 8) + 1)
    assert heuristic_opts(small, CPU, 2) == ()  # 64 entries do not pay for waking a thread


def test_a_narrow_tile_fits_the_axis_its_product_is_read_along():
    # x @ w.T + b on a (2, 6, 8) input, w an expression computed in the loop (a fresh Linear's lazy
    # init): the product's 12 rows are the kernel's 2 x 6, and the tile of one row a pass takes the
    # 6 of the root's axis (it took 12, and the option raised)
    x, w, b = rand(2, 6, 8), rand(24, 8, seed=1), rand(24, seed=2)
    out = x @ (w + 1.0).T + b
    item = last_item(out)
    opts = heuristic_opts(item, CPU, 1)
    assert all(item.root.shape[o.axis] % o.amount == 0 for o in opts if o.op is OptOps.UPCAST)
    want = x.numpy() @ (w.numpy() + 1).T + b.numpy()
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("k,blocked", [(1024, False), (2048, True), (4096, True)])
def test_heuristics_read_a_b_of_2_mib_or_more_in_column_blocks(k, blocked):
    # B of k x 256 float32s: 1, 2 and 4 MiB. From 2 MiB on its columns are read a block at a time
    # (with K = 4096 and AVX-512's 32 columns a panel is 512 KiB: a block of one, the loop outermost);
    # the blocks give the same bits as none
    a, b = rand(16, k), rand(k, 256, seed=1)
    item = last_item(a @ b)
    opts = heuristic_opts(item, CPU, 1)
    cols = next(o.axis for o in opts if o.op is OptOps.UPCAST)  # the tile's first axis runs along B's columns
    assert any(o.op is OptOps.BLOCK and o.axis == cols for o in opts) == blocked, opts
    assert run_with(item, opts).tolist() == run_with(item, ()).tolist()


@pytest.mark.parametrize("vocab,width", [(300, 40), (4096, 64)])
def test_a_one_hot_product_skips_the_terms_no_lane_selects(vocab, width):
    # an embedding's gradient, sum_t where(idx[t] == r, g[t, c], 0): the kernel opens an IF on its tile's
    # rows and adds only what is selected; the same bits as adding the zeros, which are np.add.at's float32
    # sums in t's order (negative indices wrap). A tile of one row (40 columns) tests its one equality, a
    # tile of several rows a range of arange's values: two comparisons, AND-ed
    rng = np.random.default_rng(0)
    idx = rng.integers(-vocab, vocab, (7, 33))
    g = rng.standard_normal((7, 33, width)).astype(np.float32)
    w = Tensor(np.zeros((vocab, width), np.float32)).requires_grad_()
    w[Tensor(idx)].backward(Tensor(g))
    grad = w.grad
    item = last_item(grad)
    wide = CRenderer(16, 32)  # a tile of 8 x 32 at most (AVX-512's), whatever this CPU's is
    source = wide.render(lower(item, wide))
    cond = re.search(r"if \((\w+)\) \{", source).group(1)
    assert ("&" in re.search(rf"{cond} = \((.*)\);", source).group(1)) == (vocab == 4096)
    want = np.zeros((vocab, width), np.float32)
    np.add.at(want, idx.reshape(-1) % vocab, g.reshape(-1, width))
    assert grad.numpy().view(np.uint32).tolist() == want.view(np.uint32).tolist()


def test_an_elementwise_equality_mask_opens_no_if():
    # where(a == b, x, 0) summed, each lane with a condition of its own (mostly true): no IF to test first
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 3, (2, 16, 48, 40))
    x = rng.standard_normal((16, 48, 40)).astype(np.float32)
    t = (Tensor(a) == Tensor(b)).where(Tensor(x), 0.0).sum(1)
    item = last_item(t)
    assert "if (" not in CPU.render(lower(item, CPU))
    np.testing.assert_allclose(t.numpy(), np.where(a == b, x, 0).sum(1), rtol=1e-5, atol=1e-5)


def test_heuristics_split_a_row_reduction_read_along_memory():
    x = rand(12, 64, 128)
    parts = CPU.split_parts  # a vector register of float32 partials: 16 with AVX-512, 8 with AVX2
    for t in (x.max(axis=-1), (x - 1).exp().sum(axis=-1), (x * x).mean(axis=-1)):
        item = last_item(t)
        assert heuristic_opts(item, CPU, 1) == (Opt(OptOps.SPLIT, 2, parts),)
        assert heuristic_opts(item, CRenderer(8, 16), 1) == (Opt(OptOps.SPLIT, 2, 8),)
        assert all(o.op is not OptOps.SPLIT for o in heuristic_opts(item, CUDA, 1))  # CPU vectors only
    # q @ k.T with 8 queries and 8 keys (too few for a transposed copy): dot products along memory
    products = rand(12, 8, 1, 128, seed=2) * rand(12, 1, 8, 128, seed=1)
    dots = last_item(products.sum(axis=-1))
    assert heuristic_opts(dots, CPU, 1) == (Opt(OptOps.SPLIT, 3, parts),)
    rows24 = last_item(rand(12, 24).sum(axis=-1))  # 24 terms: 8 partials, whatever the vector
    assert heuristic_opts(rows24, CRenderer(16, 32), 1) == (Opt(OptOps.SPLIT, 1, 8),)
    across = last_item(x.permute(0, 2, 1).max(axis=-1))  # the summed axis is 128 floats apart in memory
    columns = last_item(x.sum(axis=1))  # a realized tensor summed along an outer axis
    for item in (across, columns):
        assert all(o.op is not OptOps.SPLIT for o in heuristic_opts(item, CPU, 1))
    odd = last_item(rand(12, 78).sum(axis=-1))  # 78 terms: 4 passes of 16, then 14 left over
    assert heuristic_opts(odd, CPU, 1) == (Opt(OptOps.SPLIT, 1, parts),)
    matmul = last_item(rand(64, 64) @ rand(64, 64, seed=1))
    assert [o.op for o in heuristic_opts(matmul, CPU, 1)] == [OptOps.UPCAST, OptOps.UPCAST]


def test_a_gpu_register_tile_needs_no_operand_side_by_side(monkeypatch):
    """q @ k.T: both operands run along the summed head axis, none along an output axis. The CPU's
    vector lanes need one that does: k is copied transposed (codegen/layouts.py), then tiled; a GPU
    thread's scalar registers do not, and the tile of 4 x 8 outputs is 12 loads for 32 multiply-adds
    instead of 9 for 8."""
    monkeypatch.setenv("PASSES", "-online")  # (with the online pass batched products get no copy: schedule.py)
    q, k = rand(12, 64, 1, 32), rand(12, 1, 64, 32, seed=1)
    items = create_schedule([(q * k).sum(axis=-1).lazydata])
    assert items[0].reduce is None and [o.op for o in heuristic_opts(items[-1], CPU, 1)] == [OptOps.UPCAST] * 2
    gpu = type("Runtime", (), {"renderer": CUDA})()  # scheduled as the cuda device would: no copy
    monkeypatch.setattr(schedule, "runtime_of", lambda op, device: gpu)
    [dots] = create_schedule([(q * k).sum(axis=-1).lazydata])
    assert [o.op for o in heuristic_opts(dots, CUDA, 1)] == [OptOps.UPCAST, OptOps.UPCAST]


def test_the_kernel_name_and_debug_line_show_the_options(capsys, monkeypatch):
    monkeypatch.setenv("DEBUG", "2")
    a, b = rand(128, 64), rand(64, 128, seed=1)
    before = get_num_threads()
    set_num_threads(2)
    try:
        (a @ b).realize()
    finally:
        set_num_threads(before)
    # the product's line (its operands' packed copies, E_ kernels, run before it)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("***") and " r_" in x)
    assert "_T2" in line and f"UPCAST(1,{CPU.tile[1]})" in line and "THREAD(0,2)" in line


def test_the_thread_setting_is_honoured():
    before = get_num_threads()
    a, b = rand(128, 64), rand(64, 128, seed=1)
    try:
        for n in (1, 2, 3):
            set_num_threads(n)
            item = last_item(a @ b)
            kernel = lower(item, CPU)
            assert kernel.threads == n
            np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-5)
    finally:
        set_num_threads(before)


def test_kernels_compile_together_as_one_library_per_core(tmp_path, monkeypatch):
    monkeypatch.setenv("SITP_CACHE", str(tmp_path))
    monkeypatch.setattr(runtime, "compile_jobs", lambda: 2)
    sources = [(f"void twin(float* restrict d) {{ d[0] = {i}.0f; }}\n", "twin") for i in range(5)]  # one name, 5 bodies
    fns = runtime.compile_kernels(sources)
    libraries = sorted(p.name for p in (tmp_path / "stage3").glob("batch-*.so"))
    links = [p for p in (tmp_path / "stage3").glob("twin-*.so")]
    assert len(libraries) == 2 and len(links) == 5 and all(p.is_symlink() for p in links)
    out = np.zeros(1, np.float32)
    for i, fn in enumerate(fns):
        fn(ctypes.c_void_p(out.ctypes.data))
        assert out[0] == i  # each name found its own body


def test_threaded_kernels_of_one_name_share_a_library(tmp_path, monkeypatch):
    """THREAD kernels have a part function named after the kernel: both names are made unique in a shared
    file (two kernels of one name once clashed there, and every batch fell back to one compile a kernel)."""
    monkeypatch.setenv("SITP_CACHE", str(tmp_path))
    monkeypatch.setattr(runtime, "compile_jobs", lambda: 1)
    runs = runtime.RUNS[0]
    sources = [(f"static void twin_part(float* restrict d) {{ d[0] = {i}.0f; }}\n"
                f"void twin(float* restrict d) {{ twin_part(d); }}\n", "twin") for i in range(3)]
    fns = runtime.compile_kernels(sources)
    assert runtime.RUNS[0] == runs + 1  # one compiler run for the three
    out = np.zeros(1, np.float32)
    for i, fn in enumerate(fns):
        fn(ctypes.c_void_p(out.ctypes.data))
        assert out[0] == i


def test_the_smallest_int64_is_a_valid_c_literal():
    assert CPU.const(-(2**63), dtypes.int64) == "(-9223372036854775807LL-1)"
    x = Tensor(np.array([[3, -(2**63) + 5], [7, 1]], np.int64))
    assert x.max(axis=1).numpy().tolist() == [3, 7]  # the max's identity is the smallest int64


def test_a_batch_with_a_broken_kernel_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SITP_CACHE", str(tmp_path))
    good = ("void fine(float* restrict d) { d[0] = 1.0f; }\n", "fine")
    bad = ("void broken(float* restrict d) { d[0] = nope; }\n", "broken")
    with pytest.raises(runtime.CompileError, match="kernel broken failed") as err:
        runtime.compile_kernels([good, bad])
    assert err.value.source == bad[0]


def test_beam_searches_once_then_reads_its_winner_from_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("SITP_CACHE", str(tmp_path))
    monkeypatch.setenv("BEAM", "2")
    monkeypatch.setenv("BEAM_BUDGET", "20")
    monkeypatch.setattr(realize, "PROGRAMS", {})
    a, b = rand(64, 32), rand(32, 64, seed=1)
    before = search.STATS.kernels, search.STATS.cached
    np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-5)
    assert search.STATS.kernels == before[0] + 1
    [found] = (tmp_path / "stage3" / "beam").glob("*.json")
    record = json.loads(found.read_text())
    assert record["candidates"] > 2 and record["seconds"] > 0
    monkeypatch.setattr(realize, "PROGRAMS", {})  # a new process: nothing compiled in memory
    np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-5)
    assert search.STATS.kernels == before[0] + 1 and search.STATS.cached == before[1] + 1


def test_beam_must_be_a_width():
    with pytest.MonkeyPatch.context() as m:
        m.setenv("BEAM", "wide")
        with pytest.raises(ValueError, match="BEAM must be a non-negative int"):
            beam_width()


def test_beam_stops_compiling_a_round_once_its_budget_is_spent(monkeypatch):
    monkeypatch.setattr(search, "compile_jobs", lambda: 1)
    monkeypatch.setattr(search, "BATCH_PER_JOB", 2)
    item = last_item(rand(64, 32) @ rand(32, 64, seed=1))
    inputs = [s.base for s in item.reduce.srcs[0].srcs]
    device = cpu_runtime
    lists = [(Opt(OptOps.UPCAST, 1, n),) for n in (2, 4, 8, 16)] + [(Opt(OptOps.UNROLL, 2, 2),)]
    spent = search.Timer(item, device, inputs, deadline=0.0)  # perf_counter is past it
    assert list(spent.time(lists)) == lists[:2]  # the first batch only
    ample = search.Timer(item, device, inputs, deadline=float("inf"))
    assert list(ample.time(lists)) == lists


def test_a_beam_winner_must_beat_the_heuristics_again_in_a_duel(tmp_path, monkeypatch):
    monkeypatch.setenv("SITP_CACHE", str(tmp_path))
    monkeypatch.setenv("BEAM", "2")
    monkeypatch.setenv("BEAM_BUDGET", "5")
    item = last_item(rand(64, 32) @ rand(32, 64, seed=1))
    inputs = [s.base for s in item.reduce.srcs[0].srcs]
    heuristic = heuristic_opts(item, CPU, get_num_threads())
    timer = search.Timer(item, cpu_runtime, inputs, deadline=float("inf"))
    times = timer.duel((Opt(OptOps.UPCAST, 1, 2),), heuristic, 3)
    assert len(times) == 2 and all(0 < t < 1 for t in times)
    monkeypatch.setattr(search.Timer, "duel", lambda self, first, second, runs: (1.0, 1.0))  # a tie
    assert search.beam_search(item, cpu_runtime, inputs) == heuristic
