"""Generating chat replies from a NanoChat model: KV-cached, batched, streamed, with a calculator tool.

The prompt runs once, batch 1, filling a :class:`~common.models.nanochat.KVCache`; the cache is then
copied to ``num_samples`` rows and every later step feeds one token per row, reading the cache
(nanochat's Engine). Each step yields a column: the next token of every row, and a mask that is 1
for a sampled token and 0 for one the engine forced in. A row is done at ``<|assistant_end|>`` or
``<|bos|>`` (its later entries mean nothing; :meth:`Engine.generate_batch` drops them).

The tool: when a row writes ``<|python_end|>``, the tokens since its ``<|python_start|>`` are
decoded and given to :func:`common.chat.calculator.evaluate`; a result is forced into that row as
``<|output_start|>`` result ``<|output_end|>``, one token per step, before sampling resumes.

Sampling happens here on numpy logits (temperature 0: argmax; top-k; a seeded numpy Generator),
as common/train/sample.py does. ``python -m common.chat.engine --bench`` times decoding with the
cache against re-running the whole sequence each token (:func:`decode_speed`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from ..models.nanochat import NanoChat, NanoChatConfig, random_state
from ..stages import load_stage
from ..train.checkpoint import load_model_weights
from ..train.sample import sample_next
from .calculator import evaluate


def sample_tokens(logits: np.ndarray, rng: np.random.Generator, temperature: float = 1.0,
                  top_k: int | None = None, top_p: float | None = None) -> np.ndarray:
    """One token per row of logits (B, V): argmax at temperature 0, else a draw from the
    temperature-scaled softmax over the top_k largest logits (all of them when top_k is None),
    within the nucleus of top_p (train/sample.next_token_probs)."""
    if temperature < 0:
        raise ValueError(f"sample_tokens: temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return np.asarray(logits).argmax(axis=-1)
    return sample_next(logits, rng, temperature, top_k, top_p)


@contextlib.contextmanager
def no_grad(Tensor: type) -> Iterator[None]:
    """The stage's no-grad context where it has autograd (stage1 has nothing to switch off)."""
    with Tensor.no_grad() if hasattr(Tensor, "no_grad") else contextlib.nullcontext():
        yield


@dataclass
class _Row:
    """One sample's tool state while it is generated."""

    forced: deque = field(default_factory=deque)  # tokens to force in before sampling again
    in_python: bool = False
    expr: list[int] = field(default_factory=list)  # tokens since <|python_start|>
    done: bool = False


class Engine:
    """``prefill_chunk``: run the prompt in chunks of this many tokens, the last one padded, in a
    cache of a whole multiple of sequence_len positions (None: the prompt at once, in a cache just
    long enough). On a lazy stage (stage3) every prompt length and cache length would compile its
    own kernels; with chunks, replies that fit in sequence_len have two shapes in all, the chunk
    and the one-token step, compiled once."""

    def __init__(self, model: Any, tokenizer: Any, Tensor: type, prefill_chunk: int | None = None):
        if prefill_chunk is not None and prefill_chunk < 1:
            raise ValueError(f"Engine: prefill_chunk must be >= 1 or None, got {prefill_chunk}")
        self.model, self.tokenizer, self.Tensor, self.prefill_chunk = model, tokenizer, Tensor, prefill_chunk
        sid = tokenizer.special_id
        self.python_start, self.python_end = sid("<|python_start|>"), sid("<|python_end|>")
        self.output_start, self.output_end = sid("<|output_start|>"), sid("<|output_end|>")
        self.stops = {sid("<|assistant_end|>"), tokenizer.bos_id}

    def generate(self, tokens: list[int], num_samples: int = 1, max_tokens: int | None = None,
                 temperature: float = 1.0, top_k: int | None = None,
                 seed: int = 42, top_p: float | None = None) -> Iterator[tuple[list[int], list[int]]]:
        """Stream (token column, mask column) per step, one entry per sample, for at most
        ``max_tokens`` steps (None: until the cache reaches the model's sequence_len)."""
        if not tokens or not all(isinstance(t, (int, np.integer)) for t in tokens):
            raise ValueError(f"Engine.generate: tokens must be a non-empty list of ints, got {tokens!r:.80}")
        if num_samples < 1:
            raise ValueError(f"Engine.generate: num_samples must be >= 1, got {num_samples}")
        if max_tokens is None:
            max_tokens = self.model.config.sequence_len - len(tokens)
        if max_tokens < 1:
            raise ValueError(f"Engine.generate: nothing to generate (max_tokens {max_tokens}, prompt of "
                             f"{len(tokens)} tokens, sequence_len {self.model.config.sequence_len})")
        T, rng = self.Tensor, np.random.default_rng(seed)
        with no_grad(T):
            cache = self.model.new_kv_cache(T, 1, self._cache_len(len(tokens) + max_tokens))
            logits = self._prefill(tokens, cache)  # (1, V)
            if num_samples > 1:
                cache = cache.replicate(num_samples)
                logits = np.repeat(logits, num_samples, axis=0)  # (B, V): each row samples its own first token
            rows = [_Row() for _ in range(num_samples)]
            for step in range(max_tokens):
                sampled = sample_tokens(logits, rng, temperature, top_k, top_p)
                column, masks = self._advance(rows, sampled)
                yield column, masks
                if step + 1 == max_tokens or all(r.done for r in rows):
                    return
                logits = self.model(T(np.asarray(column, dtype=np.int64)[:, None]), cache).numpy()[:, -1, :]

    def _cache_len(self, needed: int) -> int:
        if self.prefill_chunk is None:
            return needed
        seq = self.model.config.sequence_len
        return seq * -(-needed // seq)  # the next multiple of sequence_len: one cache shape for most chats

    def _prefill(self, tokens: list[int], cache: Any) -> np.ndarray:
        """Run the prompt (batch 1) into the cache; the logits (1, V) after its last token."""
        T, C = self.Tensor, self.prefill_chunk
        if C is None:
            return self.model(T(np.asarray([tokens], dtype=np.int64)), cache).numpy()[:, -1, :]
        for start in range(0, len(tokens), C):
            chunk = tokens[start:start + C]
            padded = np.zeros((1, C), dtype=np.int64)
            padded[0, :len(chunk)] = chunk
            logits = self.model(T(padded), cache, n_valid=len(chunk)).numpy()[:, len(chunk) - 1, :]
        return logits

    def _advance(self, rows: list[_Row], sampled: np.ndarray) -> tuple[list[int], list[int]]:
        """Each row's next token (forced if its queue has one, else sampled) and the tool bookkeeping."""
        column, masks = [], []
        for row, drawn in zip(rows, sampled.tolist(), strict=True):
            forced = bool(row.forced)
            token = row.forced.popleft() if forced else int(drawn)
            column.append(token)
            masks.append(0 if forced else 1)
            if token in self.stops:
                row.done = True
            if token == self.python_start:
                row.in_python, row.expr = True, []
            elif token == self.python_end and row.in_python:
                row.in_python = False
                result = evaluate(self.tokenizer.decode(row.expr)) if row.expr else None
                if result is not None:
                    row.forced.extend([self.output_start, *self.tokenizer.encode_ordinary(result), self.output_end])
                row.expr = []
            elif row.in_python:
                row.expr.append(token)
        return column, masks

    def generate_batch(self, tokens: list[int], num_samples: int = 1,
                       **kwargs: Any) -> tuple[list[list[int]], list[list[int]]]:
        """Every sample in full: (prompt + generated tokens, masks: 0 for the prompt and forced tokens,
        1 for sampled ones), without the token that ended each row (nanochat's generate_batch)."""
        results = [list(tokens) for _ in range(num_samples)]
        masks = [[0] * len(tokens) for _ in range(num_samples)]
        done = [False] * num_samples
        for column, mask_column in self.generate(tokens, num_samples, **kwargs):
            for i, (token, mask) in enumerate(zip(column, mask_column, strict=True)):
                if done[i]:
                    continue
                if token in self.stops:
                    done[i] = True
                else:
                    results[i].append(token)
                    masks[i].append(mask)
            if all(done):
                break
        return results, masks


def greedy_uncached(model: Any, Tensor: type, tokens: list[int], max_tokens: int) -> list[int]:
    """Greedy decoding without a cache: the whole sequence runs again for every new token
    (nanochat's GPT.generate), the baseline the cache is measured against."""
    ids = list(tokens)
    next_logits = model.whole_sequence(Tensor)  # on stage3 one jitted capture for every length
    with no_grad(Tensor):
        for _ in range(max_tokens):
            ids.append(int(next_logits(ids).argmax()))
    return ids[len(tokens):]


def greedy_cached(model: Any, Tensor: type, tokens: list[int], max_tokens: int,
                  cache_len: int | None = None) -> list[int]:
    """Greedy decoding through the KV cache (the engine's path, without tokenizer or tool), in a cache of
    cache_len rows (default: just enough)."""
    out = []
    with no_grad(Tensor):
        cache = model.new_kv_cache(Tensor, 1, cache_len or len(tokens) + max_tokens)
        logits = model(Tensor(np.asarray([tokens], dtype=np.int64)), cache).numpy()[0, -1]
        for i in range(max_tokens):
            out.append(int(logits.argmax()))
            if i + 1 < max_tokens:
                logits = model(Tensor(np.asarray([[out[-1]]], dtype=np.int64)), cache).numpy()[0, -1]
    return out


def decode_speed(stage: ModuleType, depth: int = 4, tokens: int = 256, prompt_len: int = 16,
                 vocab_size: int = 4096, seed: int = 0, uncached: bool = True) -> dict[str, Any]:
    """Decode tokens/s of a random depth-``depth`` model, greedy, batch 1, with and without the KV
    cache, from the same prompt; also whether both produced the same tokens."""
    T = stage.Tensor
    config = NanoChatConfig.from_depth(depth, vocab_size=vocab_size, sequence_len=prompt_len + tokens)
    model = NanoChat(stage, config)
    load_model_weights(stage, model, random_state(config, seed))
    prompt = np.random.default_rng(seed).integers(0, vocab_size, prompt_len).tolist()
    runs = compiler_runs(stage)
    rows = prompt_len + tokens  # the warm-ups use the timed run's cache size: its kernels compile here
    greedy_cached(model, T, prompt, 1, rows)  # the prefill and the first token
    after_first = compiler_runs(stage)
    greedy_cached(model, T, prompt, 4, rows)  # and the decode step's (eager, capture, replay)
    warm = compiler_runs(stage)
    t0 = time.perf_counter()
    cached = greedy_cached(model, T, prompt, tokens)
    t1 = time.perf_counter()
    timed = compiler_runs(stage)
    plain = greedy_uncached(model, T, prompt, tokens) if uncached else None
    t2 = time.perf_counter()
    return {"stage": stage.__name__, "depth": depth, "params": model.num_params(), "tokens": tokens,
            "cached_tok_s": tokens / (t1 - t0), "uncached_tok_s": tokens / (t2 - t1) if uncached else None,
            "speedup": (t2 - t1) / (t1 - t0) if uncached else None,
            "same_tokens": cached == plain if uncached else None,
            "compiler_runs": {"prefill_and_first_token": after_first - runs, "after_first_token": warm - after_first,
                              "timed_cached_decode": timed - warm, "uncached_decode": compiler_runs(stage) - timed}}


def compiler_runs(stage: ModuleType) -> int:
    """C compiler processes the stage has started so far (0 for a stage that compiles nothing at run time)."""
    try:
        return importlib.import_module(f"{stage.__name__}.cpu.compiler").RUNS[0]
    except ModuleNotFoundError:
        return 0


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m common.chat.engine", description=__doc__.splitlines()[0])
    p.add_argument("--bench", action="store_true", help="time decoding with and without the KV cache")
    p.add_argument("--stage", type=int, default=2)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--cached-only", action="store_true", help="skip the decode without the cache")
    args = p.parse_args(argv)
    if not args.bench:
        p.error("nothing to do: pass --bench")
    r = decode_speed(load_stage(args.stage), args.depth, args.tokens, vocab_size=args.vocab,
                     uncached=not args.cached_only)
    plain = "" if args.cached_only else (f", no cache {r['uncached_tok_s']:.1f} tok/s, speedup {r['speedup']:.2f}x, "
                                         f"same tokens: {r['same_tokens']}")
    print(f"{r['stage']} depth {r['depth']} ({r['params']:,} params), {r['tokens']} tokens: "
          f"KV cache {r['cached_tok_s']:.1f} tok/s{plain}; compiler runs {r['compiler_runs']}")


if __name__ == "__main__":
    main()
