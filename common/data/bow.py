"""Bag-of-words features that we compute ourselves: tokenizer, vocabulary, document vectors."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

# words, numbers and contractions ("don't", "film's"); everything else separates tokens
TOKEN_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def tokenize(text: str) -> list[str]:
    """Lowercase and split into word tokens."""
    return TOKEN_RE.findall(text.lower())


@dataclass(frozen=True)
class Vocabulary:
    """Words in a fixed order; ``index[word]`` is the feature column."""

    words: tuple[str, ...]
    index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "index", {w: i for i, w in enumerate(self.words)})

    def __len__(self) -> int:
        return len(self.words)


def build_vocabulary(texts: Iterable[str], min_count: int = 2, max_size: int | None = None) -> Vocabulary:
    """Words seen at least ``min_count`` times, the most frequent ``max_size`` of them.

    Ties are broken alphabetically so the vocabulary is the same on every run.
    Build it from the training texts only, so val/test words never leak into the features.
    """
    if min_count < 1:
        raise ValueError(f"build_vocabulary: min_count must be >= 1, got {min_count}")
    counts = Counter(tok for text in texts for tok in tokenize(text))
    ranked = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    if max_size is not None:
        ranked = ranked[:max_size]
    return Vocabulary(tuple(ranked))


def featurize(texts: Sequence[str], vocab: Vocabulary, binary: bool = True) -> np.ndarray:
    """(len(texts), len(vocab)) float32: 1/0 presence if ``binary`` else token counts.

    Out-of-vocabulary tokens are dropped.
    """
    out = np.zeros((len(texts), len(vocab)), dtype=np.float32)
    for row, text in enumerate(texts):
        for tok in tokenize(text):
            col = vocab.index.get(tok)
            if col is not None:
                out[row, col] = 1.0 if binary else out[row, col] + 1.0
    return out
