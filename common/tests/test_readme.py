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


def paragraphs(text: str) -> list[str]:
    """The prose paragraphs of a markdown file: blank lines end one, each list item is its own, and code
    blocks, tables and headings are none."""
    found, current, fence = [], [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        if fence or line.startswith(("```", "|", "#")) or not line.strip() or re.match(r"^\s*([-*]|\d+\.)\s", line):
            if current:
                found.append(" ".join(current))
            current = []
            if fence or line.startswith(("```", "|", "#")) or not line.strip():
                continue
        current.append(line.strip())
    return found + ([" ".join(current)] if current else [])


def test_paragraphs_are_split_at_blank_lines_list_items_and_code():
    text = "one two\nthree\n\n- a b\n- c\n```\nx y z\n```\n| t |\n"
    assert paragraphs(text) == ["one two three", "- a b", "- c"]


def test_the_compiler_chapter_has_no_wall_of_text_and_no_history():
    text = (README.parent / "stage3_compiler" / "README.md").read_text()
    longest = max(paragraphs(text), key=lambda p: len(p.split()))
    assert len(longest.split()) <= 200, f"a paragraph of {len(longest.split())} words: {longest[:80]}..."
    found = re.findall(r"\b(earlier|not yet|by then)\b", text, flags=re.I)
    assert found == [], f"history in the chapter's prose: {found}"
