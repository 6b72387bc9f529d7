"""Symbolic index expressions: each simplification rule, bounds, rendering to C, evaluate and vars,
and a hypothesis property that random expressions keep their value through simplification and
through rendering (checked in Python, and once with the system C compiler)."""

import itertools
import os
import re
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ..graph.symbolic import (
    And,
    Div,
    Lt,
    Mod,
    Mul,
    Num,
    Sum,
    Var,
    ands,
    bounds_under,
    evaluate,
    render,
    substitute,
    vars,
)

x = Var("x", 0, 100)
y = Var("y", 0, 3)
z = Var("z", 0, 7)


def test_constant_folding_and_identities():
    assert Num(3) + Num(4) == Num(7)
    assert Num(7) // 2 == Num(3) and Num(-7) // 2 == Num(-4) and Num(-7) % 3 == Num(2)
    assert x + 0 == x and x * 1 == x and 1 * x == x
    assert x * 0 == Num(0) and x - x == Num(0)
    assert (x + 2) - 2 == x


def test_sums_are_flat_with_like_terms_combined_and_the_constant_last():
    assert x * 4 + x * 2 == x * 6
    s = (x + 3) + (y + 2) + x
    assert isinstance(s, Sum) and s.terms == (Mul(x, 2), y, Num(5))
    assert (x + y) * 3 == x * 3 + y * 3  # products distribute, so sums never nest
    assert 10 - x == Sum((Mul(x, -1), Num(10)))


def test_division_rules():
    assert (x * 4) // 4 == x
    assert (x * 4 + y) // 4 == x  # 0 <= y < 4
    assert (x * 4 + z) // 4 == x + z // 4  # z reaches 7: the remainder keeps its division
    assert (x // 2) // 3 == x // 6
    assert (x * 6) // 4 == (x * 3) // 2  # a common factor cancels
    assert (x * 3 + Var("r", 0, 2)) // 6 == x // 2  # (g*x + r)//(g*m) = x//m when 0 <= r < g
    assert isinstance(x // 4, Div)


def test_modulo_rules():
    assert (x * 4 + y) % 4 == y
    assert (x * 4 + z) % 4 == z % 4
    assert y % 4 == y  # already in [0, 4)
    assert (x % 8) % 4 == x % 4
    assert (x * 6) % 4 == (x * 3 % 2) * 2
    assert (x * 3 + Var("r", 0, 2)) % 6 == (x % 2) * 3 + Var("r", 0, 2)
    assert x % 1 == Num(0) and isinstance(x % 5, Mod)


def test_a_remainder_takes_the_share_of_the_constant_that_keeps_it_in_range():
    # (2x + i - 4) with i in [4, 5]: the remainder is i - 4 in [0, 2), so the division drops it
    i = Var("i", 4, 5)
    assert (x * 2 + i - 4) // 128 == x // 64
    assert (x * 2 + i - 4) % 128 == (x % 64) * 2 + i - 4
    for xv, iv in itertools.product(range(0, 300, 7), (4, 5)):
        env = {"x": xv, "i": iv}
        assert evaluate((x * 2 + i - 4) // 128, env) == (2 * xv + iv - 4) // 128


def test_a_condition_bounds_the_loop_indices_it_names():
    g, u = Var("g", 0, 47), Var("u", 0, 7)
    valid = ands([Num(255).lt(g * 8 + u)])  # 255 < 8g + u: g >= 32 whatever u is
    assert bounds_under(valid, g) == (32, 47) and bounds_under(valid, u) == (0, 7)
    valid = ands([Num(1).lt(g), g.lt(4)])
    assert bounds_under(valid, g) == (2, 3)
    assert bounds_under(ands([(g * -2).lt(-9)]), g) == (5, 47)  # -2g < -9: g > 4.5
    narrow = substitute((g * 64 + x * 128 - 128) // 8192, {"g": Var("g", 2, 3)})
    assert narrow == x // 64, narrow


def test_division_and_modulo_of_a_range_within_one_quotient():
    w = Var("w", 8, 11)
    assert w // 4 == Num(2)
    assert w % 4 == w - 8


def test_unflatten_then_flatten_gives_the_index_back():
    assert (x // 4) * 4 + x % 4 == x
    assert ((x // 4) * 4 + x % 4) * 3 + 1 == x * 3 + 1
    assert ((x // 3) % 8) * 3 + x % 3 == x % 24


def test_lt_folds_when_the_bounds_decide_and_keeps_a_clean_form_otherwise():
    assert y.lt(4) == Num(1) and y.lt(0) == Num(0) and y.lt(z + 4) == Num(1)
    assert (y + 2).lt(5) == y.lt(3)
    assert (x * 3).lt(10) == x.lt(4)  # 3x < 10  <=>  x < 4
    assert Num(5).lt(x * 2) == Num(2).lt(x)  # 5 < 2x  <=>  2 < x
    assert (x * -1).lt(-3) == Num(3).lt(x)
    assert isinstance(x.lt(z), Lt)


def test_ands_drop_true_terms_flatten_and_fold_to_false():
    assert ands([y.lt(4), x.lt(5)]) == x.lt(5)
    assert ands([x.lt(5), y.lt(0)]) == Num(0)
    assert ands([]) == Num(1)
    nested = ands([ands([x.lt(5), z.lt(3)]), x.lt(5)])
    assert isinstance(nested, And) and nested.terms == (x.lt(5), z.lt(3))


def test_bounds():
    assert (x * -2).min == -200 and (x * -2).max == 0
    assert (x // 7).max == 14 and (x % 7).max == 6 and (y % 7).max == 3
    assert (x - z).min == -7 and (x - z).max == 100
    assert Var("n", -5, 5) // 2 == Var("n", -5, 5) // 2 and (Var("n", -5, 5) // 2).min == -3


def test_nodes_are_immutable_and_hashable():
    with pytest.raises(AttributeError):
        x.min = 3
    assert len({x * 2 + 1, x * 2 + 1, 1 + 2 * x}) == 1
    assert {x * 2: "a"}[Var("x", 0, 100) * 2] == "a"
    assert Var("x", 0, 5) != Var("x", 0, 6)


def test_bad_operands_raise():
    with pytest.raises(ValueError, match="positive"):
        x // 0
    with pytest.raises(ValueError, match="positive"):
        x % -2
    with pytest.raises(TypeError, match="int"):
        x * y
    with pytest.raises(ValueError, match="empty range"):
        Var("v", 3, 2)


def test_render():
    i0, i1 = Var("i0", 0, 3), Var("i1", 0, 7)
    assert render(i0 * 8 + i1) == "i0*8+i1"
    assert render(x - 1) == "x-1" and render(5 - x) == "-x+5" and render(z - x * 3) == "z-x*3"
    assert render((x + z) // 4) == "(x+z)/4" and render((x // 4) * 3) == "(x/4)*3"
    assert render(ands([Num(0).lt(x), x.lt(50)])) == "(0<x)&&(x<50)"
    assert render(x * 3_000_000_000) == "x*3000000000LL"


def test_render_shifts_a_numerator_that_may_be_negative():
    n = Var("n", -5, 5)
    assert render(n // 4) == "(n+8)/4-2"  # C truncates toward zero, so the numerator is made >= 0
    assert render(n % 4) == "(n+8)%4"


def test_evaluate_and_vars():
    e = (x * 4 + z) // 3 - y
    assert evaluate(e, {"x": 5, "y": 2, "z": 7}) == (20 + 7) // 3 - 2
    assert evaluate(x.lt(3), {"x": 2}) is True
    assert vars(e) == {x, y, z} and vars(Num(3)) == set()


# ---- property: simplification and rendering keep the value ----

def _as_python(c_source: str) -> str:
    return re.sub(r"(\d)LL", r"\1", c_source).replace("&&", " and ").replace("/", "//")


@st.composite
def expressions(draw, depth=3):
    """(node, reference) where reference(env) computes the same value without any rule."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            name = draw(st.sampled_from("abc"))
            return Var(name, *BOUNDS[name]), lambda env, n=name: env[n]
        v = draw(st.integers(-9, 9))
        return Num(v), lambda env, v=v: v
    op = draw(st.sampled_from(["add", "sub", "mul", "div", "mod"]))
    a, fa = draw(expressions(depth - 1))
    if op in ("add", "sub"):
        b, fb = draw(expressions(depth - 1))
        if op == "add":
            return a + b, lambda env: fa(env) + fb(env)
        return a - b, lambda env: fa(env) - fb(env)
    k = draw(st.integers(-4, 4) if op == "mul" else st.integers(1, 7))
    if op == "mul":
        return a * k, lambda env: fa(env) * k
    if op == "div":
        return a // k, lambda env: fa(env) // k
    return a % k, lambda env: fa(env) % k


BOUNDS = {"a": (0, 5), "b": (-3, 2), "c": (2, 9)}
ENVS = [dict(zip("abc", vals, strict=True))
        for vals in itertools.product(*(range(lo, hi + 1) for lo, hi in BOUNDS.values()))]


@settings(max_examples=int(os.environ.get("SYMBOLIC_EXAMPLES", 150)), deadline=None)
@given(expressions(), expressions(), st.sampled_from(["value", "lt", "and"]))
def test_simplified_and_rendered_expressions_keep_their_value(e1, e2, kind):
    (n1, f1), (n2, f2) = e1, e2
    if kind == "value":
        node, ref = n1, f1
    elif kind == "lt":
        node, ref = n1.lt(n2), lambda env: f1(env) < f2(env)
    else:
        node, ref = ands([n1.lt(n2), n2.lt(7)]), lambda env: f1(env) < f2(env) and f2(env) < 7
    source = _as_python(render(node))
    for env in ENVS:
        want = ref(env)
        got = evaluate(node, env)
        assert got == want, (node, env)
        assert node.min <= got <= node.max, (node, env)
        assert eval(source, {}, env) == want, (source, env)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on PATH")
def test_rendered_c_compiles_and_computes_the_same(tmp_path):
    a, b = Var("a", -20, 20), Var("b", 0, 9)
    nodes = [(a * 3 + b) // 4, (a - b) % 7, (a // 3) % 5 + b * 2, ((a + 20) * 9 + b) // 10 % 3,
             ands([Num(-3).lt(a), (a * 2 + b).lt(11)]), (a * 40_000_000_000 + b) // 3]
    body = "".join(f'      printf("%lld\\n", (long long)({render(n)}));\n' for n in nodes)
    src = (f"#include <stdio.h>\nint main(void) {{\n  for (long long a = {a.min}; a <= {a.max}; a++)\n"
           f"    for (long long b = {b.min}; b <= {b.max}; b++) {{\n{body}    }}\n  return 0;\n}}\n")
    (tmp_path / "t.c").write_text(src)
    subprocess.run(["cc", "-O1", "-o", str(tmp_path / "t"), str(tmp_path / "t.c")], check=True)
    out = subprocess.run([str(tmp_path / "t")], check=True, capture_output=True, text=True).stdout.split()
    want = [int(evaluate(n, {"a": va, "b": vb})) for va in range(a.min, a.max + 1)
            for vb in range(b.min, b.max + 1) for n in nodes]
    assert [int(v) for v in out] == want
