"""The byte-level BPE: GPT-2's ranks give tiktoken's ids exactly; training is deterministic, matches a plain
Python oracle and round-trips; save/load keeps every id; bad input gets a clear error."""

from __future__ import annotations

import random
import shutil
import unicodedata
from collections import Counter
from pathlib import Path

import pytest
import regex
import tiktoken
from tiktoken.load import load_tiktoken_bpe

from common.data import load_shakespeare
from common.data.fetch import DOWNLOADS
from common.data.files import CACHE_ENV, download_path
from common.tokenizers import BPE, GPT2_PATTERN, GPT4_PATTERN, NANOCHAT_SPECIALS
from common.tokenizers.bpe import _merge, _merge_long
from common.tokenizers.bpe_train import count_chunks, train_merges, train_merges_reference
from common.tokenizers.gpt2 import gpt2_ranks_path

EOT = {"<|endoftext|>": 50256}
# Characters to draw random text from: scripts, marks, emoji, odd whitespace, other digits, contractions.
POOLS = ["abcXYZ", "0123456789", " \t\n\r", "'sltdmvreLL", ".,!?;:-()\"'<|>", "\xa0\u2028\u3000\x85\x0b\x0c\x1c\u200b",
         "".join(map(chr, range(0x300, 0x370))), "".join(map(chr, range(0x4E00, 0x4E40))),
         "".join(map(chr, range(0x1F600, 0x1F640))), "٣٤۵१२３４", "éüßøñЖя"]
LETTER_OR_DIGIT = regex.compile(r"[\p{L}\p{N}]")


def known_to_both(c: str) -> bool:
    """False for a letter or digit newer than Python's Unicode tables (14.0 on 3.11).

    The `regex` package and tiktoken's Rust regex each carry their own Unicode version (17.0 and
    16.0 today), so a code point assigned in between is a letter to us and a symbol to tiktoken;
    such characters split differently. We leave them out rather than pin either library's tables.
    """
    return not (unicodedata.category(c) == "Cn" and LETTER_OR_DIGIT.match(c))


def random_text(rng: random.Random, n: int, surrogates: bool = False) -> str:
    chars = []
    for _ in range(n):
        if rng.random() < 0.1:  # anywhere in Unicode, unassigned code points included
            c = chr(rng.randrange(0x110000))
            chars.append(c if (surrogates or not 0xD800 <= ord(c) < 0xE000) and known_to_both(c) else "?")
        else:
            chars.append(rng.choice(rng.choice(POOLS)))
    if surrogates:
        chars.insert(rng.randint(0, len(chars)), rng.choice(["\ud800", "\udfff", "\ud83d\ude00", "\ude00\ud83d"]))
    return "".join(chars)


@pytest.fixture(scope="module")
def ranks_path() -> Path:
    if not download_path(DOWNLOADS["whisper"].filename).is_file():
        pytest.skip("the openai-whisper sdist is not fetched: run `python -m common.data.fetch`")
    return gpt2_ranks_path()


@pytest.fixture(scope="module")
def gpt2(ranks_path: Path) -> BPE:
    return BPE.from_tiktoken_file(ranks_path, GPT2_PATTERN, EOT)


def oracle(ranks_path: Path, pattern: str = GPT2_PATTERN) -> tiktoken.Encoding:
    return tiktoken.Encoding(name="gpt2", pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(str(ranks_path)),
                             special_tokens=EOT)


@pytest.fixture(scope="module")
def tiktoken_gpt2(ranks_path: Path) -> tiktoken.Encoding:
    return oracle(ranks_path)


@pytest.fixture(scope="module")
def shakespeare():
    return load_shakespeare()


@pytest.fixture(scope="module")
def trained(shakespeare) -> BPE:
    return BPE.train([shakespeare.train[:300_000]], 1024)


# ---- GPT-2's ranks: tiktoken's ids ------------------------------------------------------------------

def test_gpt2_ranks_file_is_gpt2s(gpt2: BPE) -> None:
    assert gpt2.vocab_size == 50257 and gpt2.n_merges == 50000 and gpt2.bos_id == 50256


def test_gpt2_ranks_are_extracted_once_from_the_sdist(ranks_path: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    sdist = download_path(DOWNLOADS["whisper"].filename)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    (tmp_path / "downloads").mkdir()
    shutil.copy(sdist, tmp_path / "downloads" / sdist.name)
    fresh = gpt2_ranks_path()
    assert fresh == tmp_path / "tokenizers" / "gpt2.tiktoken"
    assert fresh.read_bytes() == ranks_path.read_bytes()
    assert [p.name for p in fresh.parent.iterdir()] == ["gpt2.tiktoken"]  # no temp file left behind


def test_gpt2_matches_tiktoken_on_shakespeare(gpt2: BPE, tiktoken_gpt2, shakespeare) -> None:
    text = shakespeare.val[:200_000]
    ids = gpt2.encode(text)
    assert ids == tiktoken_gpt2.encode(text)
    assert gpt2.decode(ids) == text


@pytest.mark.parametrize("pattern", [GPT2_PATTERN, GPT4_PATTERN], ids=["gpt2-split", "gpt4-split"])
def test_gpt2_ranks_match_tiktoken_on_random_unicode(ranks_path: Path, pattern: str) -> None:
    ours, theirs = BPE.from_tiktoken_file(ranks_path, pattern, EOT), oracle(ranks_path, pattern)
    rng = random.Random(0)
    for _ in range(1500):
        text = random_text(rng, rng.randint(0, 40), surrogates=rng.random() < 0.2)
        assert ours.encode(text) == theirs.encode(text), repr(text)


@pytest.mark.parametrize("text", [
    "", " ", "   \n\n  \t", "hello   world  \n", "\n\n\n", "a\r\n\r\nb", " \t \u3000 x", "1234567 89",
    "3.14159 and 2,718,281 0x1F 007", "don't I'LL we've they're 's", "x" + " " * 1000, "\n" * 600 + "end",
    "9" * 700, "ab" * 400, "é" * 300 + "😀" * 200,
], ids=repr)
def test_gpt2_matches_tiktoken_on_edge_text(gpt2: BPE, tiktoken_gpt2, text: str) -> None:
    ids = gpt2.encode(text)
    assert ids == tiktoken_gpt2.encode(text)
    assert gpt2.decode(ids) == text


def test_long_chunk_heap_merges_like_the_quadratic_loop(gpt2: BPE) -> None:
    rng = random.Random(1)
    for _ in range(200):
        alphabet = rng.choice([b" ", b"ab", b"the ", bytes(range(256)), "é😀".encode()])
        piece = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
        assert _merge_long(piece, gpt2.ranks) == _merge(piece, gpt2.ranks)


def test_specials_allowed_disallowed_and_as_text(gpt2: BPE, tiktoken_gpt2) -> None:
    text = "a<|endoftext|>b <|endoftext|><|endoftext|>"
    for kwargs in [dict(allowed_special="all"), dict(allowed_special={"<|endoftext|>"}),
                   dict(disallowed_special=())]:
        assert gpt2.encode(text, **kwargs) == tiktoken_gpt2.encode(text, **kwargs)
    assert gpt2.encode(text, allowed_special="all").count(50256) == 3
    assert 50256 not in gpt2.encode(text, disallowed_special=())
    assert gpt2.encode_ordinary(text) == tiktoken_gpt2.encode_ordinary(text)
    with pytest.raises(ValueError, match=r"<\|endoftext\|>"):
        gpt2.encode(text)
    with pytest.raises(ValueError, match="not special tokens"):
        gpt2.encode("x", allowed_special={"<|bos|>"})


def test_decode_replaces_invalid_utf8_as_tiktoken_does(gpt2: BPE, tiktoken_gpt2) -> None:
    rng = random.Random(2)
    for _ in range(300):
        ids = [rng.randrange(50257) for _ in range(rng.randint(0, 8))]
        assert gpt2.decode_bytes(ids) == tiktoken_gpt2.decode_bytes(ids)
        assert gpt2.decode(ids) == tiktoken_gpt2.decode(ids, errors="replace")


def test_surrogates_are_fixed_as_tiktoken_fixes_them(gpt2: BPE, tiktoken_gpt2) -> None:
    for text in ["\ud800", "a\udfffb", "\ud83d\ude00", "x\ude00\ud83d"]:
        assert gpt2.encode(text) == tiktoken_gpt2.encode(text)
    assert gpt2.decode(gpt2.encode("a\ud800b")) == "a\ufffdb"
    assert gpt2.decode(gpt2.encode("\ud83d\ude00")) == "😀"


def test_decode_rejects_ids_outside_the_vocab(gpt2: BPE) -> None:
    for bad in ([50257], [3, -1], [10**9]):
        with pytest.raises(ValueError, match=f"id {bad[-1]} is not in the vocabulary"):
            gpt2.decode(bad)


def test_special_lists_take_the_ids_after_the_ranks(ranks_path: Path) -> None:
    tok = BPE.from_tiktoken_file(ranks_path, GPT2_PATTERN, ["<|a|>", "<|b|>"])
    assert (tok.special_id("<|a|>"), tok.special_id("<|b|>"), tok.vocab_size) == (50256, 50257, 50258)
    with pytest.raises(KeyError, match="bos_id"):
        _ = tok.bos_id


# ---- training -----------------------------------------------------------------------------------------

def test_c_merge_loop_matches_the_python_oracle(shakespeare) -> None:
    chunks = count_chunks([shakespeare.train[:60_000]], GPT4_PATTERN)
    assert train_merges(chunks, 400) == train_merges_reference(chunks, 400)
    rng = random.Random(3)  # tiny alphabets: many ties and overlapping runs like "aaaa"
    for _ in range(100):
        alphabet = rng.choice([b"a", b"ab", b"aab", b"abc"])
        small = Counter({bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 10))): rng.randint(1, 4)
                         for _ in range(rng.randint(1, 20))})
        n = rng.randint(0, 40)
        assert train_merges(small, n) == train_merges_reference(small, n), small


def test_training_is_deterministic_and_specials_take_the_last_ids(trained: BPE, shakespeare) -> None:
    again = BPE.train(shakespeare.train[:300_000], 1024)  # a lone str is one text, not characters
    assert again.ranks == trained.ranks and again.special_tokens == trained.special_tokens
    assert trained.vocab_size == 1024 and trained.n_merges == 1024 - 256 - len(NANOCHAT_SPECIALS)
    assert [trained.special_id(name) for name in NANOCHAT_SPECIALS] == list(range(1015, 1024))
    assert trained.bos_id == 1015


def test_more_merges_give_fewer_tokens(trained: BPE, shakespeare) -> None:
    text = shakespeare.val[:50_000]
    smaller = BPE.train([shakespeare.train[:300_000]], 512)
    n_bytes, n_small, n_big = len(text.encode()), len(smaller.encode(text)), len(trained.encode(text))
    assert n_big < n_small < n_bytes
    assert trained.decode(trained.encode(text)) == text


def test_trained_ids_match_tiktoken_running_our_ranks(trained: BPE, shakespeare) -> None:
    twin = tiktoken.Encoding(name="ours", pat_str=trained.pattern, mergeable_ranks=trained.ranks,
                             special_tokens=trained.special_tokens)
    text = shakespeare.val[:50_000] + "<|user_start|>hi<|user_end|>"
    assert trained.encode(text, allowed_special="all") == twin.encode(text, allowed_special="all")
    rng = random.Random(5)
    for _ in range(300):
        text = random_text(rng, rng.randint(0, 40), surrogates=rng.random() < 0.2)
        assert trained.encode(text) == twin.encode(text), repr(text)


def test_trained_tokenizer_round_trips_random_unicode(trained: BPE) -> None:
    rng = random.Random(4)
    for _ in range(500):
        text = random_text(rng, rng.randint(0, 50))
        assert trained.decode(trained.encode(text, disallowed_special=())) == text


def test_save_load_round_trip(trained: BPE, tmp_path: Path, shakespeare) -> None:
    path = tmp_path / "tok" / "bpe.txt"
    trained.save(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "sitp-bpe 1" and lines[1].startswith("pattern ")
    loaded = BPE.load(path)
    assert (loaded.ranks, loaded.pattern, loaded.special_tokens) == (trained.ranks, trained.pattern,
                                                                    trained.special_tokens)
    text = shakespeare.val[:20_000] + "<|bos|>😀 \ud800"
    assert loaded.encode(text, allowed_special="all") == trained.encode(text, allowed_special="all")
    assert [p.name for p in path.parent.iterdir()] == ["bpe.txt"]  # the temp file was renamed away


def test_load_rejects_a_damaged_file(trained: BPE, tmp_path: Path) -> None:
    path = tmp_path / "bpe.txt"
    trained.save(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[:-3]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="BPE.load"):
        BPE.load(path)
    path.write_text("\n".join(["not-a-tokenizer"] + lines[1:]), encoding="utf-8")
    with pytest.raises(ValueError, match="sitp-bpe 1"):
        BPE.load(path)


def test_training_errors_are_clear(trained: BPE) -> None:
    with pytest.raises(ValueError, match="vocab_size=200"):
        BPE.train(["some text"], 200)
    with pytest.raises(TypeError, match="must yield str"):
        BPE.train([b"bytes"], 300)
    with pytest.raises(KeyError, match="<\\|nope\\|>"):
        trained.special_id("<|nope|>")


def test_training_stops_when_pairs_run_out() -> None:
    tok = BPE.train(["ab ab"], 1000, special_tokens=["<|bos|>"])
    # chunks "ab" and " ab": merges (a,b), then (" ", ab); then nothing is left to merge
    assert tok.n_merges == 2 and tok.vocab_size == 259 and tok.bos_id == 258
    assert tok.encode("ab ab") == [256, 257]
