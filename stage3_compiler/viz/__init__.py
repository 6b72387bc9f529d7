"""Views of the compiler at work, from outside it: each watches the realizes (engine/realize.WATCHERS) and
the plans a TinyJit makes (jit.JIT_WATCHERS).
- graphviz.py: GRAPH=1, each realize's lazy and kernel graphs as Graphviz files;
- record.py: VIZ=1 (or `with recording():`), a recording of the graphs, the kernels pass by pass and their
  times, which `sitp viz` (common/viz) serves as a page.
"""

from ..engine.realize import WATCHERS
from ..jit import JIT_WATCHERS
from . import graphviz, record

WATCHERS.extend([graphviz.write_graphs, record.watch_realize])
JIT_WATCHERS.append(record.watch_jit)
record.start_from_environment()
