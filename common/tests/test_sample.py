"""Sampling: top-k restricts the support to the k most likely tokens, top-p to the nucleus, temperature reshapes the
distribution as softmax(logits / T), draws follow the probabilities, bad arguments raise, and
generation from a model appends tokens on any stage."""

from __future__ import annotations

import numpy as np
import pytest

from common.train.sample import generate, generate_names, next_token_probs, sample_next

LOGITS = np.array([[2.0, 1.0, 0.5, -1.0, 3.0, 0.0], [0.0, 0.0, 5.0, 1.0, 1.0, -2.0]])


def test_top_k_restricts_support():
    rng = np.random.default_rng(0)
    for k in (1, 2, 3):
        draws = np.stack([sample_next(LOGITS, rng, top_k=k) for _ in range(300)])  # (300, 2)
        # the k largest logits, and any token tied with the k-th
        allowed = [set(np.flatnonzero(row >= np.sort(row)[-k]).tolist()) for row in LOGITS]
        for col in range(2):
            assert set(draws[:, col].tolist()) <= allowed[col]
        assert len(set(draws[:, 0].tolist())) == k  # and every allowed token does occur
    p = next_token_probs(LOGITS, top_k=2)
    assert (p > 0).sum(axis=1).tolist() == [2, 3]  # row 2 has a tie at the 2nd place: both kept
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert (next_token_probs(LOGITS, top_k=100) > 0).all()


def test_top_p_keeps_the_nucleus():
    p = next_token_probs(LOGITS)
    order = np.argsort(-p[0])  # row 0 by probability: tokens 4, 0, 1, 2, 5, 3
    for top_p in (0.0, 0.3, 0.6, 0.9, 0.999):
        q = next_token_probs(LOGITS, top_p=top_p)
        mass = np.cumsum(p[0][order])
        n = int(np.searchsorted(mass, top_p)) + 1 if top_p > 0 else 1  # fewest tokens reaching top_p
        assert set(np.flatnonzero(q[0]).tolist()) == set(order[:n].tolist())
        np.testing.assert_allclose(q[0][order[:n]], p[0][order[:n]] / p[0][order[:n]].sum(), rtol=1e-12)
        np.testing.assert_allclose(q.sum(axis=1), 1.0)
    np.testing.assert_array_equal(next_token_probs(LOGITS, top_p=1.0), p)
    both = next_token_probs(LOGITS, top_k=3, top_p=0.9)  # the nucleus of the top-k distribution
    assert set(np.flatnonzero(both[0]).tolist()) <= set(np.flatnonzero(next_token_probs(LOGITS, top_k=3)[0]))
    rng = np.random.default_rng(2)
    draws = {int(sample_next(LOGITS, rng, top_p=0.5)[0]) for _ in range(200)}
    assert draws == set(np.flatnonzero(next_token_probs(LOGITS, top_p=0.5)[0]).tolist())


def test_temperature():
    for t in (0.5, 1.0, 2.0):
        z = LOGITS / t
        expected = np.exp(z - z.max(1, keepdims=True))
        expected /= expected.sum(1, keepdims=True)
        np.testing.assert_allclose(next_token_probs(LOGITS, temperature=t), expected, rtol=1e-12)
    sharp, flat = next_token_probs(LOGITS, 0.1), next_token_probs(LOGITS, 10.0)
    assert sharp[0].max() > 0.99 and flat[0].max() < 0.25
    rng = np.random.default_rng(0)
    cold = [sample_next(LOGITS, rng, temperature=0.05)[0] for _ in range(100)]
    assert set(cold) == {4}  # near-greedy


def test_draws_follow_the_probabilities():
    rng = np.random.default_rng(1)
    p = next_token_probs(LOGITS[:1])[0]
    draws = np.array([sample_next(LOGITS[:1], rng)[0] for _ in range(4000)])
    freq = np.bincount(draws, minlength=6) / len(draws)
    assert np.abs(freq - p).max() < 0.03


def test_bad_arguments():
    with pytest.raises(ValueError, match="temperature"):
        next_token_probs(LOGITS, temperature=0)
    with pytest.raises(ValueError, match="top_k"):
        next_token_probs(LOGITS, top_k=0)
    with pytest.raises(ValueError, match="top_p"):
        next_token_probs(LOGITS, top_p=1.5)
    with pytest.raises(ValueError, match=r"\(B, V\)"):
        next_token_probs(LOGITS[0])


class Echo:
    """A fake language model on the stage's Tensor: always predicts (last token + 1) mod V."""

    def __init__(self, T: type, V: int, sequence: bool):
        self.T, self.V, self.sequence = T, V, sequence

    def __call__(self, idx):
        eye = np.eye(self.V)[(idx.numpy() + 1) % self.V] * 50.0  # (B, T, V)
        return self.T(eye if self.sequence else eye[:, -1])


def test_generate_on_stage1(Tensor):
    out = generate(Echo(Tensor, 5, True), Tensor, np.array([[0], [3]]), 4, context=2,
                   rng=np.random.default_rng(0), top_k=1)
    assert out.tolist() == [[0, 1, 2, 3, 4], [3, 4, 0, 1, 2]]
    names = generate_names(Echo(Tensor, 5, False), Tensor, end=0, count=2, rng=np.random.default_rng(0),
                           block_size=3, top_k=1)
    assert names == [[1, 2, 3, 4], [1, 2, 3, 4]]  # 0 -> 1 -> ... -> 4 -> 0 (the end token)


def test_generation_replays_the_same_tokens_on_stage3(monkeypatch):
    """stage3 samples through a TinyJit per window shape (sample.PerShapeJit): once the window is
    full every call has one shape and replays; the tokens are those of the eager model."""
    from common.models.gpt import GPT, GPTConfig
    from common.stages import load_stage

    s3 = load_stage(3)
    s3.Tensor.manual_seed(0)
    model = GPT(s3, GPTConfig(block_size=6, vocab_size=11, n_layer=1, n_head=2, n_embd=16, dropout=0.0))
    runs = []
    for jit in ("1", "0"):
        monkeypatch.setenv("JIT", jit)
        runs.append(generate(model, s3.Tensor, np.array([[1, 2]]), 12, context=6, rng=np.random.default_rng(5)))
    np.testing.assert_array_equal(runs[0], runs[1])
