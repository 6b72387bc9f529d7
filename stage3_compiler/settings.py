"""The compiler's leaf: settings read from the environment, and the user's line of code.

Every layer reads these (the graph remembers call sites, the engine prints by DEBUG, the compilers
cache under SITP_CACHE), so they live here, importing nothing of the package.

    DEBUG=1..4     what realize prints (engine/realize.py)
    GRAPH=1        the lazy and kernel graphs of each realize as Graphviz files (engine/debug.py)
    NANCHECK=1     stop at the first kernel that wrote a NaN (engine/debug.py)
    BEAM=n         search kernel options instead of the heuristics (engine/search.py)
    PASSES=...     which speed passes run (passes.py: `none` runs the core alone, `-vectorize` drops
                   one, `-online` drops FlashAttention, `+name` adds a pass that is off)
    NOOPT=1        the core alone (PASSES=none), tinygrad's name
    SITP_CACHE     where compiled kernels and searches are kept (default ~/.cache/sitp)
    SITP_ISA       the instruction set the C kernels are built for (isa.py)
    SITP_TILES     emulate: the tiles pass writes C that does what AMX does (isa.matrix_unit)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def enabled(name: str) -> bool:
    return os.environ.get(name, "0") not in ("", "0")


def debug_level() -> int:
    return int(os.environ.get("DEBUG", "0") or 0)


def beam_width() -> int:
    """BEAM's width (0: no search, the heuristics pick every kernel's options)."""
    raw = os.environ.get("BEAM", "0").strip() or "0"
    try:
        width = int(raw)
    except ValueError:
        raise ValueError(f"BEAM must be a non-negative int (the beam's width), got {raw!r}") from None
    if width < 0:
        raise ValueError(f"BEAM must be a non-negative int (the beam's width), got {raw!r}")
    return width


def cache_dir() -> Path:
    return Path(os.environ.get("SITP_CACHE", Path.home() / ".cache" / "sitp")) / "stage3"


# ---- call sites: the first frame outside this package ----

PACKAGE = str(Path(__file__).resolve().parent)
_inside: dict[str, bool] = {}  # filename -> in the package (its own tests count as the user's code)


def _is_inside(filename: str) -> bool:
    found = _inside.get(filename)
    if found is None:
        path = str(Path(filename).resolve())
        found = _inside[filename] = path.startswith(PACKAGE + os.sep) and not path.startswith(
            os.path.join(PACKAGE, "tests") + os.sep)
    return found


def callsite() -> tuple[str, int] | None:
    """(file, line) of the first caller outside this package; None when there is none. Every base
    of the lazy graph keeps one, so a kernel's error names the line that built it. A walk up the
    frames that keeps two small values, no frame: a nanoGPT step makes ~30k bases."""
    f = sys._getframe(1)
    while f is not None and _is_inside(f.f_code.co_filename):
        f = f.f_back
    return None if f is None else (f.f_code.co_filename, f.f_lineno)


def where(node, short: bool = False) -> str:
    """The line that made a node of the graph (its `site`), for messages."""
    site = getattr(node, "site", None)
    if site is None:
        return "an unknown line"
    return f"{Path(site[0]).name if short else site[0]}:{site[1]}"


def user_line() -> str:
    """The line of the user's code running now."""
    site = callsite()
    return "an unknown line" if site is None else f"{site[0]}:{site[1]}"
