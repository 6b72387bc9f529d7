"""The speed passes (passes.py): PASSES names them, each one changes the kernels it exists for, and
switching it off leaves what they compute (within a reordered sum's last bits) and the core runs
every program alone."""

import sys
from pathlib import Path

import numpy as np
import pytest

from .. import Tensor, nn
from ..engine import realize
from ..passes import DEFAULT, TABLE, Pass, active, parse

PACKAGE = Path(__file__).resolve().parents[1]


def test_passes_names_the_default_set_none_all_and_signed_changes():
    assert parse("") == DEFAULT == frozenset(TABLE)  # every pass is on by default
    assert parse("none") == frozenset() and parse("all") == frozenset(TABLE)
    assert parse("-vectorize,-fma") == DEFAULT - {Pass.VECTORIZE, Pass.FMA}
    assert parse("-online,+online") == DEFAULT and parse("-online") == DEFAULT - {Pass.ONLINE}
    assert parse("layouts, heuristics") == {Pass.LAYOUTS, Pass.HEURISTICS}
    assert parse("none,+vectorize") == {Pass.VECTORIZE}


def test_noopt_is_the_core_alone_unless_passes_says_otherwise(monkeypatch):
    monkeypatch.delenv("PASSES", raising=False)
    monkeypatch.setenv("NOOPT", "1")
    assert active() == frozenset()
    monkeypatch.setenv("PASSES", "-online")
    assert active() == DEFAULT - {Pass.ONLINE}


def test_an_unknown_pass_is_refused_with_the_names_there_are():
    with pytest.raises(ValueError, match=r"unknown pass 'vectorise'.*vectorize"):
        parse("-vectorise")


def test_the_table_lists_every_pass_once_with_its_file_and_what_it_does():
    assert list(TABLE) == list(Pass)
    for p, info in TABLE.items():
        assert info.what and all((PACKAGE / f).is_file() for f in info.where), p


def core_files() -> list[Path]:
    """The compiler (graph, codegen, cpu, cuda, engine, jit.py) less the files that are a pass's own
    (`leftover` lives in the core's reduce loop)."""
    compiler = [p for d in ("graph", "codegen", "cpu", "cuda", "engine") for p in (PACKAGE / d).glob("*.py")]
    own = {PACKAGE / f for info in TABLE.values() for f in info.where} - {PACKAGE / "codegen/lower.py"}
    return [p for p in [*compiler, PACKAGE / "jit.py"] if p not in own]


def test_the_core_a_learner_reads_first_is_at_most_6000_lines():
    lines = sum(len(p.read_text().splitlines()) for p in core_files())
    assert lines <= 6000, f"the core is {lines} lines"


def rand(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def matmul():
    return Tensor(rand(0, 48, 64)) @ Tensor(rand(1, 64, 64))


def linear_forward():  # x @ w.T reads w along the summed axis: the product reads a transposed copy
    return Tensor(rand(13, 48, 16)) @ Tensor(rand(14, 64, 16)).T


def tall_matmul():  # 131 rows: no tile of 6 or 8 rows divides them
    return Tensor(rand(11, 131, 32)) @ Tensor(rand(12, 32, 64))


def row_sum():  # 78 terms a row: 16 partials leave 14 to the leftover loop
    return Tensor(rand(2, 96, 78)).sum(axis=1)


def lookup():
    return Tensor(rand(3, 50, 32))[Tensor(np.array([[3, 7, 1], [0, 49, 3]]))]


def causal_attention():
    q = Tensor(rand(4, 2, 2, 16, 8))
    return q.scaled_dot_product_attention(q, q, is_causal=True)


def embedding_grad():
    emb = nn.Embedding(40, 24)
    emb.weight = Tensor(rand(5, 40, 24), requires_grad=True)
    (emb(Tensor(np.array([[1, 5, 5, 9]]))) * Tensor(rand(6, 1, 4, 24))).sum().backward()
    return emb.weight.grad


def merged_sums():  # one loop over each row folds both
    x = Tensor(rand(7, 32, 64))
    top, total = x.max(axis=1), x.sum(axis=1)
    top.realize(total)
    return top + total


def attention_grad():
    q = Tensor(rand(8, 1, 2, 32, 8), requires_grad=True)
    q.scaled_dot_product_attention(q, q, is_causal=True).sum().backward()
    return q.grad


# each pass that lowering records (Kernel.passes), with a program it changes and the passes it runs under
# (term ranges bound the online softmax's loop: a causal query reads the keys up to its own)
PROGRAMS = {Pass.LAYOUTS: (linear_forward, ""), Pass.HEURISTICS: (matmul, ""), Pass.VECTORIZE: (matmul, ""),
            Pass.LEFTOVER: (row_sum, ""),
            Pass.OVERLAP: (tall_matmul, ""),
            Pass.LOOKUP: (lookup, ""), Pass.RANGES: (causal_attention, "+online,"),
            Pass.SKIP: (embedding_grad, ""), Pass.MERGE: (merged_sums, "")}


def run(program, monkeypatch, spec: str):
    """program's result under PASSES=spec, and the passes each kernel it ran names (with its source)."""
    monkeypatch.setenv("PASSES", spec)
    ran = []
    count = realize.count
    monkeypatch.setattr(realize, "count", lambda kernel, source, *rest: (ran.append((kernel, source)),
                                                                          count(kernel, source, *rest)))
    value = program().numpy()
    return value, ran


@pytest.mark.parametrize("p", list(PROGRAMS), ids=lambda p: p.value)
def test_a_pass_changes_its_kernels_and_without_it_they_compute_the_same(p, monkeypatch):
    program, base = PROGRAMS[p]
    on, ran_on = run(program, monkeypatch, base)
    off, ran_off = run(program, monkeypatch, f"{base}-{p.value}")
    assert any(p.value in kernel.passes for kernel, _ in ran_on)
    assert not any(p.value in kernel.passes for kernel, _ in ran_off)
    np.testing.assert_allclose(off, on, rtol=1e-5, atol=1e-6)


def test_flash_attention_and_its_short_nested_sums_are_passes(monkeypatch):
    online, ran = run(attention_grad, monkeypatch, "+online")
    assert any("online" in k.passes for k, _ in ran) and any("tree" in k.passes for k, _ in ran)
    no_tree, ran_no_tree = run(attention_grad, monkeypatch, "+online,-tree")
    assert not any("tree" in k.passes for k, _ in ran_no_tree)
    unfused, ran_unfused = run(attention_grad, monkeypatch, "-online")
    assert not any("online" in k.passes for k, _ in ran_unfused)
    np.testing.assert_allclose(no_tree, online, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(unfused, online, rtol=1e-4, atol=1e-5)


def test_the_layouts_pass_adds_a_copy_of_a_weight_read_along_the_sum(monkeypatch):
    def linear():  # x @ w.T: w read along the summed axis
        return Tensor(rand(9, 64, 96)) @ Tensor(rand(10, 80, 96)).T
    on, ran_on = run(linear, monkeypatch, "")
    off, ran_off = run(linear, monkeypatch, "-layouts")
    assert len(ran_on) > len(ran_off)
    np.testing.assert_allclose(off, on, rtol=1e-5, atol=1e-5)


def test_the_fma_pass_lets_a_matmul_fuse_its_multiply_adds(monkeypatch):
    _, ran_on = run(matmul, monkeypatch, "")
    _, ran_off = run(matmul, monkeypatch, "-fma")
    assert any("fp-contract=fast" in source and "fma" in kernel.passes for kernel, source in ran_on)
    assert not any("fp-contract=fast" in source or "fma" in kernel.passes for kernel, source in ran_off)


@pytest.mark.parametrize("program", [matmul, tall_matmul, row_sum, lookup, causal_attention, embedding_grad,
                                     merged_sums, attention_grad], ids=lambda f: f.__name__)
def test_the_core_alone_computes_what_the_passes_compute(program, monkeypatch):
    fast, _ = run(program, monkeypatch, "")
    core, ran = run(program, monkeypatch, "none")
    assert ran and all(kernel.passes == () and kernel.opts == () for kernel, _ in ran)
    np.testing.assert_allclose(core, fast, rtol=1e-5, atol=1e-5)


def training_step():
    """A little of everything the zoo runs: a product, softmax, causal attention, an embedding, a cumsum,
    a split sum, and their backward."""
    x, w = Tensor(rand(20, 8, 16), requires_grad=True), Tensor(rand(21, 16, 32), requires_grad=True)
    emb = Tensor(rand(22, 10, 16), requires_grad=True)
    q = x.reshape(2, 4, 16)
    loss = (x @ w).relu().softmax(-1).sum() + q.scaled_dot_product_attention(q, q, is_causal=True).sum() \
        + emb[Tensor(np.array([1, 3, 5, 7, 2, 0, 9, 4]))].sum() + x.cumsum(0).sum() + Tensor(rand(23, 96, 78)).sum()
    loss.backward()
    return [t.numpy() for t in (loss, x.grad, w.grad, emb.grad)]


def test_the_core_alone_calls_no_function_of_a_pass(monkeypatch):
    """PASSES=none runs the core's code alone: no function defined in a pass's own file is called (the
    core asks `on(pass)` before it calls one), so what a learner reads for the core is what runs."""
    own = {str(PACKAGE / f) for info in TABLE.values() for f in info.where} - {str(PACKAGE / "codegen/lower.py")}
    called = set()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename in own:
            called.add(f"{Path(frame.f_code.co_filename).relative_to(PACKAGE)}:{frame.f_code.co_name}")

    monkeypatch.setenv("PASSES", "none")
    sys.setprofile(profile)
    try:
        training_step()
    finally:
        sys.setprofile(None)
    assert not called, sorted(called)
