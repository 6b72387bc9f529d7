"""Compile bpe_merge.c through cffi on first use and load it; the .so is cached between runs.

The build lands in ``cache_dir()/build`` under a name that hashes everything that shapes the
binary: the C source, the compiler's ``--version``, the flags, the Python ABI and cffi's version.
So an edited source or another compiler gets its own file, and an unchanged one is never rebuilt.
It is compiled in a private temp dir and renamed into place, so two processes never see half a file.
No ``-march=native``: the code is branchy integer work that gains nothing from it, and the cached
file stays valid on any machine of the same architecture. ``CC`` picks the compiler as usual.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import cffi

from ..data.files import cache_dir

SOURCE = Path(__file__).with_name("bpe_merge.c")
MODULE = "_sitp_bpe_merge"
FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra"]
CDEF = """
int64_t bpe_train(int32_t *merges, int64_t n_merges, int32_t *tokens, const int64_t *start, const int64_t *count,
                  int64_t n_words);
"""


def _compiler() -> str:
    return os.environ.get("CC", "cc")


def _fingerprint() -> str:
    h = hashlib.sha256()
    version = subprocess.run([_compiler(), "--version"], capture_output=True).stdout
    for part in (SOURCE.read_bytes(), CDEF, version, *FLAGS, sys.version, cffi.__version__, MODULE):
        h.update(part if isinstance(part, bytes) else str(part).encode())
    return h.hexdigest()[:16]


def _build(target: Path) -> None:
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        ffi.set_source(MODULE, CDEF, sources=[str(SOURCE)], extra_compile_args=FLAGS)
        try:
            built = ffi.compile(tmpdir=tmp, verbose=False)
        except Exception as e:  # cffi raises distutils/setuptools errors of several kinds
            raise RuntimeError(f"bpe_clib: compiling {SOURCE.name} with {_compiler()} failed: {e}") from e
        os.replace(built, target)


@functools.cache
def load():
    """(ffi, lib) of the compiled merge loop, building it first if the cache misses."""
    target = cache_dir() / "build" / f"{MODULE}-{_fingerprint()}{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    if not target.exists():
        _build(target)
    spec = importlib.util.spec_from_file_location(MODULE, target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ffi, module.lib
