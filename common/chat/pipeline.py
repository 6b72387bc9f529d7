"""nanochat's pipeline, scaled to a 2-core CPU: tokenizer -> base pretraining -> mid-training -> SFT -> report.

Each phase writes into its own folder under ``out`` and a later run with ``resume=True`` skips what is
finished and continues what is not (the zoo's training loop checkpoints and resumes each phase):

- ``tokenizer.bpe``: our byte-level BPE, trained on the pretraining text plus the chat text;
- ``base/``: the model learns English from the pretraining text (random windows of the token stream);
- ``mid/``: starting from base, it learns the conversation format and the calculator tool on a stream
  of rendered conversations (every token is a target, as nanochat's mid-training);
- ``sft/``: starting from mid, it is fine-tuned on padded conversations with the loss only on the
  assistant's tokens (the render mask), as nanochat's chat SFT;
- ``report.md``: the report card (config, tokenizer compression, losses and bits per byte per phase,
  samples, timings, the machine).

Every checkpoint carries the tokenizer (as text in its metadata), so ``sitp chat --ckpt`` needs nothing else.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..data.conversations import chat_splits
from ..data.gutenberg import pretraining_text
from ..models.nanochat import NanoChat, NanoChatConfig
from ..tokenizers import BPE
from ..train.batching import ArrayBatches, TextBatches
from ..train.checkpoint import load_checkpoint, load_model_weights
from ..train.distributed import World
from ..train.loop import CHECKPOINT, train
from ..train.tasks import Task, TrainConfig
from .render import pack_rows, render_conversation

PHASES = ("base", "mid", "sft")
TOKENIZER_FILE = "tokenizer.bpe"


@dataclass
class NanochatSettings:
    """The pipeline's knobs. The defaults fit the whole run in about 20 minutes on a 2-core CPU (stage2)."""

    depth: int = 4  # the dial: width 64 * depth, depth blocks
    vocab_size: int = 4096
    sequence_len: int = 128  # conversations are short: SFT pads each to a row, so a long row is mostly padding
    batch_size: int = 16
    steps: dict[str, int] = field(default_factory=lambda: {"base": 450, "mid": 250, "sft": 300})
    lr: dict[str, float] = field(default_factory=lambda: {"base": 1.0, "mid": 1.0, "sft": 1.0})  # x each group's rate
    tokenizer_bytes: int = 3_000_000  # of text the tokenizer trains on
    eval_every: int = 100
    eval_batches: int = 8
    seed: int = 0
    precision: str = "fp32"  # fp32 | bf16 | fp16: mixed precision (common/train/precision.py)

    def model_config(self) -> NanoChatConfig:
        return NanoChatConfig.from_depth(self.depth, vocab_size=self.vocab_size, sequence_len=self.sequence_len)

    def train_config(self, phase: str) -> TrainConfig:
        return TrainConfig(steps=self.steps[phase], batch_size=self.batch_size, lr=self.lr[phase],
                           schedule="warmdown", warmdown=0.2, grad_clip=1.0, eval_every=self.eval_every,
                           eval_batches=self.eval_batches, ckpt_every=self.eval_every, seed=self.seed,
                           precision=self.precision)


@dataclass
class ChatTask(Task):
    """One phase of the pipeline as a task of the zoo's training loop: the model starts from the previous
    phase's weights (``init_from``) and steps Muon and AdamW together."""

    phase: str = "base"
    tokenizer_text: str = ""  # the BPE file's text, stored in every checkpoint
    init_from: Path | None = None

    def build(self, stage: ModuleType) -> Any:
        model = NanoChat(stage, self.config)
        if self.init_from is not None:
            load_model_weights(stage, model, load_checkpoint(self.init_from).model)
        return model

    def build_optimizer(self, stage: ModuleType, model: Any) -> Any:
        return model.optimizers(stage)

    def meta(self) -> dict[str, Any]:
        return {"task": "nanochat", "phase": self.phase, "config": dataclasses.asdict(self.config),
                "chars": None, "tokenizer": self.tokenizer_text}


def train_tokenizer(settings: NanochatSettings, texts: list[str], path: Path, log: Any) -> tuple[BPE, float]:
    """Train the BPE on the first ``tokenizer_bytes`` of ``texts`` (or load it when it exists)."""
    if path.is_file():
        return BPE.load(path), 0.0
    began = time.perf_counter()
    budget, chunks = settings.tokenizer_bytes, []
    for text in texts:
        take = text[:budget]
        chunks.append(take)
        budget -= len(take.encode("utf-8"))
        if budget <= 0:
            break
    tok = BPE.train(chunks, settings.vocab_size)
    seconds = time.perf_counter() - began
    tok.save(path)
    log(f"tokenizer: {tok.vocab_size} tokens trained on {sum(len(c) for c in chunks):,} characters in {seconds:.1f}s")
    return tok, seconds


def token_bytes(tok: BPE) -> np.ndarray:
    """Bytes of text each token stands for; 0 for the special tokens (bits per byte leaves them out)."""
    specials = set(tok.special_tokens.values())
    return np.array([0 if i in specials else len(tok.decode_bytes([i])) for i in range(tok.vocab_size)],
                    dtype=np.int64)


def bits_per_byte(stage: ModuleType, model: Any, batches: list[tuple[np.ndarray, np.ndarray]],
                  nbytes: np.ndarray) -> float:
    """Cross-entropy in bits per byte of text over the targets of ``batches`` (nanochat's tokenizer-independent
    metric): sum of -log2 p(target) over the targets that stand for text, divided by the bytes they stand for.
    Targets of -1 (masked) and special tokens count in neither sum."""
    T = stage.Tensor
    nats, total = 0.0, 0
    with T.no_grad():
        for x, y in batches:
            logits = model(T(x)).numpy().astype(np.float64)  # (B, T, V)
            logits -= logits.max(axis=-1, keepdims=True)
            logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
            keep = y >= 0
            counted = keep & (nbytes[np.where(keep, y, 0)] > 0)
            picked = np.take_along_axis(logp, np.where(keep, y, 0)[..., None], axis=-1)[..., 0]
            nats -= picked[counted].sum()
            total += int(nbytes[y[counted]].sum())
    return nats / math.log(2) / max(total, 1)


def val_batches(batches: Any, settings: NanochatSettings, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng([settings.seed, 7])
    return [batches.sample(rng, settings.batch_size) for _ in range(count)]


def phase_data(phase: str, tok: BPE, settings: NanochatSettings, text: Any, chats: dict[str, Any]) -> tuple[Any, Any]:
    """(train, val) batches of one phase."""
    T = settings.sequence_len
    if phase == "base":
        return (TextBatches(np.asarray(tok.encode_ordinary(text.train), dtype=np.int64), T),
                TextBatches(np.asarray(tok.encode_ordinary(text.val), dtype=np.int64), T))
    if phase == "mid":  # one stream of whole rendered conversations; every token is a target
        def stream(convs: list) -> np.ndarray:
            return np.asarray([i for c in convs for i in render_conversation(tok, c)[0]], dtype=np.int64)

        return TextBatches(stream(chats["mid_train"]), T), TextBatches(stream(chats["mid_val"]), T)
    batches = []
    for split in ("train", "val"):
        x, y = pack_rows([render_conversation(tok, c, max_tokens=T + 1) for c in chats[f"sft_{split}"]], T)
        keep = (y >= 0).any(axis=1)  # a row cut before its first assistant token has nothing to learn
        batches.append(ArrayBatches(x[keep], y[keep]))
    return tuple(batches)


def run_pipeline(stage: ModuleType, out: str | Path, settings: NanochatSettings | None = None, resume: bool = False,
                 progress: bool = True, log: Any = print, world: World | None = None) -> dict[str, Any]:
    """Run every phase into ``out`` and write ``out/report.md``; returns what the report shows. With a
    ``world`` of several ranks each phase trains data-parallel (train()); rank 0 trains the tokenizer
    the others then load, and alone measures bits per byte."""
    settings = settings or NanochatSettings()
    world = world or World()
    log = log if world.is_main else (lambda *a, **k: None)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    text, chats = pretraining_text(), chat_splits(settings.seed)
    chat_text = "\n".join(json.dumps(c) for c in chats["mid_train"][:2000])
    if not world.is_main:
        world.barrier("the tokenizer")  # rank 0 trains and saves it, then the others load it
    tok, tok_seconds = train_tokenizer(settings, [text.train, chat_text], out / TOKENIZER_FILE, log)
    if world.is_main:
        world.barrier("the tokenizer")
    tokenizer_text = (out / TOKENIZER_FILE).read_text(encoding="utf-8")
    nbytes = token_bytes(tok)
    report: dict[str, Any] = {"settings": dataclasses.asdict(settings), "stage": stage.__name__,
                              "tokenizer": {"vocab_size": tok.vocab_size, "seconds": tok_seconds,
                                            "bytes_per_token": compression(tok, text.val)},
                              "phases": {}}
    previous = None
    for phase in PHASES:
        train_batches, val = phase_data(phase, tok, settings, text, chats)
        task = ChatTask("nanochat", settings.model_config(), settings.train_config(phase), None, train_batches, val,
                        phase=phase, tokenizer_text=tokenizer_text, init_from=previous)
        folder = out / phase
        again = resume and (folder / CHECKPOINT).is_file()
        log(f"== {phase}: {task.train_config.steps} steps" + (" (resuming)" if again else ""))
        result = train(task, stage, task.train_config, out=folder, resume=again, progress=progress, log=log,
                       world=world)
        previous = folder / CHECKPOINT
        if not world.is_main:
            continue
        bpb = bits_per_byte(stage, result.model, val_batches(val, settings, settings.eval_batches), nbytes)
        log(f"{phase}: val {bpb:.4f} bits per byte, {result.seconds:.0f}s")
        report["phases"][phase] = {"steps": task.train_config.steps, "seconds": result.seconds,
                                   "final_train_loss": result.train_losses[-1], "val_history": result.val_history,
                                   "val_bpb": bpb}
    report["seconds"] = time.perf_counter() - began
    report["checkpoint"] = str(previous)
    report["machine"] = machine()
    return report


def compression(tok: BPE, text: str, limit: int = 500_000) -> float:
    """Bytes of UTF-8 per token of ``tok`` on (the first ``limit`` characters of) ``text``."""
    sample = text[:limit]
    return len(sample.encode("utf-8")) / max(1, len(tok.encode_ordinary(sample)))


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "system": platform.platform()}
