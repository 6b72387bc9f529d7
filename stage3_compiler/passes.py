"""The speed passes: every rule the compiler applies only to run faster, in one ordered table.

The core pipeline (lazy graph -> schedule -> lower to UOps -> render -> compile -> run) computes
every program correctly on its own. Each pass below rewrites one step of it for speed, never for
meaning: with all of them off the core still passes the conformance suite and trains the zoo, only
slower. A pass is named by its `Pass` member's value and switched by the environment:

    PASSES unset        the default passes (every pass)
    PASSES=none         the core alone
    PASSES=all          every pass
    PASSES=-vectorize,-online   the defaults less two;  PASSES=-online,+online  signed names in order
    PASSES=layouts,heuristics   exactly the passes named (signed names then add or drop)
    NOOPT=1             tinygrad's name for the core alone, where PASSES is unset

The table's order is the pipeline's: what rewrites the graph or the schedule comes first, then the
choice of each kernel's options, then the rules lowering applies, the rewrite of the UOp list, and
the renderers' rules. Each entry names the file that holds the rule; the rule's docstring says what
it rewrites and why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum, auto


class Phase(Enum):
    GRAPH = auto()  # how the Tensor API records an op in the lazy graph
    SCHEDULE = auto()  # how the scheduler cuts and rewrites the graph into kernels
    OPTIONS = auto()  # which loop options (codegen/opts.py) a kernel gets
    LOWER = auto()  # what lowering writes for a kernel's loops and reads
    UOPS = auto()  # a rewrite of the lowered UOp list
    RENDER = auto()  # what a renderer writes for the UOps


class Pass(Enum):
    LAYOUTS = "layouts"
    TILES = "tiles"
    MERGE = "merge"
    ONLINE = "online"
    HEURISTICS = "heuristics"
    LEFTOVER = "leftover"
    OVERLAP = "overlap"
    LOOKUP = "lookup"
    RANGES = "ranges"
    SKIP = "skip"
    TREE = "tree"
    VECTORIZE = "vectorize"
    FMA = "fma"
    GROUP = "group"
    LOCAL = "local"


@dataclass(frozen=True)
class PassInfo:
    phase: Phase
    where: tuple[str, ...]  # the files that hold the rule (a pass's own, but for `leftover`: the core's loop)
    default: bool  # on unless PASSES says otherwise
    what: str  # what it rewrites, in a line


TABLE: dict[Pass, PassInfo] = {
    Pass.LAYOUTS: PassInfo(Phase.SCHEDULE, ("codegen/layouts.py",), True,
                           "a matmul reads a transposed, packed or padded copy of an operand"),
    Pass.TILES: PassInfo(Phase.SCHEDULE, ("codegen/tiles.py", "cpu/tiles.py"), True,
                         "a bfloat16 matmul runs on the CPU's matrix tiles (AMX), its operands copied tile by tile"),
    Pass.MERGE: PassInfo(Phase.SCHEDULE, ("engine/merge.py",), True,
                         "kernels of one shape become one kernel with several outputs"),
    Pass.ONLINE: PassInfo(Phase.GRAPH, ("engine/online.py", "codegen/softmax.py"), True,
                          "FlashAttention: softmax folded into the loop of the sum it weights"),
    Pass.HEURISTICS: PassInfo(Phase.OPTIONS, ("codegen/heuristics.py",), True,
                              "register tiles, split sums, cache blocks and threads by rule"),
    Pass.LEFTOVER: PassInfo(Phase.OPTIONS, ("codegen/heuristics.py", "codegen/lower.py"), True,
                            "a split sum whose partials do not divide its terms takes the rest in a loop"),
    Pass.OVERLAP: PassInfo(Phase.OPTIONS, ("codegen/overlap.py",), True,
                           "a register tile that does not divide its axis shifts the axis' last pass back"),
    Pass.LOOKUP: PassInfo(Phase.LOWER, ("codegen/lookup.py",), True,
                          "a one-hot sum becomes one load at the index (an embedding's rows)"),
    Pass.RANGES: PassInfo(Phase.LOWER, ("codegen/ranges.py",), True,
                          "a reduce loop runs over the terms a mask leaves, not all of them"),
    Pass.SKIP: PassInfo(Phase.LOWER, ("codegen/skipping.py",), True,
                        "a one-hot product tests its conditions once and skips terms no lane selects"),
    Pass.TREE: PassInfo(Phase.LOWER, ("codegen/tree.py",), True,
                        "a short nested sum is written out as a tree of independent adds"),
    Pass.VECTORIZE: PassInfo(Phase.UOPS, ("codegen/vectorize.py", "cpu/half_vectors.py"), True,
                             "an upcast kernel's lanes become the CPU's vector registers"),
    Pass.FMA: PassInfo(Phase.RENDER, ("codegen/fma.py",), True,
                       "a multiply-add the order of a sum allows becomes one fused instruction"),
    Pass.GROUP: PassInfo(Phase.RENDER, ("cuda/group.py",), True,
                         "a GPU block's threads share out a reduction's terms"),
    Pass.LOCAL: PassInfo(Phase.RENDER, ("cuda/local.py",), True,
                         "a GPU block stages a matmul's operand tiles in shared memory"),
}

DEFAULT = frozenset(p for p, info in TABLE.items() if info.default)
_parsed: dict[str, frozenset[Pass]] = {}
_keys: dict[frozenset[Pass], tuple[str, ...]] = {}


def parse(spec: str) -> frozenset[Pass]:
    """The passes a PASSES value turns on (the module's docstring); a name it does not know raises."""
    spec = spec.strip()
    words = [w.strip() for w in spec.split(",") if w.strip()]
    plain = [w for w in words if w[0] not in "+-"]
    chosen: set[Pass] = set(DEFAULT) if not plain else set()
    for word in words:
        sign, name = (word[0], word[1:]) if word[0] in "+-" else ("+", word)
        if name in ("none", "all"):
            chosen = set() if name == "none" else set(TABLE)
            continue
        try:
            p = Pass(name)
        except ValueError:
            raise ValueError(f"PASSES: unknown pass {name!r} in {spec!r}; the passes are "
                             f"{', '.join(p.value for p in TABLE)} (or none, all)") from None
        if sign == "+":
            chosen.add(p)
        else:
            chosen.discard(p)
    return frozenset(chosen)


def active() -> frozenset[Pass]:
    """The passes on now, as PASSES says (read on every call: a test or a benchmark may change it)."""
    spec = os.environ.get("PASSES", "")
    if not spec and os.environ.get("NOOPT", "0") not in ("", "0"):
        spec = "none"
    found = _parsed.get(spec)
    if found is None:
        found = _parsed[spec] = parse(spec)
    return found


def on(p: Pass) -> bool:
    return p in active()


def key() -> tuple[str, ...]:
    """The active passes as a cache key: a schedule or a program made under other passes is another.
    (Asked for every kernel of every realize: made once per set of passes.)"""
    passes = active()
    found = _keys.get(passes)
    if found is None:
        found = _keys[passes] = tuple(sorted(p.value for p in passes))
    return found
