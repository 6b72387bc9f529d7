"""Views of the compiler at work, from outside it: each watches the realizes (engine/realize.WATCHERS).
- graphviz.py: GRAPH=1, each realize's lazy and kernel graphs as Graphviz files.
"""

from ..engine.realize import WATCHERS
from . import graphviz

WATCHERS.append(graphviz.write_graphs)
