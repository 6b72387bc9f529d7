"""Training a byte-level BPE: count the regex chunks of the text, then merge the commonest pair, again and again.

The text is cut by the split pattern into chunks ("words"); merges never cross a chunk boundary, so
only each distinct chunk and how often it occurs matter, and a few MB of text shrink to some tens
of thousands of weighted words. Each merge takes the adjacent pair of tokens with the largest
count summed over all words, ties going to the smallest pair (left id, then right id), and makes
it the next token: 256 + the merge's index. :func:`train_merges` runs the loop in C
(bpe_merge.c); :func:`train_merges_reference` is the same rule in plain Python, recounting every
pair at every step, kept as the oracle the tests hold the C loop to.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np
import regex


def valid_utf8(text: str) -> str:
    """``text`` with surrogate code points fixed as tiktoken does: a valid pair joins, a lone one becomes U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def count_chunks(texts: Iterable[str], pattern: str) -> Counter[bytes]:
    """How often each chunk of ``pattern`` occurs across ``texts``, as UTF-8 bytes."""
    if isinstance(texts, str):  # a lone string would otherwise iterate as characters
        texts = [texts]
    split = regex.compile(pattern)
    counts: Counter[str] = Counter()
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"BPE.train: text_iter must yield str, got {type(text).__name__}")
        counts.update(split.findall(valid_utf8(text)))
    return Counter({chunk.encode("utf-8"): n for chunk, n in counts.items()})


def train_merges(chunks: Counter[bytes], n_merges: int) -> list[tuple[int, int]]:
    """Up to ``n_merges`` merges (left id, right id) learned from weighted chunks; fewer if pairs run out."""
    from .bpe_clib import load

    ffi, lib = load()
    words = [w for w in chunks if len(w) >= 2]  # a one-byte chunk has no pair to merge
    tokens = np.frombuffer(b"".join(words), dtype=np.uint8).astype(np.int32)  # (total bytes,)
    start = np.zeros(len(words) + 1, dtype=np.int64)  # (n_words + 1,)
    np.cumsum([len(w) for w in words], out=start[1:])
    count = np.array([chunks[w] for w in words], dtype=np.int64)  # (n_words,)
    merges = np.zeros((max(n_merges, 1), 2), dtype=np.int32)  # (n_merges, 2)

    def ptr(kind: str, a: np.ndarray):
        return ffi.cast(kind, ffi.from_buffer(a))

    done = lib.bpe_train(ptr("int32_t *", merges), n_merges, ptr("int32_t *", tokens), ptr("int64_t *", start),
                         ptr("int64_t *", count), len(words))
    if done < 0:
        raise MemoryError(f"BPE.train: the C merge loop ran out of memory on {len(words):,} words")
    return [(int(a), int(b)) for a, b in merges[:done]]


def train_merges_reference(chunks: Counter[bytes], n_merges: int) -> list[tuple[int, int]]:
    """:func:`train_merges` written plainly: recount all pairs before every merge. Slow; for tests."""
    words = [(list(w), n) for w, n in chunks.items()]
    merges: list[tuple[int, int]] = []
    for m in range(n_merges):
        pairs: Counter[tuple[int, int]] = Counter()
        for tokens, n in words:
            for pair in zip(tokens, tokens[1:], strict=False):
                pairs[pair] += n
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))  # the largest count, then the smallest pair
        merges.append(best)
        for tokens, _ in words:
            i = 0
            while i < len(tokens) - 1:
                if (tokens[i], tokens[i + 1]) == best:
                    tokens[i:i + 2] = [256 + m]
                i += 1
    return merges
