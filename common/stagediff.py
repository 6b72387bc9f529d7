"""The lesson between two stages: a unified diff of the files that changed (identical files left
out) and a table of changed lines per file.

Files come in the order the new stage's README reads them (its file-map table, in pipeline
order; a folder in the map is read in its own README's order), files the map does not name
after them; changed files first, then the new ones, then any removed. Where the map has a `pass`
column (stage3's speed passes), the files a pass holds come after all the others: the lesson
leads with the core.

    python -m common.stagediff 1 2 [--stat] [--no-tests]      (or: nox -s diff -- 1 2)
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from common.stages import STAGES

ROOT = Path(__file__).resolve().parents[1]
SKIP = {"__pycache__", ".pytest_cache", ".hypothesis"}
GROUPS = ("changed", "new", "removed")  # the order the lesson shows them in


@dataclass
class FileDiff:
    name: str  # path inside the stage
    status: str  # one of GROUPS
    text: str  # the unified diff
    added: int
    removed: int


def stage_files(root: Path, tests: bool = True) -> dict[str, Path]:
    """Every source file of a stage by its path inside it (build outputs left out)."""
    files = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if not p.is_file() or SKIP & set(rel.parts) or p.suffix in (".pyc", ".so", ".o"):
            continue
        if not tests and "tests" in rel.parts:
            continue
        files[rel.as_posix()] = p
    return files


def file_map(readme: Path) -> list[str]:
    """The paths in a README's file map (the first table whose header starts with ``file``), in order.

    A row names its file in backticks in the first cell (``| `tensor.py` | ... |``); a name ending
    in ``/`` is a folder; a row without one (``| stage1's files | ... |``) is prose and skipped.
    """
    if not readme.is_file():
        return []
    entries: list[str] = []
    in_map = False
    for line in readme.read_text().splitlines():
        if not line.startswith("|"):
            if entries:
                break
            in_map = False
            continue
        first = line.strip().strip("|").split("|")[0].strip()
        if first == "file":
            in_map = True
        elif in_map:
            entries += re.findall(r"`([^`]+)`", first)
    return entries


def pass_files(readme: Path) -> set[str]:
    """The paths of the file map's rows that name a pass in a ``pass`` column (none without one)."""
    if not readme.is_file():
        return set()
    found: set[str] = set()
    column = None
    for line in readme.read_text().splitlines():
        if not line.startswith("|"):
            if column is not None and found:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "file":
            column = cells.index("pass") if "pass" in cells else None
            if column is None:
                break  # the first file table is the map, and it has no pass column
        elif column is not None and len(cells) > column and cells[column] and not set(cells[column]) <= {"-"}:
            found.update(re.findall(r"`([^`]+)`", cells[0]))
    return found


def reading_key(name: str, stage: Path, folder: str = "") -> tuple[tuple[int, ...], str]:
    """Where ``name`` comes in the stage's reading order: its row in the file map (and in a mapped
    folder's own map), files the map does not name after the mapped ones, by name."""
    entries = file_map(stage / folder / "README.md")
    rest = name[len(folder):]
    for i, entry in enumerate(entries):
        if rest == entry:
            return (i,), name
        if entry.endswith("/") and rest.startswith(entry):
            inner, _ = reading_key(name, stage, folder + entry)
            return (i, *inner), name
    return (len(entries),), name


def file_diff(name: str, before: Path | None, after: Path | None, old: str, new: str) -> FileDiff | None:
    a = before.read_text(errors="replace").splitlines(keepends=True) if before else []
    b = after.read_text(errors="replace").splitlines(keepends=True) if after else []
    if a == b:
        return None
    lines = list(difflib.unified_diff(a, b, f"{old}/{name}", f"{new}/{name}"))
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    status = "new" if before is None else "removed" if after is None else "changed"
    return FileDiff(name, status, "".join(lines), added, removed)


def lesson(old: Path, new: Path, tests: bool = True) -> tuple[list[FileDiff], int]:
    """Every file that differs, in reading order (changed, then new, then removed), and how many are identical."""
    a, b = stage_files(old, tests), stage_files(new, tests)
    diffs = [d for name in a.keys() | b.keys()
             if (d := file_diff(name, a.get(name), b.get(name), old.name, new.name)) is not None]
    passes = pass_files(new / "README.md")
    diffs.sort(key=lambda d: (d.name in passes, GROUPS.index(d.status),
                              reading_key(d.name, new if d.status != "removed" else old)))
    identical = len(a.keys() & b.keys()) - sum(1 for d in diffs if d.status == "changed")
    return diffs, identical


def render_table(diffs: list[FileDiff], identical: int) -> str:
    width = max([44, *(len(d.name) for d in diffs)])
    rows = [f"{'file':<{width}} {'':<7} {'+':>6} {'-':>6}"]
    rows += [f"{d.name:<{width}} {d.status:<7} {d.added:>6} {d.removed:>6}" for d in diffs]
    rows.append(f"{'total':<{width}} {'':<7} {sum(d.added for d in diffs):>6} {sum(d.removed for d in diffs):>6}")
    rows.append(f"({identical} identical files left out)")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stagediff", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", nargs="?", type=int, default=1, choices=sorted(STAGES), help="stage number (1)")
    parser.add_argument("new", nargs="?", type=int, default=2, choices=sorted(STAGES), help="stage number (2)")
    parser.add_argument("--stat", action="store_true", help="only the changed-lines table")
    parser.add_argument("--no-tests", action="store_true", help="leave out the stages' tests/ folders")
    args = parser.parse_args(argv)
    old, new = ROOT / STAGES[args.old], ROOT / STAGES[args.new]
    for path in (old, new):
        if not path.is_dir():
            print(f"diff: {path.name} is not in this checkout yet", file=sys.stderr)
            return 2
    diffs, identical = lesson(old, new, tests=not args.no_tests)
    if not args.stat:
        print("\n".join(d.text for d in diffs))
    print(render_table(diffs, identical))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
