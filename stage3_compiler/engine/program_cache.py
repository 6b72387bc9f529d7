"""Lowered kernels on disk: a kernel lowered and rendered once on this machine, by this code, is
found again by a later process instead of lowered again.

realize keeps Programs by the kernel's identity (identity.kernel_key) for the life of a process, and
the compiled libraries stay on disk (cpu/compiler.py), but a new process still lowers and renders
every kernel it meets before it can ask the disk for the library, and that Python is most of a warm
first training step (benchmarks/results/stage3_rule_measurements.md). Here the lowered Kernel, its
source and its argument slots are pickled under a hash of the identity key, the renderer (its class
and settings) and the machine (compiler and CPU: machine_key) together with a hash of this package's
own source, so a change to the compiler makes every entry unreachable instead of wrong. A key that
does not pickle to the same bytes again only misses (the kernel is lowered as before); the entry also
holds the pickled key, compared on load. Not under BEAM: searched options are kept by search.py.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import pickle
import tempfile
from pathlib import Path
from typing import NamedTuple

from ..codegen.program import Program
from ..codegen.uops import Kernel
from ..cpu.compiler import machine_key
from ..dtype import DType, dtypes
from ..graph.symbolic import Variable
from ..settings import cache_dir

PACKAGE = Path(__file__).resolve().parents[1]


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, DType):  # the one DType of its name when loaded (the code compares dtypes with `is`)
            return getattr, (dtypes, obj.name)
        if isinstance(obj, Variable) and obj.value is not None:  # a kernel is the same for every value
            return Variable, (obj.name, obj.min, obj.max)
        return NotImplemented


def _dumps(obj) -> bytes:
    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return out.getvalue()


@functools.cache
def code_version() -> str:
    """A hash of every Python file of the package but its tests."""
    h = hashlib.sha256()
    for path in sorted(p for p in PACKAGE.rglob("*.py") if "tests" not in p.relative_to(PACKAGE).parts):
        h.update(str(path.relative_to(PACKAGE)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


class DiskKey(NamedTuple):
    name: str  # the entry's file name
    identity: bytes  # the pickled identity the entry must hold


class Lowering(NamedTuple):
    kernel: Kernel
    source: str
    slots: list[int]  # Program.slots


def disk_key(key: tuple, renderer) -> DiskKey:
    identity = _dumps((key, type(renderer).__name__, vars(renderer)))
    name = hashlib.sha256(identity + machine_key().encode() + code_version().encode()).hexdigest()[:32]
    return DiskKey(name, identity)


def _path(key: DiskKey) -> Path:
    return cache_dir() / "lowered" / f"{key.name}.pkl"


def load(key: DiskKey) -> Lowering | None:
    """The kernel lowered before under this key, or None."""
    try:
        blob = _path(key).read_bytes()
    except FileNotFoundError:
        return None
    identity, *found = pickle.loads(blob)
    return Lowering(*found) if identity == key.identity else None


def store(key: DiskKey, program: Program) -> None:
    path = _path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as tmp:  # renamed into place: whole or absent
        tmp.write(_dumps((key.identity, program.kernel, program.source, program.slots)))
    os.replace(tmp.name, path)
