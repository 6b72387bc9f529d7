"""Fusion, counted: how many kernels the scheduler makes for the ops the issue names, read from
GlobalCounters.kernel_count around one realize, with the results checked against numpy."""

import math

import numpy as np
import pytest

from .. import GlobalCounters, Tensor, TinyJit, nn, optim
from ..autograd import attention_grads
from ..dtype import dtypes
from ..engine.schedule import create_schedule
from ..graph.lazy import numel
from ..ops import Ops


def realized(*shape):
    return Tensor(np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32))


def count(t: Tensor) -> int:
    GlobalCounters.reset()
    t.realize()
    return GlobalCounters.kernel_count


@pytest.mark.parametrize("length", [1, 4, 16])
def test_an_elementwise_chain_is_one_kernel(length):
    x, y = realized(8, 16), realized(8, 16)
    out, ref = x, x.numpy()
    for i in range(length):
        out, ref = (out * y + i).maximum(0.5), np.maximum(ref * y.numpy() + i, 0.5)
    assert count(out) == 1
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)


def test_mul_sum_is_one_kernel():
    x, y = realized(32, 16), realized(32, 16)
    out = (x * y).sum()
    assert count(out) == 1
    np.testing.assert_allclose(out.numpy(), (x.numpy() * y.numpy()).sum(), rtol=1e-5)


def test_softmax_is_at_most_three_kernels():
    x = realized(4, 33)
    out = x.softmax(-1)
    assert count(out) <= 3
    e = np.exp(x.numpy() - x.numpy().max(-1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_layernorm_is_at_most_three_kernels():
    x = realized(6, 40)
    out = x.layernorm()
    assert count(out) <= 3
    a = x.numpy()
    ref = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-5)


def test_relu_of_a_linear_layer_is_at_most_two_kernels():
    x, w, b = realized(8, 24), realized(24, 12), realized(12)
    out = (x @ w + b).relu()
    assert count(out) <= 2
    np.testing.assert_allclose(out.numpy(), np.maximum(x.numpy() @ w.numpy() + b.numpy(), 0), rtol=1e-5, atol=1e-5)


def test_views_copy_nothing_until_realized():
    x = realized(4, 6)
    GlobalCounters.reset()
    y = x.T.reshape(2, 12)[:, ::3].flip(0).pad(((1, 0), (0, 2)))
    assert GlobalCounters.kernel_count == 0  # nothing ran yet: the ops only built a view
    ref = np.pad(x.numpy().T.reshape(2, 12)[:, ::3][::-1], ((1, 0), (0, 2)))
    np.testing.assert_array_equal(y.numpy(), ref)
    assert GlobalCounters.kernel_count == 1  # one kernel read the whole view through index arithmetic


def test_cross_entropy_is_at_most_three_kernels():
    x, t = realized(64, 65), Tensor(np.random.default_rng(1).integers(0, 65, (64,)))
    GlobalCounters.reset()
    out = x.cross_entropy(t)
    assert GlobalCounters.kernel_count == 0  # lazy: the label range check waits for the realize (checks.py)
    # row max + picked logit in one loop; the exp sum; the mean with its count and the labels' bounds
    assert count(out) <= 3
    logits = x.numpy().astype(np.float64)
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), -logp[np.arange(64), t.numpy()].mean(), rtol=1e-5)


def attention_ref(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d) + mask) v in float64 (a masked-out entry: -inf)."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    with np.errstate(invalid="ignore"):  # a row masked out everywhere: nan, as torch gives
        p = np.exp(s - s.max(-1, keepdims=True))
        return (p / p.sum(-1, keepdims=True)) @ v


@pytest.fixture
def online(monkeypatch):
    monkeypatch.setenv("PASSES", "+online")  # the online softmax rule (engine/online.py), whatever PASSES says


def test_causal_attention_forward_is_one_kernel(online):
    q, k, v = realized(2, 4, 16, 8), realized(2, 4, 16, 9)[..., :8].contiguous(), realized(2, 3, 16, 8)[:, :1]
    k.realize(), v.realize()
    out = q.scaled_dot_product_attention(k, v, is_causal=True)
    # the scores in a loop nested in the sum over the keys, which keeps each row's running max and
    # sum of exps (engine/online.py): no (16, 16) array is written
    assert count(out) == 1
    causal = np.tril(np.ones((16, 16), bool))
    np.testing.assert_allclose(out.numpy(), attention_ref(q.numpy(), k.numpy(), v.numpy(), causal),
                               rtol=1e-5, atol=1e-6)


def test_unfused_causal_attention_is_at_most_six_kernels():
    q, k, v = realized(2, 4, 16, 8), realized(2, 4, 16, 9)[..., :8].contiguous(), realized(2, 3, 16, 8)[:, :1]
    k.realize(), v.realize()
    out = q.scaled_dot_product_attention(k, v, is_causal=True)
    # k copied transposed (codegen/layouts.py: the scores' product then takes a register tile);
    # scores with the mask computed in their loop; max; exp sum; the probabilities, stored (read
    # expanded by the product, and too costly to recompute there: engine/schedule's docstring);
    # probabilities @ v
    assert count(out) <= 6
    causal = np.tril(np.ones((16, 16), bool))
    np.testing.assert_allclose(out.numpy(), attention_ref(q.numpy(), k.numpy(), v.numpy(), causal),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mask", ["none", "bool", "float", "empty_row"])
@pytest.mark.parametrize("d", [5, 32])
def test_online_softmax_matches_the_softmax(online, mask, d):
    rng = np.random.default_rng(d)
    q, k, v = (Tensor((rng.standard_normal((2, 3, 24, d)) * 1.5).astype(np.float32)) for _ in range(3))
    m = {"none": None, "bool": rng.random((24, 24)) < 0.7, "float": (rng.standard_normal((24, 24)) * 4),
         "empty_row": np.ones((24, 24), bool)}[mask]
    if mask == "empty_row":
        m[5] = False  # a query that may attend to nothing: nan, as torch
    m = None if m is None else m.astype(np.float32) if m.dtype != bool else m
    out = q.scaled_dot_product_attention(k, v, attn_mask=None if m is None else Tensor(m))
    assert count(out) == 1
    want = attention_ref(q.numpy(), k.numpy(), v.numpy(), m)
    # conformance's REDUCE tolerance: each score is a float32 sum of d products
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
    assert np.isnan(out.numpy()).any() == (mask == "empty_row")


def test_online_softmax_rescales_when_the_row_max_grows(online):
    # scores rising along the row, then one far above: every step moves the max, and the early
    # terms (e^-80 of the last) must vanish without overflow or nan
    q = Tensor(np.ones((1, 1, 1, 4), np.float32))
    keys = np.concatenate([np.linspace(-20, 20, 15), [80.0]]).astype(np.float32)
    k = Tensor(np.repeat(keys[:, None] / 2, 4, 1)[None, None])  # q . k / sqrt(4) = keys
    v = Tensor(np.arange(64, dtype=np.float32).reshape(1, 1, 16, 4))
    out = q.scaled_dot_product_attention(k, v)
    assert count(out) == 1
    np.testing.assert_allclose(out.numpy(), attention_ref(q.numpy(), k.numpy(), v.numpy()), rtol=1e-6)


def test_a_block_of_keys_keeps_a_nan_score_in_its_rows(online):
    # 16 keys a pass (softmax.softmax_block), whose max lets a NaN score pass: the NaN's own term makes
    # its rows NaN, as the softmax does; the rows the causal mask keeps it from stay finite
    q, k, v = realized(1, 2, 48, 8), realized(1, 2, 48, 9)[..., :8].contiguous(), realized(2, 1, 48, 8)
    keys = k.numpy()
    keys[0, 1, 20, 3] = np.nan
    k = Tensor(keys)
    out = q.scaled_dot_product_attention(k, v, is_causal=True)
    assert count(out) == 1
    want = attention_ref(q.numpy(), keys, v.numpy(), np.tril(np.ones((48, 48), bool)))
    got = out.numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[0, 1, 20:]).all() and not np.isnan(got[0, 1, :20]).any()
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], rtol=1e-5, atol=1e-6)


def heads(seed: int, *shape) -> Tensor:
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32)).requires_grad_()


def largest_output(items) -> int:
    return max(numel(o.shape) for it in items for o in it.outputs)


@pytest.mark.parametrize("T, S, causal, kernels", [(16, 16, True, 1), (24, 16, True, 2), (16, 24, False, 2)])
def test_flash_attention_backward_is_at_most_two_kernels(online, T, S, causal, kernels):
    # FlashAttention, by autograd's rule and the scheduler (autograd.attention_grads): the forward is one
    # kernel, which writes the output and each row's log-sum-exp; the backward is dq in one kernel, dk and
    # dv in one, the probabilities recomputed in both (where T == S the three sums run over one loop and
    # share one kernel). No kernel writes a (T, S) array.
    q, k, v, g = heads(1, 2, 3, T, 8), heads(2, 2, 3, S, 8), heads(3, 2, 3, S, 8), heads(4, 2, 3, T, 8)
    out = q.scaled_dot_product_attention(k, v, is_causal=causal)
    assert out._ctx.op is Ops.ATTENTION
    lse = out._ctx.saved["lse"]  # each row's log-sum-exp, written by the online kernel beside the output
    forward = create_schedule([out.lazydata, lse.lazydata])
    assert len(forward) == 1
    assert largest_output(forward) < 2 * 3 * T * S
    out.realize(lse)
    with Tensor.no_grad():
        grads = attention_grads(g, out, q, k, v, **out._ctx.saved)
    backward = create_schedule([t.lazydata for t in grads])
    assert len(backward) == kernels
    assert largest_output(backward) < 2 * 3 * T * S
    torch = pytest.importorskip("torch")
    tq, tk, tv = (torch.tensor(t.numpy(), requires_grad=True) for t in (q, k, v))
    want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
    want.backward(torch.tensor(g.numpy()))
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    grads[0].realize(*grads[1:])
    for ours, theirs in zip(grads, (tq, tk, tv), strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mask", ["causal", "bool"])
def test_attention_trains_through_backward_as_torch(online, mask):
    # the whole path a training step takes: the forward realized first, then backward() from a loss
    torch = pytest.importorskip("torch")
    q, k, v = heads(5, 2, 2, 12, 4), heads(6, 2, 2, 12, 4), heads(7, 2, 2, 12, 4)
    keep = np.random.default_rng(8).random((12, 12)) < 0.8
    keep[:, 0] = True
    kwargs = {"is_causal": True} if mask == "causal" else {"attn_mask": Tensor(keep)}
    out = q.scaled_dot_product_attention(k, v, **kwargs)
    # a mask of the user's is not FlashAttention's: that attention is the composite, its probabilities kept
    assert (out._ctx.op is Ops.ATTENTION) == (mask == "causal")
    loss = (out ** 2).sum()
    loss.realize()
    loss.backward()
    tq, tk, tv = (torch.tensor(t.numpy(), requires_grad=True) for t in (q, k, v))
    tkw = {"is_causal": True} if mask == "causal" else {"attn_mask": torch.tensor(keep)}
    (torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **tkw) ** 2).sum().backward()
    for ours, theirs in ((q, tq), (k, tk), (v, tv)):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-5)


# a half type's unit in the last place, relative: 8 significant bits in bfloat16, 11 in float16
HALF_ULP = {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}


@pytest.mark.parametrize("half", ["bfloat16", "float16"])
def test_half_heads_run_flash_attention_in_float32(online, half):
    # autocast's heads: widened, attention runs as FlashAttention's one op in float32, and the output and each
    # gradient are rounded to the half type once. Against torch's float32 attention on the same (half) values:
    # the float32 results agree to ~1e-6, so after one rounding each they differ by at most one unit in the last place
    torch = pytest.importorskip("torch")
    dtype = getattr(dtypes, half)
    q, k, v, g = (heads(seed, 2, 2, 12, 8).cast(dtype).detach().requires_grad_() for seed in (11, 12, 13, 14))
    out = q.scaled_dot_product_attention(k, v, is_causal=True)
    assert out.dtype is dtype and out._ctx.op is Ops.CAST and out._ctx.parents[0]._ctx.op is Ops.ATTENTION
    out.backward(g.detach())
    wide = [torch.tensor(t.float().numpy(), requires_grad=True) for t in (q, k, v)]
    want = torch.nn.functional.scaled_dot_product_attention(*wide, is_causal=True)
    want.backward(torch.tensor(g.float().numpy()))
    ulp = HALF_ULP[half]
    np.testing.assert_allclose(out.float().numpy(), want.detach().numpy(), rtol=ulp, atol=1e-6)
    for ours, theirs in zip((q, k, v), wide, strict=True):
        assert ours.grad.dtype is dtype
        np.testing.assert_allclose(ours.grad.float().numpy(), theirs.grad.numpy(), rtol=ulp, atol=1e-5)


def attention_training(jitted: bool) -> tuple[list[float], np.ndarray]:
    """Three AdamW steps of one causal self-attention layer (a Linear to q, k and v, 2 heads of 4); the
    losses and the final weight."""
    Tensor.manual_seed(1)
    qkv = nn.Linear(8, 24)
    opt = optim.AdamW([qkv.weight, qkv.bias], lr=0.05)

    def step(x):
        heads = qkv(x).reshape(2, 6, 3, 2, 4).permute(2, 0, 3, 1, 4)  # (q k v, batch, head, time, dim)
        out = heads[0].scaled_dot_product_attention(heads[1], heads[2], is_causal=True)
        loss = (out * out).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    run = TinyJit(step) if jitted else step
    rng = np.random.default_rng(2)
    losses = [run(Tensor(rng.standard_normal((2, 6, 8)).astype(np.float32))) for _ in range(3)]
    return [loss.item() for loss in losses], qkv.weight.numpy()


def test_a_jitted_step_with_flash_attention_is_the_eager_step(online, monkeypatch):
    # FlashAttention's kernels (the forward writing each row's log-sum-exp, the backward's) replay to the
    # eager step's bits, and train as the unfused attention does
    eager, jitted = attention_training(False), attention_training(True)
    assert jitted[0] == eager[0]
    np.testing.assert_array_equal(jitted[1], eager[1])
    monkeypatch.setenv("PASSES", "-online")
    unfused = attention_training(False)
    np.testing.assert_allclose(eager[0], unfused[0], rtol=1e-5)
    np.testing.assert_allclose(eager[1], unfused[1], rtol=1e-4, atol=1e-6)


def test_an_adamw_step_writes_param_m_and_v_in_one_kernel():
    from ..optim import AdamW

    p = realized(32, 16).requires_grad_()
    opt = AdamW([p], lr=1e-2, weight_decay=0.1)
    p.grad = realized(16, 32).T.contiguous()
    p.grad.realize()
    before, g = p.numpy().copy(), p.grad.numpy()
    GlobalCounters.reset()
    opt.step()
    assert GlobalCounters.kernel_count <= 2  # one multi-output kernel (+ the step counter's, if any)
    m, v = 0.1 * g, 0.001 * g * g  # after one step from zero state, betas (0.9, 0.999)
    m_hat, v_hat = m / 0.1, v / 0.001
    ref = before * (1 - 1e-2 * 0.1) - 1e-2 * m_hat / (np.sqrt(v_hat) + 1e-8)
    np.testing.assert_allclose(p.numpy(), ref, rtol=1e-5, atol=1e-6)


def test_merged_outputs_read_each_other_only_at_their_own_index():
    # b reads a transposed: in one kernel with a it would read entries the loop has not written yet
    x = realized(8, 8)
    a = x * 2
    b = a.T + 1
    c = a + x  # reads a at its own index: joins a's kernel
    GlobalCounters.reset()
    a.realize(b, c)
    assert GlobalCounters.kernel_count == 2
    np.testing.assert_allclose(b.numpy(), (x.numpy() * 2).T + 1)
    np.testing.assert_allclose(c.numpy(), x.numpy() * 3)
    np.testing.assert_allclose(a.numpy(), x.numpy() * 2)


def test_matmuls_of_one_shape_stay_apart_and_row_reductions_merge():
    # each matmul holds a register tile: merged, the tiles would spill (merge.merge_outputs)
    a, b = realized(32, 24), realized(24, 48)
    c, d = Tensor(a.numpy()[::-1].copy()), Tensor(b.numpy()[:, ::-1].copy())  # the same shapes, other values
    GlobalCounters.reset()
    first, second = a @ b, c @ d
    first.realize(second)
    assert GlobalCounters.kernel_count == 2
    np.testing.assert_allclose(second.numpy(), c.numpy() @ d.numpy(), rtol=1e-5, atol=1e-5)
    x = realized(16, 40)
    top, total = x.max(axis=1), x.sum(axis=1)  # one loop over each row folds both
    GlobalCounters.reset()
    top.realize(total)
    assert GlobalCounters.kernel_count == 1
    np.testing.assert_allclose(total.numpy(), x.numpy().sum(axis=1), rtol=1e-5)


def test_an_expensive_operand_of_a_matmul_is_stored_and_a_cheap_one_recomputed():
    x = realized(16, 24)
    for w in (realized(24, 64), realized(24, 16)):  # exp read 64 (16) times per element: stored once instead
        out = x.exp() @ w
        assert count(out) == 2
        np.testing.assert_allclose(out.numpy(), np.exp(x.numpy()) @ w.numpy(), rtol=1e-5, atol=1e-5)
    out = (x * 0.5) @ w  # one multiply: recomputed in the product's loop
    assert count(out) == 1
    np.testing.assert_allclose(out.numpy(), (x.numpy() * 0.5) @ w.numpy(), rtol=1e-5, atol=1e-5)


def test_autocasts_rounded_weight_is_stored_once_not_rounded_again_for_each_row():
    # a rounding into a half type costs the scheduler ROUNDING ops, more than CHEAP: the weight's bfloat16 values
    # that a matmul reads for each of its 64 rows are written once (widened back, as the product reads them), not
    # rounded again in every row's loop
    x, w = realized(64, 32), realized(32, 16)
    with Tensor.autocast(dtypes.bfloat16):
        out = x @ w
    written = [o for item in create_schedule([out.lazydata]) for o in item.outputs]
    assert any(o.op is Ops.CAST and o.shape == (32, 16) and o.srcs[0].base.dtype is dtypes.bfloat16 for o in written)
    want = (x.cast(dtypes.bfloat16).float() @ w.cast(dtypes.bfloat16).float()).numpy()
    np.testing.assert_allclose(out.float().numpy(), want, rtol=2.0 ** -8)


def test_a_long_expression_after_a_matmul_runs_apart():
    # a bias or relu after a matmul runs in its kernel; GELU's ~140 ops there slowed its tile 7x
    x, w, z = realized(32, 24), realized(24, 48), realized(32, 48)
    cheap = (x @ w) * z
    assert count(cheap) == 1
    long = (x @ w) * z.gelu()
    assert count(long) == 2
    gelu = z.numpy() * 0.5 * (1 + np.vectorize(math.erf)(z.numpy() / math.sqrt(2)))
    np.testing.assert_allclose(long.numpy(), (x.numpy() @ w.numpy()) * gelu, rtol=1e-5, atol=1e-5)



def test_an_expensive_value_read_by_two_kernels_is_stored_once():
    # a soft-capped logit (a tanh: more than EXPENSIVE ops) read by a row max and a sum of exps is
    # stored by a kernel of its own; recomputed, it would be two kernels, each computing the tanh
    x = realized(8, 40)
    capped = (x * 0.1).tanh() * 10
    out = (capped - capped.max(-1, keepdim=True)).exp().sum(-1)
    items = create_schedule([out.lazydata])
    assert [(it.reduce is None, it.root.shape) for it in items][0] == (True, (8, 40))
    assert count(out) == len(items) == 3
    c = np.tanh(x.numpy().astype(np.float64) * 0.1) * 10
    np.testing.assert_allclose(out.numpy(), np.exp(c - c.max(-1, keepdims=True)).sum(-1), rtol=1e-5)
