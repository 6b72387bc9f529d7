"""Mixed precision (`Tensor.autocast`, stages 2 and 3) against torch's CPU autocast.

What runs in which type: the multiplying ops (matmul, linear, conv2d, attention) return the half type
as torch's do; the losses return float32 as torch's do; softmax, log_softmax and layernorm return
float32 where torch's CPU autocast keeps the input's half type (ours follow torch's CUDA lists: an
exponential's sum in 8 bits loses its small terms). A float32 tensor plus a half one is float32.

The values: each multiplying op's result lies within the op's half tolerance of the float64 answer on
the same half-rounded inputs (2 units of roundoff u of the type, plus the float32 sum's error), and the
gradients of a small network, which autocast leaves float32, agree with torch's autocast gradients
to 8u (the backward multiplies in the half type too: each gradient is a few rounded products deep).
"""

from __future__ import annotations

import numpy as np
import pytest

from conformance.cases import expect, new_dtypes_here

HALVES = ("bfloat16", "float16")
U = {"bfloat16": 2.0**-8, "float16": 2.0**-11}  # unit roundoff
FLOAT32_SUM = 2.0**-18  # a float32 sum of K <= 40 products errs by at most K 2^-24 sum |a||b| (< 2^-18 of it)


@pytest.fixture(autouse=True)
def _on_the_cpu(stage):
    new_dtypes_here(stage)


def _inputs(seed: int, *shapes) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _rounded(x: np.ndarray, half: str) -> np.ndarray:
    """x rounded to the half type, back in float64 (what autocast's products read)."""
    import ml_dtypes

    return x.astype(ml_dtypes.bfloat16 if half == "bfloat16" else np.float16).astype(np.float64)


def _close(ours: np.ndarray, exact: np.ndarray, slack: np.ndarray, half: str, what: str) -> None:
    """|ours - exact| <= 2u |exact| + slack: 2u for the result's rounding into the half type, the slack for
    what the op adds before it (a float32 sum's error, or attention's inner roundings)."""
    ours = np.asarray(ours, np.float64)
    bound = 2 * U[half] * np.abs(exact) + slack
    worst = float(np.max(np.abs(ours - exact) - bound)) if ours.size else -1.0
    expect(worst <= 0, f"{what} in {half}: off by {worst:.3g} beyond the bound")


@pytest.mark.needs("autocast")
@pytest.mark.parametrize("half", HALVES)
def test_the_types_inside_a_block(stage, half):
    torch = pytest.importorskip("torch")
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    x, w, q, img, k = _inputs(0, (4, 8), (8, 6), (1, 2, 5, 4), (2, 3, 6, 6), (4, 3, 3, 3))
    ours, theirs = {}, {}
    with T.autocast(getattr(dtypes, half)):
        tx, tw, tq = T(x), T(w), T(q)
        ours["matmul"] = (tx @ tw).dtype.name
        ours["linear"] = tx.linear(tw).dtype.name
        ours["conv2d"] = T(img).conv2d(T(k)).dtype.name
        ours["attention"] = tq.scaled_dot_product_attention(tq, tq, is_causal=True).dtype.name
        ours["cross_entropy"] = (tx @ tw).cross_entropy(T(np.array([0, 1, 2, 3]))).dtype.name
        ours["residual"] = (tx[:, :6] + tx @ tw).dtype.name
        ours["softmax"] = (tx @ tw).softmax(-1).dtype.name
        ours["layernorm"] = (tx @ tw).layernorm().dtype.name
    ours["after the block"] = (T(x) @ T(w)).dtype.name
    F = torch.nn.functional
    with torch.autocast("cpu", dtype=getattr(torch, half)):
        a, b, c = (torch.from_numpy(v) for v in (x, w, q))
        theirs["matmul"] = a @ b
        theirs["linear"] = F.linear(a, b.T)
        theirs["conv2d"] = F.conv2d(torch.from_numpy(img), torch.from_numpy(k))
        theirs["attention"] = F.scaled_dot_product_attention(c, c, c, is_causal=True)
        theirs["cross_entropy"] = F.cross_entropy(a @ b, torch.tensor([0, 1, 2, 3]))
        theirs["residual"] = a[:, :6] + a @ b
    theirs["after the block"] = torch.from_numpy(x) @ torch.from_numpy(w)
    theirs = {k: str(v.dtype).removeprefix("torch.") for k, v in theirs.items()}
    expect(all(ours[k] == v for k, v in theirs.items()), f"ours {ours}\ntorch {theirs}")
    expect(ours["softmax"] == ours["layernorm"] == "float32", ours)  # (torch's CPU lists keep the half type)


@pytest.mark.needs("autocast")
@pytest.mark.parametrize("half", HALVES)
def test_the_products_round_their_inputs_once(stage, half):
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    x, w, q, kk, v, img, k = _inputs(1, (5, 40), (40, 7), (2, 2, 6, 8), (2, 2, 6, 8), (2, 2, 6, 8), (2, 3, 7, 7),
                                     (4, 3, 3, 3))
    with T.autocast(getattr(dtypes, half)):
        mm = (T(x) @ T(w)).float().numpy()
        conv = T(img).conv2d(T(k), padding=1).float().numpy()
        att = T(q).scaled_dot_product_attention(T(kk), T(v)).float().numpy()
    xr, wr = _rounded(x, half), _rounded(w, half)
    _close(mm, xr @ wr, FLOAT32_SUM * (np.abs(xr) @ np.abs(wr)), half, "matmul")
    import torch  # (a float64 convolution to compare with; the conformance suite needs torch anyway)

    F = torch.nn.functional
    img64, k64 = torch.from_numpy(_rounded(img, half)), torch.from_numpy(_rounded(k, half))
    exact = F.conv2d(img64, k64, padding=1).numpy()
    _close(conv, exact, FLOAT32_SUM * F.conv2d(img64.abs(), k64.abs(), padding=1).numpy(), half, "conv2d")
    # attention: the scores and the probabilities are half-type values too, rounded where a stage stores them
    # (stage2 after each op, stage3 where a kernel writes): each score within 2u|s| of exact, so each
    # probability within (2 max|s| + 1)u of its own size, and the output within that of sum p|v|
    qr, kr, vr = (_rounded(t, half) for t in (q, kk, v))
    s = qr @ kr.transpose(0, 1, 3, 2) / np.sqrt(8)
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    _close(att, p @ vr, (2 * np.abs(s).max() + 1) * U[half] * (p @ np.abs(vr)), half, "attention")


@pytest.mark.needs("autocast")
@pytest.mark.parametrize("half", HALVES)
def test_gradients_stay_float32_and_match_torch(stage, half):
    torch = pytest.importorskip("torch")
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    x, w1, w2 = _inputs(2, (6, 10), (10, 16), (16, 5))
    y = np.array([0, 1, 2, 3, 4, 0])
    ours = [T(w1, requires_grad=True), T(w2, requires_grad=True)]
    with T.autocast(getattr(dtypes, half)):
        loss = (T(x) @ ours[0]).gelu().linear(ours[1]).cross_entropy(T(y))
    loss.backward()
    theirs = [torch.tensor(w1, requires_grad=True), torch.tensor(w2, requires_grad=True)]
    with torch.autocast("cpu", dtype=getattr(torch, half)):
        ref = torch.nn.functional.cross_entropy(torch.nn.functional.gelu(torch.from_numpy(x) @ theirs[0]) @ theirs[1],
                                                torch.from_numpy(y))
    ref.backward()
    expect(abs(loss.item() - ref.item()) <= 8 * U[half] * abs(ref.item()), (loss.item(), ref.item()))
    for name, a, b in zip(("w1", "w2"), ours, theirs, strict=True):
        g, r = a.grad.numpy(), b.grad.numpy()
        expect(a.grad.dtype is dtypes.float32, f"{name}'s gradient is {a.grad.dtype.name}")
        scale, off = np.abs(r).max(), np.max(np.abs(g - r))
        expect(off <= 8 * U[half] * scale, f"{name}: off by {off:.3g} of {scale:.3g}")


@pytest.mark.needs("autocast")
def test_blocks_nest_and_end(stage):
    T, dtypes = stage.module.Tensor, stage.module.dtypes
    a = T(np.ones((2, 2), np.float32))
    with T.autocast(dtypes.float16):
        with T.autocast(enabled=False):
            expect((a @ a).dtype is dtypes.float32, "enabled=False inside a block")
        with T.autocast(dtypes.bfloat16):
            expect((a @ a).dtype is dtypes.bfloat16, "the inner block's type")
        expect((a @ a).dtype is dtypes.float16, "the outer block's type again")
        expect((a.double() @ a.double()).dtype is dtypes.float64, "float64 is left alone, as torch leaves it")
    expect((a @ a).dtype is dtypes.float32, "after the block")
    with pytest.raises(TypeError, match="float16 or bfloat16"):
        T.autocast(dtypes.float64).__enter__()
