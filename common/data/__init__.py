"""Data loaders: real data sets that install with packages, split by a seed, cached as .npz.

Every loader returns a :class:`Split` of numpy arrays (or text for ``load_vader_movie``), except
the language-model text: ``load_names`` gives :class:`Words` (names split train/val/test) and
``load_shakespeare`` gives :class:`Text` (a 90/10 character split), and so do the pretraining
texts of ``gutenberg`` (``load_gutenberg_shakespeare``, ``load_austen``, ``pretraining_text``);
``conversations`` gives chat conversations (lists of messages) and nanochat's mid/SFT splits.
"""

from .conversations import calculator_conversations, chat_splits, load_chatterbot, load_chitchat
from .digits import load_digits8x8, load_mnist5k
from .files import cache_dir
from .gutenberg import load_austen, load_gutenberg_shakespeare, pretraining_text
from .names import Words, load_names
from .regression import load_diabetes, load_housing
from .sentiment import load_vader_bow, load_vader_movie
from .shakespeare import Text, load_shakespeare
from .split import Split, make_split, split_indices

__all__ = [
    "Split",
    "Text",
    "Words",
    "cache_dir",
    "calculator_conversations",
    "chat_splits",
    "load_austen",
    "load_chatterbot",
    "load_chitchat",
    "load_diabetes",
    "load_digits8x8",
    "load_gutenberg_shakespeare",
    "load_housing",
    "load_mnist5k",
    "load_names",
    "load_shakespeare",
    "load_vader_bow",
    "load_vader_movie",
    "make_split",
    "pretraining_text",
    "split_indices",
]
