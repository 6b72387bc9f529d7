"""Lowered kernels on disk (engine/program_cache.py): a second process finds every kernel it lowered
before, lowers none, and computes the same bits; a change to the package's code is a miss."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from .. import Tensor, Variable, dtypes
from ..codegen.uops import UOps
from ..engine import program_cache, realize
from ..graph.symbolic import Node, Var


@pytest.fixture
def lowered(monkeypatch, tmp_path):
    """A fresh disk cache; returns a function that runs `work` as a new process would (nothing in memory)
    and gives its result and how many kernels it lowered."""
    monkeypatch.setenv("SITP_CACHE", str(tmp_path))
    calls = [0]
    real = realize.lower

    def counting(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(realize, "lower", counting)

    def run(work):
        monkeypatch.setattr(realize, "PROGRAMS", {})
        before = calls[0]
        return work(), calls[0] - before
    return run


def model(n: int):
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((16, 24)).astype(np.float32))
    w = Tensor(rng.standard_normal((24, 8)).astype(np.float32))
    rows = Variable("rows", 1, 16).bind(n)
    h = (x[:rows] @ w).relu()
    return np.concatenate([h.sum(axis=0).numpy(), (x.exp() * 2).max(axis=1).numpy(), x.argmax(axis=1).numpy()])


def test_a_second_process_lowers_nothing_and_computes_the_same(lowered):
    first, n_first = lowered(lambda: model(5))
    second, n_second = lowered(lambda: model(5))
    other, n_other = lowered(lambda: model(11))  # another value of the variable: the same kernels
    assert n_first > 0 and n_second == 0 and n_other == 0
    assert first.tobytes() == second.tobytes()
    np.testing.assert_array_equal(other, model(11))


def test_a_change_to_the_code_misses(lowered, monkeypatch):
    lowered(lambda: model(3))
    monkeypatch.setattr(program_cache, "code_version", lambda: "another version of the compiler")
    _, n = lowered(lambda: model(3))
    assert n > 0


def test_a_loaded_kernel_holds_the_same_dtypes_and_equal_nodes(lowered):
    lowered(lambda: model(4))
    kernel = next(iter(realize.PROGRAMS.values())).kernel
    back = pickle.loads(program_cache._dumps(kernel))
    assert [u.dtype for u in back.uops] == [u.dtype for u in kernel.uops]
    assert all(a.dtype is b.dtype for a, b in zip(back.uops, kernel.uops, strict=True))  # the singletons
    assert any(u.dtype is dtypes.float32 for u in back.uops)
    nodes = [(a.arg[0], b.arg[0]) for a, b in zip(back.uops, kernel.uops, strict=True) if a.op is UOps.LOAD]
    assert nodes and all(a == b and hash(a) == hash(b) for a, b in nodes)
    v = pickle.loads(pickle.dumps(Variable("rows", 1, 16).bind(7)))
    assert v == Variable("rows", 1, 16) and v.value == 7 and isinstance(v + Var("i", 0, 3), Node)
