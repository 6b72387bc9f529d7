"""GPT with nanoGPT's architecture (Karpathy's model.py, itself GPT-2), written on the Tensor API.

Token + learned position embeddings; n_layer pre-LayerNorm blocks (x + attn(ln_1(x)), then
x + mlp(ln_2(x))), each with a fused q/k/v projection (c_attn), causal scaled dot-product
attention, and a 4x MLP with exact GELU; a final LayerNorm; an lm_head whose weight is the token
embedding (tied). Init: N(0, 0.02) for every linear and embedding weight, zero biases, and the
residual projections (c_proj) N(0, 0.02 / sqrt(2 n_layer)), so the residual stream's variance
does not grow with depth. Parameter names match nanoGPT's (transformer.h.0.attn.c_attn.weight).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType, SimpleNamespace
from typing import Any

from .layers import layers_of, named_tensors

Tensor = Any


@dataclass(frozen=True)
class GPTConfig:
    block_size: int = 64
    vocab_size: int = 65
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = False  # biases in the linear layers and LayerNorms, as GPT-2 (nanoGPT's default True)


class CausalSelfAttention:
    def __init__(self, nn: Any, config: GPTConfig):
        if config.n_embd % config.n_head:
            raise ValueError(f"GPT: n_embd {config.n_embd} must divide by n_head {config.n_head}")
        self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)

    def __call__(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)  # each (B, T, C)
        q = q.reshape(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.reshape(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.reshape(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        dropout_p = self.dropout if type(x).training else 0.0
        y = q.scaled_dot_product_attention(k, v, dropout_p=dropout_p, is_causal=True)  # (B, nh, T, hs)
        y = y.transpose(1, 2).reshape(B, T, C)  # heads side by side again
        return self.resid_dropout(self.c_proj(y))


class MLP:
    def __init__(self, nn: Any, config: GPTConfig):
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def __call__(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.c_fc(x).gelu()))  # exact (erf) GELU, as nn.GELU()


class Block:
    def __init__(self, nn: Any, config: GPTConfig):
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(nn, config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(nn, config)

    def __call__(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT:
    def __init__(self, stage: ModuleType, config: GPTConfig):
        nn = layers_of(stage)
        self.config = config
        self.transformer = SimpleNamespace(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=[Block(nn, config) for _ in range(config.n_layer)],
            ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self._init_weights(stage.Tensor)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying: one tensor, two names

    def _init_weights(self, T: type) -> None:
        """nanoGPT's init: replace the layers' default weights by N(0, 0.02), c_proj by the scaled std."""
        proj_std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for name, t in named_tensors(self).items():
            layer, _, attr = name.rpartition(".")
            owner = _resolve(self, layer)
            if layer.rpartition(".")[2].startswith("ln_"):
                continue  # LayerNorms keep weight 1, bias 0
            if attr == "bias":
                new = T.zeros(*t.shape, requires_grad=True)
            else:
                std = proj_std if layer.endswith("c_proj") else 0.02
                new = T.normal(*t.shape, mean=0.0, std=std, requires_grad=True)
            setattr(owner, attr, new)

    def num_params(self, non_embedding: bool = True) -> int:
        """Parameter count, each tied tensor once; without the position embedding by default (nanoGPT)."""
        unique = {id(t): t for t in named_tensors(self).values()}
        n = sum(t.numel() for t in unique.values())
        return n - self.transformer.wpe.weight.numel() if non_embedding else n

    def __call__(self, idx: Tensor) -> Tensor:
        """idx (B, T) int, T <= block_size -> logits (B, T, vocab_size)."""
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"GPT: sequence length {T} exceeds block_size {self.config.block_size}")
        pos = type(idx).arange(T)  # (T,)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))  # (B, T, C)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        return self.lm_head(x)  # (B, T, vocab_size)

    def loss(self, idx: Tensor, targets: Tensor) -> Tensor:
        """Mean cross-entropy of the next token at every position; targets (B, T) int (-1 ignored)."""
        return self(idx).sparse_categorical_crossentropy(targets, ignore_index=-1)

    def optim_groups(self) -> tuple[list[Tensor], list[Tensor]]:
        """configure_optimizers' split: weight decay on tensors of 2+ dims (matmul weights and
        embeddings), none on biases and LayerNorm gains. Tied tensors appear once."""
        unique = {id(t): t for t in named_tensors(self).values()}
        decay = [t for t in unique.values() if t.ndim >= 2]
        no_decay = [t for t in unique.values() if t.ndim < 2]
        return decay, no_decay


def _resolve(obj: Any, dotted: str) -> Any:
    """The object at a dotted path of attributes and list indices ("transformer.h.0.attn")."""
    for part in dotted.split(".") if dotted else []:
        obj = obj[int(part)] if isinstance(obj, (list, tuple)) else getattr(obj, part)
    return obj
