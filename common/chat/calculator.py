"""The chat model's calculator tool: arithmetic (and ``"text".count("t")``) evaluated safely.

The model writes ``<|python_start|>12*(3+4)<|python_end|>`` and the engine forces the result in
as ``<|output_start|>84<|output_end|>``. nanochat runs Python's ``eval`` on a character-filtered
string under a timeout; here the text is parsed with :mod:`ast` and only a whitelist of nodes is
walked by our own small interpreter, so no name, attribute, call or import can ever run: numbers,
``+ - * / // % **``, unary signs, parentheses, and one method call, a string literal's ``.count``
of another string literal (nanochat's "how many r in strawberry" tool use). Sizes are bounded
before they are computed (the expression's length, an integer's bits, a power's estimated size),
so hostile input costs microseconds. Anything else gives ``None``: the engine then forces nothing.
"""

from __future__ import annotations

import ast
import math
import operator

MAX_CHARS = 256  # longer "expressions" are prose, or an attack on the parser
MAX_INT_BITS = 512  # about 154 decimal digits: plenty for arithmetic, far from a memory problem

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class Refused(ValueError):
    """The expression is outside what the calculator computes."""


def evaluate(expr: str) -> str | None:
    """The value of ``expr`` as text (Python's ``str`` of the result), or None when it is not safe
    arithmetic or a string count, is malformed, too large, or divides by zero."""
    if not isinstance(expr, str) or len(expr) > MAX_CHARS:
        return None
    text = expr.strip()
    if "'" not in text and '"' not in text:
        text = text.replace(",", "")  # "1,000 * 3": thousands separators, as nanochat strips them
    try:
        tree = ast.parse(text, mode="eval")
        value = _eval(tree.body)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError, MemoryError):
        return None
    if isinstance(value, str) or isinstance(value, float) and not math.isfinite(value):
        return None  # a bare string literal is not a calculation; inf/nan are not answers
    return str(value)


def _eval(node: ast.AST) -> int | float | str:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float, str)):
            raise Refused(f"calculator: constant {node.value!r} is not a number or a string")
        return _checked(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _checked(_UNARY[type(node.op)](_number(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _number(node.left), _number(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        return _checked(_BINARY[type(node.op)](left, right))
    if _is_count_call(node):
        return node.func.value.value.count(node.args[0].value)
    raise Refused(f"calculator: {type(node).__name__} is not allowed")


def _number(node: ast.AST) -> int | float:
    value = _eval(node)
    if isinstance(value, str):
        raise Refused("calculator: arithmetic on a string")
    return value


def _checked(value: int | float | str) -> int | float | str:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise Refused(f"calculator: integer of {value.bit_length()} bits is too large")
    if isinstance(value, complex):
        raise Refused("calculator: complex result")  # (-8) ** 0.5
    return value


def _check_power(base: int | float, exponent: int | float) -> None:
    """Refuse a power whose result would be too big to compute cheaply, before computing it."""
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if exponent * math.log2(abs(base)) > MAX_INT_BITS:
            raise Refused(f"calculator: {base} ** {exponent} is too large")
    if abs(exponent) > 10_000:
        raise Refused(f"calculator: exponent {exponent} is too large")


def _is_count_call(node: ast.AST) -> bool:
    """``"literal".count("literal")`` and nothing else that looks like a call."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "count"
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str))
