"""Tokenizers: text to integer ids and back."""

from .char import CharTokenizer

__all__ = ["CharTokenizer"]
