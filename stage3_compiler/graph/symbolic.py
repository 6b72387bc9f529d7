"""Symbolic integer index expressions: the arithmetic that turns loop indices into buffer indices.

A node is immutable and hashable, and knows inclusive bounds `min <= value <= max`, computed when
it is built. Nodes are built through the operators (`a + b`, `a - b`, `a * 3`, `a // 4`, `a % 4`,
`a.lt(b)`, `ands([...])`, ints mixed in freely), which simplify as they go: constants fold, sums
stay flat with like terms combined, and division and modulo use the bounds to vanish where they
can. That is what makes a contiguous (4, 8) view index render as `i0*8+i1` and not as a pile of
`/` and `%`. Building a class directly (`Mul(x, 4)`) skips the rules; only `Var`, `Variable` and
`Num` are meant to be built that way. `render` writes C, `evaluate` computes, `vars` lists the
variables.

A `Var` is a loop index the compiler makes. A `Variable` is a size the user names (tinygrad's):
`Variable("start_pos", 0, 255).bind(17)` is a node that can stand in a shape (`x[:, :start_pos+1]`),
so one kernel serves every value; the bound value travels beside the node, never inside its
identity. Python code that sizes things asks a node `n >= 0` or `min(n, 8)`: the bounds answer
where they decide it, and where they do not the question raises (`SymbolicError`), never guesses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class SymbolicError(TypeError):
    """A question about a symbolic value that its range cannot answer (or an op it cannot take)."""


class Node:
    """An integer expression with inclusive bounds. Equal structure means equal nodes."""

    __slots__ = ("min", "max", "_key", "_hash")
    min: int
    max: int

    def _init(self, lo: int, hi: int, key: tuple, **fields: object) -> None:
        fields.update(min=lo, max=hi, _key=key, _hash=hash((type(self), key)))
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self) -> tuple:
        """Pickled by its fields (engine/program_cache.py keeps lowered kernels on disk); the hash is
        computed again where it is loaded (a string's hash differs between processes)."""
        fields = {s: getattr(self, s) for c in type(self).__mro__ for s in getattr(c, "__slots__", ()) if s != "_hash"}
        return _rebuild, (type(self), fields)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._key == other._key  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {_render(self, c=False)[0]} in [{self.min}, {self.max}]>"

    def __add__(self, other: Node | int) -> Node:
        return sum_nodes([self, other])

    __radd__ = __add__

    def __sub__(self, other: Node | int) -> Node:
        return sum_nodes([self, mul(_node(other), -1)])

    def __rsub__(self, other: int) -> Node:
        return sum_nodes([other, mul(self, -1)])

    def __neg__(self) -> Node:
        return mul(self, -1)

    def __mul__(self, other: Node | int) -> Node:
        if isinstance(self, Num) and isinstance(other, Node):
            return mul(other, self.value)
        return mul(self, _int(other, "*"))

    __rmul__ = __mul__

    def __floordiv__(self, other: Node | int) -> Node:
        return floordiv(self, _int(other, "//"))

    def __mod__(self, other: Node | int) -> Node:
        return mod(self, _int(other, "%"))

    def lt(self, other: Node | int) -> Node:
        return lt(self, other)

    # ---- Python's comparisons, for code that sizes things: decided by the bounds, or refused ----

    def _compare(self, other: Node | int, op: str) -> bool:
        d = self - other  # the bounds of the difference decide it (x+1 > x for every x)
        answers = {"<": (d.max < 0, d.min >= 0), "<=": (d.max <= 0, d.min > 0),
                   ">": (d.min > 0, d.max <= 0), ">=": (d.min >= 0, d.max < 0)}
        yes, no = answers[op]
        if yes or no:
            return yes
        raise SymbolicError(f"symbolic: cannot tell whether {_show(self)} {op} {_show(other)} from their ranges "
                            f"({_show(self)} - {_show(other)} is in [{d.min}, {d.max}])")

    def __lt__(self, other: Node | int) -> bool:
        return self._compare(other, "<")

    def __le__(self, other: Node | int) -> bool:
        return self._compare(other, "<=")

    def __gt__(self, other: Node | int) -> bool:
        return self._compare(other, ">")

    def __ge__(self, other: Node | int) -> bool:
        return self._compare(other, ">=")


def _rebuild(cls: type, fields: dict) -> Node:
    node = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(node, name, value)
    object.__setattr__(node, "_hash", hash((cls, fields["_key"])))
    return node


class Var(Node):
    """A named integer in [lo, hi] (a loop index)."""

    __slots__ = ("name",)

    def __init__(self, name: str, lo: int, hi: int) -> None:
        if lo > hi:
            raise ValueError(f"Var {name!r}: empty range [{lo}, {hi}]")
        self._init(lo, hi, (name, lo, hi), name=name)


class Variable(Var):
    """A size the user names: an integer in [lo, hi] (lo >= 0), bound to a value per call with
    `bind`. Its identity is (name, lo, hi): two binds of one variable are equal nodes, so a kernel's
    structure, and its cache key, are the same for every value; a kernel takes it as an argument
    named like it, so the name must be a C identifier."""

    __slots__ = ("value",)

    def __init__(self, name: str, lo: int, hi: int, value: int | None = None) -> None:
        if not (isinstance(name, str) and name.isidentifier() and name.isascii()) or name in RESERVED \
                or COMPILER_NAMES.fullmatch(name):
            raise ValueError(f"Variable: name {name!r} must be an ASCII identifier, neither a C keyword nor a name "
                             "the compiler gives its own variables (gidx0, ridx1, data2, i0, part, ...)")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi)) or not 0 <= lo <= hi:
            raise ValueError(f"Variable {name!r}: expected ints 0 <= lo <= hi, got [{lo!r}, {hi!r}]")
        Var.__init__(self, name, lo, hi)
        object.__setattr__(self, "value", value)

    def bind(self, value: int) -> Variable:
        """This variable holding `value` for a call (checked against its range)."""
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"Variable {self.name!r}: bind expects an int, got {type(value).__name__}")
        if not self.min <= value <= self.max:
            raise ValueError(f"Variable {self.name!r}: bind({value}) is outside its range [{self.min}, {self.max}]")
        return Variable(self.name, self.min, self.max, value)

    def unbind(self) -> tuple[Variable, int]:
        if self.value is None:
            raise ValueError(f"Variable {self.name!r}: unbind of a variable that is not bound")
        return Variable(self.name, self.min, self.max), self.value

    def __repr__(self) -> str:
        bound = "" if self.value is None else f" = {self.value}"
        return f"<Variable {self.name} in [{self.min}, {self.max}]{bound}>"


COMPILER_NAMES = re.compile(r"(gidx|ridx|bidx|data|acc|i|m|v)\d+|sidx|part|gid|exp2|log2|sqrt|sin|sitp_\w*|"
                            r"blockIdx|blockDim|threadIdx")  # the compiler's own names
RESERVED = frozenset("auto break case char const continue default do double else enum extern float for goto if "
                     "inline int long register restrict return short signed sizeof static struct switch typedef "
                     "union unsigned void volatile while".split())


class Num(Node):
    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        value = int(value)
        self._init(value, value, (value,), value=value)


class Sum(Node):
    """terms: non-constant terms, each at most once, then the constant (if not 0) last."""

    __slots__ = ("terms",)

    def __init__(self, terms: tuple[Node, ...]) -> None:
        self._init(sum(t.min for t in terms), sum(t.max for t in terms), terms, terms=terms)


class Mul(Node):
    __slots__ = ("a", "k")

    def __init__(self, a: Node, k: int) -> None:
        self._init(min(a.min * k, a.max * k), max(a.min * k, a.max * k), (a, k), a=a, k=k)


class Div(Node):
    """Floor division by a positive int."""

    __slots__ = ("a", "k")

    def __init__(self, a: Node, k: int) -> None:
        self._init(a.min // k, a.max // k, (a, k), a=a, k=k)


class Mod(Node):
    """Floor modulo by a positive int: always in [0, k)."""

    __slots__ = ("a", "k")

    def __init__(self, a: Node, k: int) -> None:
        self._init(0, min(k - 1, a.max) if a.min >= 0 else k - 1, (a, k), a=a, k=k)


class Lt(Node):
    __slots__ = ("a", "b")

    def __init__(self, a: Node, b: Node) -> None:
        self._init(0, 1, (a, b), a=a, b=b)


class And(Node):
    __slots__ = ("terms",)

    def __init__(self, terms: tuple[Node, ...]) -> None:
        self._init(0, 1, terms, terms=terms)


def lo_hi(x: Node | int) -> tuple[int, int]:
    return (x.min, x.max) if isinstance(x, Node) else (int(x), int(x))


def _show(x: Node | int) -> str:
    return _render(x, c=False)[0] if isinstance(x, Node) else str(x)


def concrete(x: Node | int) -> Node | int:
    """x as an int where it is a constant node (a shrink by start_pos to start_pos+1 is 1 wide)."""
    return x.value if isinstance(x, Num) else x


def layout(size: Node | int) -> int:
    """The extent a dim is laid out at: a symbolic size at its maximum (graph/shapetracker.py)."""
    return size.max if isinstance(size, Node) else size


def smax(a: Node | int, b: Node | int) -> Node | int:
    """max(a, b) where the bounds of b - a decide it; SymbolicError otherwise."""
    d = _node(b) - a
    if d.min >= 0:
        return b
    if d.max <= 0:
        return a
    raise SymbolicError(f"symbolic: cannot tell max({_show(a)}, {_show(b)}) from their ranges")


def smin(a: Node | int, b: Node | int) -> Node | int:
    """min(a, b) where the bounds of b - a decide it; SymbolicError otherwise."""
    d = _node(b) - a
    if d.max <= 0:
        return b
    if d.min >= 0:
        return a
    raise SymbolicError(f"symbolic: cannot tell min({_show(a)}, {_show(b)}) from their ranges")


def variables(x) -> set[Variable]:
    """The user's Variables in a node, or in a (nested) tuple of ints and nodes (a shape, a mask)."""
    if isinstance(x, Node):
        return {v for v in vars(x) if isinstance(v, Variable)}
    if isinstance(x, (tuple, list)):
        return set().union(*(variables(e) for e in x)) if x else set()
    return set()


def _node(x: Node | int) -> Node:
    if isinstance(x, (Node, int)):
        return x if isinstance(x, Node) else Num(x)
    raise TypeError(f"symbolic: expected a Node or an int, got {type(x).__name__}")


def _int(x: Node | int, op: str) -> int:
    if isinstance(x, (Num, int)):
        return x.value if isinstance(x, Num) else x
    raise SymbolicError(f"symbolic {op}: the right operand must be an int (products, // and % are by constants), "
                        f"got {x!r}")


# ---- the rules, applied at construction ----

def _terms(a: Node) -> tuple[list[tuple[Node, int]], int]:
    """a as (base, coefficient) pairs plus a constant."""
    if isinstance(a, Num):
        return [], a.value
    parts = a.terms if isinstance(a, Sum) else (a,)
    const = sum(t.value for t in parts if isinstance(t, Num))
    return [(t.a, t.k) if isinstance(t, Mul) else (t, 1) for t in parts if not isinstance(t, Num)], const


def _build(terms: list[tuple[Node, int]], const: int, divide: int = 1) -> Node:
    return sum_nodes([*(mul(b, c // divide) for b, c in terms), Num(const // divide)])


def sum_nodes(nodes: Iterable[Node | int]) -> Node:
    """The sum of nodes and ints: flat, like terms combined, the constant last."""
    coefs: dict[Node, int] = {}
    const = 0
    for n in nodes:
        terms, c = _terms(_node(n))
        const += c
        for base, k in terms:
            coefs[base] = coefs.get(base, 0) + k
    coefs = {b: k for b, k in coefs.items() if k != 0}
    for base, k in coefs.items():
        if not isinstance(base, Mod):
            continue
        # what unflattening an index and flattening it back leaves: (x//m)*m + x%m = x, and
        # ((x//m)%n)*m + x%m = x%(m*n)
        for outer, whole in ((Div(base.a, base.k), base.a), *((t, base.a % (base.k * t.k)) for t in coefs
                             if isinstance(t, Mod) and t.a == Div(base.a, base.k))):
            if coefs.get(outer) == k * base.k:
                rest = [(b, c) for b, c in coefs.items() if b != base and b != outer]
                return sum_nodes([_build(rest, const), mul(whole, k)])
    terms = tuple(b if k == 1 else Mul(b, k) for b, k in coefs.items())
    if not terms:
        return Num(const)
    if const == 0 and len(terms) == 1:
        return terms[0]
    return Sum(terms + ((Num(const),) if const else ()))


def mul(a: Node, k: int) -> Node:
    """a * k, distributed over sums so that sums stay flat."""
    if k == 0:
        return Num(0)
    if k == 1:
        return a
    if isinstance(a, Num):
        return Num(a.value * k)
    if isinstance(a, Mul):
        return mul(a.a, a.k * k)
    if isinstance(a, Sum):
        return sum_nodes(mul(t, k) for t in a.terms)
    return Mul(a, k)


def floordiv(a: Node, k: int) -> Node:
    """a // k (floor) for a positive int k."""
    if k <= 0:
        raise ValueError(f"symbolic //: the divisor must be a positive int, got {k}")
    if k == 1:
        return a
    if a.min // k == a.max // k:  # the whole range falls in one quotient (this also folds constants)
        return Num(a.min // k)
    if isinstance(a, Div):
        return floordiv(a.a, a.k * k)
    if isinstance(a, (Sum, Mul)):
        terms, const = _terms(a)
        whole = [(b, c // k) for b, c in terms if c % k == 0]
        rest = [(b, c) for b, c in terms if c % k != 0]
        # pull whole multiples of k out of the constant only while the numerator stays >= 0
        q = const // k if _build(rest, 0).min >= 0 else 0
        if whole or q:  # (x*k + y)//k = x + y//k
            return sum_nodes([_build(whole, q), floordiv(_build(rest, const - q * k), k)])
        if split := _split_by(terms, const, k):  # (g*y + r)//(g*m) = y//m when 0 <= r < g
            return floordiv(split[1], k // split[0])
    return Div(a, k)


def _split_by(terms: list[tuple[Node, int]], const: int, k: int) -> tuple[int, Node, Node] | None:
    """(g, y, r) with a = g*y + r, g dividing k and 0 <= r < g, for the largest such g found:
    y gathers the terms whose coefficients g divides; a common factor of everything is one case.
    r takes the constant's share that brings its least value into [0, g): (2x + i - 4)//128 with
    i in [4, 5] is x//64 (r = i - 4), as a narrowed index (shapetracker.narrowed) leaves it."""
    common = math.gcd(k, const, *(c for _, c in terms))
    for g in sorted(({math.gcd(k, c) for _, c in terms} | {common}) - {1, k}, reverse=True):
        rest = _build([(b, c) for b, c in terms if c % g], 0)
        shift = -rest.min + (const + rest.min) % g  # = const (mod g), and rest.min + shift in [0, g)
        if rest.max + shift < g:
            return g, _build([(b, c) for b, c in terms if c % g == 0], const - shift, g), sum_nodes([rest, shift])
    return None


def mod(a: Node, k: int) -> Node:
    """a % k (floor, so in [0, k)) for a positive int k."""
    if k <= 0:
        raise ValueError(f"symbolic %: the modulus must be a positive int, got {k}")
    if k == 1:
        return Num(0)
    if a.min // k == a.max // k:  # one period: a minus a constant (a itself when 0 <= a < k)
        return sum_nodes([a, -k * (a.min // k)])
    if isinstance(a, Mod) and a.k % k == 0:
        return mod(a.a, k)
    if isinstance(a, (Sum, Mul)):
        terms, const = _terms(a)
        rest = [(b, c) for b, c in terms if c % k != 0]
        # reduce the constant only where the numerator stays >= 0
        reduced = const % k if _build(rest, 0).min >= 0 else const
        if len(rest) < len(terms) or reduced != const:  # (x*k + y) % k = y % k
            return mod(_build(rest, reduced), k)
        if split := _split_by(terms, const, k):  # (g*y + r) % (g*m) = g*(y % m) + r when 0 <= r < g
            g, y, r = split
            return sum_nodes([mul(mod(y, k // g), g), r])
    return Mod(a, k)


def lt(a: Node | int, b: Node | int) -> Node:
    """a < b as a node worth 1 or 0, folded when the bounds decide it."""
    a, b = _node(a), _node(b)
    if a.max < b.min:
        return Num(1)
    if a.min >= b.max:
        return Num(0)
    if isinstance(b, Num):  # move everything onto the constant side: a clean `x < n` is what masks need
        terms, const = _terms(a)
        n = b.value - const
        g = math.gcd(*(c for _, c in terms))
        if const or g > 1:  # g*y < n  <=>  y < ceil(n/g)
            return lt(_build(terms, 0, g), -(-n // g))
        if all(c < 0 for _, c in terms):
            return lt(-n, mul(a, -1))
    elif isinstance(a, Num):
        terms, const = _terms(b)
        n = a.value - const
        g = math.gcd(*(c for _, c in terms))
        if const or g > 1:  # n < g*y  <=>  floor(n/g) < y
            return lt(n // g, _build(terms, 0, g))
        if all(c < 0 for _, c in terms):
            return lt(mul(b, -1), -n)
    return Lt(a, b)


def ands(nodes: Iterable[Node]) -> Node:
    """The conjunction of conditions: true terms dropped, a false term makes it false."""
    out: list[Node] = []
    for n in nodes:
        for t in n.terms if isinstance(n, And) else (n,):
            if isinstance(t, Num):
                if t.value == 0:
                    return Num(0)
            elif t not in out:
                out.append(t)
    if not out:
        return Num(1)
    return out[0] if len(out) == 1 else And(tuple(out))


def substitute(node: Node, values: Mapping[str, Node]) -> Node:
    """node with each loop index named in values replaced by its node (a Var of a narrower range),
    rebuilt through the operators so that it simplifies again with the new bounds."""
    if type(node) is Var:
        return values.get(node.name, node)
    if isinstance(node, (Num, Var)):
        return node
    if isinstance(node, Sum):
        return sum_nodes(substitute(t, values) for t in node.terms)
    if isinstance(node, Mul):
        return mul(substitute(node.a, values), node.k)
    if isinstance(node, Div):
        return floordiv(substitute(node.a, values), node.k)
    if isinstance(node, Mod):
        return mod(substitute(node.a, values), node.k)
    if isinstance(node, Lt):
        return lt(substitute(node.a, values), substitute(node.b, values))
    return ands(substitute(t, values) for t in node.terms)


def bounds_under(cond: Node, var: Var) -> tuple[int, int]:
    """The range of a loop index wherever the condition holds, as far as its linear conjuncts say:
    from `c*x + rest < 0` (each `a < b` moved to one side), c*x <= -rest.min - 1 bounds x."""
    lo, hi = var.min, var.max
    for t in cond.terms if isinstance(cond, And) else (cond,):
        if not isinstance(t, Lt):
            continue
        terms, const = _terms(sum_nodes([t.a, mul(t.b, -1)]))
        c = next((k for base, k in terms if base == var), 0)
        if c == 0:
            continue
        most = -(_build([(b, k) for b, k in terms if b != var], const).min) - 1  # c*x <= most
        if c > 0:
            hi = min(hi, most // c)
        else:
            lo = max(lo, -(-most // c))
    return lo, hi


# ---- using nodes: evaluate, vars, render ----

_EVAL = {
    Num: lambda n, env: n.value,
    Var: lambda n, env: env[n.name],
    Variable: lambda n, env: env[n.name],
    Sum: lambda n, env: sum(evaluate(t, env) for t in n.terms),
    Mul: lambda n, env: evaluate(n.a, env) * n.k,
    Div: lambda n, env: evaluate(n.a, env) // n.k,
    Mod: lambda n, env: evaluate(n.a, env) % n.k,
    Lt: lambda n, env: evaluate(n.a, env) < evaluate(n.b, env),
    And: lambda n, env: all(evaluate(t, env) for t in n.terms),
}


def evaluate(node: Node, env: Mapping[str, int]) -> int | bool:
    """The value of node with each variable's value taken from env (by name); comparisons give bools."""
    return _EVAL[type(node)](node, env)


def vars(node: Node) -> set[Var]:  # shadows the builtin on purpose: the compiler's name for it
    """The variables node uses."""
    out: set[Var] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Var):
            out.add(n)
        elif isinstance(n, (Sum, And)):
            stack.extend(n.terms)
        elif isinstance(n, Lt):
            stack.extend((n.a, n.b))
        elif isinstance(n, (Mul, Div, Mod)):
            stack.append(n.a)
    return out


# C precedence levels, loosest first; a child looser than its slot gets parentheses
_AND, _CMP, _ADD, _MUL, _ATOM = range(5)


def descends(node: Node) -> bool:
    """Whether the expression has a term with a negative coefficient: an index that walks memory
    backwards as a loop variable grows (a flipped view)."""
    if isinstance(node, Mul):
        return node.k < 0 or descends(node.a)
    if isinstance(node, (Sum, And)):
        return any(descends(t) for t in node.terms)
    if isinstance(node, (Div, Mod)):
        return descends(node.a)
    if isinstance(node, Lt):
        return descends(node.a) or descends(node.b)
    return False


def render(node: Node) -> str:
    """node as a C expression (also CUDA C), e.g. `i0*8+i1`. `/` and `%` are written only over
    numerators whose bounds are >= 0, where C's truncating division equals floor division; a
    numerator that may be negative is first shifted up by a multiple of the divisor:
    a//k = (a + k*m)/k - m and a%k = (a + k*m)%k."""
    return _render(node, c=True)[0]


def _literal(v: int, c: bool) -> str:
    return f"{v}LL" if c and not INT32_MIN <= v <= INT32_MAX else str(v)


def _paren(node: Node, level: int, c: bool) -> str:
    s, own = _render(node, c)
    return f"({s})" if own < level else s


def _render(node: Node, c: bool) -> tuple[str, int]:
    if isinstance(node, (Num, Var)):
        return _literal(node.value, c) if isinstance(node, Num) else node.name, _ATOM
    if isinstance(node, Sum):
        out = ""
        for t in node.terms:
            neg = (isinstance(t, Num) and t.value < 0) or (isinstance(t, Mul) and t.k < 0)
            t = mul(t, -1) if neg else t
            # a leading unary minus binds tighter than * / %: only a product may go without parentheses
            level = _ATOM if neg and not out and not isinstance(t, Mul) else _MUL
            out += ("-" if neg else "+" if out else "") + _paren(t, level, c)
        return out, _ADD
    if isinstance(node, Mul):
        return f"{_paren(node.a, _ATOM, c)}*{_literal(node.k, c)}", _MUL
    if isinstance(node, (Div, Mod)):
        return _render_divmod(node, c)
    if isinstance(node, Lt):
        return f"{_paren(node.a, _ADD, c)}<{_paren(node.b, _ADD, c)}", _CMP
    if isinstance(node, And):
        return "&&".join(_paren(t, _ADD, c) for t in node.terms), _AND
    raise TypeError(f"render: not a symbolic node: {node!r}")


def _render_divmod(node: Div | Mod, c: bool) -> tuple[str, int]:
    div = isinstance(node, Div)
    if not c:
        return f"{_paren(node.a, _ATOM, c)}{'//' if div else '%'}{node.k}", _MUL
    shift = -(node.a.min // node.k) if node.a.min < 0 else 0  # (a + k*shift) >= 0 by its bounds
    num = node.a + node.k * shift
    assert num.min >= 0, f"render: numerator {num!r} of {node!r} may be negative"
    s = f"{_paren(num, _ATOM, c)}{'/' if div else '%'}{_literal(node.k, c)}"
    if div and shift:
        return f"{s}-{_literal(shift, c)}", _ADD
    return s, _MUL
