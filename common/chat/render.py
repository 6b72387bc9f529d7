"""nanochat's conversation format: a conversation becomes token ids plus a loss mask.

A conversation is a list of messages ``{"role": "user" | "assistant", "content": ...}`` that
alternate, starting with the user (one leading ``system`` message is allowed: its text is put in
front of the first user message, as nanochat does). A user's content is a string; an assistant's is
a string or a list of parts ``{"type": "text" | "python" | "python_output", "text": str}``.

The layout, with the mask (1 = the model is trained to produce this token) under each piece::

    <|bos|> <|user_start|> text <|user_end|> <|assistant_start|> text ... <|assistant_end|>
       0          0          0        0               0             1              1

Inside an assistant message a ``python`` part is ``<|python_start|> code <|python_end|>`` (mask 1:
the model writes the call) and a ``python_output`` part is ``<|output_start|> out <|output_end|>``
(mask 0: at inference the engine writes the tool's answer, so the model must not learn to make it
up). ``<|assistant_start|>`` is masked because the engine (or the renderer) always writes it;
``<|assistant_end|>`` is learned because the model must decide when it is done.

The tokenizer is used only through ``encode_ordinary(text)``, ``special_id(name)`` and ``bos_id``.

For training, ``to_training_rows`` shifts by one (inputs = ids[:-1], targets = ids[1:]) and sets a
target to -1 (ignored by the loss) wherever the mask of that target token is 0. Two ways to make
fixed-length rows from many conversations, as nanochat's two chat phases do:

- ``pack_rows`` (SFT): one conversation per row, truncated to T + 1 tokens, the rest padded (targets
  with -1, inputs with ``pad_id``: nanochat pads with ``<|assistant_end|>``), so no row mixes two
  conversations and padding costs no loss;
- ``pack_stream`` (mid-training): conversations back to back in one token stream cut into rows of
  T + 1 tokens, no padding wasted; nanochat's mid-training trains on every token of the stream, which
  ``masked=False`` gives (``masked=True`` keeps the loss mask).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

SPECIAL_TOKENS = (
    "<|bos|>",
    "<|user_start|>",
    "<|user_end|>",
    "<|assistant_start|>",
    "<|assistant_end|>",
    "<|python_start|>",
    "<|python_end|>",
    "<|output_start|>",
    "<|output_end|>",
)
PART_TYPES = ("text", "python", "python_output")
IGNORE = -1  # target value the loss skips

Conversation = Sequence[dict[str, Any]]


def _fail(where: str, message: str) -> ValueError:
    return ValueError(f"{where}: {message}")


def _check_part(where: str, index: int, part: Any) -> None:
    if not isinstance(part, dict) or part.get("type") not in PART_TYPES or not isinstance(part.get("text"), str):
        raise _fail(where, f"message {index}: an assistant part must be {{'type': one of {PART_TYPES}, "
                           f"'text': str}}, got {part!r}")


def normalize_conversation(conversation: Conversation, where: str = "normalize_conversation") -> list[dict[str, Any]]:
    """Check a conversation and merge a leading system message into the first user message.

    Raises ValueError naming ``where``, the message index and what was expected."""
    if not isinstance(conversation, (list, tuple)) or not conversation:
        raise _fail(where, f"a conversation is a non-empty list of messages, got {conversation!r:.80}")
    messages = [dict(m) if isinstance(m, dict) else m for m in conversation]
    if isinstance(messages[0], dict) and messages[0].get("role") == "system":
        system = messages.pop(0)
        if not isinstance(system.get("content"), str):
            raise _fail(where, f"the system message's content must be a str, got {system.get('content')!r:.80}")
        if not messages or not isinstance(messages[0], dict) or messages[0].get("role") != "user":
            raise _fail(where, "a system message must be followed by a user message")
        if not isinstance(messages[0].get("content"), str):
            raise _fail(where, f"message 1: a user's content must be a str, got {messages[0].get('content')!r:.80}")
        messages[0]["content"] = system["content"] + "\n\n" + messages[0]["content"]
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            raise _fail(where, f"message {i} must be a dict with 'role' and 'content', got {message!r:.80}")
        expected = "user" if i % 2 == 0 else "assistant"
        if message["role"] != expected:
            raise _fail(where, f"messages must alternate user/assistant starting with user: message {i} has role "
                               f"{message['role']!r}, expected {expected!r}")
        content = message["content"]
        if isinstance(content, list) and expected == "assistant":
            for part in content:
                _check_part(where, i, part)
        elif not isinstance(content, str):
            kind = "a str or a list of parts" if expected == "assistant" else "a str"
            raise _fail(where, f"message {i}: a {expected}'s content must be {kind}, got {content!r:.80}")
    return messages


class _Builder:
    """Token ids and their mask, appended piece by piece."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.mask: list[int] = []

    def special(self, name: str, mask: int) -> None:
        self.ids.append(self.tokenizer.special_id(name))
        self.mask.append(mask)

    def text(self, text: str, mask: int) -> None:
        ids = self.tokenizer.encode_ordinary(text)
        self.ids.extend(ids)
        self.mask.extend([mask] * len(ids))

    def assistant_content(self, content: str | list[dict[str, str]]) -> None:
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for part in parts:
            if part["type"] == "text":
                self.text(part["text"], 1)
            elif part["type"] == "python":  # the model writes the tool call
                self.special("<|python_start|>", 1)
                self.text(part["text"], 1)
                self.special("<|python_end|>", 1)
            else:  # python_output: the engine writes it at inference time, so no loss
                self.special("<|output_start|>", 0)
                self.text(part["text"], 0)
                self.special("<|output_end|>", 0)

    def messages(self, messages: list[dict[str, Any]]) -> None:
        self.ids.append(self.tokenizer.bos_id)
        self.mask.append(0)
        for message in messages:
            if message["role"] == "user":
                self.special("<|user_start|>", 0)
                self.text(message["content"], 0)
                self.special("<|user_end|>", 0)
            else:
                self.special("<|assistant_start|>", 0)
                self.assistant_content(message["content"])
                self.special("<|assistant_end|>", 1)


def render_conversation(tokenizer: Any, conversation: Conversation,
                        max_tokens: int | None = None) -> tuple[list[int], list[int]]:
    """(ids, mask) of a whole conversation; both cut to the first ``max_tokens`` when given."""
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise ValueError(f"render_conversation: max_tokens must be a positive int or None, got {max_tokens!r}")
    builder = _Builder(tokenizer)
    builder.messages(normalize_conversation(conversation, "render_conversation"))
    if max_tokens is not None:
        return builder.ids[:max_tokens], builder.mask[:max_tokens]
    return builder.ids, builder.mask


def render_for_completion(tokenizer: Any, conversation: Conversation) -> list[int]:
    """The prompt for the engine: the conversation without its last (assistant) message, then
    ``<|assistant_start|>``, so the model's next token begins its reply."""
    messages = normalize_conversation(conversation, "render_for_completion")
    if messages[-1]["role"] != "assistant":
        raise ValueError("render_for_completion: the conversation must end with the assistant message to be "
                         f"completed (its content is dropped), but its last message has role {messages[-1]['role']!r}")
    builder = _Builder(tokenizer)
    builder.messages(messages[:-1])
    builder.special("<|assistant_start|>", 0)
    return builder.ids


def to_training_rows(ids: Sequence[int], mask: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """inputs = ids[:-1], targets = ids[1:] with -1 where the target's mask is 0; both (len(ids) - 1,) int64."""
    if len(ids) != len(mask) or len(ids) < 2:
        raise ValueError(f"to_training_rows: need ids and mask of the same length >= 2, got {len(ids)} and {len(mask)}")
    ids_arr = np.asarray(ids, dtype=np.int64)
    keep = np.asarray(mask, dtype=np.int64)[1:] != 0
    targets = np.where(keep, ids_arr[1:], IGNORE)
    return ids_arr[:-1].copy(), targets


def pack_rows(rendered: Sequence[tuple[Sequence[int], Sequence[int]]], T: int,
              pad_id: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """SFT rows: one rendered (ids, mask) per row, cut to T + 1 tokens and padded.

    Returns inputs, targets (N, T) int64; padded inputs hold ``pad_id`` (default: the row's last
    token, a real token id, so any embedding lookup stays in range) and padded targets -1. A
    conversation that has no target left after the cut (no assistant token among its first T + 1)
    still gets its row: the loss simply skips it."""
    if not isinstance(T, int) or T < 1:
        raise ValueError(f"pack_rows: T must be a positive int, got {T!r}")
    if not rendered:
        raise ValueError("pack_rows: no conversations to pack")
    inputs = np.zeros((len(rendered), T), dtype=np.int64)
    targets = np.full((len(rendered), T), IGNORE, dtype=np.int64)
    for row, (ids, mask) in enumerate(rendered):
        x, y = to_training_rows(ids[:T + 1], mask[:T + 1])
        fill = pad_id if pad_id is not None else int(ids[min(len(ids), T + 1) - 1])
        inputs[row, :] = fill
        inputs[row, :len(x)] = x
        targets[row, :len(y)] = y
    return inputs, targets


def pack_stream(rendered: Sequence[tuple[Sequence[int], Sequence[int]]], T: int,
                masked: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Mid-training rows: all conversations back to back, cut into windows of T + 1 tokens that
    overlap by one (each token after the first is a target once); the tail that does not fill a
    window is dropped. ``masked=False`` (nanochat's mid-training) makes every token a target.
    Returns inputs, targets (N, T) int64."""
    if not isinstance(T, int) or T < 1:
        raise ValueError(f"pack_stream: T must be a positive int, got {T!r}")
    ids = np.asarray([i for r in rendered for i in r[0]], dtype=np.int64)
    mask = np.asarray([m for r in rendered for m in r[1]], dtype=np.int64)
    if len(ids) != len(mask):
        raise ValueError(f"pack_stream: ids and masks differ in length ({len(ids)} vs {len(mask)})")
    rows = (len(ids) - 1) // T
    if rows < 1:
        raise ValueError(f"pack_stream: {len(ids)} tokens cannot fill one row of T + 1 = {T + 1}")
    window = np.arange(T)[None, :] + T * np.arange(rows)[:, None]  # (N, T) positions of the inputs
    targets = ids[window + 1]
    if masked:
        targets = np.where(mask[window + 1] != 0, targets, IGNORE)
    return ids[window], targets
