"""Render the CPU GEMM run (pytest-benchmark JSON from benchmarks/test_gemm.py) as a leaderboard.

    python -m benchmarks.gemm_leaderboard [benchmarks/results/gemm.json]

writes gemm.md and gemm.png next to the JSON and replaces the table in README.md between the
`<!-- gemm:start -->` and `<!-- gemm:end -->` markers. Every number comes from the one run in
the JSON: GFLOP/s from the median round, % of OpenBLAS (numpy) on the same shape and thread
count, % of the machine's peak that benchmarks/peak.c measured in that run.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "gemm.json"
README = ROOT / "README.md"
MARKERS = ("<!-- gemm:start -->", "<!-- gemm:end -->")
GOAL_SIZES = (1024, 2048)  # the goals: >= 90% of OpenBLAS here, on 1 and 2 threads
KIND_ORDER = {"rung": 0, "stage3": 1, "numba": 2, "python": 3, "vendor": 4}
STAGE3_SIZES = (512, 1024, 2048)  # stage3's goals: BEAM >= 70% of stage1's best rung here, heuristics >= 40%

Shape = tuple[int, int, int]


def rates(data: dict) -> tuple[dict[tuple[str, int], dict[Shape, float]], dict[str, str]]:
    """({(impl, threads): {(M, N, K): FLOP/s}}, {impl: kind}) from each benchmark's median."""
    table: dict[tuple[str, int], dict[Shape, float]] = defaultdict(dict)
    kinds = {}
    for bench in data["benchmarks"]:
        info = bench["extra_info"]
        shape = (info["M"], info["N"], info["K"])
        table[(info["impl"], info["threads"])][shape] = info["flops"] / bench["stats"]["median"]
        kinds[info["impl"]] = info["kind"]
    return table, kinds


def row_order(table, kinds) -> list[tuple[str, int]]:
    names = list(dict.fromkeys(impl for impl, _ in table))
    rank = {name: (KIND_ORDER.get(kinds[name], 9), name) for name in names}
    return sorted(table, key=lambda key: (key[1], rank[key[0]]))


def gflops(x: float) -> str:
    return f"{x / 1e9:.2f}" if x < 1e9 else f"{x / 1e9:.1f}"


def percent(x: float | None, ref: float | None) -> str:
    return f"{100 * x / ref:.0f}%" if x and ref else "-"


def square_table(table, kinds, peaks: dict[str, float]) -> list[str]:
    sizes = sorted({s[0] for by in table.values() for s in by if s[0] == s[1] == s[2]})
    goals = [n for n in GOAL_SIZES if n in sizes] or sizes[-1:]
    top = sizes[-1]
    head = ("| impl | threads | " + " | ".join(f"n={n}" for n in sizes)
            + "".join(f" | % of OpenBLAS n={n}" for n in goals) + f" | % of peak n={top} |")
    lines = [head, "|" + " --- |" * 2 + " ---: |" * (len(sizes) + len(goals) + 1)]
    for impl, threads in row_order(table, kinds):
        by = table[(impl, threads)]
        if not any((n, n, n) in by for n in sizes):
            continue
        blas = table.get(("numpy", threads), {})
        cells = [gflops(by[(n, n, n)]) if (n, n, n) in by else "-" for n in sizes]
        ratios = [percent(by.get((n, n, n)), blas.get((n, n, n))) for n in goals]
        cells += ratios + [percent(by.get((top, top, top)), peaks.get(str(threads)))]
        lines.append(f"| {impl} | {threads} | " + " | ".join(cells) + " |")
    return lines


def skinny_table(table, kinds) -> list[str]:
    shapes = sorted({s for by in table.values() for s in by if not s[0] == s[1] == s[2]})
    if not shapes:
        return []
    lines = ["| impl | threads | " + " | ".join(f"{M}x{N}x{K}" for M, N, K in shapes) + " |",
             "|" + " --- |" * 2 + " ---: |" * len(shapes)]
    for impl, threads in row_order(table, kinds):
        by, blas = table[(impl, threads)], table.get(("numpy", threads), {})
        if not any(s in by for s in shapes):
            continue
        cells = []
        for s in shapes:
            ratio = f" ({percent(by[s], blas.get(s))})" if s in by and impl != "numpy" and s in blas else ""
            cells.append(gflops(by[s]) + ratio if s in by else "-")
        lines.append(f"| {impl} | {threads} | " + " | ".join(cells) + " |")
    return lines


def stage3_table(table, kinds) -> list[str]:
    """stage3's generated GEMM against the best of stage1's hand-written rungs on each shape and thread count."""
    rows = [(impl, t) for impl, t in row_order(table, kinds) if kinds[impl] == "stage3"]
    if not rows:
        return []
    lines = ["| impl | threads | " + " | ".join(f"n={n}: GFLOP/s (best rung, %)" for n in STAGE3_SIZES) + " |",
             "|" + " --- |" * 2 + " ---: |" * len(STAGE3_SIZES)]
    for impl, threads in rows:
        cells = []
        for n in STAGE3_SIZES:
            ours = table[(impl, threads)].get((n, n, n))
            rungs = {name: by[(n, n, n)] for (name, t), by in table.items()
                     if t == threads and kinds[name] == "rung" and (n, n, n) in by}
            best = max(rungs, key=rungs.get, default=None)
            cells.append(f"{gflops(ours)} ({best} {gflops(rungs[best])}, {percent(ours, rungs[best])})"
                         if ours and best else "-")
        lines.append(f"| {impl} | {threads} | " + " | ".join(cells) + " |")
    return lines


def machine_text(data: dict) -> str:
    """The CPU's model (with its family and model numbers where recorded) and the ISA the rungs were built for."""
    info = data.get("machine_info", {})
    cpu = info.get("cpu", {})
    model = info.get("cpu_model", "?")
    if "family" in cpu and "model" in cpu:
        model += f" (family {cpu['family']}, model {cpu['model']})"
    isa = data["benchmarks"][0]["extra_info"].get("isa")
    if isa is None:  # a run from before the rungs recorded their build: the CPU's own flags
        flags = cpu.get("flags", [])
        isa = "AVX-512" if "avx512f" in flags else "AVX2/FMA" if "avx2" in flags else "?"
    return f"CPU: {model}, {info.get('cores', '?')} cores, rungs built for {isa}"


def render(data: dict) -> str:
    if not data["benchmarks"]:
        raise ValueError("gemm leaderboard: the JSON holds no benchmarks")
    table, kinds = rates(data)
    info = data.get("machine_info", {})
    peaks = data["benchmarks"][0]["extra_info"].get("peak_flops", {})
    peak_text = ", ".join(f"{t} thread{'s' if t != '1' else ''} {gflops(p)}" for t, p in sorted(peaks.items()))
    lines = [f"{machine_text(data)}; numpy {info.get('numpy', '?')} (OpenBLAS); run {data.get('datetime', '?')} "
             "by `nox -s gemm`.",
             f"Measured FP32 peak (benchmarks/peak.c, FMA chains, same run): {peak_text} GFLOP/s.", "",
             "Square C = A @ B in float32, GFLOP/s (2n^3 / median time):", ""]
    lines += square_table(table, kinds, peaks)
    stage3 = stage3_table(table, kinds)
    if stage3:
        lines += ["", "stage3's generated GEMM (reshape, expand, mul, sum: no MATMUL op) against stage1's best "
                  "hand-written rung on the same size and threads:", ""] + stage3
    skinny = skinny_table(table, kinds)
    if skinny:
        lines += ["", "Skinny and odd shapes (M x N x K), GFLOP/s (% of OpenBLAS, same threads):", ""] + skinny
    return "\n".join(lines) + "\n"


def plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table, kinds = rates(data)
    thread_counts = sorted({t for _, t in table})
    fig, axes = plt.subplots(1, len(thread_counts), figsize=(7 * len(thread_counts), 5), squeeze=False)
    peaks = data["benchmarks"][0]["extra_info"].get("peak_flops", {})
    names = list(dict.fromkeys(impl for impl, _ in row_order(table, kinds)))
    colors = {name: plt.get_cmap("tab20")(i % 20) for i, name in enumerate(names)}  # one color per impl, both panels
    for ax, threads in zip(axes[0], thread_counts, strict=True):
        for impl, t in row_order(table, kinds):
            square = sorted((s[0], r) for s, r in table[(impl, t)].items() if s[0] == s[1] == s[2])
            if t != threads or not square:
                continue
            style = "--" if kinds[impl] == "vendor" else ":" if kinds[impl] in ("numba", "python") else "-"
            ax.plot([n for n, _ in square], [r / 1e9 for _, r in square], style, marker="o", label=impl,
                    color=colors[impl])
        if str(threads) in peaks:
            ax.axhline(peaks[str(threads)] / 1e9, color="gray", linewidth=0.8)
            ax.text(ax.get_xlim()[0], peaks[str(threads)] / 1e9, " measured peak", va="bottom", color="gray")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("n (square float32 GEMM)")
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"{threads} thread{'s' if threads > 1 else ''}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def replace_between_markers(text: str, body: str) -> str:
    start, end = MARKERS
    if start not in text or end not in text:
        raise ValueError(f"gemm leaderboard: README.md lacks the {start} ... {end} markers")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body}{end}{tail}"


def main(source: Path) -> str:
    data = json.loads(source.read_text())
    board = render(data)
    source.with_suffix(".md").write_text(board)
    plot(data, source.with_suffix(".png"))
    README.write_text(replace_between_markers(README.read_text(), board))
    return board


if __name__ == "__main__":
    sys.stdout.write(main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_JSON))
