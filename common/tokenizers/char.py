"""Character tokenizer: one id per distinct character of the training text, in sorted order.

Sorted order makes the vocabulary a function of the character set alone, so the same text
always gives the same ids. ``specials`` (e.g. the "." that ends a name in makemore) come first.
The vocabulary is saved as a string (``chars``) so a checkpoint can carry it.
"""

from __future__ import annotations

import numpy as np


class CharTokenizer:
    def __init__(self, chars: str) -> None:
        if len(set(chars)) != len(chars):
            raise ValueError(f"CharTokenizer: the vocabulary has repeated characters: {chars!r}")
        if not chars:
            raise ValueError("CharTokenizer: the vocabulary is empty")
        self.chars = chars
        self.stoi = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text: str, specials: str = "") -> CharTokenizer:
        """The vocabulary of ``text``: ``specials`` first, then its other characters sorted."""
        return cls(specials + "".join(sorted(set(text) - set(specials))))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """str -> int64 ids; a character outside the vocabulary raises ValueError."""
        try:
            return np.fromiter((self.stoi[c] for c in text), dtype=np.int64, count=len(text))
        except KeyError as e:
            raise ValueError(f"CharTokenizer.encode: character {e.args[0]!r} is not in the vocabulary "
                             f"of {self.vocab_size} characters") from None

    def decode(self, ids) -> str:
        """Ids (any int sequence or array) -> str; an id outside [0, vocab_size) raises IndexError."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise IndexError(f"CharTokenizer.decode: ids must lie in [0, {self.vocab_size}), "
                             f"got values in [{ids.min()}, {ids.max()}]")
        return "".join(self.chars[i] for i in ids.tolist())
