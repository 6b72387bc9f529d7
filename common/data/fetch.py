"""The project's one install-time download: the vaderSentiment 3.3.2 source distribution.

The VADER movie-review snippets ship only in that sdist (not in the wheel), so this step asks
pip for it once and keeps it under ``$SITP_CACHE/downloads``. Run it as
``python -m common.data.fetch`` (nox runs it before the tests); loaders never download.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from .sentiment import FETCH_COMMAND, VADER_REQUIREMENT, vader_sdist_path

# sha256 of the sdist on PyPI; pins the data so every machine trains on the same sentences
VADER_SHA256 = "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_vader(quiet: bool = False) -> Path:
    """Download the sdist with pip unless it is already in the cache; check its hash."""
    path = vader_sdist_path()
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary=:all:",
            VADER_REQUIREMENT,
            "-d",
            str(path.parent),
        ]
        if quiet:
            cmd.append("--quiet")
        subprocess.run(cmd, check=True)
    if not path.is_file():
        raise RuntimeError(f"fetch: pip finished but {path} is missing")
    digest = _sha256(path)
    if digest != VADER_SHA256:
        raise RuntimeError(
            f"fetch: {path} has sha256 {digest}, expected {VADER_SHA256}; delete it and run `{FETCH_COMMAND}`"
        )
    return path


def main(argv: list[str] | None = None) -> int:
    path = fetch_vader(quiet="--quiet" in (argv if argv is not None else sys.argv[1:]))
    print(f"ok: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
