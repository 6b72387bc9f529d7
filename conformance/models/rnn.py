"""Reference for common/models/rnn.py: a vanilla RNN cell or an LSTM cell (gates i, f, g, o from one
linear layer over [x, h]) unrolled over time, learned start state, padding targets of -1 ignored."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RNNCell(nn.Module):
    def __init__(self, n_embd: int, n_hidden: int):
        super().__init__()
        self.xh_to_h = nn.Linear(n_embd + n_hidden, n_hidden)

    def forward(self, x, state):
        (h,) = state
        return (torch.tanh(self.xh_to_h(torch.cat([x, h], dim=1))),)


class LSTMCell(nn.Module):
    def __init__(self, n_embd: int, n_hidden: int):
        super().__init__()
        self.xh_to_gates = nn.Linear(n_embd + n_hidden, 4 * n_hidden)

    def forward(self, x, state):
        h, c = state
        i, f, g, o = self.xh_to_gates(torch.cat([x, h], dim=1)).chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class RNN(nn.Module):
    def __init__(self, vocab_size: int, n_embd: int, n_hidden: int, cell: str):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.start = nn.Parameter(torch.zeros(1 if cell == "rnn" else 2, n_hidden))
        self.cell = RNNCell(n_embd, n_hidden) if cell == "rnn" else LSTMCell(n_embd, n_hidden)
        self.lm_head = nn.Linear(n_hidden, vocab_size)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        B, T = idx.shape
        emb = self.wte(idx)
        state = tuple(s.expand(B, -1) for s in self.start.split(1))
        hs = []
        for t in range(T):
            state = self.cell(emb[:, t], state)
            hs.append(state[0])
        return self.lm_head(torch.stack(hs, dim=1))

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self(idx)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)
