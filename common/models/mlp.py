"""The MLP language model of Bengio et al. 2003, as in makemore: predict the next character from
the previous ``block_size`` characters.

Each context character is looked up in an embedding table, the embeddings are concatenated into
one vector, a tanh hidden layer mixes them, and a linear layer gives the next character's logits.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .layers import layers_of

Tensor = Any


@dataclass(frozen=True)
class MLPConfig:
    vocab_size: int = 27
    block_size: int = 3  # characters of context
    n_embd: int = 16
    n_hidden: int = 128


class MLP:
    def __init__(self, stage: ModuleType, config: MLPConfig):
        nn = layers_of(stage)
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.hidden = nn.Linear(config.block_size * config.n_embd, config.n_hidden)
        self.lm_head = nn.Linear(config.n_hidden, config.vocab_size)

    def __call__(self, idx: Tensor) -> Tensor:
        """idx (B, block_size) int -> logits (B, vocab_size) for the character that follows."""
        B, T = idx.shape
        if T != self.config.block_size:
            raise ValueError(f"MLP: expected contexts (B, {self.config.block_size}), got {idx.shape}")
        x = self.wte(idx).reshape(B, T * self.config.n_embd)  # (B, T*n_embd): the concatenated context
        h = self.hidden(x).tanh()  # (B, n_hidden)
        return self.lm_head(h)  # (B, vocab_size)

    def loss(self, idx: Tensor, targets: Tensor) -> Tensor:
        """Mean cross-entropy of the next character; targets (B,) int."""
        return self(idx).sparse_categorical_crossentropy(targets)
