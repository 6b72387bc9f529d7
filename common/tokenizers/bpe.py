"""Byte-level BPE: text -> UTF-8 bytes -> ids, with tiktoken's encoding rule, trainable here.

A tokenizer is three things: a split pattern, the ranks (every token's bytes and its id, lower ids
merged first) and the special tokens (names such as ``<|bos|>`` with ids after the ranks).

Encoding cuts the text into chunks with the pattern (the ``regex`` package, for ``\\p{L}``), then
turns each chunk into ids the way tiktoken does: a chunk that is itself a token is one id;
otherwise start from its single bytes and keep joining the adjacent pair whose joined bytes have
the lowest rank (the leftmost on a tie) until no adjacent pair is a token. Given GPT-2's ranks
file and its pattern, this gives tiktoken's ids exactly. A chunk's ids are cached, since words
repeat. Text holding surrogate code points is first fixed up as tiktoken does (a valid pair
joins, a lone one becomes U+FFFD), so only then does decode(encode(s)) differ from ``s``.
One known difference from tiktoken: ``\\p{L}`` and ``\\p{N}`` follow the ``regex`` package's Unicode
version (17.0 for regex 2026.5), tiktoken 0.14's Rust regex Unicode 16.0, so the 4,644 letters and
13 digits new in Unicode 17.0 (e.g. U+33460, CJK Extension J) split differently.

:meth:`BPE.train` learns ranks from text (see bpe_train.py); :meth:`BPE.save` writes a plain text
file that :meth:`BPE.load` reads back (no pickle): a header line, the pattern as a JSON string,
one ``base64-bytes rank`` line per token, one ``id json-name`` line per special token.
"""

from __future__ import annotations

import base64
import heapq
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import regex

from .bpe_train import count_chunks, train_merges, valid_utf8

# GPT-2's split, as tiktoken writes it (possessive quantifiers make it faster, same chunks).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
# GPT-4's (cl100k) split with numbers in groups of 1-2 digits instead of 1-3, as nanochat trains.
GPT4_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|"""
                r"""\s*[\r\n]|\s+(?!\S)|\s+""")
NANOCHAT_SPECIALS = ("<|bos|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>", "<|assistant_end|>",
                     "<|python_start|>", "<|python_end|>", "<|output_start|>", "<|output_end|>")
FORMAT = "sitp-bpe 1"
CACHE_LIMIT = 200_000  # chunks remembered before the cache starts over
LONG_CHUNK = 256  # bytes; longer chunks merge through a heap, O(n log n) instead of O(n^2)
NO_RANK = 1 << 62


class BPE:
    def __init__(self, ranks: dict[bytes, int], pattern: str, special_tokens: dict[str, int]) -> None:
        missing = [b for b in range(256) if bytes([b]) not in ranks]
        if missing:
            raise ValueError(f"BPE: the ranks lack {len(missing)} single bytes (first {missing[:5]}); "
                             "every byte needs a token so that any text can be encoded")
        if len(set(ranks.values())) != len(ranks) or min(ranks.values()) < 0:
            raise ValueError("BPE: token ids in the ranks must be distinct and >= 0")
        rank_ids = set(ranks.values())
        clash = {name: i for name, i in special_tokens.items() if i in rank_ids or i < 0}
        if clash or len(set(special_tokens.values())) != len(special_tokens):
            raise ValueError(f"BPE: special token ids must be distinct, >= 0 and not token ids; got {special_tokens}")
        try:
            self._split = regex.compile(pattern)
        except regex.error as e:
            raise ValueError(f"BPE: the split pattern does not compile: {e}") from None
        self.pattern = pattern
        self.ranks = dict(ranks)
        self.special_tokens = dict(special_tokens)
        self._decoder: list[bytes | None] = [None] * (max([*ranks.values(), *special_tokens.values()]) + 1)
        for piece, i in ranks.items():
            self._decoder[i] = piece
        for name, i in special_tokens.items():
            self._decoder[i] = name.encode("utf-8")
        self._cache: dict[str, tuple[int, ...]] = {}
        self._special_splits: dict[frozenset[str], regex.Pattern] = {}

    # ---- making one ------------------------------------------------------------------------------

    @classmethod
    def train(cls, text_iter: Iterable[str] | str, vocab_size: int, pattern: str = GPT4_PATTERN,
              special_tokens: Sequence[str] = NANOCHAT_SPECIALS) -> BPE:
        """Learn ``vocab_size - 256 - len(special_tokens)`` merges; the specials take the last ids.

        Ties between equally frequent pairs go to the smallest (left id, right id). If the text runs
        out of pairs first, the vocabulary is smaller than asked: check ``vocab_size``.
        """
        specials = list(special_tokens)
        n_merges = vocab_size - 256 - len(specials)
        if n_merges < 0:
            raise ValueError(f"BPE.train: vocab_size={vocab_size} is below 256 bytes + {len(specials)} specials")
        merges = train_merges(count_chunks(text_iter, pattern), n_merges)
        vocab = [bytes([b]) for b in range(256)]
        for a, b in merges:
            vocab.append(vocab[a] + vocab[b])
        ranks = {piece: i for i, piece in enumerate(vocab)}
        if len(ranks) != len(vocab):  # never seen; a ranks table (tiktoken's format) needs distinct bytes
            raise RuntimeError("BPE.train: two merges produced the same bytes; this tokenizer cannot hold both")
        return cls(ranks, pattern, {name: len(vocab) + k for k, name in enumerate(specials)})

    @classmethod
    def from_tiktoken_file(cls, path: str | os.PathLike, pattern: str = GPT2_PATTERN,
                           special_tokens: dict[str, int] | Sequence[str] | None = None) -> BPE:
        """Read a tiktoken ranks file (``base64-bytes rank`` lines); a list of specials takes the ids after the ranks.

        The default specials are GPT-2's: ``{"<|endoftext|>": 50256}``.
        """
        if special_tokens is None:
            special_tokens = {"<|endoftext|>": 50256}
        ranks = _read_ranks(Path(path).read_text(encoding="ascii").splitlines(), str(path), 0)
        if not isinstance(special_tokens, dict):
            first = max(ranks.values()) + 1
            special_tokens = {name: first + k for k, name in enumerate(special_tokens)}
        return cls(ranks, pattern, special_tokens)

    def save(self, path: str | os.PathLike) -> None:
        """Write the plain text format (see the module docstring); atomic, so a crash leaves no half file."""
        path = Path(path)
        lines = [FORMAT, "pattern " + json.dumps(self.pattern), f"tokens {len(self.ranks)}"]
        lines += [f"{base64.b64encode(piece).decode()} {i}" for piece, i in sorted(self.ranks.items(), key=_by_id)]
        lines.append(f"specials {len(self.special_tokens)}")
        lines += [f"{i} {json.dumps(name)}" for name, i in sorted(self.special_tokens.items(), key=_by_id)]
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.",
                                         suffix=".tmp", delete=False) as tmp:
            tmp.write("\n".join(lines) + "\n")
        os.replace(tmp.name, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> BPE:
        """Read a file written by :meth:`save`."""
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        where = f"BPE.load({str(path)!r})"
        try:
            if lines[0] != FORMAT:
                raise ValueError(f"{where}: the first line is {lines[0][:40]!r}, expected {FORMAT!r}")
            pattern = json.loads(_field(lines[1], "pattern", where))
            n_tokens = int(_field(lines[2], "tokens", where))
            ranks = _read_ranks(lines[3:3 + n_tokens], where, 3)
            n_specials = int(_field(lines[3 + n_tokens], "specials", where))
            specials = {}
            for line in lines[4 + n_tokens:4 + n_tokens + n_specials]:
                i, name = line.split(" ", 1)
                specials[json.loads(name)] = int(i)
        except (IndexError, ValueError) as e:
            raise ValueError(f"{where}: not a valid tokenizer file ({e})") from None
        if len(specials) != n_specials or len(lines) != 4 + n_tokens + n_specials:
            raise ValueError(f"{where}: truncated or padded file: {len(lines)} lines for {n_tokens} tokens "
                             f"and {n_specials} specials")
        return cls(ranks, pattern, specials)

    # ---- facts -------------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """One past the largest id (tokens and specials)."""
        return len(self._decoder)

    @property
    def n_merges(self) -> int:
        return len(self.ranks) - 256

    @property
    def bos_id(self) -> int:
        """The document separator: ``<|bos|>`` (nanochat) or ``<|endoftext|>`` (GPT-2)."""
        for name in ("<|bos|>", "<|endoftext|>"):
            if name in self.special_tokens:
                return self.special_tokens[name]
        raise KeyError(f"BPE.bos_id: neither <|bos|> nor <|endoftext|> is a special token; "
                       f"have {sorted(self.special_tokens)}")

    def special_id(self, name: str) -> int:
        if name not in self.special_tokens:
            raise KeyError(f"BPE.special_id: {name!r} is not a special token; have {sorted(self.special_tokens)}")
        return self.special_tokens[name]

    def __repr__(self) -> str:
        return f"BPE(vocab_size={self.vocab_size}, n_merges={self.n_merges}, specials={len(self.special_tokens)})"

    # ---- encoding ----------------------------------------------------------------------------------

    def encode_ordinary(self, text: str) -> list[int]:
        """Ids of ``text`` with special-token strings treated as plain text."""
        return self._encode_plain(valid_utf8(text))

    def encode(self, text: str, allowed_special: Iterable[str] | str = frozenset(),
               disallowed_special: Iterable[str] | str = "all") -> list[int]:
        """tiktoken's rule: allowed specials become their id; a disallowed one in the text raises ValueError.

        ``allowed_special="all"`` allows every special; ``disallowed_special=()`` lets the others
        through as plain text.
        """
        allowed = set(self.special_tokens) if allowed_special == "all" else set(allowed_special)
        unknown = allowed - set(self.special_tokens)
        if unknown:
            raise ValueError(f"BPE.encode: allowed_special names {sorted(unknown)}, which are not special tokens "
                             f"of this tokenizer ({sorted(self.special_tokens)})")
        disallowed = set(self.special_tokens) - allowed if disallowed_special == "all" else set(disallowed_special)
        if disallowed:
            found = self._special_split(frozenset(disallowed)).search(text)
            if found:
                raise ValueError(f"BPE.encode: the text holds the special token {found.group()!r}, which is "
                                 "disallowed; pass allowed_special={...} to encode it as its id, or "
                                 "disallowed_special=() to encode it as plain text")
        text = valid_utf8(text)
        if not allowed:
            return self._encode_plain(text)
        ids: list[int] = []
        start = 0
        for found in self._special_split(frozenset(allowed)).finditer(text):
            ids += self._encode_plain(text[start:found.start()])
            ids.append(self.special_tokens[found.group()])
            start = found.end()
        return ids + self._encode_plain(text[start:])

    def encode_batch(self, texts: Iterable[str], allowed_special: Iterable[str] | str = frozenset(),
                     disallowed_special: Iterable[str] | str = "all") -> list[list[int]]:
        return [self.encode(t, allowed_special, disallowed_special) for t in texts]

    def _special_split(self, names: frozenset[str]) -> regex.Pattern:
        if names not in self._special_splits:  # longest first, so a special that prefixes another loses
            self._special_splits[names] = regex.compile("|".join(regex.escape(n) for n in
                                                                 sorted(names, key=lambda n: (-len(n), n))))
        return self._special_splits[names]

    def _encode_plain(self, text: str) -> list[int]:
        cache = self._cache
        ids: list[int] = []
        for chunk in self._split.findall(text):
            hit = cache.get(chunk)
            if hit is None:
                if len(cache) >= CACHE_LIMIT:
                    cache.clear()
                hit = cache[chunk] = self._encode_chunk(chunk.encode("utf-8"))
            ids += hit
        return ids

    def _encode_chunk(self, piece: bytes) -> tuple[int, ...]:
        ranks = self.ranks
        if piece in ranks:
            return (ranks[piece],)
        cuts = _merge_long(piece, ranks) if len(piece) > LONG_CHUNK else _merge(piece, ranks)
        return tuple(ranks[piece[s:e]] for s, e in zip(cuts, cuts[1:], strict=False))

    # ---- decoding ----------------------------------------------------------------------------------

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)  # numpy arrays too
        try:
            if ids and min(ids) < 0:
                raise IndexError
            return b"".join(map(self._decoder.__getitem__, ids))
        except (IndexError, TypeError):  # past the end, or a gap in the ids
            bad = next(i for i in ids if not isinstance(i, int) or not 0 <= i < len(self._decoder)
                       or self._decoder[i] is None)
            raise ValueError(f"BPE.decode: id {bad} is not in the vocabulary (ids 0..{len(self._decoder) - 1}, "
                             f"{len(self.ranks)} tokens and {len(self.special_tokens)} specials)") from None

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> str; bytes that are not valid UTF-8 (a token cut inside a character) become U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


def _merge(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """Cut offsets of ``piece`` after tiktoken's merge rule: join the lowest-ranked adjacent pair, leftmost first."""
    cuts = list(range(len(piece) + 1))
    pair_ranks = [ranks.get(piece[i:i + 2], NO_RANK) for i in range(len(piece) - 1)]  # pair_ranks[i]: parts i, i+1
    while pair_ranks:
        best = min(pair_ranks)
        if best == NO_RANK:
            break
        i = pair_ranks.index(best)  # the leftmost of equal ranks
        del cuts[i + 1], pair_ranks[i]
        if i > 0:
            pair_ranks[i - 1] = ranks.get(piece[cuts[i - 1]:cuts[i + 1]], NO_RANK)
        if i < len(pair_ranks):
            pair_ranks[i] = ranks.get(piece[cuts[i]:cuts[i + 2]], NO_RANK)
    return cuts


def _merge_long(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """:func:`_merge` with a heap of (rank, start): the same merges, O(n log n) for a long chunk.

    Parts are a linked list of start offsets. A heap entry is current if its start is still a part
    and the bytes from there to the end of the next part still have that rank (a rank names one
    byte string, so equal rank means the same pair); otherwise it is stale and skipped.
    """
    n = len(piece)
    nxt = list(range(1, n + 2))  # nxt[s]: start of the part after the part at s (n marks the end)
    prv = list(range(-1, n))
    alive = [True] * (n + 1)
    heap = [(ranks.get(piece[s:s + 2], NO_RANK), s) for s in range(n - 1)]
    heapq.heapify(heap)
    while heap:
        rank, s = heapq.heappop(heap)
        if rank == NO_RANK:
            break
        if not alive[s] or nxt[s] >= n or ranks.get(piece[s:nxt[nxt[s]]], NO_RANK) != rank:
            continue
        gone = nxt[s]  # the right part joins the left one
        alive[gone] = False
        nxt[s] = nxt[gone]
        prv[nxt[s]] = s
        if nxt[s] < n:
            heapq.heappush(heap, (ranks.get(piece[s:nxt[nxt[s]]], NO_RANK), s))
        if prv[s] >= 0:
            heapq.heappush(heap, (ranks.get(piece[prv[s]:nxt[s]], NO_RANK), prv[s]))
    cuts = [0]
    while cuts[-1] < n:
        cuts.append(nxt[cuts[-1]])
    return cuts


def _read_ranks(lines: list[str], where: str, first_line: int) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for k, line in enumerate(lines):
        if not line:
            continue
        try:
            piece, rank = line.split()
            ranks[base64.b64decode(piece, validate=True)] = int(rank)
        except ValueError:
            raise ValueError(f"{where}: line {first_line + k + 1} is {line[:60]!r}, expected 'base64-bytes rank'") \
                from None
    if len(ranks) != sum(1 for line in lines if line):
        raise ValueError(f"{where}: a token's bytes appear twice")
    return ranks


def _field(line: str, name: str, where: str) -> str:
    key, _, value = line.partition(" ")
    if key != name:
        raise ValueError(f"{where}: expected a {name!r} line, got {line[:40]!r}")
    return value


def _by_id(item: tuple) -> int:
    return item[1]
