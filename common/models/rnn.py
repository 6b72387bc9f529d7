"""Character-level recurrent models, as in makemore: a vanilla (Elman) RNN and an LSTM.

Both read a sequence one character at a time, carry a hidden state from step to step, and give
logits for the next character at every position. The first hidden state is a learned parameter
(``start``), so the model learns how a name begins. Targets of -1 mark padding and count for
nothing in the loss (names have different lengths but share a batch).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .layers import layers_of

Tensor = Any


@dataclass(frozen=True)
class RNNConfig:
    vocab_size: int = 27
    n_embd: int = 16
    n_hidden: int = 64
    cell: str = "rnn"  # "rnn" or "lstm"


class RNNCell:
    """h' = tanh(W [x, h] + b): one linear layer over the input and the previous state."""

    def __init__(self, nn: Any, n_embd: int, n_hidden: int):
        self.xh_to_h = nn.Linear(n_embd + n_hidden, n_hidden)

    def __call__(self, x: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        (h,) = state
        return (self.xh_to_h(x.cat(h, dim=1)).tanh(),)  # (B, n_hidden)


class LSTMCell:
    """Hochreiter & Schmidhuber 1997 with a forget gate: the four gates come from one linear layer
    over [x, h], in the order input, forget, cell candidate, output (torch's order)."""

    def __init__(self, nn: Any, n_embd: int, n_hidden: int):
        self.xh_to_gates = nn.Linear(n_embd + n_hidden, 4 * n_hidden)

    def __call__(self, x: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        h, c = state
        i, f, g, o = self.xh_to_gates(x.cat(h, dim=1)).chunk(4, dim=1)  # each (B, n_hidden)
        c = f.sigmoid() * c + i.sigmoid() * g.tanh()
        h = o.sigmoid() * c.tanh()
        return h, c


class RNN:
    def __init__(self, stage: ModuleType, config: RNNConfig):
        if config.cell not in ("rnn", "lstm"):
            raise ValueError(f"RNN: cell must be 'rnn' or 'lstm', got {config.cell!r}")
        nn = layers_of(stage)
        T = stage.Tensor
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        n_state = 1 if config.cell == "rnn" else 2  # (h,) or (h, c)
        self.start = T.zeros(n_state, config.n_hidden, requires_grad=True)
        cell = RNNCell if config.cell == "rnn" else LSTMCell
        self.cell = cell(nn, config.n_embd, config.n_hidden)
        self.lm_head = nn.Linear(config.n_hidden, config.vocab_size)

    def __call__(self, idx: Tensor) -> Tensor:
        """idx (B, T) int -> logits (B, T, vocab_size); position t sees characters 0..t."""
        B, T = idx.shape
        emb = self.wte(idx)  # (B, T, n_embd)
        H = self.config.n_hidden
        state = tuple(self.start[i:i + 1].expand(B, H) for i in range(self.start.shape[0]))
        hs = []
        for t in range(T):
            state = self.cell(emb[:, t], state)
            hs.append(state[0])
        h = hs[0].stack(*hs[1:], dim=1)  # (B, T, n_hidden)
        return self.lm_head(h)  # (B, T, vocab_size)

    def loss(self, idx: Tensor, targets: Tensor) -> Tensor:
        """Mean cross-entropy over the positions whose target is not -1; targets (B, T) int."""
        return self(idx).sparse_categorical_crossentropy(targets, ignore_index=-1)
