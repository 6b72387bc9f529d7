"""The zoo's training tasks: which model, on which data, with which default hyperparameters.

A :class:`Task` knows how to build its model on a stage, where its train and val batches come
from, how a numpy batch becomes stage Tensors, and what a checkpoint must record to rebuild the
model later (``meta``). ``make_task(name, overrides)`` builds one; ``overrides`` change fields
of the model config (the tests use tiny models this way).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from ..data.digits import load_mnist5k
from ..data.files import cached_arrays
from ..data.names import load_names
from ..data.shakespeare import SHAKESPEARE_VERSION, load_shakespeare
from ..models.cnn import CNN, CNNConfig
from ..models.gpt import GPT, GPTConfig
from ..models.mlp import MLP, MLPConfig
from ..models.rnn import RNN, RNNConfig
from ..tokenizers import CharTokenizer
from .batching import END, ArrayBatches, TextBatches, name_contexts, name_sequences


@dataclass
class TrainConfig:
    steps: int = 2000
    batch_size: int = 32
    optimizer: str = "adamw"  # sgd | adam | adamw
    lr: float = 1e-3
    min_lr: float = 1e-4  # the cosine schedule's floor
    warmup: int = 0
    lr_decay_steps: int | None = None  # where the cosine reaches min_lr (nanoGPT's lr_decay_iters); None: steps
    schedule: str = "cosine"  # cosine | constant | warmdown
    warmdown: float = 0.2  # warmdown: the last fraction of the steps, where lr falls linearly to 0 (nanochat)
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.99)
    grad_clip: float = 1.0  # 0 turns clipping off
    grad_accum: int = 1  # micro-batches per optimizer step
    eval_every: int = 200  # 0: only at the end
    eval_batches: int = 20
    ckpt_every: int = 0  # 0: only at the end
    seed: int = 0
    precision: str = "fp32"  # fp32 | bf16 | fp16: mixed precision (precision.py)


MODELS = {"mlp": (MLP, MLPConfig), "rnn": (RNN, RNNConfig), "lstm": (RNN, RNNConfig), "cnn": (CNN, CNNConfig),
          "nanogpt": (GPT, GPTConfig)}
NAME_TASKS = ("mlp", "rnn", "lstm")


@dataclass
class Task:
    name: str
    config: Any  # the model's config dataclass
    train_config: TrainConfig
    chars: str | None  # the tokenizer's vocabulary; None for the image classifier
    train: Any = field(default=None, repr=False)  # ArrayBatches | TextBatches, loaded by load_data
    val: Any = field(default=None, repr=False)

    @property
    def tokenizer(self) -> CharTokenizer | None:
        return CharTokenizer(self.chars) if self.chars else None

    def build(self, stage: ModuleType) -> Any:
        model_cls, _ = MODELS[self.name]
        return model_cls(stage, self.config)

    def tensors(self, Tensor: type, x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
        """A numpy batch -> the model's inputs and targets on the stage."""
        if self.name == "cnn":
            return Tensor(x.reshape(-1, 1, 28, 28).astype(np.float32)), Tensor(y)
        return Tensor(x), Tensor(y)

    def meta(self) -> dict[str, Any]:
        """What a checkpoint records to rebuild this model (and its tokenizer) without the data."""
        return {"task": self.name, "config": dataclasses.asdict(self.config), "chars": self.chars}


def _names_data(task: Task) -> None:
    words = load_names()
    tok = task.tokenizer
    if task.name == "mlp":
        block = task.config.block_size
        task.train = ArrayBatches(*name_contexts(words.train.tolist(), tok, block))
        task.val = ArrayBatches(*name_contexts(words.val.tolist(), tok, block))
    else:
        length = max(len(w) for w in words.train.tolist() + words.val.tolist()) + 1
        task.train = ArrayBatches(*name_sequences(words.train.tolist(), tok, length))
        task.val = ArrayBatches(*name_sequences(words.val.tolist(), tok, length))


def shakespeare_ids() -> tuple[str, np.ndarray, np.ndarray]:
    """The character vocabulary of the train text and both parts encoded (cached as uint8 ids)."""

    def build() -> dict[str, np.ndarray]:
        text = load_shakespeare()
        tok = CharTokenizer.from_text(text.train)
        return {"chars": np.array([tok.chars]), "train": tok.encode(text.train).astype(np.uint8),
                "val": tok.encode(text.val).astype(np.uint8)}

    arrays = cached_arrays(f"{SHAKESPEARE_VERSION}-char-ids", build)
    return str(arrays["chars"][0]), arrays["train"], arrays["val"]


def _shakespeare_data(task: Task) -> None:
    chars, train, val = shakespeare_ids()
    if chars != task.chars:
        raise RuntimeError("nanogpt: the cached Shakespeare vocabulary changed; delete $SITP_CACHE/data and retry")
    task.train = TextBatches(train, task.config.block_size)
    task.val = TextBatches(val, task.config.block_size)


def _digits_data(task: Task) -> None:
    data = load_mnist5k()
    task.train = ArrayBatches(data.x_train, data.y_train)
    task.val = ArrayBatches(data.x_val, data.y_val)


NAMES_CHARS = END + "abcdefghijklmnopqrstuvwxyz"

# Defaults that train in minutes on this 2-core machine on stage2. nanogpt: the CPU config
# (n_layer 4, n_head 4, n_embd 128, block 64, batch 12, AdamW(0.9, 0.99), lr 1e-3 with 100 warmup
# steps and cosine decay to 1e-4, weight decay 0.1, clipping at 1.0) for 2000 steps, the length of
# nanoGPT README's CPU run of this config (which reports val ~1.88); ~0.33 s a step here.
DEFAULT_TRAIN = {
    "mlp": TrainConfig(steps=3000, batch_size=64, lr=3e-3, min_lr=3e-4, warmup=100),
    "rnn": TrainConfig(steps=2000, batch_size=32, lr=3e-3, min_lr=3e-4, warmup=100),
    "lstm": TrainConfig(steps=2000, batch_size=32, lr=3e-3, min_lr=3e-4, warmup=100),
    "cnn": TrainConfig(steps=600, batch_size=32, lr=2e-3, min_lr=2e-4, warmup=50, eval_every=100),
    "nanogpt": TrainConfig(steps=2000, batch_size=12, lr=1e-3, min_lr=1e-4, warmup=100, weight_decay=0.1,
                           eval_every=250, eval_batches=20, ckpt_every=500),
}


def make_task(name: str, overrides: dict[str, Any] | None = None, load_data: bool = True,
              chars: str | None = None) -> Task:
    """The task ``name`` with its default model config changed by ``overrides``; loads its data
    unless ``load_data`` is False (sampling needs only the model and ``chars``)."""
    if name not in MODELS:
        raise ValueError(f"make_task: task must be one of {sorted(MODELS)}, got {name!r}")
    _, config_cls = MODELS[name]
    known = {f.name: f.type for f in dataclasses.fields(config_cls)}
    overrides = dict(overrides or {})
    bad = sorted(set(overrides) - set(known))
    if bad:
        raise ValueError(f"make_task {name}: unknown model settings {bad}; known: {sorted(known)}")
    if name in NAME_TASKS:
        chars = NAMES_CHARS
        overrides.setdefault("vocab_size", len(chars))
        if name != "mlp":
            overrides.setdefault("cell", name)
    elif name == "nanogpt" and chars is None:
        chars = shakespeare_ids()[0]
    if name == "nanogpt":
        overrides.setdefault("vocab_size", len(chars))
    for key, value in overrides.items():
        if isinstance(value, list):
            overrides[key] = tuple(value)  # from JSON
    task = Task(name, config_cls(**overrides), dataclasses.replace(DEFAULT_TRAIN[name]), chars)
    if load_data:
        {"mlp": _names_data, "rnn": _names_data, "lstm": _names_data, "cnn": _digits_data,
         "nanogpt": _shakespeare_data}[name](task)
    return task


def task_from_meta(meta: dict[str, Any]) -> Task:
    """Rebuild a checkpoint's task (model config and tokenizer) without loading any data."""
    return make_task(meta["task"], meta["config"], load_data=False, chars=meta.get("chars"))
