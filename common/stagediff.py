"""The lesson between two stages: a unified diff of the files that changed (identical files left
out) and a table of changed lines per file.

    python -m common.stagediff 1 2      (or: nox -s diff -- 1 2)
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = {"1": "stage1_ndarray", "2": "stage2_autograd", "3": "stage3_compiler"}
SKIP = {"__pycache__", ".pytest_cache"}


def stage_files(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*"))
            if p.is_file() and not SKIP & set(p.parts) and p.suffix not in (".pyc", ".so")}


def read_lines(path: Path | None) -> list[str]:
    return path.read_text().splitlines(keepends=True) if path else []


def lesson(old: Path, new: Path) -> tuple[str, list[tuple[str, int, int]]]:
    """The diff text and (file, lines added, lines removed) for every file that differs."""
    a, b = stage_files(old), stage_files(new)
    chunks, table = [], []
    for name in sorted(a.keys() | b.keys()):
        before, after = read_lines(a.get(name)), read_lines(b.get(name))
        if before == after:
            continue
        diff = list(difflib.unified_diff(before, after, f"{old.name}/{name}", f"{new.name}/{name}"))
        added = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
        removed = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
        chunks.append("".join(diff))
        table.append((name, added, removed))
    return "\n".join(chunks), table


def render_table(table: list[tuple[str, int, int]], identical: int) -> str:
    rows = [f"{'file':<44} {'+':>6} {'-':>6}"]
    rows += [f"{name:<44} {added:>6} {removed:>6}" for name, added, removed in table]
    rows.append(f"{'total':<44} {sum(t[1] for t in table):>6} {sum(t[2] for t in table):>6}")
    rows.append(f"({identical} identical files left out)")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", choices=sorted(STAGES))
    parser.add_argument("new", choices=sorted(STAGES))
    parser.add_argument("--stat", action="store_true", help="only the changed-lines table")
    args = parser.parse_args(argv)
    old, new = ROOT / STAGES[args.old], ROOT / STAGES[args.new]
    for path in (old, new):
        if not path.is_dir():
            print(f"diff: {path.name} is not in this checkout yet", file=sys.stderr)
            return 2
    text, table = lesson(old, new)
    identical = len(stage_files(old).keys() & stage_files(new).keys()) - sum(
        1 for name, _, _ in table if (old / name).exists() and (new / name).exists())
    if not args.stat:
        print(text)
    print(render_table(table, identical))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
