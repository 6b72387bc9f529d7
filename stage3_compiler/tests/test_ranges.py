"""Term ranges (codegen/ranges.py): a reduce loop whose terms a comparison of positions masks runs over
the positions it lets through, and computes the bits the whole loop computes; a mask that could leave
a row empty, or one read from memory, keeps the whole loop."""

import numpy as np
import pytest

from .. import Tensor
from ..autograd import attention_grads
from ..codegen import lower as lowering
from ..codegen.lower import lower
from ..codegen.program import Program
from ..codegen.uops import LoopKind, UOps
from ..codegen.vectorize import Vectorizer
from ..cpu.runtime import cpu_runtime
from ..device import buffer_class
from ..dtype import dtypes
from ..engine import realize
from ..engine.schedule import create_schedule
from ..graph.symbolic import Node, render
from ..ops import Ops

CPU = cpu_runtime.renderer


def rand(seed: int, *shape) -> Tensor:
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def last_item(*ts: Tensor):
    """The schedule's last kernel, with what it reads realized."""
    items = create_schedule([t.lazydata for t in ts])
    for job in realize.identify(items[:-1]):
        realize.run_job(job)
    return items[-1]


def outputs(kernel) -> list[np.ndarray]:
    """Run the kernel on the CPU: each output's float32 bits."""
    source = CPU.render(kernel)
    program = Program(kernel, source, cpu_runtime.compile(source, kernel.name), [])
    sizes = [int(np.prod(b.shape)) for b in kernel.buffers[:kernel.outputs]]
    outs = [buffer_class("test", "CPU")(4 * n) for n in sizes]
    cpu_runtime.launch(program, outs + [b.base.buffer for b in kernel.buffers[kernel.outputs:]])
    return [o.to_numpy(0, n, dtypes.float32).view(np.uint32).copy() for o, n in zip(outs, sizes, strict=True)]


def reduce_loops(kernel) -> list[tuple[str, str]]:
    """(start, end) of each reduce loop, as C."""
    return [tuple(render(x) if isinstance(x, Node) else str(x) for x in (u.arg.start, u.arg.extent))
            for u in kernel.uops if u.op is UOps.RANGE and u.arg.kind is LoopKind.REDUCE]


def whole_loop_bits(item, monkeypatch) -> list[np.ndarray]:
    """The kernel's outputs lowered with no term ranges: every term folded."""
    with monkeypatch.context() as m:
        m.setattr(lowering, "reduce_ranges", lambda *args: None)
        kernel = lower(item, CPU)
    assert all("gidx" not in start + end for start, end in reduce_loops(kernel))
    return outputs(kernel)


def backward_item(seed: int):
    """The one kernel of FlashAttention's backward (dq, dk and dv) for causal heads (1, 2, 64, 8)."""
    q, k, v, g = (rand(seed + i, 1, 2, 64, 8) for i in range(4))
    for t in (q, k, v):
        t.requires_grad_()
    out = q.scaled_dot_product_attention(k, v, is_causal=True)
    out.realize(out._ctx.saved["lse"])
    with Tensor.no_grad():
        grads = attention_grads(g, out, q, k, v, **out._ctx.saved)
    return last_item(*grads)


@pytest.fixture
def online(monkeypatch):
    monkeypatch.setenv("PASSES", "+online")  # FlashAttention (engine/online.py), whatever PASSES says


def test_causal_flash_attention_runs_each_query_up_to_itself(online, monkeypatch):
    q, k, v = rand(1, 2, 3, 64, 8).requires_grad_(), rand(2, 2, 3, 64, 8), rand(3, 2, 3, 64, 8)
    out = q.scaled_dot_product_attention(k, v, is_causal=True)
    item = last_item(out, out._ctx.saved["lse"])
    assert item.online is not None
    kernel = lower(item, CPU)
    (start, end), = reduce_loops(kernel)
    assert start == "0" and end.startswith("gidx") and end.endswith("+1")  # keys 0 .. the query's own
    ranged = outputs(kernel)
    for ours, whole in zip(ranged, whole_loop_bits(item, monkeypatch), strict=True):
        np.testing.assert_array_equal(ours, whole)


def test_flash_attention_backward_runs_two_ranges(online, monkeypatch):
    # one kernel for dq, dk and dv (T == S): dq sums the keys up to its query, dk and dv the queries
    # from their key on, 16 a pass (heuristics.packed_terms: the passes that hold any of them); the two
    # loops fold the same bits as one whole loop
    item = backward_item(4)
    kernel = lower(item, CPU)
    loops = reduce_loops(kernel)
    assert len(loops) == 2
    (start0, end0), (start1, end1) = loops
    assert (start0, end0, start1, end1) == ("0", "gidx2/16+1", "gidx2/16", "4")
    for ours, whole in zip(outputs(kernel), whole_loop_bits(item, monkeypatch), strict=True):
        np.testing.assert_array_equal(ours, whole)


def test_a_running_max_under_a_causal_mask_stops_at_its_row():
    # max over j <= i of x[i, j]: a where(..., -inf) is nothing to a max (lowered without options: the
    # heuristics' SPLIT folds a row into partials, a loop the ranges leave whole)
    x = rand(8, 3, 64, 64)
    i, j = Tensor.arange(64).unsqueeze(-1), Tensor.arange(64)
    top = (i >= j).where(x, float("-inf")).max(-1)
    item = last_item(top)
    (start, end), = reduce_loops(lower(item, CPU, ()))
    assert start == "0" and end.endswith("+1")
    want = np.where(np.tril(np.ones((64, 64), bool)), x.numpy(), -np.inf).max(-1)
    np.testing.assert_array_equal(top.numpy(), want)


def test_a_mask_that_could_leave_a_row_empty_keeps_the_whole_loop():
    # j < i leaves row 0 nothing: its sum must still be the sum of its (zero) terms
    x = rand(9, 64, 64)
    i, j = Tensor.arange(64).unsqueeze(-1), Tensor.arange(64)
    total = (j < i).where(x.exp(), 0.0).sum(-1)
    item = last_item(total)
    assert reduce_loops(lower(item, CPU, ())) == [("0", "64")]
    want = np.where(np.tril(np.ones((64, 64), bool), -1), np.exp(x.numpy().astype(np.float64)), 0).sum(-1)
    np.testing.assert_allclose(total.numpy(), want, rtol=1e-5)


def test_a_mask_read_from_memory_keeps_the_whole_loop():
    x = rand(10, 64, 64)
    keep = Tensor(np.tril(np.ones((64, 64), bool)))
    total = keep.where(x.exp(), 0.0).sum(-1)
    item = last_item(total)
    assert reduce_loops(lower(item, CPU, ())) == [("0", "64")]


def test_the_backward_packs_16_keys_exps_into_one_vector_with_the_same_bits(online, monkeypatch):
    # heuristics.packed_terms unrolls the loop by 16; vectorize.pack_terms then computes the 16 terms' ds
    # (their scores and dp's summed across, their exps) as vectors, lane by lane the scalar code's ops
    item = backward_item(11)
    kernel = lower(item, CPU)
    exps = [u for u in kernel.uops if u.op is UOps.ALU and u.arg is Ops.POW2]
    assert exps and all(u.lanes == 16 for u in exps)
    with monkeypatch.context() as m:
        m.setattr(Vectorizer, "pack_terms", lambda self: None)
        scalar = lower(item, CPU)
    assert all(u.lanes == 1 for u in scalar.uops if u.op is UOps.ALU and u.arg is Ops.POW2)
    for ours, theirs in zip(outputs(kernel), outputs(scalar), strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_the_forward_folds_a_blocks_max_and_sum_as_vectors_with_the_same_bits(online, monkeypatch):
    # softmax.softmax_block takes 16 keys a pass; their max and the sum of their exps are pairwise trees
    # over the packed vector's lanes, which vectorize.fold_lanes folds as vectors (the even lanes with
    # the odd ones, half as wide a level): no scalar select is left but the last pair's, and the bits are
    # the scalar trees'. Scores spread wide, so that rows' maxima move from block to block.
    q, k, v = (rand(21, 1, 2, 64, 8) * 4).requires_grad_(), rand(22, 1, 2, 64, 8) * 4, rand(23, 1, 2, 64, 8)
    out = q.scaled_dot_product_attention(k, v, is_causal=True)
    item = last_item(out, out._ctx.saved["lse"])
    assert item.online is not None
    kernel = lower(item, CPU)
    folded = [u for u in kernel.uops if u.op is UOps.SHUFFLE and u.srcs[0].lanes == 16]
    assert len(folded) == 4  # the max's and the sum's first level, even and odd lanes
    scalar_selects = [u for u in kernel.uops if u.op is UOps.ALU and u.arg is Ops.WHERE and u.lanes == 1
                      and u.srcs[0].op is UOps.ALU and u.srcs[0].arg is Ops.CMPLT]
    with monkeypatch.context() as m:
        m.setattr(Vectorizer, "fold_lanes", lambda self, *args: None)
        scalar = lower(item, CPU)
    trees = [u for u in scalar.uops if u.op is UOps.ALU and u.arg is Ops.WHERE and u.lanes == 1
             and u.srcs[0].op is UOps.ALU and u.srcs[0].arg is Ops.CMPLT]
    assert len(trees) == len(scalar_selects) + 14  # the 15 selects of the max's tree, 1 left folded
    for ours, theirs in zip(outputs(kernel), outputs(scalar), strict=True):
        np.testing.assert_array_equal(ours, theirs)
