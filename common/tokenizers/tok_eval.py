"""How well our BPE compresses our text, next to GPT-2's, and how fast it trains and encodes.

``python -m common.tokenizers.tok_eval`` trains two tokenizers (vocab 4,096 and 8,192, GPT-4
split) on the Shakespeare train text, then prints markdown tables: bytes per token of each on
the train and val parts and on a chitchat sample (higher is better: fewer tokens for the same
text), the training times, and encode throughput on 1 MB against tiktoken running the same ranks.
GPT-2 was trained on WebText, so it is the stranger here; ours are fit to the very text they
compress, which is the point nanochat's tok_eval makes with its own tokenizer.
"""

from __future__ import annotations

import argparse
import json
import time
import zipfile

import tiktoken

from ..data import load_shakespeare
from ..data.fetch import require_download
from .bpe import BPE, GPT2_PATTERN, GPT4_PATTERN
from .gpt2 import gpt2_ranks_path


def chitchat_sample(n_chars: int = 500_000) -> str:
    """The first ``n_chars`` of the chitchat conversations' messages, one message a line."""
    with zipfile.ZipFile(require_download("chitchat")) as z:
        dataset = json.loads(z.read("chitchat_dataset/dataset.json"))
    lines, size = [], 0
    for convo in dataset.values():
        for turn in convo["messages"]:
            for message in turn:
                lines.append(message["text"])
                size += len(message["text"]) + 1
        if size >= n_chars:
            break
    return "\n".join(lines)[:n_chars]


def tiktoken_twin(tok: BPE) -> tiktoken.Encoding:
    """tiktoken running the same ranks, pattern and specials: the speed (and ids) to compare against."""
    return tiktoken.Encoding(name="twin", pat_str=tok.pattern, mergeable_ranks=tok.ranks,
                             special_tokens=tok.special_tokens)


def throughput(tok: BPE, text: str, repeats: int = 3) -> tuple[float, float, float, bool]:
    """(ours cold MB/s, ours warm MB/s, tiktoken MB/s, same ids) on ``text``; cold = empty chunk cache."""
    mb = len(text.encode("utf-8")) / 1e6
    twin = tiktoken_twin(tok)
    tok._cache.clear()
    t0 = time.perf_counter()
    ours = tok.encode_ordinary(text)
    cold = time.perf_counter() - t0
    warm = best_time(lambda: tok.encode_ordinary(text), repeats)
    theirs = best_time(lambda: twin.encode_ordinary(text), repeats)
    return mb / cold, mb / warm, mb / theirs, ours == twin.encode_ordinary(text)


def best_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, nargs="+", default=[4096, 8192], help="our vocab sizes to train")
    args = parser.parse_args(argv)

    text = load_shakespeare()
    parts = {"train": text.train, "val": text.val, "chitchat": chitchat_sample()}
    sizes = {name: len(s.encode("utf-8")) for name, s in parts.items()}
    print(f"text: {', '.join(f'{name} {n / 1e6:.2f} MB' for name, n in sizes.items())}\n")

    tokenizers = {"gpt2 (50,257)": BPE.from_tiktoken_file(gpt2_ranks_path(), GPT2_PATTERN)}
    print("| tokenizer | train time (s) |\n|---|---|")
    for vocab in args.vocab:
        t0 = time.perf_counter()
        tokenizers[f"ours ({vocab:,})"] = BPE.train([text.train], vocab, GPT4_PATTERN)
        print(f"| ours ({vocab:,}) on {sizes['train'] / 1e6:.2f} MB | {time.perf_counter() - t0:.2f} |")

    print("\nbytes per token (higher is better)\n")
    print("| tokenizer | " + " | ".join(parts) + " |\n|---|" + "---|" * len(parts))
    for label, tok in tokenizers.items():
        ratios = [sizes[name] / len(tok.encode_ordinary(s)) for name, s in parts.items()]
        print(f"| {label} | " + " | ".join(f"{r:.2f}" for r in ratios) + " |")

    sample = text.train.encode("utf-8")[:1_000_000].decode("utf-8", errors="ignore")
    print("\nencode throughput on 1 MB of train text (MB/s; tiktoken runs the same ranks and pattern)\n")
    print("| tokenizer | ours, cold cache | ours, warm cache | tiktoken | tiktoken / ours (cold) | same ids |")
    print("|---|---|---|---|---|---|")
    for label, tok in tokenizers.items():
        cold, warm, theirs, same = throughput(tok, sample)
        print(f"| {label} | {cold:.1f} | {warm:.1f} | {theirs:.1f} | {theirs / cold:.2f}x | {same} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
