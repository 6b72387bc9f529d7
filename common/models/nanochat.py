"""nanochat's GPT (Karpathy, late 2025), written on the Tensor API, with a shape-constant KV cache.

What differs from nanoGPT (common/models/gpt.py):
- no learned positions: rotary embeddings (half-split: the first and second half of each head's
  channels are the two coordinates of a pair rotated by angle pos * base^(-2i/head_dim), base 10,000);
- RMSNorm without weights (x / sqrt(mean(x^2) + eps)) after the token embedding, before attention,
  before the MLP and before the head; and on q and k after rotary (QK-norm);
- ReLU^2 MLP, no biases, grouped-query attention (n_kv_head key/value heads shared by n_head queries);
- untied embedding and lm_head; logits soft-capped as 15 * tanh(x / 15), in float32;
- nanochat's init: N(0, 1) embedding, linears N(0, 1/sqrt(fan_in) * min(1, sqrt(fan_out/fan_in))),
  lm_head and every c_proj zero (so the blocks start as the identity and the logits as uniform);
- Muon for the block matrices, AdamW (betas 0.8, 0.95) for the embedding and the head.

The KV cache (:class:`KVCache`) keeps per layer a (B, n_kv_head, max_len, head_dim) k and v. A
forward at position ``start_pos`` writes its keys at rows [start_pos, start_pos+T) (a pad to the
cache's length and a where, assigned in place) and attends over rows [0, start_pos+T). On an eager
stage ``start_pos`` is an int. On a stage with symbolic sizes and a TinyJit (stage3) a one-token
decode step is jitted with ``start_pos`` a bound ``Variable`` (tinygrad's llama does the same): the
slice ``[:start_pos+1]`` is one kernel for every position, and every step after the second replays
one capture with the new value, running no Python (the book's ``forward_jit``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np

from .layers import layers_of, named_tensors

Tensor = Any

SOFTCAP = 15.0
ROPE_BASE = 10_000.0
NORM_EPS = float(np.finfo(np.float32).eps)  # torch's F.rms_norm default (eps=None) for float32, as nanochat


@dataclass(frozen=True)
class NanoChatConfig:
    sequence_len: int = 256
    vocab_size: int = 4096
    n_layer: int = 4
    n_head: int = 4  # query heads
    n_kv_head: int = 4  # key/value heads (GQA when fewer than n_head)
    n_embd: int = 256

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"NanoChatConfig: n_embd {self.n_embd} must divide by n_head {self.n_head}")
        if not 1 <= self.n_kv_head <= self.n_head or self.n_head % self.n_kv_head:
            raise ValueError(f"NanoChatConfig: n_kv_head {self.n_kv_head} must divide n_head {self.n_head}")
        if (self.n_embd // self.n_head) % 2:
            raise ValueError(f"NanoChatConfig: head_dim {self.n_embd // self.n_head} must be even (rotary pairs)")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @classmethod
    def from_depth(cls, depth: int, vocab_size: int, sequence_len: int, head_dim: int = 64,
                   n_kv_head: int | None = None) -> NanoChatConfig:
        """nanochat's one dial: width 64 * depth, heads of about ``head_dim`` channels.

        nanochat asks for head_dim 128 (its models are 1280+ wide); our models are 64-512 wide,
        where 128 would leave one to four heads, so the default here is 64 (n_head = depth).
        When head_dim does not divide the width, the head count is the next one that does (so the
        real head_dim is a little smaller than asked). n_kv_head defaults to n_head (no GQA), as nanochat.
        """
        if depth < 1:
            raise ValueError(f"NanoChatConfig.from_depth: depth must be >= 1, got {depth}")
        n_embd = 64 * depth
        n_head = max(1, math.ceil(n_embd / head_dim))
        while n_embd % n_head or (n_embd // n_head) % 2:
            n_head += 1
        return cls(sequence_len=sequence_len, vocab_size=vocab_size, n_layer=depth, n_head=n_head,
                   n_kv_head=n_kv_head or n_head, n_embd=n_embd)


def rms_norm(x: Tensor) -> Tensor:
    """RMSNorm over the last axis, without weights."""
    return x * (x.square().mean(-1, keepdim=True) + NORM_EPS).rsqrt()


def rotary_tables(length: int, head_dim: int, base: float = ROPE_BASE) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin (length, head_dim/2), float32: angle pos * base^(-2i/head_dim) for pair i."""
    inv_freq = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)  # (D/2,)
    angles = np.outer(np.arange(length, dtype=np.float64), inv_freq)  # (length, D/2)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate channel pairs (i, i + D/2) of x (B, H, T, D) by the angles of cos/sin (T, D/2)."""
    d = x.shape[-1] // 2
    x1, x2 = x[..., :d], x[..., d:]  # (B, H, T, D/2) each
    y1 = x1 * cos + x2 * sin
    y2 = x2 * cos - x1 * sin
    return y1.cat(y2, dim=-1)  # (B, H, T, D)


class _Rotary:
    """The rotary tables, as numpy and as stage tensors (a forward slices the rows of its positions,
    no upload, so a jitted step may use them). Slots, no __dict__: the state-dict walkers skip it, so
    the tables are neither parameters nor saved (nanochat's persistent=False buffers)."""

    __slots__ = ("np_cos", "np_sin", "cos", "sin")

    def __init__(self, T: type, config: NanoChatConfig):
        # 10x the training length, as nanochat: a chat may run past sequence_len
        self.np_cos, self.np_sin = rotary_tables(10 * config.sequence_len, config.head_dim)
        self.cos = T(self.np_cos, requires_grad=False)  # (10 * sequence_len, D/2)
        self.sin = T(self.np_sin, requires_grad=False)

    def rows(self, start: Any, count: int) -> tuple[Tensor, Tensor]:
        """cos and sin of positions [start, start+count), clamped to the table (a padded chunk's
        padding rows may run past it: any angle will do there); start may be a bound Variable."""
        if isinstance(start, int) and start + count > len(self.np_cos):
            rows = np.minimum(np.arange(start, start + count), len(self.np_cos) - 1)
            T = type(self.cos)
            return T(self.np_cos[rows]), T(self.np_sin[rows])
        return self.cos[start:start + count], self.sin[start:start + count]


class KVCache:
    """Keys and values of every layer for positions [0, pos), in (B, n_kv_head, max_len, head_dim)
    tensors updated in place (see the module docstring). ``decode`` is a jitted one-token forward
    over this cache where the stage has a JIT (``make_decode(cache)`` builds it: NanoChat.new_kv_cache),
    else None."""

    def __init__(self, T: type, config: NanoChatConfig, batch_size: int, max_len: int, make_decode: Any = None):
        if batch_size < 1 or max_len < 1:
            raise ValueError(f"KVCache: batch_size and max_len must be >= 1, got {batch_size}, {max_len}")
        self.T, self.config, self.batch_size, self.max_len = T, config, batch_size, max_len
        shape = (batch_size, config.n_kv_head, max_len, config.head_dim)
        self.k = [T.zeros(*shape).contiguous() for _ in range(config.n_layer)]
        self.v = [T.zeros(*shape).contiguous() for _ in range(config.n_layer)]
        T.realize(*self.k, *self.v)
        self.pos = 0
        self.step: SimpleNamespace | None = None  # the current forward's position and rows (begin .. end)
        self.make_decode = make_decode
        self.decode = None if make_decode is None else make_decode(self)

    def begin(self, T_new: int, rotary: _Rotary, n_valid: int | None = None, start_pos: Any = None) -> SimpleNamespace:
        """What a forward of T_new tokens at offset pos needs: its rotary rows and, for more than one
        token, the attention mask (query pos+t sees keys <= pos+t). With ``n_valid`` only the first
        n_valid tokens are real (a prompt padded to a fixed chunk, so that a lazy stage compiles one
        prefill shape): the rest are neither stored nor counted, their logits mean nothing.
        ``start_pos``: the position as a bound Variable (a jitted decode step), else pos."""
        n = T_new if n_valid is None else n_valid
        if not 1 <= n <= T_new:
            raise ValueError(f"KVCache: n_valid must be in [1, {T_new}], got {n_valid}")
        self.check_room(n, rotary)
        p0, p1 = self.pos, self.pos + n
        pos = p0 if start_pos is None else start_pos
        cos, sin = rotary.rows(pos, T_new)
        mask = None
        if T_new > 1:
            mask = self.T(np.arange(p1)[None, :] <= np.arange(p0, p0 + T_new)[:, None])  # (T_new, p1)
        self.step = SimpleNamespace(pos=pos, n=n, cos=cos, sin=sin, mask=mask)
        return self.step

    def check_room(self, n: int, rotary: _Rotary) -> None:
        """n more tokens fit in the cache and in the rotary table."""
        p1 = self.pos + n
        if p1 > self.max_len:
            raise ValueError(f"KVCache: {n} new tokens at position {self.pos} overflow max_len {self.max_len}")
        if p1 > len(rotary.np_cos):
            raise ValueError(f"KVCache: position {p1} is past the rotary table ({len(rotary.np_cos)} rows)")

    def write(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store the real tokens of k, v (B, n_kv_head, T_new, D) at rows [pos, pos+n); return this
        layer's keys and values of rows [0, pos+n)."""
        s = self.step
        if s is None:
            raise RuntimeError("KVCache.write: begin() was not called for this forward")
        rows = ((0, 0), (0, 0), (s.pos, self.max_len - s.pos - s.n), (0, 0))
        inside = self.T.ones(1, 1, s.n, 1).pad(rows) > 0  # (1, 1, max_len, 1): the rows written
        for cache, new in ((self.k, k), (self.v, v)):
            updated = inside.where(new[:, :, :s.n].pad(rows), cache[layer])
            # in place where the stage can (a jitted step must write the buffers it captured)
            cache[layer] = cache[layer].assign(updated) if hasattr(cache[layer], "assign") else updated
        end = s.pos + s.n
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]

    def end(self) -> None:
        """Advance pos past the forward's tokens and realize the cache (a lazy stage must not keep
        a graph that grows by one step each token)."""
        self.advance(self.step.n)
        self.step = None
        self.T.realize(*self.k, *self.v)

    def advance(self, n: int) -> None:
        self.pos += n

    def replicate(self, batch_size: int) -> KVCache:
        """A cache of ``batch_size`` rows, each a copy of this batch-1 cache (prefill once, sample many)."""
        if self.batch_size != 1:
            raise ValueError(f"KVCache.replicate: only a batch-1 cache can be replicated, this one has "
                             f"{self.batch_size} rows")
        out = KVCache(self.T, self.config, batch_size, self.max_len, self.make_decode)
        for mine, theirs in ((out.k, self.k), (out.v, self.v)):
            for layer, t in enumerate(theirs):
                copied = t.expand(*mine[layer].shape)
                mine[layer] = mine[layer].assign(copied) if hasattr(mine[layer], "assign") else copied.contiguous()
        out.pos = self.pos
        self.T.realize(*out.k, *out.v)
        return out


class WholeSequence:
    """Next-token logits by running the whole sequence again, no cache (nanochat's GPT.generate): the
    baseline the KV cache is measured against. On a stage with symbolic sizes and a TinyJit the tokens
    sit in a buffer of sequence_len and their count is a bound Variable ``length``, so every length
    replays one capture: the same kernels, looping over ``length`` rows (and ``length`` x ``length``
    attention scores) wherever a concrete forward would loop over T."""

    def __init__(self, model: NanoChat, T: type):
        self.model, self.T = model, T
        jitted = model._jit is not None and model._variable is not None
        self.step = model._jit(self._last_logits) if jitted else None

    def __call__(self, ids: list[int]) -> np.ndarray:
        """(V,) float32 logits of the token after ``ids`` (batch 1)."""
        n, limit = len(ids), self.model.config.sequence_len
        if not 1 <= n <= limit:
            raise ValueError(f"WholeSequence: expected 1 to sequence_len={limit} tokens, got {n}")
        if self.step is None:
            return self.model(self.T(np.asarray([ids], dtype=np.int64))).numpy()[0, -1]
        tokens = np.zeros((1, limit), dtype=np.int64)
        tokens[0, :n] = ids
        length = self.model._variable("length", 1, limit).bind(n)
        return self.step(self.T(tokens), length).numpy()[0]

    def _last_logits(self, tokens: Tensor, length: Any) -> Tensor:
        """(1, V): the logits at row length-1 of a forward over tokens[:, :length]."""
        return self.model(tokens[:, :length])[:, length - 1]


def _repeat_kv(x: Tensor, groups: int) -> Tensor:
    """(B, Hkv, S, D) -> (B, Hkv*groups, S, D): query head h reads kv head h // groups (GQA)."""
    if groups == 1:
        return x
    B, H, S, D = x.shape
    return x.reshape(B, H, 1, S, D).expand(B, H, groups, S, D).reshape(B, H * groups, S, D)


class CausalSelfAttention:
    def __init__(self, nn: Any, config: NanoChatConfig, layer_idx: int):
        self.layer_idx = layer_idx
        self.n_head, self.n_kv_head, self.head_dim = config.n_head, config.n_kv_head, config.head_dim
        C = config.n_embd
        self.c_q = nn.Linear(C, self.n_head * self.head_dim, bias=False)
        self.c_k = nn.Linear(C, self.n_kv_head * self.head_dim, bias=False)
        self.c_v = nn.Linear(C, self.n_kv_head * self.head_dim, bias=False)
        self.c_proj = nn.Linear(C, C, bias=False)

    def __call__(self, x: Tensor, cos: Tensor, sin: Tensor, kv_cache: KVCache | None) -> Tensor:
        B, T, C = x.shape
        q = self.c_q(x).reshape(B, T, self.n_head, self.head_dim).transpose(1, 2)  # (B, H, T, D)
        k = self.c_k(x).reshape(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)  # (B, Hkv, T, D)
        v = self.c_v(x).reshape(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)  # (B, Hkv, T, D)
        q, k = rms_norm(apply_rotary(q, cos, sin)), rms_norm(apply_rotary(k, cos, sin))  # QK-norm after rotary
        groups = self.n_head // self.n_kv_head
        if kv_cache is None:
            k, v = _repeat_kv(k, groups), _repeat_kv(v, groups)
            y = q.scaled_dot_product_attention(k, v, is_causal=True)  # (B, H, T, D)
        else:
            k, v = kv_cache.write(self.layer_idx, k, v)  # (B, Hkv, pos+n, D): every key so far
            k, v = _repeat_kv(k, groups), _repeat_kv(v, groups)
            y = q.scaled_dot_product_attention(k, v, attn_mask=kv_cache.step.mask)  # (B, H, T, D)
        y = y.transpose(1, 2).reshape(B, T, C)  # heads side by side again
        return self.c_proj(y)


class MLP:
    def __init__(self, nn: Any, config: NanoChatConfig):
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=False)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=False)

    def __call__(self, x: Tensor) -> Tensor:
        return self.c_proj(self.c_fc(x).relu().square())  # ReLU^2


class Block:
    def __init__(self, nn: Any, config: NanoChatConfig, layer_idx: int):
        self.attn = CausalSelfAttention(nn, config, layer_idx)
        self.mlp = MLP(nn, config)

    def __call__(self, x: Tensor, cos: Tensor, sin: Tensor, kv_cache: KVCache | None) -> Tensor:
        x = x + self.attn(rms_norm(x), cos, sin, kv_cache)
        return x + self.mlp(rms_norm(x))


class NanoChat:
    def __init__(self, stage: ModuleType, config: NanoChatConfig):
        nn = layers_of(stage)
        self.config = config
        self.transformer = SimpleNamespace(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            h=[Block(nn, config, i) for i in range(config.n_layer)],
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self._init_weights(stage.Tensor)
        self.rotary = _Rotary(stage.Tensor, config)
        # a stage with symbolic sizes and a JIT decodes one token a step by replaying one capture
        self._jit, self._variable = getattr(stage, "TinyJit", None), getattr(stage, "Variable", None)

    def _init_weights(self, T: type) -> None:
        """nanochat's init (see the module docstring), replacing the layers' default weights."""
        for name, t in named_tensors(self).items():
            owner_path, _, attr = name.rpartition(".")
            owner = _resolve(self, owner_path)
            if name == "transformer.wte.weight":
                new = T.normal(*t.shape, mean=0.0, std=1.0, requires_grad=True)
            elif name == "lm_head.weight" or owner_path.endswith("c_proj"):
                new = T.zeros(*t.shape, requires_grad=True)
            else:
                fan_out, fan_in = t.shape
                std = 1.0 / math.sqrt(fan_in) * min(1.0, math.sqrt(fan_out / fan_in))
                new = T.normal(*t.shape, mean=0.0, std=std, requires_grad=True)
            setattr(owner, attr, new)

    def num_params(self) -> int:
        """Every parameter, the embedding included (nanochat counts them all)."""
        return sum(t.numel() for t in named_tensors(self).values())

    def __call__(self, idx: Tensor, kv_cache: KVCache | None = None, n_valid: int | None = None) -> Tensor:
        """idx (B, T) int -> logits (B, T, vocab_size) float32. With ``kv_cache`` the tokens sit at
        positions [pos, pos+T) after the cached ones, whose keys and values are reused; ``n_valid``
        marks only the first n_valid of them as real (see :meth:`KVCache.begin`). One token with a
        cache that has a jitted ``decode`` runs that (the same forward, replayed)."""
        if kv_cache is not None and kv_cache.decode is not None and idx.shape[1] == 1 and n_valid is None:
            if idx.shape[0] != kv_cache.batch_size:
                raise ValueError(f"NanoChat: batch {idx.shape[0]} does not match the KV cache's "
                                 f"{kv_cache.batch_size} rows")
            kv_cache.check_room(1, self.rotary)
            start_pos = self._variable("start_pos", 0, kv_cache.max_len - 1).bind(kv_cache.pos)
            logits = kv_cache.decode(idx, start_pos=start_pos)
            kv_cache.advance(1)
            return logits
        return self._forward(idx, kv_cache, n_valid)

    def _decode(self, kv_cache: KVCache, idx: Tensor, start_pos: Any) -> Tensor:
        """A one-token step at position start_pos (a bound Variable): what a cache's decode jits."""
        return self._forward(idx, kv_cache, None, start_pos, end=False)

    def _make_decode(self, kv_cache: KVCache) -> Any:
        return self._jit(functools.partial(self._decode, kv_cache))

    def _forward(self, idx: Tensor, kv_cache: KVCache | None, n_valid: int | None, start_pos: Any = None,
                 end: bool = True) -> Tensor:
        B, T = idx.shape
        if kv_cache is None:
            if n_valid is not None:
                raise ValueError("NanoChat: n_valid only applies to a forward with a KV cache")
            if T > self.config.sequence_len:
                raise ValueError(f"NanoChat: sequence length {T} exceeds sequence_len {self.config.sequence_len} "
                                 "(use a KV cache to go further)")
            cos, sin = self.rotary.cos[:T], self.rotary.sin[:T]  # (T, D/2)
        else:
            if B != kv_cache.batch_size:
                raise ValueError(f"NanoChat: batch {B} does not match the KV cache's {kv_cache.batch_size} rows")
            step = kv_cache.begin(T, self.rotary, n_valid, start_pos)
            cos, sin = step.cos, step.sin  # (T, D/2), rows [pos, pos+T)
        x = rms_norm(self.transformer.wte(idx))  # (B, T, C)
        for block in self.transformer.h:
            x = block(x, cos, sin, kv_cache)
        logits = self.lm_head(rms_norm(x)).float()  # (B, T, vocab_size), float32 for the cap and the loss
        logits = (logits * (1 / SOFTCAP)).tanh() * SOFTCAP
        if kv_cache is not None and end:
            kv_cache.end()
        return logits

    def loss(self, idx: Tensor, targets: Tensor) -> Tensor:
        """Mean cross-entropy of the next token over the targets that are not -1 (SFT masks with -1)."""
        return self(idx).sparse_categorical_crossentropy(targets, ignore_index=-1)

    def new_kv_cache(self, T: type, batch_size: int, max_len: int) -> KVCache:
        jitted = self._jit is not None and self._variable is not None  # a stage with symbolic sizes and a JIT
        return KVCache(T, self.config, batch_size, max_len, self._make_decode if jitted else None)

    def whole_sequence(self, T: type) -> WholeSequence:
        return WholeSequence(self, T)

    def param_groups(self) -> tuple[list[Tensor], list[Tensor], list[Tensor]]:
        """(block matrices, [embedding], [lm_head]): nanochat's three optimizer groups."""
        matrices = list(named_tensors(self.transformer.h).values())
        return matrices, [self.transformer.wte.weight], [self.lm_head.weight]

    def optimizers(self, stage: ModuleType, matrix_lr: float = 0.02, embedding_lr: float = 0.2,
                   unembedding_lr: float = 0.004, weight_decay: float = 0.0) -> Any:
        """Muon (momentum 0.95, nesterov) for the block matrices, AdamW (betas 0.8, 0.95, eps 1e-10) for
        the embedding and the head, as one ParamGroups whose per-group scales are the base lrs, so its
        ``lr`` is the schedule's multiplier (1.0: every group at its own rate).
        As nanochat, the AdamW lrs are scaled by (n_embd / 768)^-0.5 (they were tuned at width 768)."""
        from ..train.optimizers import ParamGroups  # here, not at the top: common.train imports the models

        optim = getattr(stage, "optim", None)
        if optim is None:
            raise RuntimeError(f"NanoChat.optimizers: {stage.__name__} has no optim (training needs autograd)")
        scale = (self.config.n_embd / 768) ** -0.5
        lrs = [matrix_lr, embedding_lr * scale, unembedding_lr * scale]
        matrices, embedding, head = self.param_groups()
        opts = [
            optim.Muon(matrices, lr=lrs[0], momentum=0.95, nesterov=True, weight_decay=0.0),
            optim.AdamW(embedding, lr=lrs[1], b1=0.8, b2=0.95, eps=1e-10, weight_decay=weight_decay),
            optim.AdamW(head, lr=lrs[2], b1=0.8, b2=0.95, eps=1e-10, weight_decay=weight_decay),
        ]
        return ParamGroups(opts, scales=lrs)



def random_state(config: NanoChatConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """Weights for every parameter name, drawn with numpy: nanochat's init stds, but lm_head and
    c_proj random too (std as the other linears), so that every weight shapes the output. For
    loading the same model into each stage, and for benchmarks of a model that is not trained."""
    rng = np.random.default_rng(seed)
    C, kv = config.n_embd, config.n_kv_head * config.head_dim
    shapes = {"transformer.wte.weight": (config.vocab_size, C)}
    for i in range(config.n_layer):
        p = f"transformer.h.{i}."
        shapes.update({p + "attn.c_q.weight": (C, C), p + "attn.c_k.weight": (kv, C), p + "attn.c_v.weight": (kv, C),
                       p + "attn.c_proj.weight": (C, C), p + "mlp.c_fc.weight": (4 * C, C),
                       p + "mlp.c_proj.weight": (C, 4 * C)})
    shapes["lm_head.weight"] = (config.vocab_size, C)
    out = {}
    for name, (fan_out, fan_in) in shapes.items():
        std = 1.0 if name == "transformer.wte.weight" else min(1.0, math.sqrt(fan_out / fan_in)) / math.sqrt(fan_in)
        out[name] = (rng.standard_normal((fan_out, fan_in)) * std).astype(np.float32)
    return out


def lr_multiplier(step: int, total: int, warmdown: float = 0.2) -> float:
    """nanochat's schedule as a factor of each group's lr: 1 until the last ``warmdown`` fraction of
    ``total`` steps, then linearly down to 0 at step ``total`` (final_lr_frac 0)."""
    if not 0 <= warmdown <= 1:
        raise ValueError(f"lr_multiplier: warmdown must be in [0, 1], got {warmdown}")
    if total < 1:
        raise ValueError(f"lr_multiplier: total must be >= 1, got {total}")
    n_down = round(warmdown * total)
    if step < total - n_down:
        return 1.0
    return max(total - step, 0) / max(n_down, 1)


def _resolve(obj: Any, dotted: str) -> Any:
    """The object at a dotted path of attributes and list indices ("transformer.h.0.attn")."""
    for part in dotted.split(".") if dotted else []:
        obj = obj[int(part)] if isinstance(obj, (list, tuple)) else getattr(obj, part)
    return obj
