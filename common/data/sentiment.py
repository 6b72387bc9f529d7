"""Sentiment data: VADER's 10,605 movie-review snippets (Hutto & Gilbert, ICWSM 2014).

Each snippet (a sentence from a Rotten Tomatoes review, Pang & Lee 2004) carries the mean of
20 human ratings in [-4, 4]. Label = 1 if the mean is > 0, 0 if < 0; the 37 snippets rated
exactly 0 are neutral and dropped, leaving 10,568. The file lives in a tarball inside the
vaderSentiment 3.3.2 sdist, which ``python -m common.data.fetch`` puts in the cache.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np

from .bow import build_vocabulary, featurize
from .files import cache_dir, cached_arrays
from .split import DEFAULT_FRACTIONS, Split, make_split

VADER_VERSION = "vader-movie-v1"
VADER_REQUIREMENT = "vaderSentiment==3.3.2"
VADER_SDIST = "vaderSentiment-3.3.2.tar.gz"
FETCH_COMMAND = "python -m common.data.fetch"
INNER_TARBALL = "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"
SNIPPETS = "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"


def vader_sdist_path() -> Path:
    """Where ``python -m common.data.fetch`` keeps the sdist; may not exist yet."""
    return cache_dir() / "downloads" / VADER_SDIST


def require_vader_sdist() -> Path:
    """The sdist's path, or a RuntimeError that tells the user how to get it."""
    path = vader_sdist_path()
    if not path.is_file():
        raise RuntimeError(
            f"VADER data missing: {path} not found. Run `{FETCH_COMMAND}` once "
            f"(it downloads the {VADER_REQUIREMENT} source distribution into {path.parent})."
        )
    return path


def _read_snippets() -> dict[str, np.ndarray]:
    sdist = require_vader_sdist()
    try:
        with tarfile.open(sdist, "r:gz") as outer:
            inner_bytes = outer.extractfile(INNER_TARBALL).read()  # type: ignore[union-attr]
        with tarfile.open(fileobj=io.BytesIO(inner_bytes), mode="r:gz") as inner:
            raw = inner.extractfile(SNIPPETS).read()  # type: ignore[union-attr]
    except (tarfile.TarError, KeyError, AttributeError, EOFError) as e:
        raise RuntimeError(
            f"VADER data: cannot read {SNIPPETS} from {sdist} ({e}); "
            f"delete the file and run `{FETCH_COMMAND}`"
        ) from e
    ids, scores, texts = [], [], []
    # format: "id<TAB>mean rating<TAB>text", CRLF line ends, UTF-8
    for line in raw.decode("utf-8").splitlines():
        if not line.strip():
            continue
        sid, score, text = line.split("\t", 2)
        ids.append(int(sid))
        scores.append(float(score))
        texts.append(text.strip())
    return {"id": np.array(ids), "score": np.array(scores), "text": np.array(texts)}


def load_vader_movie(seed: int = 0, fractions: tuple[float, float, float] = DEFAULT_FRACTIONS) -> Split:
    """Texts and labels: x = snippets (str array), y = 1 positive / 0 negative (int64)."""
    arrays = cached_arrays(VADER_VERSION, _read_snippets)
    score = arrays["score"]
    keep = score != 0.0  # neutral snippets have no sign to learn
    labels = (score[keep] > 0).astype(np.int64)
    return make_split("vader-movie", arrays["text"][keep], labels, seed, fractions)


def load_vader_bow(
    seed: int = 0,
    min_count: int = 2,
    max_vocab: int | None = 5000,
    binary: bool = True,
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
) -> Split:
    """Bag-of-words features (float32) over a vocabulary built from the train split only.

    ``feature_names`` is the vocabulary in column order.
    """
    # Not cached: featurizing takes about as long as loading a dense 200 MB .npz would.
    texts = load_vader_movie(seed, fractions)
    vocab = build_vocabulary(texts.x_train.tolist(), min_count, max_vocab)
    parts = (texts.x_train, texts.x_val, texts.x_test)
    x_train, x_val, x_test = (featurize(x.tolist(), vocab, binary) for x in parts)
    return Split(
        "vader-movie-bow", x_train, texts.y_train, x_val, texts.y_val, x_test, texts.y_test, vocab.words
    )
