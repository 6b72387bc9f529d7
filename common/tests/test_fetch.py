"""The install step `python -m common.data.fetch` and the loader's clear error without it.

No network: pip is replaced by a stub that records its command line."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from common.data import fetch, load_vader_bow, load_vader_movie
from common.data.sentiment import vader_sdist_path


def test_missing_sdist_names_the_fix(empty_cache):
    for loader in (load_vader_movie, load_vader_bow):
        with pytest.raises(RuntimeError, match=r"python -m common\.data\.fetch"):
            loader(seed=0)


def test_fetch_calls_pip_download_once(empty_cache, monkeypatch):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, check: calls.append(cmd))
    with pytest.raises(RuntimeError, match="missing"):
        fetch.fetch_vader()
    (cmd,) = calls
    assert cmd[1:4] == ["-m", "pip", "download"]
    assert "--no-deps" in cmd and "--no-binary=:all:" in cmd and "vaderSentiment==3.3.2" in cmd
    assert cmd[cmd.index("-d") + 1] == str(empty_cache / "downloads")


def test_fetch_rejects_a_corrupt_sdist(empty_cache, monkeypatch):
    monkeypatch.setattr(subprocess, "run", lambda cmd, check: pytest.fail("must not download again"))
    path = vader_sdist_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"truncated")
    with pytest.raises(RuntimeError, match="sha256"):
        fetch.fetch_vader()


def test_fetch_keeps_a_good_sdist(vader_fetched, empty_cache, monkeypatch):
    monkeypatch.setattr(subprocess, "run", lambda cmd, check: pytest.fail("must not download again"))
    vader_sdist_path().parent.mkdir(parents=True)
    shutil.copy(vader_fetched, vader_sdist_path())
    assert fetch.fetch_vader() == vader_sdist_path()
    assert load_vader_movie(seed=0).sizes[0] > 8000
