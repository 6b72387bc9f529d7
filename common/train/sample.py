"""Sampling from a language model: temperature, top-k, top-p (nucleus), and autoregressive generation.

The model runs on the stage; its last-position logits come out through ``.numpy()`` and the
categorical draw happens here with a seeded numpy Generator (sampling is a decision about the
model's output, not a tensor computation the stage should own).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import numpy as np


def next_token_probs(logits: np.ndarray, temperature: float = 1.0, top_k: int | None = None,
                     top_p: float | None = None) -> np.ndarray:
    """logits (B, V) -> probabilities (B, V) after dividing by ``temperature`` and keeping only the
    ``top_k`` largest logits of each row (ties at the k-th value are kept, as nanoGPT's ``<`` test),
    then only the nucleus of ``top_p``: the most probable tokens, fewest first, whose probabilities
    reach ``top_p`` together (the most probable token always stays), renormalized."""
    if temperature <= 0:
        raise ValueError(f"sample: temperature must be > 0, got {temperature}")
    if top_p is not None and not 0 <= top_p <= 1:
        raise ValueError(f"sample: top_p must be in [0, 1], got {top_p}")
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim != 2:
        raise ValueError(f"sample: expected logits (B, V), got shape {logits.shape}")
    z = logits / temperature
    if top_k is not None:
        if not 1 <= top_k:
            raise ValueError(f"sample: top_k must be >= 1, got {top_k}")
        k = min(top_k, z.shape[1])
        kth = np.sort(z, axis=1)[:, -k][:, None]  # (B, 1) the k-th largest logit of each row
        z = np.where(z < kth, -np.inf, z)
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p = p / p.sum(axis=1, keepdims=True)
    if top_p is None or top_p >= 1:
        return p
    order = np.argsort(-p, axis=1, kind="stable")  # most probable first (ties in vocabulary order)
    ranked = np.take_along_axis(p, order, axis=1)
    before = np.cumsum(ranked, axis=1) - ranked  # the mass of the tokens ranked above each one
    keep = np.zeros_like(p, dtype=bool)
    np.put_along_axis(keep, order, before < top_p, axis=1)  # in while the nucleus is not yet full
    keep[np.arange(p.shape[0]), order[:, 0]] = True
    p = np.where(keep, p, 0.0)
    return p / p.sum(axis=1, keepdims=True)


def sample_next(logits: np.ndarray, rng: np.random.Generator, temperature: float = 1.0,
                top_k: int | None = None, top_p: float | None = None) -> np.ndarray:
    """One token id per row of logits (B, V), drawn from :func:`next_token_probs`."""
    p = next_token_probs(logits, temperature, top_k, top_p)
    return np.array([rng.choice(p.shape[1], p=row) for row in p], dtype=np.int64)


def generate(model: Any, Tensor: type, idx: np.ndarray, max_new_tokens: int, context: int | None,
             rng: np.random.Generator, temperature: float = 1.0, top_k: int | None = None) -> np.ndarray:
    """Append ``max_new_tokens`` sampled tokens to idx (B, T). ``model(x)`` gives (B, T, V) logits;
    the input is cropped to the last ``context`` tokens (the block size), as nanoGPT's generate."""
    idx = np.asarray(idx, dtype=np.int64)
    forward = PerShapeJit(model, Tensor)
    with no_grad(Tensor):
        for _ in range(max_new_tokens):
            window = idx if context is None else idx[:, -context:]
            logits = forward(Tensor(window)).numpy()[:, -1, :]  # (B, V) at the last position
            idx = np.concatenate([idx, sample_next(logits, rng, temperature, top_k)[:, None]], axis=1)
    return idx


def generate_names(model: Any, Tensor: type, end: int, count: int, rng: np.random.Generator,
                   block_size: int | None = None, max_len: int = 30, temperature: float = 1.0,
                   top_k: int | None = None) -> list[list[int]]:
    """``count`` names from a name model: start from the END token, stop at the next END.

    ``block_size`` set: an MLP that sees a fixed window of (B, block_size) ids and gives (B, V).
    ``block_size`` None: a sequence model that sees the whole prefix and gives (B, T, V)."""
    idx = np.full((count, block_size or 1), end, dtype=np.int64)
    done = np.zeros(count, dtype=bool)
    with no_grad(Tensor):
        for _ in range(max_len):
            if block_size is None:
                logits = model(Tensor(idx)).numpy()[:, -1, :]
            else:
                logits = model(Tensor(idx[:, -block_size:])).numpy()
            nxt = sample_next(logits, rng, temperature, top_k)
            nxt[done] = end
            idx = np.concatenate([idx, nxt[:, None]], axis=1)
            done |= nxt == end
            if done.all():
                break
    start = block_size or 1
    names = []
    for row in idx[:, start:].tolist():
        names.append(row[:row.index(end)] if end in row else row)
    return names


class PerShapeJit:
    """model(x) under the stage's JIT (stage3's TinyJit), one per input shape: the window grows
    a token at a time until it reaches the context, and from then on every call has one shape, so
    its kernels replay (a shape seen once is only run, never captured). Plain model(x) on a stage
    without a JIT, or with JIT=0."""

    def __init__(self, model: Any, Tensor: type):
        stage = importlib.import_module(Tensor.__module__.split(".")[0])
        self.jit = getattr(stage, "TinyJit", None) if os.environ.get("JIT", "1") != "0" else None
        self.model, self.by_shape = model, {}

    def __call__(self, x: Any) -> Any:
        if self.jit is None:
            return self.model(x)
        fn = self.by_shape.get(tuple(x.shape))
        if fn is None:
            fn = self.by_shape[tuple(x.shape)] = self.jit(lambda x: self.model(x))
        return fn(x)


class no_grad:
    """The stage's no-grad context where it has autograd; nothing to switch off otherwise."""

    def __init__(self, Tensor: type):
        self.ctx = Tensor.no_grad() if hasattr(Tensor, "no_grad") else None

    def __enter__(self) -> None:
        if self.ctx is not None:
            self.ctx.__enter__()

    def __exit__(self, *exc: Any) -> None:
        if self.ctx is not None:
            self.ctx.__exit__(*exc)


def sample_task(task: Any, model: Any, Tensor: type, rng: np.random.Generator, count: int = 10,
                tokens: int = 500, temperature: float = 1.0, top_k: int | None = None, prompt: str = "\n") -> str:
    """Text sampled from a zoo model: ``count`` names from the name models, ``tokens`` characters
    after ``prompt`` from nanogpt. The CNN is a classifier and has nothing to sample."""
    tok = task.tokenizer
    if tok is None:
        raise ValueError(f"sample: {task.name} is a classifier; only language models can be sampled")
    if task.name == "nanogpt":
        start = tok.encode(prompt or "\n")[None, :]
        out = generate(model, Tensor, start, tokens, task.config.block_size, rng, temperature, top_k)
        return tok.decode(out[0])
    block = task.config.block_size if task.name == "mlp" else None
    names = generate_names(model, Tensor, tok.stoi["."], count, rng, block, temperature=temperature, top_k=top_k)
    return "\n".join(tok.decode(n) for n in names)
