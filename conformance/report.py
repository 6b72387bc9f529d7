"""Print the conformance coverage: catalogue entries, op x dtype pairs and forward cases per
section, and for every stage how many of them it runs and how many are xfails from the
capability table. `python -m conformance.report` (counts only; run pytest for results).
"""

from __future__ import annotations

import argparse

from .catalogue import CATALOGUE, SECTIONS
from .stages import STAGES, importable


def section_rows() -> list[tuple[str, int, int, int]]:
    rows = []
    for section in SECTIONS:
        ops = [op for op in CATALOGUE if op.section == section]
        pairs = sum(len(op.dtypes) for op in ops)
        cases = sum(len(op.cases(dt)) for op in ops for dt in op.dtypes)
        rows.append((section, len(ops), pairs, cases))
    return rows


def stage_rows() -> list[tuple[str, str, int, int, int]]:
    rows = []
    for stage in STAGES:
        missing = [op for op in CATALOGUE if stage.reason(op.needs)]
        pairs = sum(len(op.dtypes) for op in CATALOGUE)
        xfail = sum(len(op.dtypes) for op in missing)
        status = "present" if importable(stage) else "absent"
        rows.append((stage.name, status, len(CATALOGUE) - len(missing), pairs - xfail, xfail))
    return rows


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__).parse_args(argv)
    from . import test_errors, test_forward  # the tables other than the catalogue

    print("| section | ops | op x dtype | forward cases |")
    print("| --- | ---: | ---: | ---: |")
    rows = section_rows()
    for section, ops, pairs, cases in rows:
        print(f"| {section} | {ops} | {pairs} | {cases} |")
    total = [sum(r[i] for r in rows) for i in (1, 2, 3)]
    print(f"| **all** | {total[0]} | {total[1]} | {total[2]} |")
    capabilities = len({op.needs for op in CATALOGUE})
    print(f"\n{total[0]} catalogue entries ({capabilities} capability-table keys), "
          f"{len(test_forward.PAIRS)} mixed-dtype promotion pairs, {len(test_errors.ERRORS)} error-contract "
          "cases, 3 hypothesis properties.")
    print("\n| stage | status | ops run | op x dtype run | op x dtype xfail (missing) |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, status, ops, run, xfail in stage_rows():
        print(f"| {name} | {status} | {ops} | {run} | {xfail} |")


if __name__ == "__main__":
    main()
