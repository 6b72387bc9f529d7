"""Movement ops are views: they run nothing and copy nothing, they compose the ShapeTracker of one
base, and the kernel that finally reads them turns the view into index arithmetic."""

import numpy as np

from .. import GlobalCounters, Tensor
from ..codegen.lower import lower
from ..codegen.uops import UOps
from ..cpu.runtime import cpu_runtime
from ..engine.schedule import create_schedule
from ..graph.symbolic import render


def test_views_run_nothing_and_read_the_same_base():
    x = Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    ref = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    cases = [(lambda t: t.reshape(6, 4), lambda a: a.reshape(6, 4)),
             (lambda t: t.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
             (lambda t: t[1], lambda a: a[1]),
             (lambda t: t[:, ::2, ::-1], lambda a: a[:, ::2, ::-1]),
             (lambda t: t.flip(0), lambda a: a[::-1]),
             (lambda t: t[None, ..., 1], lambda a: a[None, ..., 1]),
             (lambda t: t.expand(5, 2, 3, 4), lambda a: np.broadcast_to(a, (5, 2, 3, 4))),
             (lambda t: t.shrink(((0, 1), None, (1, 3))), lambda a: a[0:1, :, 1:3]),
             (lambda t: t.flatten(1), lambda a: a.reshape(2, 12)),
             (lambda t: t.T.reshape(12, 2), lambda a: a.T.reshape(12, 2))]
    for view, expect in cases:
        GlobalCounters.reset()
        y = view(x)
        assert GlobalCounters.kernel_count == 0 and y.lazydata.base is x.lazydata.base
        np.testing.assert_array_equal(y.numpy(), expect(ref))


def test_a_reshape_of_a_whole_buffer_needs_no_copy():
    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    GlobalCounters.reset()
    np.testing.assert_array_equal(x.reshape(2, 6).numpy(), np.arange(12).reshape(2, 6))
    assert GlobalCounters.kernel_count == 0


def test_expand_costs_no_memory():
    x = Tensor([[1.0], [2.0]]).expand(2, 1000)
    assert x.lazydata.base.shape == (2, 1) and x.sum().item() == 3000


def test_contiguous_of_a_base_is_itself():
    x = Tensor(np.zeros((2, 3), np.float32))
    assert x.contiguous() is x
    assert x.T.contiguous() is not x


def _gated_loads(t) -> list:
    """The gated LOADs of the kernels that realize t (their buffers, each read only where valid)."""
    items = create_schedule([t.lazydata])
    return [u for it in items for u in lower(it, cpu_runtime.renderer).uops
            if u.op is UOps.LOAD and len(u.srcs) > 1]


def test_a_padded_view_of_a_computed_row_reads_only_where_valid():
    # (x * 2) padded from 61 to 64 columns (a matmul operand's padded copy): the computed base is read
    # at the index simplified for where the view is valid (no division by its row, which it had), so
    # the last row's padding points past x's end: x's load is gated. Its values and zeros, as numpy
    x = np.arange(7 * 61, dtype=np.float32).reshape(7, 61)
    t = (Tensor(x) * 2).reshape(1, 7, 61).pad(((0, 0), (0, 0), (0, 3))).contiguous()
    gated = _gated_loads(t)
    assert len(gated) == 1 and render(gated[0].arg[0]) == "gidx1*61+gidx2" and gated[0].arg[1] is None
    np.testing.assert_array_equal(t.numpy(), np.pad(x * 2, ((0, 0), (0, 3)))[None])


def test_a_pad_of_a_padded_computed_view_reads_as_numpy():
    # pads within pads of computed values: each load is read only where its views are valid
    x = np.arange(5 * 6, dtype=np.float32).reshape(5, 6) + 1
    inner = (Tensor(x) + 1).pad(((1, 2), (0, 2)))  # (8, 8)
    t = (inner * 3).pad(((2, 1), (3, 0))).contiguous()
    want = np.pad(np.pad(x + 1, ((1, 2), (0, 2))) * 3, ((2, 1), (3, 0)))
    np.testing.assert_array_equal(t.numpy(), want)


def test_a_packed_copy_of_a_concatenation_reads_each_part_as_gated_vectors():
    # the backward of q, k, v = qkv.split(C, -1) on heads-permuted gradients, copied into a matmul's
    # panels of 8 columns: each part is read where it is valid only, 8 entries a load, no clamp
    B, H, T, D = 2, 4, 64, 32
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((B, H, T, D)).astype(np.float32) for _ in range(3)]
    pieces = [Tensor(p).permute(0, 2, 1, 3).reshape(B, T, H * D) for p in parts]
    C = H * D
    cat = sum(piece.pad(((0, 0), (0, 0), (k * C, (2 - k) * C))) for k, piece in enumerate(pieces))
    packed = cat.reshape(B * T, 3 * C // 8, 8).permute(1, 0, 2).contiguous()
    loads = [u for u in _gated_loads(packed)]
    assert loads and all(u.lanes == 8 and u.arg[1] is None and "/" not in render(u.arg[0]).replace("gidx1/64", "")
                         for u in loads), [render(u.arg[0]) for u in loads]
    want = np.concatenate([p.transpose(0, 2, 1, 3).reshape(B, T, C) for p in parts], -1)
    np.testing.assert_array_equal(packed.numpy(), want.reshape(B * T, 3 * C // 8, 8).transpose(1, 0, 2))
