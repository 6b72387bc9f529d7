"""Comments and docstrings say why, in words: no file of the package (tests aside) carries a timing
(ms, us, ns, s), a throughput (GFLOP/s, GB/s), a measured speedup ('2.6x slower', 'ran 21% faster'),
a before -> after figure or a machine's name (Zen 5, Xeon, H100, 'one core') in a comment or in a
module's, class's or function's docstring. Those numbers, with their machine and command, live in
benchmarks/results/stage3_rule_measurements.md. Sizes that are a rule's own constants (a 16 x 16
block, 16 lanes, 4 MiB of L2) are not measurements and may stay."""

import ast
import io
import re
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]

NUMBER = r"(?<![\w.+-])\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?"  # 5, 0.62, 159-165; not the 12 of 0.12 nor -0
MEASUREMENT = re.compile("|".join([
    rf"{NUMBER}\s*(?:ms|us|µs|ns)\b",  # a time
    rf"{NUMBER}\s*(?:sec|seconds)\b|(?<![\w.])(?:\d+\.\d+|\d{{2,}})s\b",  # not "keepdim's 1s", "2 s T_k"
    rf"{NUMBER}\s*(?:[GT]FLOP/s|GFLOPS|[GMT]B/s)",  # a throughput (the bare unit may name a column)
    rf"{NUMBER}\s*[x×]\s+(?:faster|slower)\b",  # a speedup
    # a measured change ("ran 21% faster", "lost 7%"), not a rule's threshold ("nothing 1% faster")
    r"\b(?:ran|runs?|took|takes?|was|were|went)\s+(?:about\s+|~)?\d+(?:\.\d+)?\s*%\s+(?:faster|slower|less|more)\b",
    r"\b(?:lost|gained|saved)\s+~?\d+(?:\.\d+)?\s*%",
    r"\d+(?:\.\d+)?\s*%\s+of\s+[^.;:]*?\b(?:time|step)\b",  # a share of a run
    rf"{NUMBER}\s*(?:->|→)\s*\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?",  # a before -> after figure
    r"\bZen\s?\d\b|\bXeon\b|\bEPYC\b|\bRyzen\b|\bThreadripper\b|\bSapphire\s+Rapids\b",  # a machine
    r"\b(?:Ice|Cascade)\s+Lake\b|\bSkylake\b|\b(?:Granite|Emerald)\s+Rapids\b|\bApple\s+M\d\b",
    r"\b(?:GH200|H200|H100|A100|V100|L40S?)\b|\bRTX\s?\d+",
    r"\bone\s+core\b|\b\d+-core\s+(?:VM|machine|CPU)\b",
]))


def files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "tests" not in p.relative_to(PACKAGE).parts)


def comments(source: str) -> list[tuple[int, str]]:
    """(first line, text) of each block of comments on consecutive lines, joined by newlines."""
    blocks: list[tuple[int, list[str]]] = []
    last = -1
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        line, text = tok.start[0], tok.string.lstrip("#").strip()
        if blocks and line == last + 1:
            blocks[-1][1].append(text)
        else:
            blocks.append((line, [text]))
        last = line
    return [(line, "\n".join(texts)) for line, texts in blocks]


def docstrings(source: str) -> list[tuple[int, str]]:
    """(first line, text) of the module's, each class's and each function's docstring."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                found.append((first.value.lineno, first.value.value))
    return found


def measurements(source: str) -> list[tuple[int, str]]:
    """(line, matched text) of every timing or machine name in a comment or docstring."""
    hits = []
    for line, text in comments(source) + docstrings(source):
        for m in MEASUREMENT.finditer(text):
            hits.append((line + text.count("\n", 0, m.start()), " ".join(m.group().split())))
    return sorted(hits)


def test_the_pattern_flags_a_measurement_and_spares_a_rule_constant():
    flagged = ["2048 x 4096 x 256 66-68 -> 43 ms", "0.54 -> 0.12 ms", "took 30s", "one Zen 5 core: 211 GFLOP/s",
               "a softmax ran 21% faster", "0.47 ms a kernel on one Xeon core", "(a shared 2-core VM)",
               "H100: 4.2 TFLOP/s"]
    spared = ["a 16 x 16 block, 16 lanes a pass, B of 4 MiB (2 MiB of L2)", "keepdim's 1s, (x//m)*m + x%m = x",
              "a round that is not 1% faster is idle", "DEBUG=2: shape, time, GFLOP/s, GB/s", "+-0 -> 0.0",
              "n -> (n - 1) * step + 1", "T_k+1 = 2 s T_k - T_k-1"]
    assert [t for t in flagged if not MEASUREMENT.search(t)] == []
    assert [t for t in spared if MEASUREMENT.search(t)] == []


def test_a_comment_block_is_read_whole_and_a_hit_names_its_own_line():
    source = '"""A module: 16 lanes."""\n\n# the merged kernels ran 2.6x\n# slower\nx = 1  # on one core\n'
    assert measurements(source) == [(3, "2.6x slower"), (5, "one core")]


def test_comments_and_docstrings_carry_no_timings_or_machine_names():
    hits = [f"{path.relative_to(PACKAGE)}:{line}: {text}"
            for path in files() for line, text in measurements(path.read_text())]
    assert hits == [], "measurements belong in benchmarks/results/, the reason in words:\n" + "\n".join(hits)
