"""A train/val/test split fixed by a seed, and the container the loaders return."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_FRACTIONS = (0.8, 0.1, 0.1)


@dataclass(frozen=True, eq=False)  # eq=False: comparing numpy arrays with == is ambiguous
class Split:
    """One data set cut into train / val / test. ``x`` rows are examples; ``y`` are targets."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    feature_names: tuple[str, ...] = ()

    @property
    def sizes(self) -> tuple[int, int, int]:
        return len(self.y_train), len(self.y_val), len(self.y_test)

    def __repr__(self) -> str:
        n_train, n_val, n_test = self.sizes
        return (
            f"Split({self.name!r}, x={self.x_train.shape[1:]} {self.x_train.dtype}, "
            f"train={n_train}, val={n_val}, test={n_test})"
        )


def split_indices(
    n: int, seed: int, fractions: tuple[float, float, float] = DEFAULT_FRACTIONS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shuffle ``range(n)`` with ``seed`` and cut it into train / val / test index arrays.

    The test part takes whatever rounding leaves, so the three sizes always add up to n.
    """
    if len(fractions) != 3 or min(fractions) < 0 or abs(sum(fractions) - 1.0) > 1e-9:
        raise ValueError(f"split: fractions must be 3 non-negative numbers summing to 1, got {fractions}")
    order = np.random.default_rng(seed).permutation(n)
    n_train = int(round(n * fractions[0]))
    n_val = int(round(n * fractions[1]))
    return order[:n_train], order[n_train : n_train + n_val], order[n_train + n_val :]


def make_split(
    name: str,
    x: np.ndarray,
    y: np.ndarray,
    seed: int,
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
    feature_names: tuple[str, ...] = (),
) -> Split:
    """Split parallel arrays ``x`` and ``y`` with :func:`split_indices`."""
    if len(x) != len(y):
        raise ValueError(f"split: x has {len(x)} rows but y has {len(y)}")
    tr, va, te = split_indices(len(y), seed, fractions)
    return Split(name, x[tr], y[tr], x[va], y[va], x[te], y[te], tuple(feature_names))
