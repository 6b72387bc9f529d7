"""`nox -s diff -- 1 2` (common/stagediff.py): files in the new stage's README reading order
(a mapped folder in its own README's order, unmapped files after), changed files before new ones
before removed ones, identical files left out and counted, `--no-tests` leaving out tests/,
`--stat` printing only the table, and one STAGES map shared with common/stages.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from common import stagediff, stages
from common.cli import main as sitp

OLD_README = "| file | what it holds |\n| --- | --- |\n| `a.py` | a |\n"
NEW_README = """# the new stage

## Read it in this order

| file | what it holds |
| --- | --- |
| stage1's files | unchanged: `same.py` |
| `zeta.py` | read first though it sorts last |
| `alpha.py` | read second |
| `pkg/` | a folder, in its own README's order |
| `fresh.py`, `fresher.py` | two new files in one row |

## Another table

| file | idea | what it fixes |
| --- | --- | --- |
| `unmapped_in_second_table.py` | not the file map | - |
"""
PKG_README = "| file | what it holds |\n| --- | --- |\n| `z.py` | first |\n| `a.py` | second |\n"


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture
def two_stages(tmp_path: Path) -> tuple[Path, Path]:
    common = {"same.py": "x = 1\n", "tests/test_same.py": "def test(): pass\n"}
    old = write(tmp_path / "old", {**common, "README.md": OLD_README, "alpha.py": "a = 1\n", "zeta.py": "z = 1\n",
                                   "unmapped.py": "u = 1\n", "gone.py": "g = 1\n", "pkg/a.py": "1\n",
                                   "tests/test_alpha.py": "a = 1\n"})
    new = write(tmp_path / "new", {**common, "README.md": NEW_README, "alpha.py": "a = 2\n", "zeta.py": "z = 2\n",
                                   "unmapped.py": "u = 2\n", "fresher.py": "f\n", "fresh.py": "f\n",
                                   "pkg/README.md": PKG_README, "pkg/a.py": "2\n", "pkg/z.py": "new\n",
                                   "pkg/b.py": "new\n", "unmapped_in_second_table.py": "n\n",
                                   "tests/test_alpha.py": "a = 2\n", "tests/test_new.py": "n = 1\n"})
    return old, new


def test_file_map_reads_the_first_file_table(two_stages):
    _, new = two_stages
    assert stagediff.file_map(new / "README.md") == ["zeta.py", "alpha.py", "pkg/", "fresh.py", "fresher.py"]
    assert stagediff.file_map(new / "nothing.md") == []


def test_reading_order_changed_then_new_then_removed(two_stages):
    old, new = two_stages
    diffs, identical = stagediff.lesson(old, new)
    assert [(d.name, d.status) for d in diffs] == [
        ("zeta.py", "changed"), ("alpha.py", "changed"), ("pkg/a.py", "changed"),   # README order
        ("README.md", "changed"), ("tests/test_alpha.py", "changed"), ("unmapped.py", "changed"),  # then by name
        ("pkg/z.py", "new"), ("pkg/README.md", "new"), ("pkg/b.py", "new"),  # pkg's own map, then by name
        ("fresh.py", "new"), ("fresher.py", "new"),
        ("tests/test_new.py", "new"), ("unmapped_in_second_table.py", "new"),
        ("gone.py", "removed"),
    ]
    assert identical == 2  # same.py, tests/test_same.py
    zeta = diffs[0]
    assert (zeta.added, zeta.removed) == (1, 1) and "-z = 1\n+z = 2" in zeta.text


def test_a_map_with_a_pass_column_leads_with_the_files_that_hold_no_pass(tmp_path):
    old = write(tmp_path / "old", {"api.py": "a = 1\n"})
    readme = ("| file | pass | what it holds |\n| --- | --- | --- |\n| `core.py` | | the core |\n"
              "| `fast.py` | fast | a speed rule |\n| `lower.py` | | the core, reads fast.py |\n")
    new = write(tmp_path / "new", {"README.md": readme, "api.py": "a = 2\n", "core.py": "c\n", "fast.py": "f\n",
                                   "lower.py": "l\n"})
    assert stagediff.pass_files(new / "README.md") == {"fast.py"}
    assert stagediff.pass_files(old / "README.md") == set()
    diffs, _ = stagediff.lesson(old, new)
    assert [d.name for d in diffs] == ["api.py", "core.py", "lower.py", "README.md", "fast.py"]


def test_no_tests_leaves_out_tests(two_stages):
    old, new = two_stages
    diffs, identical = stagediff.lesson(old, new, tests=False)
    assert not [d.name for d in diffs if d.name.startswith("tests/")]
    assert identical == 1


def test_one_stages_map():
    assert stagediff.STAGES is stages.STAGES


def test_real_stages_stat(capsys):
    if not all((stagediff.ROOT / stages.STAGES[n]).is_dir() for n in (1, 2)):
        pytest.skip("stage1 and stage2 are not both in this checkout")
    assert stagediff.main(["1", "2", "--stat", "--no-tests"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1].endswith("identical files left out)") and "@@" not in out
    assert "tests/" not in out and "autograd.py" in out
    assert sitp(["diff", "1", "2"]) == 0  # the console command: the diff text, then the table
    out = capsys.readouterr().out
    assert out.startswith("--- stage1_ndarray/") and "+++ stage2_autograd/" in out


def test_missing_stage_is_a_clear_error(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(stagediff, "ROOT", tmp_path)
    assert stagediff.main(["1", "2"]) == 2
    assert "is not in this checkout yet" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        stagediff.main(["1", "9"])
