"""Elementwise ops. Four primitives make a node of the lazy graph (unary, binary, where, cast in
tensor.py); everything else in this file is written on top of them.

Operands are promoted first (docs/api-contract.md), then broadcast as expanded views. Only the
IR's ops become nodes (NEG, RECIP, SQRT, EXP2, LOG2, SIN; ADD, MUL, MAX, CMPLT, CMPNE, CMPEQ,
AND, OR, XOR; WHERE; CAST): `_unary` and `_binary` write the API's other ops on them, with the
math of transcendental.py (exp is exp2(x * log2 e), gelu is x * Phi(x) through an erf polynomial).
"""

from __future__ import annotations

import math
from typing import Self

from . import transcendental as tm
from .autograd import no_grad, record
from .device import check_same
from .dtype import dtypes, float_of, promote, rounds_once, scalar_dtype
from .errors import ArgumentError
from .hooks import TensorCore
from .ops import FLOAT_ONLY, IR_ELEMENTWISE, Ops
from .shape import broadcast_shapes

# The API's float ops that the IR does not have, as formulas on it. Each is differentiated by its
# own rule, as stage2's op of the same name, not through the formula (autograd.py says why).
# A half type's computes in float32 and rounds once (dtype.rounds_once): the formulas' constants and
# rounding tricks are float32's and float64's.
COMPOSITE_UNARY = {op: rounds_once(f) for op, f in {
    Ops.EXP: tm.exp, Ops.LOG: tm.log, Ops.COS: tm.cos, Ops.TANH: tm.tanh, Ops.ERF: tm.erf, Ops.GELU: tm.gelu,
    Ops.SIGMOID: tm.sigmoid}.items()}

Operand = TensorCore | bool | int | float


class ElementwiseMixin(TensorCore):
    # ---- the primitives ----

    def _unary(self, op: Ops, name: str) -> Self:
        x = self.cast(float_of(self.dtype)) if op in FLOAT_ONLY else self
        if x.dtype is dtypes.bool and op is not Ops.NOT:
            raise TypeError(f"{name}: not supported for bool tensors of shape {self.shape}")
        if x.dtype.is_float and op is Ops.NOT:
            raise TypeError(f"{name}: expected a bool or int tensor, got {x.dtype.name}")
        if op in COMPOSITE_UNARY:  # a formula recorded as one op, with its own rule (autograd.py says why)
            with no_grad():
                out = COMPOSITE_UNARY[op](x)
            if out.lazydata.is_base and out.lazydata.formula is None and out.lazydata.op is not Ops.BUFFER:
                out.lazydata.formula = (op, x.lazydata)  # what the formula computes, for the scheduler's rules
            return record(out, op, (x,))
        if op is Ops.NOT:  # bool: x == False; ints: every bit flipped
            return x._binary(Ops.CMPEQ, name, False) if x.dtype is dtypes.bool else x._binary(Ops.XOR, name, -1)
        if op is Ops.ABS:
            return rounds_once(tm.abs)(x) if x.dtype.is_float else x.maximum(-x)
        if op is Ops.SIGN and x.dtype.is_float:  # selects of constants: recorded as one op, derivative 0
            with no_grad():
                out = rounds_once(tm.sign)(x)
            return record(out, op, (x,))
        if op is Ops.SIGN:
            return (x > 0).cast(x.dtype) - (x < 0).cast(x.dtype)
        return record(self._make(x.lazydata.alu(op)), op, (x,))

    def _operands(self, name: str, other: Operand, reflected: bool = False) -> tuple[Self, Self]:
        """Turn `other` into a tensor, promote both to one dtype and broadcast them to one shape."""
        if isinstance(other, TensorCore):
            if other.device != self.device:  # compared inline: this runs for every binary op
                check_same(name, self, other)
            dtype = promote(self.dtype, other.dtype)
        elif isinstance(other, (bool, int, float)):
            dtype = scalar_dtype(other, self.dtype)
            other = self._like(other, dtype)
        else:
            raise TypeError(f"{name}: cannot combine a tensor with {type(other).__name__}")
        a, b = self.cast(dtype), other.cast(dtype)
        if reflected:
            a, b = b, a
        shape = broadcast_shapes(name, a.shape, b.shape)
        return a._broadcast_to(shape), b._broadcast_to(shape)

    def _binary(self, op: Ops, name: str, other: Operand, reflected: bool = False) -> Self:
        a, b = self._operands(name, other, reflected)
        if op in IR_ELEMENTWISE:
            return record(self._make(a.lazydata.alu(op, b.lazydata)), op, (a, b))
        if op is Ops.SUB:
            return a + -b
        if op is Ops.CMPLE:
            return (a < b) | (a == b)
        if op is Ops.MIN:  # floats: -max(-a, -b) keeps max's NaN and tie rules; ints: ~ reverses the order
            if a.dtype.is_float:
                return -((-a).maximum(-b))
            return a & b if a.dtype is dtypes.bool else ~((~a).maximum(~b))
        if op is Ops.POW and a.dtype.is_float:  # a formula recorded as one op, like the unary composites
            with no_grad():
                out = rounds_once(tm.pow)(a, b)
            return record(out, op, (a, b))
        if op is Ops.POW:
            return a._int_pow(b)
        raise NotImplementedError(f"{name}: no IR form for {op.name}")

    def _int_pow(self, b: Self) -> Self:
        """Integer power by squaring over the bits of b (b >= 0, checked by pow), wrapping like numpy."""
        top = int(b.max().item()) if b.numel() else 0
        out, base = self.full_like(1), self
        for bit in range(max(top.bit_length(), 1)):
            out = ((b & (1 << bit)) != 0).where(out * base, out)
            base = base * base
        return out

    def where(self, x: Operand, y: Operand) -> Self:
        """self is the condition: pick x where it is true, y elsewhere."""
        cond = self.cast(dtypes.bool)
        if not isinstance(x, TensorCore) and not isinstance(y, TensorCore):
            x = self._like(x)
        if isinstance(x, TensorCore):
            a, b = x._operands("where", y)
        else:
            b, a = y._operands("where", x)
        check_same("where", cond, a)
        shape = broadcast_shapes("where", cond.shape, a.shape)
        cond, a, b = cond._broadcast_to(shape), a._broadcast_to(shape), b._broadcast_to(shape)
        out = self._make(cond.lazydata.alu(Ops.WHERE, a.lazydata, b.lazydata))
        return record(out, Ops.WHERE, (a, b), cond=cond)

    # ---- arithmetic ----

    def add(self, x: Operand, reflected: bool = False) -> Self:
        return self._binary(Ops.OR if self._both_bool(x) else Ops.ADD, "add", x, reflected)

    def sub(self, x: Operand, reflected: bool = False) -> Self:
        if self._both_bool(x):
            raise TypeError(f"sub: subtracting bool tensors is not supported (shape {self.shape}); "
                            "use ^ or logical ops")
        return self._binary(Ops.SUB, "sub", x, reflected)

    def mul(self, x: Operand, reflected: bool = False) -> Self:
        return self._binary(Ops.AND if self._both_bool(x) else Ops.MUL, "mul", x, reflected)

    def div(self, x: Operand, reflected: bool = False, rounding_mode: str | None = None) -> Self:
        """True division: ints divide as default_float. rounding_mode "floor" or "trunc" rounds the
        quotient instead, in the operands' dtype (division.py)."""
        if rounding_mode is not None:
            return self._div_rounded(x, reflected, rounding_mode)
        a, b = self._operands("div", x, reflected)
        return a.cast(float_of(a.dtype))._binary(Ops.DIV, "div", b.cast(float_of(a.dtype)))

    def pow(self, x: Operand, reflected: bool = False) -> Self:
        a, b = self._operands("pow", x, reflected)
        if a.dtype is dtypes.bool:
            a, b = a.cast(dtypes.default_int), b.cast(dtypes.default_int)
        if a.dtype.is_int and b.numel() and b.min().item() < 0:
            raise ArgumentError(f"pow: integers to negative integer powers are not allowed (shape {b.shape})")
        return a._binary(Ops.POW, "pow", b)

    def _both_bool(self, x: Operand) -> bool:
        other = x.dtype if hasattr(x, "dtype") else (dtypes.bool if isinstance(x, bool) else None)
        return self.dtype is dtypes.bool and other is dtypes.bool

    def neg(self) -> Self:
        if self.dtype is dtypes.bool:
            raise TypeError(f"neg: negating a bool tensor is not supported (shape {self.shape}); use ~")
        return self._unary(Ops.NEG, "neg")

    def __add__(self, x: Operand) -> Self:
        return self.add(x)

    def __radd__(self, x: Operand) -> Self:
        return self.add(x, True)

    def __sub__(self, x: Operand) -> Self:
        return self.sub(x)

    def __rsub__(self, x: Operand) -> Self:
        return self.sub(x, True)

    def __mul__(self, x: Operand) -> Self:
        return self.mul(x)

    def __rmul__(self, x: Operand) -> Self:
        return self.mul(x, True)

    def __truediv__(self, x: Operand) -> Self:
        return self.div(x)

    def __rtruediv__(self, x: Operand) -> Self:
        return self.div(x, True)

    def __pow__(self, x: Operand) -> Self:
        return self.pow(x)

    def __rpow__(self, x: Operand) -> Self:
        return self.pow(x, True)

    def __neg__(self) -> Self:
        return self.neg()

    def __matmul__(self, x: Operand) -> Self:
        return self.matmul(x)

    def __rmatmul__(self, x: Operand) -> Self:
        return self.matmul(x, True)

    # ---- comparisons ----

    def __lt__(self, x: Operand) -> Self:
        return self._binary(Ops.CMPLT, "lt", x)

    def __le__(self, x: Operand) -> Self:
        return self._binary(Ops.CMPLE, "le", x)

    def __gt__(self, x: Operand) -> Self:
        return self._binary(Ops.CMPLT, "gt", x, True)

    def __ge__(self, x: Operand) -> Self:
        return self._binary(Ops.CMPLE, "ge", x, True)

    def __eq__(self, x: Operand) -> Self:
        return self._binary(Ops.CMPEQ, "eq", x)

    def __ne__(self, x: Operand) -> Self:
        return self._binary(Ops.CMPNE, "ne", x)

    # ---- logical / bitwise ----

    def _logical(self, op: Ops, name: str, x: Operand, reflected: bool = False) -> Self:
        if self.dtype.is_float or getattr(x, "dtype", dtypes.bool).is_float or isinstance(x, float):
            raise TypeError(f"{name}: expected bool or int tensors, got {self.dtype.name} (shape {self.shape})")
        return self._binary(op, name, x, reflected)

    def __and__(self, x: Operand) -> Self:
        return self._logical(Ops.AND, "and", x)

    def __rand__(self, x: Operand) -> Self:
        return self._logical(Ops.AND, "and", x, True)

    def __or__(self, x: Operand) -> Self:
        return self._logical(Ops.OR, "or", x)

    def __ror__(self, x: Operand) -> Self:
        return self._logical(Ops.OR, "or", x, True)

    def __xor__(self, x: Operand) -> Self:
        return self._logical(Ops.XOR, "xor", x)

    def __rxor__(self, x: Operand) -> Self:
        return self._logical(Ops.XOR, "xor", x, True)

    def __invert__(self) -> Self:
        return self._unary(Ops.NOT, "invert")

    def logical_not(self) -> Self:
        return self.cast(dtypes.bool)._unary(Ops.NOT, "logical_not")

    # ---- unary math ----

    def reciprocal(self) -> Self:
        return self._unary(Ops.RECIP, "reciprocal")

    def exp(self) -> Self:
        return self._unary(Ops.EXP, "exp")

    def exp2(self) -> Self:
        return self._unary(Ops.EXP2, "exp2")

    def pow2(self) -> Self:
        """2**self for an integer-valued tensor (a fraction is dropped, toward 0): the IR's POW2, the
        power of two the math formulas scale by, built from the float's exponent bits."""
        return self._unary(Ops.POW2, "pow2")

    def log(self) -> Self:
        return self._unary(Ops.LOG, "log")

    def log2(self) -> Self:
        return self._unary(Ops.LOG2, "log2")

    def sqrt(self) -> Self:
        return self._unary(Ops.SQRT, "sqrt")

    def rsqrt(self) -> Self:
        return self.sqrt().reciprocal()

    def sin(self) -> Self:
        return self._unary(Ops.SIN, "sin")

    def cos(self) -> Self:
        return self._unary(Ops.COS, "cos")

    def tanh(self) -> Self:
        return self._unary(Ops.TANH, "tanh")

    def erf(self) -> Self:
        return self._unary(Ops.ERF, "erf")

    def sigmoid(self) -> Self:
        """1 / (1 + e^-x), recorded as one op: its rule s (1 - s) is finite everywhere, where the
        chain rule through the formula is inf / inf once e^-x overflows (x < -88 in float32)."""
        return self._unary(Ops.SIGMOID, "sigmoid")

    def relu(self) -> Self:
        # not maximum(0): its gradient splits a tie (0.5 at x == 0); relu's is 0 there, as in torch and tinygrad.
        # x <= 0, not x > 0: NaN fails every comparison, and relu(NaN) is NaN, as torch gives it
        return (self <= 0).where(0, self)

    def gelu(self, approximate: str = "none") -> Self:
        """Exact GELU, x * Phi(x), as nanoGPT and torch use; approximate="tanh" is tinygrad's."""
        x = self.cast(float_of(self.dtype))
        if approximate == "tanh":
            return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)).tanh())
        return x._unary(Ops.GELU, "gelu")  # x * Phi(x), accurate in both tails (transcendental.py)

    def silu(self) -> Self:
        return self * self.sigmoid()

    def leaky_relu(self, neg_slope: float = 0.01) -> Self:
        return (self < 0).where(self * neg_slope, self)

    def abs(self) -> Self:
        if self.dtype is dtypes.bool or self.dtype.is_unsigned:
            return self
        return self._unary(Ops.ABS, "abs")

    def sign(self) -> Self:
        if self.dtype is dtypes.bool:
            return self
        return self._unary(Ops.SIGN, "sign")

    def square(self) -> Self:
        return self * self

    def maximum(self, x: Operand) -> Self:
        return self._binary(Ops.MAX, "maximum", x)

    def minimum(self, x: Operand) -> Self:
        return self._binary(Ops.MIN, "minimum", x)

    def clip(self, min_: Operand | None = None, max_: Operand | None = None) -> Self:
        if min_ is None and max_ is None:
            raise ArgumentError("clip: at least one of min_ and max_ must be given")
        x = self if min_ is None else self.maximum(min_)
        return x if max_ is None else x.minimum(max_)

    def clamp(self, min_: Operand | None = None, max_: Operand | None = None) -> Self:
        return self.clip(min_, max_)
