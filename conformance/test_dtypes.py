"""The dtypes themselves, on every stage: rounding into the half types (to nearest even, NaN and inf
kept, through float32 as torch's), bitcast, the conversions' names, numpy round trips (bfloat16 through
ml_dtypes), the promotion lattice against torch's where torch has a rule, and integer wrapping."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from conformance.cases import expect, new_dtypes_here

BF16 = ml_dtypes.bfloat16


@pytest.fixture(autouse=True)
def _on_the_cpu(stage):
    new_dtypes_here(stage)


def _bits(t, dtype) -> list[int]:
    return t.bitcast(dtype).numpy().tolist()


def test_float32_rounds_to_nearest_even_into_the_half_types(stage):
    T = stage.module.Tensor
    # 1 + 2^-8 lies halfway between bfloat16's 1 and 1 + 2^-7: ties go to the even one (1); 1 + 3 * 2^-8 lies
    # halfway between 1 + 2^-7 and 1 + 2^-6: to the even one again (1 + 2^-6); just above a tie rounds up.
    x = T(np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20], np.float32))
    expect(x.bfloat16().float().numpy().tolist() == [1.0, 1 + 2**-6, 1 + 2**-7], x.bfloat16().float().numpy())
    y = T(np.array([1 + 2**-11, 1 + 3 * 2**-11, 65520.0, 65519.0], np.float32))  # float16's ties and its overflow
    expect(y.half().float().numpy().tolist() == [1.0, 1 + 2**-9, float("inf"), 65504.0], y.half().float().numpy())


def test_nan_and_inf_survive_every_cast_between_floats(stage):
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    x = T(np.array([np.nan, np.inf, -np.inf, -0.0], np.float64))
    for half in (dtypes.float16, dtypes.bfloat16):
        back = x.cast(half).cast(dtypes.float32).numpy()
        expect(np.isnan(back[0]) and back[1] == np.inf and back[2] == -np.inf, back)
        expect(back[3] == 0 and np.signbit(back[3]), f"-0.0 through {half.name}: {back[3]}")
    expect(_bits(x.bfloat16(), dtypes.uint16)[0] == 0x7FC0, "bfloat16's NaN is the quiet NaN")


def test_a_cast_from_float64_goes_through_float32_as_torch_does(stage):
    torch = pytest.importorskip("torch")
    T = stage.module.Tensor
    # one float64 just above a bfloat16 tie, whose float32 rounding lands on the tie itself
    v = 1 + 2**-8 + 2**-40
    ours = T(np.array([v])).bfloat16().float().item()
    expect(ours == torch.tensor([v], dtype=torch.float64).bfloat16().float().item(), ours)


def test_bitcast_reads_the_same_bytes(stage):
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    expect(_bits(T([1.0, -2.0]), dtypes.int32) == [0x3F800000, -0x40000000], "float32 -> int32")
    expect(_bits(T([1.0]).bfloat16(), dtypes.uint16) == [0x3F80], "bfloat16 -> uint16")
    expect(_bits(T([1.0]).half(), dtypes.int16) == [0x3C00], "float16 -> int16")
    back = T(np.array([0x3F80], np.uint16)).bitcast(dtypes.bfloat16)
    expect(back.dtype is dtypes.bfloat16 and back.float().item() == 1.0, back.numpy())


def test_the_conversions_and_numpy_round_trips(stage):
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    x = T([1.5, -2.25])
    for method, dtype in (("half", "float16"), ("bfloat16", "bfloat16"), ("double", "float64"),
                          ("long", "int64"), ("int", "int32"), ("float", "float32")):
        expect(getattr(x, method)().dtype is getattr(dtypes, dtype), method)
    arr = np.array([0.5, 3.0, -1.0], BF16)
    got = T(arr)
    expect(got.dtype is dtypes.bfloat16 and got.numpy().dtype == arr.dtype, got.numpy().dtype)
    expect(got.numpy().tolist() == arr.tolist() and got.tolist() == [0.5, 3.0, -1.0], got.numpy())
    expect(isinstance(got[1].item(), float) and got[1].item() == 3.0, got[1].item())
    small = T(np.array([-128, 127], np.int8))
    expect(small.dtype is dtypes.int8 and small.numpy().dtype == np.int8, small.numpy().dtype)


@pytest.mark.parametrize("left, right", [("int8", "uint8"), ("int64", "float16"), ("float16", "bfloat16"),
                                         ("bool", "int8"), ("uint8", "int16"), ("int16", "float32"),
                                         ("bfloat16", "float64"), ("uint8", "int64")])
def test_promotion_agrees_with_torch(stage, left, right):
    torch = pytest.importorskip("torch")
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    ours = (T([1], dtype=getattr(dtypes, left)) + T([1], dtype=getattr(dtypes, right))).dtype.name
    theirs = str((torch.ones(1, dtype=getattr(torch, left)) + torch.ones(1, dtype=getattr(torch, right))).dtype)
    expect(f"torch.{ours}" == theirs, (ours, theirs))


def test_tinygrads_lattice_where_torch_has_no_rule(stage):
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    expect((T([1], dtype=dtypes.uint32) + T([1], dtype=dtypes.int32)).dtype is dtypes.int64, "uint32 + int32")
    expect((T([1], dtype=dtypes.uint16) + T([1], dtype=dtypes.uint8)).dtype is dtypes.uint16, "uint16 + uint8")


def test_integers_wrap_like_torch(stage):
    torch = pytest.importorskip("torch")
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    for name, values in (("uint8", [250, 3]), ("int8", [120, -128]), ("int16", [32000, -5])):
        ours = T(np.array(values, np.dtype(name)))
        theirs = torch.tensor(values, dtype=getattr(torch, name))
        for f in (lambda t: t + 10, lambda t: t * 3, lambda t: t - 7, lambda t: t + (-3)):
            expect(f(ours).numpy().tolist() == f(theirs).tolist(), (name, f(ours).numpy(), f(theirs)))
        expect(ours.sum().dtype is dtypes.int64 and ours.sum().item() == int(theirs.sum()), (name, "sum"))


def test_rand_in_a_half_type_stays_below_one(stage):
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    T.manual_seed(3)
    for half in (dtypes.float16, dtypes.bfloat16):
        x = T.rand(4096, dtype=half)
        values = x.float().numpy()
        expect(x.dtype is half and values.min() >= 0 and values.max() < 1, (half, values.min(), values.max()))
        expect(len(np.unique(values)) > 100, f"{half.name}: {len(np.unique(values))} distinct values")
