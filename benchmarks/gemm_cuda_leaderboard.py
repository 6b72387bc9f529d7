"""Render the CUDA GEMM run (pytest-benchmark JSON from benchmarks/test_gemm_cuda.py) as a leaderboard.

    python -m benchmarks.gemm_cuda_leaderboard [benchmarks/results/gemm_cuda.json] [--write-headers]

writes benchmarks/results/gemm_cuda.md and gemm_cuda.png next to the JSON and replaces the table
in README.md between the gemm-cuda markers; --write-headers also fills each rung's 'measured:'
header line from the run. Every number comes from the one run in the JSON:
GFLOP/s from the median round (a round is a batch of launches, see the suite's docstring), % of
cuBLAS at the same precision and size, % of the peak the suite recorded (FP32: measured by an FMA
microbenchmark; BF16: tensor-core spec from SM count and clock).
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "gemm_cuda.json"
README = ROOT / "README.md"
MARKERS = ("<!-- gemm-cuda:start -->", "<!-- gemm-cuda:end -->")
FOCUS_N = 4096  # the size the goals are stated at


def rates(data: dict) -> dict[tuple[str, str], dict[int, float]]:
    """{(impl, precision): {n: FLOP/s}} from the median round of each benchmark."""
    table: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for bench in data["benchmarks"]:
        info = bench["extra_info"]
        seconds = bench["stats"]["median"] / info["launches_per_round"]
        table[(info["impl"], info["precision"])][int(info["n"])] = info["flops"] / seconds
    return table


def render(data: dict) -> str:
    if not data["benchmarks"]:
        raise ValueError("gemm_cuda leaderboard: the JSON holds no benchmarks")
    info = data["benchmarks"][0]["extra_info"]
    table = rates(data)
    sizes = sorted({n for by_n in table.values() for n in by_n})
    focus = FOCUS_N if FOCUS_N in sizes else sizes[-1]
    peaks = {"fp32": info.get("peak_fp32_measured"), "bf16": info.get("peak_bf16_spec")}
    peak_text = ", ".join(f"{p} peak {v / 1e12:.1f} TFLOP/s" for p, v in peaks.items() if v)
    gpu = f"{info['gpu']} (sm_{info['compute_capability']}, {info['sms']} SMs)"
    lines = [f"GPU: {gpu}; run {data.get('datetime', '?')}; "
             f"{peak_text} (fp32 measured by an FMA loop, bf16 from the tensor-core spec).", "",
             "GFLOP/s at each square size n, with % of cuBLAS at the same precision in parentheses.", "",
             "| rung | precision | " + " | ".join(f"n={n}" for n in sizes)
             + f" | % of cuBLAS (n={focus}) | % of peak (n={focus}) |",
             "| --- | --- | " + " | ".join("---:" for _ in sizes) + " | ---: | ---: |"]
    order = sorted(table, key=lambda key: (key[0].startswith("cublas"), key[1] != "fp32", key[0]))
    for impl, precision in order:
        by_n, cublas = table[(impl, precision)], table.get((f"cublas_{precision}", precision), {})
        cells = []
        for n in sizes:
            if n not in by_n:
                cells.append("-")
                continue
            ratio = f" ({100 * by_n[n] / cublas[n]:.0f}%)" if n in cublas and not impl.startswith("cublas") else ""
            cells.append(f"{by_n[n] / 1e9:,.0f}{ratio}")
        vs_cublas = f"{100 * by_n[focus] / cublas[focus]:.1f}%" if focus in by_n and focus in cublas else "-"
        vs_peak = f"{100 * by_n[focus] / peaks[precision]:.1f}%" if focus in by_n and peaks.get(precision) else "-"
        lines.append(f"| {impl} | {precision} | " + " | ".join(cells) + f" | {vs_cublas} | {vs_peak} |")
    return "\n".join(lines) + "\n"


def plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for (impl, precision), by_n in sorted(rates(data).items()):
        sizes = sorted(by_n)
        style = "--" if impl.startswith("cublas") else "-"
        ax.plot(sizes, [by_n[n] / 1e12 for n in sizes], style, marker="o", label=f"{impl} ({precision})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n (square GEMM)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"CUDA GEMM ladder on {data['benchmarks'][0]['extra_info']['gpu']}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def replace_between_markers(text: str, table: str) -> str:
    start, end = MARKERS
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"gemm_cuda leaderboard: README.md has no {start} ... {end} block")
    return pattern.sub(lambda _: f"{start}\n{table}{end}", text)


def measured_lines(data: dict) -> dict[str, str]:
    """{rung: its header's new 'measured:' text}, at the focus size, from the run."""
    table = rates(data)
    info = data["benchmarks"][0]["extra_info"]
    sizes = sorted({n for by_n in table.values() for n in by_n})
    focus = FOCUS_N if FOCUS_N in sizes else sizes[-1]
    lines = {}
    for (impl, precision), by_n in table.items():
        cublas = table.get((f"cublas_{precision}", precision), {})
        if impl.startswith("cublas") or focus not in by_n or focus not in cublas:
            continue
        day = data.get("datetime", "?")[:10]
        lines[impl] = (f"{by_n[focus] / 1e9:,.0f} GFLOP/s at n={focus} on {info['gpu']}, "
                       f"{100 * by_n[focus] / cublas[focus]:.0f}% of cuBLAS {precision} ({day})")
    return lines


def write_headers(data: dict, gemm_dir: Path = ROOT / "stage2_autograd" / "cuda" / "gemm") -> list[str]:
    """Replace the 'measured:' line of each rung's header with this run's number; returns the rungs touched."""
    touched = []
    for rung, text in measured_lines(data).items():
        path = gemm_dir / f"{rung}.cu"
        source = path.read_text()
        updated = re.sub(r"^(\s*measured:\s*).*$", lambda m, text=text: m.group(1) + text, source, count=1,
                         flags=re.M)
        if updated != source:
            path.write_text(updated)
            touched.append(rung)
    return touched


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--write-headers"]
    source = Path(args[0]) if args else DEFAULT_JSON
    data = json.loads(source.read_text())
    table = render(data)
    source.with_suffix(".md").write_text(table)
    plot(data, source.with_suffix(".png"))
    README.write_text(replace_between_markers(README.read_text(), table))
    if "--write-headers" in argv:
        print("measured: lines updated in", ", ".join(write_headers(data)) or "no rung")
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
