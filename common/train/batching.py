"""Turning data into training examples, and drawing random batches of them with a seeded numpy RNG.

Batches are drawn with replacement by a ``numpy.random.Generator`` the training loop owns and
saves in its checkpoints, so a resumed run draws exactly the batches the uninterrupted run
would have drawn. numpy is right here: this is the data side of the door into the stage.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..tokenizers import CharTokenizer

END = "."  # makemore's token that both starts the context and ends a name


def name_contexts(words: Sequence[str], tok: CharTokenizer, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (previous block_size characters -> next character) pair of every name, makemore style:
    the context starts as all END tokens, and the last target of a name is END.
    Returns x (N, block_size) int64 and y (N,) int64."""
    end = tok.stoi[END]
    xs, ys = [], []
    for word in words:
        context = [end] * block_size
        for target in [*tok.encode(word).tolist(), end]:
            xs.append(context)
            ys.append(target)
            context = [*context[1:], target]
    return np.array(xs, dtype=np.int64).reshape(-1, block_size), np.array(ys, dtype=np.int64)


def name_sequences(words: Sequence[str], tok: CharTokenizer, length: int) -> tuple[np.ndarray, np.ndarray]:
    """One row per name for the recurrent models: x = END + name, y = name + END, padded to
    ``length`` with x = END and y = -1 (ignored by the loss). Returns x, y (N, length) int64."""
    end = tok.stoi[END]
    x = np.full((len(words), length), end, dtype=np.int64)
    y = np.full((len(words), length), -1, dtype=np.int64)
    for row, word in enumerate(words):
        ids = tok.encode(word)
        if len(ids) + 1 > length:
            raise ValueError(f"name_sequences: {word!r} needs {len(ids) + 1} positions, length is {length}")
        x[row, 1:len(ids) + 1] = ids
        y[row, :len(ids)] = ids
        y[row, len(ids)] = end
    return x, y


class ArrayBatches:
    """Rows of parallel arrays x, y; a batch is ``batch_size`` rows drawn uniformly with replacement."""

    def __init__(self, x: np.ndarray, y: np.ndarray):
        if len(x) != len(y) or len(x) == 0:
            raise ValueError(f"ArrayBatches: need as many x rows as y rows, and at least one; got {len(x)}, {len(y)}")
        self.x, self.y = x, y

    def sample(self, rng: np.random.Generator, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        ix = rng.integers(0, len(self.y), size=batch_size)
        return self.x[ix], self.y[ix]


class TextBatches:
    """Windows of a token stream: x = ids[i:i+block], y = ids[i+1:i+1+block] (nanoGPT's get_batch)."""

    def __init__(self, ids: np.ndarray, block_size: int):
        if ids.ndim != 1 or len(ids) <= block_size:
            raise ValueError(f"TextBatches: need a 1-D stream longer than block_size {block_size}, got {ids.shape}")
        self.ids, self.block_size = ids.astype(np.int64, copy=False), block_size

    def sample(self, rng: np.random.Generator, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        start = rng.integers(0, len(self.ids) - self.block_size, size=batch_size)
        offsets = start[:, None] + np.arange(self.block_size)  # (B, block)
        return self.ids[offsets], self.ids[offsets + 1]
