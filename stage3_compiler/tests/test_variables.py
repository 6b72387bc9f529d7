"""Symbolic sizes: a user's Variable through the shape tracker, codegen, realize and TinyJit.

Each value test runs at both ends of the variable's range and in between, against numpy; the
compile tests count Programs and compiler processes, which must not grow with new values."""

import numpy as np
import pytest

from .. import Tensor, TinyJit, Variable
from ..codegen.lower import lower
from ..codegen.opts import Opt, OptError, OptOps, apply_opts
from ..cpu import compiler
from ..cpu.renderer import CRenderer
from ..engine import realize
from ..engine.capture import JitError
from ..engine.schedule import create_schedule
from ..graph.shapetracker import ShapeTracker
from ..graph.symbolic import SymbolicError, Var, smax, smin

RNG = np.random.default_rng(0)


def softmax_attention(q, k, v):
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


# ---- the variable ----

def test_bind_checks_the_range_and_keeps_the_identity():
    n = Variable("n", 1, 8)
    assert n.bind(1).value == 1 and n.bind(8).value == 8
    assert n.bind(3) == n and hash(n.bind(3)) == hash(n.bind(5))  # the value is not part of the node
    assert n.bind(3).unbind() == (n, 3)
    with pytest.raises(ValueError, match=r"bind\(9\) is outside its range \[1, 8\]"):
        n.bind(9)
    with pytest.raises(ValueError, match=r"outside"):
        n.bind(0)
    with pytest.raises(TypeError, match="expects an int"):
        n.bind(2.0)
    with pytest.raises(ValueError, match="not bound"):
        n.unbind()


@pytest.mark.parametrize("name", ["i0", "gidx2", "data1", "for", "3x", "part", "a-b"])
def test_names_that_would_clash_in_the_kernel_are_refused(name):
    with pytest.raises(ValueError, match="Variable: name"):
        Variable(name, 0, 4)


def test_python_comparisons_are_decided_by_the_bounds_or_refused():
    n = Variable("n", 1, 8)
    assert n + 1 > n and n >= 1 and n <= 8 and n < 9 and not n > 8
    assert smax(0, n) is n and smin(n + 1, 9) == n + 1
    with pytest.raises(SymbolicError, match="cannot tell whether n > 4"):
        n > 4  # noqa: B015
    with pytest.raises(SymbolicError, match="cannot tell max"):
        smax(n, 4)


# ---- the shape tracker ----

def test_a_symbolic_dim_is_laid_out_at_its_maximum():
    n = Variable("n", 1, 16).bind(5)
    st = ShapeTracker.from_shape((3, 16, 4)).shrink(((0, 3), (0, n), (0, 4)))
    assert st.shape == (3, n, 4) and st.views[0].strides == (64, 4, 1)
    idx, valid = st.expr_idxs([Var("a", 0, 2), Var("b", 0, 15), Var("c", 0, 3)])
    assert valid is None and idx == Var("a", 0, 2) * 64 + Var("b", 0, 15) * 4 + Var("c", 0, 3)
    # a shrink by a variable start is a symbolic offset over concrete sizes
    r = Variable("r", 0, 15).bind(5)
    row = ShapeTracker.from_shape((16, 4)).shrink(((r, r + 1), (0, 4)))
    assert row.shape == (1, 4) and row.views[-1].offset == r * 4 and row.variables == {r}
    with pytest.raises(SymbolicError, match="cannot tell whether n\\+1 <= 16"):
        ShapeTracker.from_shape((16, 4)).shrink(((n, n + 1), (0, 4)))  # n = 16 would read past the end


def test_a_reshape_that_moves_a_symbolic_dim_is_refused():
    n = Variable("n", 1, 16).bind(5)
    st = ShapeTracker.from_shape((2, 3, n, 4))
    assert st.reshape((6, n, 2, 2)).shape == (6, n, 2, 2)  # concrete dims regroup around it
    with pytest.raises(ValueError, match="a symbolic dim must stay a dim of its own"):
        st.reshape((2, 3 * 4, n))
    with pytest.raises(ValueError, match="a symbolic dim must stay a dim of its own"):
        st.reshape((6, n * 4))


# ---- realize: values at the range ends, one kernel for every value ----

@pytest.mark.parametrize("value", [1, 5, 16])
def test_sums_over_a_symbolic_slice(value):
    x = RNG.standard_normal((3, 16, 4)).astype(np.float32)
    n = Variable("n", 1, 16).bind(value)
    t = Tensor(x)[:, :n]
    np.testing.assert_allclose(t.sum(1).numpy(), x[:, :value].sum(1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t.max(1).numpy(), x[:, :value].max(1))
    np.testing.assert_allclose((t * 2 + 1).numpy(), x[:, :value] * 2 + 1)  # numpy() at the bound size


def test_one_program_and_no_compiler_run_for_new_values():
    x = Tensor(RNG.standard_normal((2, 32, 8)).astype(np.float32))
    q = Tensor(RNG.standard_normal((2, 1, 8)).astype(np.float32))
    pos = Variable("pos", 0, 31)

    def attend(p: int) -> np.ndarray:
        keys = x[:, :pos.bind(p) + 1]
        return q.scaled_dot_product_attention(keys, keys).numpy()

    attend(0)
    programs, runs = len(realize.PROGRAMS), compiler.RUNS[0]
    for p in (1, 7, 30, 31):
        want = softmax_attention(q.numpy()[:, None], x.numpy()[:, None, :p + 1], x.numpy()[:, None, :p + 1])[:, 0]
        np.testing.assert_allclose(attend(p), want, rtol=1e-5, atol=1e-6)
    assert len(realize.PROGRAMS) == programs and compiler.RUNS[0] == runs


def test_symbolic_arange_and_a_causal_square():
    """A sequence of symbolic length t: arange(t), a (t, t) causal mask and t x t attention scores
    (two symbolic factors in one shape), at both ends of the range, one program set for all."""
    x = Tensor(RNG.standard_normal((1, 2, 12, 8)).astype(np.float32))
    t = Variable("t", 1, 12)
    counts = []
    for n in (1, 12, 5):
        v = t.bind(n)
        np.testing.assert_array_equal(Tensor.arange(v).numpy(), np.arange(n))
        np.testing.assert_array_equal(Tensor.arange(2, v + 2).numpy(), np.arange(2, n + 2))
        np.testing.assert_array_equal(Tensor.arange(v, dtype="float32").numpy(), np.arange(n, dtype=np.float32))
        q = x[:, :, :v]
        assert q.reshape(1, 2, v, 2, 4).reshape(2, v, 8).shape == (2, v, 8)  # (t, t) products and reshapes
        y = q.scaled_dot_product_attention(q, q, is_causal=True).numpy()
        xs = x.numpy()[:, :, :n]
        s = xs @ xs.transpose(0, 1, 3, 2) / np.sqrt(8) + np.triu(np.full((n, n), -np.inf), 1)
        e = np.exp(s - s.max(-1, keepdims=True))
        np.testing.assert_allclose(y, (e / e.sum(-1, keepdims=True)) @ xs, rtol=1e-5, atol=1e-6)
        counts.append(len(realize.PROGRAMS))
    assert counts[1] == counts[2]
    with pytest.raises(SymbolicError, match="arange: a symbolic stop .* takes an int start and step 1"):
        Tensor.arange(0, t.bind(3), 2)
    with pytest.raises(ValueError, match="cannot reshape .* the element counts differ"):
        x[:, :, :t.bind(3)].reshape(2, t.bind(3), t.bind(3), 8)


def test_a_symbolic_matmul_is_tiled_on_its_concrete_axis():
    """A matmul over a symbolic number of rows gets lanes along its columns (heuristics.matmul_tile) and
    threads over its rows, and the same values at every length."""
    a = Tensor(RNG.standard_normal((40, 32)).astype(np.float32))
    w = Tensor(RNG.standard_normal((32, 64)).astype(np.float32))
    t = Variable("t", 1, 40)
    (item,) = create_schedule([(a[:t.bind(3)] @ w).lazydata])
    kernel = lower(item, CRenderer())
    assert kernel.upcast > 1, kernel.name
    for n in (1, 40, 17):
        np.testing.assert_allclose((a[:t.bind(n)] @ w).numpy(), a.numpy()[:n] @ w.numpy(), rtol=1e-5, atol=1e-5)


def test_the_kernel_takes_the_variable_as_an_argument():
    n = Variable("n", 1, 16).bind(3)
    x = Tensor(RNG.standard_normal((16, 4)).astype(np.float32)).realize()
    (item,) = create_schedule([x[:n].sum(0).lazydata])
    kernel = lower(item, CRenderer())
    source = CRenderer().render(kernel)
    assert [v.name for v in kernel.variables] == ["n"] and "const long long n)" in source
    assert "ridx0 < n;" in source


def test_a_symbolic_pad_places_rows_at_a_variable_offset():
    cache = RNG.standard_normal((2, 10, 3)).astype(np.float32)
    new = RNG.standard_normal((2, 1, 3)).astype(np.float32)
    pos = Variable("pos", 0, 9)
    for p in (0, 4, 9):
        v = pos.bind(p)
        rows = ((0, 0), (v, 10 - v - 1), (0, 0))
        inside = Tensor.ones(1, 1, 1).pad(rows) > 0
        out = inside.where(Tensor(new).pad(rows), Tensor(cache)).numpy()
        want = cache.copy()
        want[:, p] = new[:, 0]
        np.testing.assert_array_equal(out, want)


def test_unbound_and_unprovable_uses_raise_clear_errors():
    x = Tensor(np.ones((4, 8), np.float32))
    with pytest.raises(ValueError, match="Variable 'n' in \\[1, 8\\] is not bound"):
        x[:, :Variable("n", 1, 8)].sum().numpy()
    with pytest.raises(ValueError, match="do not prove them inside a dim of size 8"):
        x[:, :Variable("n", 1, 9).bind(2)]
    n = Variable("n", 1, 8).bind(2)
    (item,) = create_schedule([(x[:, :n] * 2).lazydata])
    with pytest.raises(OptError, match="axis 1 of .* has a symbolic size"):
        apply_opts(item, (Opt(OptOps.UPCAST, 1, 2),), CRenderer())
    (item,) = create_schedule([x[:, :n].sum(1).lazydata])
    with pytest.raises(OptError, match="reduce axis 1 .* has a symbolic size"):
        apply_opts(item, (Opt(OptOps.UNROLL, 1, 2),), CRenderer())
    assert apply_opts(item, (Opt(OptOps.UPCAST, 0, 2),), CRenderer()).upcast == {0: 2}  # a concrete axis takes lanes
    with pytest.raises(ValueError, match="getitem: a slice with a symbolic bound takes step 1"):
        x[:, :n:2]


# ---- TinyJit: a replay with the call's value ----

def test_tinyjit_replays_with_the_bound_value():
    keys = Tensor(RNG.standard_normal((1, 2, 24, 8)).astype(np.float32)).realize()
    pos = Variable("start_pos", 0, 23)

    @TinyJit
    def step(q, start_pos):
        k = keys[:, :, :start_pos + 1]
        return q.scaled_dot_product_attention(k, k)

    runs = None
    for p in [0, 1, 2, 23, 5, 11]:  # capture at the second call, replays after it
        q = RNG.standard_normal((1, 2, 1, 8)).astype(np.float32)
        out = step(Tensor(q), start_pos=pos.bind(p)).numpy()
        k = keys.numpy()[:, :, :p + 1]
        np.testing.assert_allclose(out, softmax_attention(q, k, k), rtol=1e-5, atol=1e-6)
        runs = compiler.RUNS[0] if p == 1 else runs
    assert step.plan is not None and compiler.RUNS[0] == runs


def test_tinyjit_refuses_a_variable_it_cannot_replay():
    x = Tensor(np.ones((8, 4), np.float32)).realize()
    hidden = Variable("hidden", 1, 8)

    @TinyJit
    def frozen(y, k):
        return (x[:hidden.bind(k)].sum(0) + y).realize()

    frozen(Tensor(np.ones(4, np.float32)), 3)
    with pytest.raises(JitError, match="takes Variable 'hidden', which is not an argument"):
        frozen(Tensor(np.ones(4, np.float32)), 3)

    @TinyJit
    def symbolic_out(y, n):
        return x[:n] + y

    symbolic_out(Tensor(np.ones(4, np.float32)), hidden.bind(2))
    with pytest.raises(JitError, match="returns a tensor of symbolic shape"):
        symbolic_out(Tensor(np.ones(4, np.float32)), hidden.bind(2))
    with pytest.raises(JitError, match="not bound"):
        symbolic_out(Tensor(np.ones(4, np.float32)), hidden)


def test_tinyjit_returns_a_view_at_a_variable_offset():
    """x[:, n-1] of an input is a view whose offset is the variable: the capture copies it out in a
    kernel that takes n, so a replay reads the call's row, not the capture's."""
    n = Variable("n", 1, 10)

    @TinyJit
    def last(x, n):
        return x[:, :n][:, n - 1]

    for k in (1, 2, 3, 10, 4):
        x = RNG.standard_normal((2, 10)).astype(np.float32)
        np.testing.assert_array_equal(last(Tensor(x), n.bind(k)).numpy(), x[:, k - 1])
    assert last.plan is not None


def test_constant_nodes_become_ints():
    n = Variable("n", 0, 7).bind(3)
    t = Tensor(np.arange(8, dtype=np.float32))[n:n + 1]
    assert t.shape == (1,) and type(t.shape[0]) is int and t.numpy().tolist() == [3.0]
