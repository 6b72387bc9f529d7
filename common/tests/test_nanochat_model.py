"""The nanochat GPT: its forward equals an independent PyTorch write-up of nanochat's architecture
from the same weights; KV-cached logits equal the full forward's, token by token, on stage1, stage2
and stage3 (prefill chunks and single tokens, with GQA); GQA means query head h reads kv head
h // groups; the loss ignores -1 targets; the soft-cap bounds the logits; the zero-init head
gives uniform logits; Muon + AdamW lower the loss on stage2 and stage3; the depth dial and the lr
schedule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from common.models.nanochat import (
    SOFTCAP,
    KVCache,
    NanoChat,
    NanoChatConfig,
    lr_multiplier,
    random_state,
)
from common.train.checkpoint import load_model_weights

# One tiny shape for everything, so stage3 compiles few kernels (and finds them on disk next time).
CFG = NanoChatConfig(sequence_len=16, vocab_size=48, n_layer=2, n_head=4, n_kv_head=2, n_embd=32)


@pytest.fixture(scope="module")
def stage3():
    return pytest.importorskip("stage3_compiler")


def build(stage, config=CFG, seed=0, weights=None):
    model = NanoChat(stage, config)
    load_model_weights(stage, model, weights if weights is not None else random_state(config, seed))
    return model


def no_grad(T):
    return T.no_grad() if hasattr(T, "no_grad") else _Null()


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def torch_reference(weights: dict[str, np.ndarray], config: NanoChatConfig, idx: np.ndarray) -> np.ndarray:
    """nanochat's forward written directly in torch from its description (float64), for the oracle."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    w = {k: torch.tensor(v, dtype=torch.float64) for k, v in weights.items()}
    B, T = idx.shape
    H, Hkv, D = config.n_head, config.n_kv_head, config.head_dim
    pos = torch.arange(T, dtype=torch.float64)[:, None]
    inv = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    cos, sin = torch.cos(pos * inv), torch.sin(pos * inv)  # (T, D/2)

    def norm(x):
        return F.rms_norm(x, (x.shape[-1],), eps=float(np.finfo(np.float32).eps))

    def rope(x):  # (B, h, T, D)
        a, b = x[..., : D // 2], x[..., D // 2:]
        return torch.cat([a * cos + b * sin, -a * sin + b * cos], -1)

    x = norm(w["transformer.wte.weight"][torch.tensor(idx)])
    for i in range(config.n_layer):
        p = f"transformer.h.{i}."
        h = norm(x)
        q = (h @ w[p + "attn.c_q.weight"].T).view(B, T, H, D).transpose(1, 2)
        k = (h @ w[p + "attn.c_k.weight"].T).view(B, T, Hkv, D).transpose(1, 2)
        v = (h @ w[p + "attn.c_v.weight"].T).view(B, T, Hkv, D).transpose(1, 2)
        q, k = norm(rope(q)), norm(rope(k))
        k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, -1)
        x = x + y @ w[p + "attn.c_proj.weight"].T
        x = x + (F.relu(norm(x) @ w[p + "mlp.c_fc.weight"].T) ** 2) @ w[p + "mlp.c_proj.weight"].T
    logits = norm(x) @ w["lm_head.weight"].T
    return (15 * torch.tanh(logits / 15)).numpy()


def test_forward_matches_torch_reference(stage1, stage2):
    weights = random_state(CFG, seed=1)
    idx = np.random.default_rng(1).integers(0, CFG.vocab_size, (2, 12))
    expected = torch_reference(weights, CFG, idx)
    for stage in (stage1, stage2):
        got = build(stage, weights=weights)(stage.Tensor(idx)).numpy()
        assert got.dtype == np.float32 and got.shape == (2, 12, CFG.vocab_size)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def cached_vs_full(stage):
    """Logits of a prefill of 3 tokens, then 1, a chunk of 2, then singles, against the full forward
    (of the training test's shape (2, sequence_len): on stage3 its kernels are compiled once)."""
    T = stage.Tensor
    model = build(stage)
    idx = np.random.default_rng(2).integers(0, CFG.vocab_size, (2, CFG.sequence_len))
    with no_grad(T):
        full = model(T(idx)).numpy()[:, :9]  # (2, 9, V): causal, so the first 9 positions see only themselves
        cache = model.new_kv_cache(T, 2, 10)
        parts, at = [], 0
        for n in (3, 1, 2, 1, 1, 1):
            parts.append(model(T(idx[:, at:at + n]), cache).numpy())
            at += n
            assert cache.pos == at
    cached = np.concatenate(parts, axis=1)
    scale = np.abs(full).max()
    np.testing.assert_allclose(cached, full, rtol=1e-5, atol=1e-5 * scale)


def test_kv_cache_equals_full_forward_stage1(stage1):
    cached_vs_full(stage1)


def test_kv_cache_equals_full_forward_stage2(stage2):
    cached_vs_full(stage2)


def test_kv_cache_equals_full_forward_stage3(stage3):
    cached_vs_full(stage3)


def test_whole_sequence_one_capture_for_every_length(stage2, stage3):
    """No cache: stage3 runs the sequence at a symbolic length under one TinyJit capture, so lengths
    1 .. sequence_len give the concrete forward's last logits (stage2's) and compile nothing new."""
    compiler = stage3.cpu.compiler  # counts the C compiler's runs
    ids = np.random.default_rng(4).integers(0, CFG.vocab_size, CFG.sequence_len).tolist()
    eager, symbolic = build(stage2).whole_sequence(stage2.Tensor), build(stage3).whole_sequence(stage3.Tensor)
    runs = None
    for n in (2, 3, 1, CFG.sequence_len, 7):  # eager, capture, then replays at both ends and between
        with no_grad(stage3.Tensor):
            got = symbolic(ids[:n])
        want = eager(ids[:n])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
        runs = compiler.RUNS[0] if n == 1 else runs
    assert symbolic.step.plan is not None and compiler.RUNS[0] == runs
    with pytest.raises(ValueError, match="expected 1 to sequence_len=16 tokens, got 17"):
        symbolic(ids + [0])


def test_kv_cache_padded_chunk(stage2):
    """A chunk of 4 with 2 real tokens stores 2, and the next tokens continue from there."""
    T = stage2.Tensor
    model = build(stage2)
    idx = np.random.default_rng(9).integers(0, CFG.vocab_size, (1, 5))
    with T.no_grad():
        full = model(T(idx)).numpy()
        cache = model.new_kv_cache(T, 1, 5)  # exactly the 5 real tokens: the padding needs no room
        padded = np.concatenate([idx[:, :2], np.full((1, 2), 7)], axis=1)
        first = model(T(padded), cache, n_valid=2).numpy()[:, :2]
        assert cache.pos == 2
        rest = model(T(idx[:, 2:]), cache).numpy()
        with pytest.raises(ValueError, match="n_valid"):
            model(T(idx[:, :2]), n_valid=1)
    np.testing.assert_allclose(np.concatenate([first, rest], 1), full, rtol=1e-5, atol=1e-5 * np.abs(full).max())


def test_kv_cache_bounds_and_replicate(stage2):
    T = stage2.Tensor
    model = build(stage2)
    idx = np.random.default_rng(3).integers(0, CFG.vocab_size, (1, 5))
    with T.no_grad():
        cache = model.new_kv_cache(T, 1, 6)
        first = model(T(idx[:, :4]), cache).numpy()
        wide = cache.replicate(3)
        assert wide.pos == 4 and wide.k[0].shape == (3, CFG.n_kv_head, 6, CFG.head_dim)
        nxt = model(T(np.repeat(idx[:, 4:5], 3, axis=0)), wide).numpy()  # every row continues the same prompt
        full = model(T(idx)).numpy()
        with pytest.raises(ValueError, match="overflow max_len 6"):
            model(T(np.zeros((3, 2), dtype=np.int64)), wide)
        with pytest.raises(ValueError, match="batch 2 does not match"):
            model(T(np.zeros((2, 1), dtype=np.int64)), wide)
        with pytest.raises(ValueError, match="only a batch-1 cache"):
            wide.replicate(2)
    np.testing.assert_allclose(first, full[:, :4], rtol=1e-5, atol=1e-5)
    for row in nxt:
        np.testing.assert_allclose(row, full[0, 4:5], rtol=1e-5, atol=1e-5)
    assert isinstance(cache, KVCache)


def test_gqa_reads_kv_head_of_its_group(stage2):
    """A 2-kv-head model equals a 4-kv-head model whose k/v heads are each kv head repeated for its group."""
    gqa = random_state(CFG, seed=4)
    mha_cfg = NanoChatConfig(**{**CFG.__dict__, "n_kv_head": CFG.n_head})
    mha = dict(gqa)
    D, groups = CFG.head_dim, CFG.n_head // CFG.n_kv_head
    for name, w in gqa.items():
        if name.endswith(("c_k.weight", "c_v.weight")):
            heads = w.reshape(CFG.n_kv_head, D, CFG.n_embd)
            mha[name] = np.repeat(heads, groups, axis=0).reshape(CFG.n_head * D, CFG.n_embd)
    idx = np.random.default_rng(4).integers(0, CFG.vocab_size, (2, 10))
    T = stage2.Tensor
    a = build(stage2, weights=gqa)(T(idx)).numpy()
    b = build(stage2, mha_cfg, weights=mha)(T(idx)).numpy()
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert build(stage2, weights=gqa).transformer.h[0].attn.c_k.weight.shape == (CFG.n_kv_head * D, CFG.n_embd)


def test_loss_ignores_minus_one_targets(stage2):
    T = stage2.Tensor
    model = build(stage2)
    rng = np.random.default_rng(5)
    idx = rng.integers(0, CFG.vocab_size, (2, 8))
    targets = rng.integers(0, CFG.vocab_size, (2, 8))
    targets[0, :5] = -1
    targets[1, 6:] = -1
    logits = model(T(idx)).numpy().astype(np.float64)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    keep = targets != -1
    expected = -logp[keep, targets[keep]].mean()
    assert math.isclose(model.loss(T(idx), T(targets)).item(), expected, rel_tol=1e-5)
    other = targets.copy()
    other[~keep] = -1
    other[0, 0] = 3  # un-ignoring one position changes the loss
    assert not math.isclose(model.loss(T(idx), T(other)).item(), expected, rel_tol=1e-5)


def test_softcap_bounds_logits(stage2):
    weights = random_state(CFG, seed=6)
    weights["lm_head.weight"] = weights["lm_head.weight"] * 1000.0
    T = stage2.Tensor
    idx = np.random.default_rng(6).integers(0, CFG.vocab_size, (2, 8))
    logits = build(stage2, weights=weights)(T(idx)).numpy()
    assert np.abs(logits).max() <= SOFTCAP
    assert np.abs(logits).max() > 0.99 * SOFTCAP  # the cap is reached, not avoided


def test_init_zero_head_uniform_logits(stage2):
    T = stage2.Tensor
    T.manual_seed(0)
    model = NanoChat(stage2, CFG)
    assert not model.lm_head.weight.numpy().any()
    assert not model.transformer.h[0].attn.c_proj.weight.numpy().any()
    assert not model.transformer.h[1].mlp.c_proj.weight.numpy().any()
    assert abs(model.transformer.wte.weight.numpy().std() - 1.0) < 0.1  # N(0, 1) embedding
    fc = model.transformer.h[0].mlp.c_fc.weight.numpy()  # (4C, C): std 1/sqrt(C) * min(1, sqrt(4))
    assert abs(fc.std() - 1 / math.sqrt(CFG.n_embd)) < 0.1 / math.sqrt(CFG.n_embd)
    idx = np.random.default_rng(7).integers(0, CFG.vocab_size, (2, 8))
    logits = model(T(idx)).numpy()
    assert not logits.any()
    assert math.isclose(model.loss(T(idx), T(idx)).item(), math.log(CFG.vocab_size), rel_tol=1e-6)
    assert model.num_params() == sum(w.size for w in random_state(CFG).values())
    assert "rotary" not in str(sorted(stage2.nn.state.get_state_dict(model)))  # tables are not weights


def train_steps(stage, steps=6, weights=None):
    T = stage.Tensor
    T.manual_seed(0)
    model = NanoChat(stage, CFG) if weights is None else build(stage, weights=weights)
    opt = model.optimizers(stage)
    rng = np.random.default_rng(8)
    data = rng.integers(0, CFG.vocab_size, (2, CFG.sequence_len + 1))
    x, y = T(data[:, :-1]), T(data[:, 1:])
    losses = []
    for step in range(steps):
        opt.lr = lr_multiplier(step, steps)
        loss = model.loss(x, y).realize()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def test_muon_adamw_lower_the_loss_stage2(stage2):
    losses = train_steps(stage2)
    assert math.isclose(losses[0], math.log(CFG.vocab_size), rel_tol=1e-5)
    assert losses[-1] < 0.8 * losses[0]
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False))


def test_muon_adamw_lower_the_loss_stage3(stage2, stage3):
    losses = train_steps(stage3)
    np.testing.assert_allclose(losses, train_steps(stage2), rtol=1e-4)  # the same run as stage2's


def test_tiny_logits_train_on_stage3_as_on_stage2(stage2, stage3):
    """The head a zero init leaves after its first small updates: logits of 1e-7 and less, where the
    soft-cap's tanh is about the identity. stage3 once differentiated tanh through its formula,
    whose e^t - 1 divides by log(e^t) = 0 at tiny t: the logits' gradient was NaN and
    `sitp nanochat --stage 3` stopped at step 2. Now the same steps give stage2's losses."""
    weights = random_state(CFG, 3)
    weights["lm_head.weight"] = weights["lm_head.weight"] * np.float32(1e-6)
    losses = train_steps(stage3, steps=3, weights=weights)
    assert all(math.isfinite(v) for v in losses), losses
    np.testing.assert_allclose(losses, train_steps(stage2, steps=3, weights=weights), rtol=1e-4)


def test_optimizer_groups_and_lrs(stage2):
    model = NanoChat(stage2, CFG)
    opt = model.optimizers(stage2, matrix_lr=0.02, embedding_lr=0.2, unembedding_lr=0.004)
    muon, emb, head = opt.optimizers
    assert type(muon).__name__ == "Muon" and len(muon.params) == 6 * CFG.n_layer
    assert emb.params[0] is model.transformer.wte.weight and head.params[0] is model.lm_head.weight
    assert (emb.b1, emb.b2) == (0.8, 0.95)
    scale = (CFG.n_embd / 768) ** -0.5
    opt.lr = 0.5
    assert opt.lr == 0.5
    assert [muon.lr, emb.lr, head.lr] == pytest.approx([0.01, 0.1 * scale, 0.002 * scale])


def test_lr_multiplier():
    values = [lr_multiplier(s, 10) for s in range(11)]
    assert values[:8] == [1.0] * 8
    assert values[8:] == pytest.approx([1.0, 0.5, 0.0])
    with pytest.raises(ValueError, match="warmdown"):
        lr_multiplier(0, 10, warmdown=1.5)


def test_from_depth():
    c = NanoChatConfig.from_depth(4, vocab_size=100, sequence_len=64)
    assert (c.n_layer, c.n_embd, c.n_head, c.n_kv_head, c.head_dim) == (4, 256, 4, 4, 64)
    c = NanoChatConfig.from_depth(20, vocab_size=100, sequence_len=64, head_dim=128)  # nanochat's d20
    assert (c.n_embd, c.n_head, c.head_dim) == (1280, 10, 128)
    c = NanoChatConfig.from_depth(3, vocab_size=100, sequence_len=64, head_dim=128)  # 192 wide: 2 heads of 96
    assert (c.n_head, c.head_dim) == (2, 96)
    with pytest.raises(ValueError, match="n_kv_head"):
        NanoChatConfig(n_head=4, n_kv_head=3, n_embd=32)
    with pytest.raises(ValueError, match="depth"):
        NanoChatConfig.from_depth(0, vocab_size=10, sequence_len=8)


def test_too_long_without_cache(stage2):
    model = NanoChat(stage2, CFG)
    with pytest.raises(ValueError, match="exceeds sequence_len 16"):
        model(stage2.Tensor(np.zeros((1, 17), dtype=np.int64)))
