"""Render a pytest-benchmark JSON into a markdown table of medians and stage/numpy ratios.

    python -m benchmarks.report [benchmarks/results/kernels.json]

writes the table next to the JSON (same name, .md) and prints it.
"""

import json
import sys
from collections import defaultdict


def render(path: str) -> str:
    data = json.load(open(path))
    medians: dict[str, dict[str, float]] = defaultdict(dict)
    for bench in data["benchmarks"]:
        medians[bench["group"]][bench["extra_info"]["impl"]] = bench["stats"]["median"]
    info = data["machine_info"]
    lines = [f"Machine: {info.get('cpu_model', '?')}, {info.get('cores', '?')} cores, numpy {info.get('numpy', '?')}",
             f"Run: {data['datetime']}", "",
             "| kernel | stage1 median (ms) | numpy median (ms) | stage1 / numpy |", "| --- | ---: | ---: | ---: |"]
    for group, by_impl in medians.items():
        ours, ref = by_impl.get("stage1"), by_impl.get("numpy")
        ratio = f"{ours / ref:.2f}x" if ours and ref else "-"
        lines.append(f"| {group} | {ours * 1e3:.3f} | {ref * 1e3:.3f} | {ratio} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    source = sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/kernels.json"
    table = render(source)
    with open(source.rsplit(".", 1)[0] + ".md", "w") as f:
        f.write(table)
    sys.stdout.write(table)
