"""A chat model loaded from a pipeline checkpoint, on any stage: what ``sitp chat`` and the web UI talk to.

``ChatBackend.load(ckpt, stage)`` rebuilds the model and the tokenizer from the checkpoint alone (its
metadata carries the tokenizer's file). ``stream_reply(messages, ...)`` renders the conversation for
completion (ending in ``<|assistant_start|>``), runs the KV-cache engine and yields the reply's text as
it is decoded. A token can end in the middle of a UTF-8 character, so the bytes go through an incremental
decoder that holds an incomplete character back until its last byte arrives.
"""

from __future__ import annotations

import codecs
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from ..models.nanochat import NanoChat, NanoChatConfig
from ..stages import load_stage
from ..tokenizers import BPE
from ..train.checkpoint import CheckpointError, load_checkpoint, load_model_weights
from ..train.sample import no_grad
from .engine import Engine
from .render import render_for_completion


def tokenizer_from_text(text: str) -> BPE:
    """A BPE from the text of its file (as a checkpoint's metadata holds it)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tokenizer.bpe"
        path.write_text(text, encoding="utf-8")
        return BPE.load(path)


class ChatBackend:
    def __init__(self, stage: ModuleType, model: Any, tokenizer: BPE):
        self.stage, self.model, self.tokenizer = stage, model, tokenizer
        # prompts run in fixed chunks of 32 in a cache of a multiple of the window: every prompt then has
        # the same shapes, so stage3 compiles one prefill and one decode step, not a set per prompt length
        self.engine = Engine(model, tokenizer, stage.Tensor, prefill_chunk=32)

    @classmethod
    def load(cls, ckpt: str | Path, stage: int | ModuleType = 2) -> ChatBackend:
        stage = load_stage(stage) if isinstance(stage, int) else stage
        state = load_checkpoint(ckpt)
        if state.meta.get("task") != "nanochat" or not state.meta.get("tokenizer"):
            raise CheckpointError(ckpt, f"holds a {state.meta.get('task')!r} model, not a nanochat one "
                                        "(train one with `sitp nanochat`)")
        model = NanoChat(stage, NanoChatConfig(**state.meta["config"]))
        load_model_weights(stage, model, state.model)
        return cls(stage, model, tokenizer_from_text(state.meta["tokenizer"]))

    def reply_tokens(self, messages: list[dict], temperature: float = 0.6, top_k: int | None = 50,
                     max_tokens: int = 256, seed: int | None = 0, stats: Any = None,
                     top_p: float | None = None) -> Iterator[int]:
        """The reply's token ids as they are generated (tool tokens forced by the engine included).
        ``stats`` (api.ReplyStats), when given, counts the prompt's and the reply's tokens."""
        prompt = render_for_completion(self.tokenizer, [*messages, {"role": "assistant", "content": ""}])
        if stats is not None:
            stats.prompt_tokens = len(prompt)
        room = self.model.config.sequence_len - len(prompt)
        if room <= 0:
            raise ValueError(f"chat: the conversation is {len(prompt)} tokens, the model's window is "
                             f"{self.model.config.sequence_len}; start a new conversation")
        with no_grad(self.stage.Tensor):  # stage1 has no autograd to switch off
            for column, _ in self.engine.generate(prompt, num_samples=1, max_tokens=min(max_tokens, room),
                                                  temperature=temperature, top_k=top_k, top_p=top_p,
                                                  seed=0 if seed is None else seed):
                if stats is not None:
                    stats.completion_tokens += 1
                yield column[0]

    def stream_reply(self, messages: list[dict], temperature: float = 0.6, top_k: int | None = 50,
                     max_tokens: int = 256, seed: int | None = 0, stats: Any = None,
                     top_p: float | None = None) -> Iterator[str]:
        """The reply as text pieces; special tokens show as their names, except the closing <|assistant_end|>
        (which sets ``stats.ended``)."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        specials = {i: name for name, i in self.tokenizer.special_tokens.items()}
        end = self.tokenizer.special_id("<|assistant_end|>")
        for token in self.reply_tokens(messages, temperature, top_k, max_tokens, seed, stats, top_p):
            if token == end:
                if stats is not None:
                    stats.ended = True
                break
            piece = specials[token] if token in specials else decoder.decode(self.tokenizer.decode_bytes([token]))
            if piece:
                yield piece
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail

    def reply(self, messages: list[dict], **kwargs: Any) -> str:
        return "".join(self.stream_reply(messages, **kwargs))
