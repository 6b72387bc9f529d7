"""A kernel pass by pass, for VIZ's recording (record.py): lowered again with the core alone, then with each pass
that changed it added in the table's order (passes.py), its options, UOps and source at each step, the first
in full and each next as the lines it changed; kept on disk beside the lowered kernels."""

from __future__ import annotations

import difflib
import json
import os
import tempfile
from contextlib import contextmanager

from ..codegen.lower import lower
from ..engine import program_cache
from ..engine.identity import kernel_key
from ..passes import TABLE, Phase, active
from ..settings import beam_width, cache_dir

KERNEL_PHASES = (Phase.OPTIONS, Phase.LOWER, Phase.UOPS, Phase.RENDER)  # the passes that act on one kernel
CONTEXT = 3  # unchanged lines shown around each change of a step's diff
MAX_LINES = 400  # of a step's UOps, source or diff kept (a large kernel's vectorized UOps run to thousands)


@contextmanager
def passes_set(names: list[str]):
    """PASSES set to exactly these passes (none: the core alone) inside the block."""
    before = os.environ.get("PASSES")
    os.environ["PASSES"] = ",".join(names) or "none"
    try:
        yield
    finally:
        if before is None:
            del os.environ["PASSES"]
        else:
            os.environ["PASSES"] = before


def capped(text: str) -> str:
    """The text's first MAX_LINES lines, and how many more there were."""
    lines = text.splitlines()
    if len(lines) <= MAX_LINES:
        return text
    return "\n".join([*lines[:MAX_LINES], f"... {len(lines) - MAX_LINES} more lines (the recording keeps {MAX_LINES})"])


def diff(before: str, after: str) -> list[list[str]]:
    """The lines that changed from before to after, with CONTEXT lines around each change: [tag, line]
    with tag "+" (added), "-" (removed), " " (kept) or "@" (a gap of unchanged lines); at most MAX_LINES."""
    out = []
    for group in difflib.SequenceMatcher(None, before.splitlines(), after.splitlines()).get_grouped_opcodes(CONTEXT):
        out.append(["@", f"lines {group[0][1] + 1}.. / {group[0][3] + 1}.."])
        a, b = before.splitlines(), after.splitlines()
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend([" ", line] for line in a[i1:i2])
                continue
            out.extend(["-", line] for line in a[i1:i2])
            out.extend(["+", line] for line in b[j1:j2])
    if len(out) > MAX_LINES:
        out = [*out[:MAX_LINES], ["@", f"... {len(out) - MAX_LINES} more lines of this diff (the recording keeps "
                                       f"{MAX_LINES})"]]
    return out


def pass_steps(item, program, renderer) -> list[dict]:
    """The kernel after the core alone (with the passes that shaped its schedule item, which lowering
    reads), then after each pass that changed it, added in the table's order: its options, UOps and
    source at each step, the first in full and each next one as a diff of the one before."""
    on_now = active()
    shaping = [p.value for p in TABLE if p in on_now and TABLE[p].phase not in KERNEL_PHASES]
    changed = [p.value for p in TABLE if p.value in program.kernel.passes and TABLE[p].phase in KERNEL_PHASES]
    steps, names, last = [], list(shaping), None
    for added in [None, *changed]:
        names += [added] if added else []
        with passes_set(names):
            kernel = lower(item, renderer)
            source = renderer.render(kernel)
        uops = "\n".join(repr(u) for u in kernel.uops)
        step = {"pass": added or "core", "opts": [str(o) for o in kernel.opts]}
        if last is None:
            step.update(uops=capped(uops), source=capped(source))
        else:
            step.update(uops_diff=diff(last[0], uops), source_diff=diff(last[1], source))
        steps.append(step)
        last = (uops, source)
    if last[1] != program.source:  # BEAM's options, not the heuristics'
        steps.append({"pass": "beam", "opts": [str(o) for o in program.kernel.opts],
                      "uops_diff": [], "source_diff": diff(last[1], program.source)})
    return steps


def cached_steps(item, program, renderer) -> list[dict]:
    """pass_steps, kept on disk beside the lowered kernels (engine/program_cache.py, under its key: the kernel's
    identity, the renderer, the machine and this package's code): lowering a kernel once per pass is most of
    what a recording costs, and a second recording of a program finds its kernels' steps there. (Not under
    BEAM, whose options the key does not hold.)"""
    if beam_width():
        return pass_steps(item, program, renderer)
    path = cache_dir() / "viz" / f"{program_cache.disk_key(kernel_key(item)[0], renderer).name}.json"
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        pass
    steps = pass_steps(item, program, renderer)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as tmp:  # renamed into place: all or none
        json.dump(steps, tmp)
    os.replace(tmp.name, path)
    return steps
