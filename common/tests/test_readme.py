"""The top README is a front page: at most 150 lines and 100 numbers of prose and tables, counted
outside code blocks and the generated leaderboards (benchmarks/gemm_leaderboard.py and
gemm_cuda_leaderboard.py rewrite those); every other figure lives in benchmarks/results/."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
GENERATED = ("gemm", "gemm-cuda")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def counted_lines(text: str) -> list[str]:
    """The non-blank lines outside ``` fences and outside the generated blocks."""
    kept, fence, block = [], False, None
    for line in text.splitlines():
        s = line.strip()
        if block:
            block = None if s == f"<!-- {block}:end -->" else block
            continue
        start = re.fullmatch(r"<!-- ([\w-]+):start -->", s)
        if start and start.group(1) in GENERATED:
            block = start.group(1)
        elif s.startswith("```"):
            fence = not fence
        elif not fence and s:
            kept.append(line)
    return kept


def test_the_counter_skips_code_and_generated_tables():
    text = "a 1\n```\nx 2 3\n```\n<!-- gemm:start -->\n| 4 |\n<!-- gemm:end -->\n\nb 5.5, 6\n"
    lines = counted_lines(text)
    assert lines == ["a 1", "b 5.5, 6"]
    assert sum(len(NUMBER.findall(line)) for line in lines) == 3


def test_the_front_page_is_short_and_keeps_its_figures_few():
    lines = counted_lines(README.read_text())
    numbers = sum(len(NUMBER.findall(line)) for line in lines)
    assert len(lines) <= 150, f"README.md: {len(lines)} lines outside code and generated tables (at most 150)"
    assert numbers <= 100, f"README.md: {numbers} numbers outside code and generated tables (at most 100)"
