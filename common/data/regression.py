"""Regression data: Windsor house prices (pydataset's Ecdat/Housing) and sklearn's diabetes.

Housing: 546 houses sold in Windsor, Canada (Anglin & Gencay 1996). Target: sale price in
Canadian dollars; 11 features, of which the yes/no columns are encoded as 1/0. pydataset keeps
its CSVs in a tarball inside the installed package; we read that tarball directly, because
importing pydataset unpacks the whole archive into the home directory.
"""

from __future__ import annotations

import csv
import io
import tarfile

import numpy as np

from .files import cached_arrays, package_file
from .split import DEFAULT_FRACTIONS, Split, make_split

HOUSING_VERSION = "housing-v1"
HOUSING_MEMBER = "resources/rdata/csv/Ecdat/Housing.csv"


def _read_housing_csv() -> dict[str, np.ndarray]:
    tarball = package_file("pydataset", "resources.tar.gz")
    with tarfile.open(tarball, "r:gz") as tar:
        member = tar.extractfile(HOUSING_MEMBER)
        if member is None:
            raise RuntimeError(f"housing: {HOUSING_MEMBER} missing from {tarball}")
        text = member.read().decode("utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    # column 0 is R's row name, column 1 the price; the rest are features
    names = header[2:]
    yes_no = {"yes": 1.0, "no": 0.0}
    x = np.array([[yes_no[v] if v in yes_no else float(v) for v in r[2:]] for r in body])
    y = np.array([float(r[1]) for r in body])
    return {"x": x.astype(np.float64), "y": y, "names": np.array(names)}


def load_housing(seed: int = 0, fractions: tuple[float, float, float] = DEFAULT_FRACTIONS) -> Split:
    """Windsor house prices: x (546, 11) float64, y = price (546,) float64, split by ``seed``."""
    arrays = cached_arrays(HOUSING_VERSION, _read_housing_csv)
    names = tuple(str(n) for n in arrays["names"])
    return make_split("housing", arrays["x"], arrays["y"], seed, fractions, names)


def load_diabetes(seed: int = 0, fractions: tuple[float, float, float] = DEFAULT_FRACTIONS) -> Split:
    """sklearn's diabetes progression set, unscaled: x (442, 10) float64, y (442,) float64."""
    from sklearn.datasets import load_diabetes as sk_load_diabetes

    bunch = sk_load_diabetes(scaled=False)
    x = np.asarray(bunch.data, dtype=np.float64)
    y = np.asarray(bunch.target, dtype=np.float64)
    return make_split("diabetes", x, y, seed, fractions, tuple(bunch.feature_names))
