"""Reference for common/models/mlp.py: embedding, concatenated context, tanh hidden layer, logits."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    def __init__(self, vocab_size: int, block_size: int, n_embd: int, n_hidden: int):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.hidden = nn.Linear(block_size * n_embd, n_hidden)
        self.lm_head = nn.Linear(n_hidden, vocab_size)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx).flatten(1)  # (B, block_size * n_embd)
        return self.lm_head(torch.tanh(self.hidden(x)))

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self(idx), targets)
