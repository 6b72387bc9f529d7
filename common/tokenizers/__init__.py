"""Tokenizers: text to integer ids and back."""

from .bpe import BPE, GPT2_PATTERN, GPT4_PATTERN, NANOCHAT_SPECIALS
from .char import CharTokenizer

__all__ = ["BPE", "GPT2_PATTERN", "GPT4_PATTERN", "NANOCHAT_SPECIALS", "CharTokenizer"]
