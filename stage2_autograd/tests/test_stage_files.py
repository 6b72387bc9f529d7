"""stage2 is a snapshot of stage1: every file outside the README's list of differences is a
byte-identical copy, and every listed file really differs (or is new). The stage imports only itself."""

import re
from pathlib import Path

STAGE2 = Path(__file__).resolve().parents[1]
STAGE1 = STAGE2.parent / "stage1_ndarray"


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def listed() -> list[str]:
    text = (STAGE2 / "README.md").read_text()
    block = text.split("<!-- differs:start -->")[1].split("<!-- differs:end -->")[0]
    return re.findall(r"^- `([^`]+)`", block, flags=re.M)


def covered(path: str, entries: list[str]) -> bool:
    return any(path == e or (e.endswith("/") and path.startswith(e)) for e in entries)


def test_the_readme_lists_exactly_the_files_that_differ_from_stage1():
    old, new = files(STAGE1), files(STAGE2)
    assert old <= new, f"files of stage1 missing from stage2: {sorted(old - new)}"
    differ = {p for p in new if p not in old or (STAGE1 / p).read_bytes() != (STAGE2 / p).read_bytes()}
    entries = listed()
    assert sorted(p for p in differ if not covered(p, entries)) == [], "differ from stage1 but are not listed"
    stale = [e for e in entries if not any(covered(p, [e]) for p in differ)]
    assert stale == [], "listed, but byte-identical to stage1 (or absent)"


def test_the_stage_imports_neither_stage1_nor_common():
    for path in STAGE2.rglob("*.py"):
        if "tests" in path.parts:
            continue
        text = path.read_text()
        for name in ("stage1_ndarray", "common", "stage3_compiler"):
            assert f"import {name}" not in text and f"from {name}" not in text, path
