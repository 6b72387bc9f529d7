"""Elementwise ops. Four primitives call a kernel (unary, binary, where, cast in tensor.py);
everything else in this file is written on top of them.

Operands are promoted first (docs/api-contract.md), then broadcast as zero-stride views, then the
dims every operand walks alike are merged so the kernel's inner loop is as long as possible.
"""

from __future__ import annotations

import math
from typing import Self

from .autograd import no_grad, record
from .ckernels import ffi, int64s
from .device import check, check_same
from .dtype import compute_of, dtypes, float_of, promote, scalar_dtype
from .errors import ArgumentError
from .hooks import TensorCore
from .ops import COMPARE, FLOAT_ONLY, Ops
from .shape import broadcast_shapes, merge_dims

Operand = TensorCore | bool | int | float


class ElementwiseMixin(TensorCore):
    # ---- the primitives ----

    def _unary(self, op: Ops, name: str) -> Self:
        x = self.cast(float_of(self.dtype)) if op in FLOAT_ONLY else self
        if x.dtype is dtypes.bool and op is not Ops.NOT:
            raise TypeError(f"{name}: not supported for bool tensors of shape {self.shape}")
        if x.dtype.is_float and op is Ops.NOT:
            raise TypeError(f"{name}: expected a bool or int tensor, got {x.dtype.name}")
        if compute_of(x.dtype) is not x.dtype:  # half types in float32, narrow ints in int64; stored once
            return x.cast(compute_of(x.dtype))._unary(op, name).cast(x.dtype)
        out = x._alloc(x.shape, x.dtype)
        shape, (sa,) = merge_dims(x.shape, x._strides)
        check(x._buf.kernels.unary(op, x.dtype.code, out._ptr(), x._ptr(), len(shape), int64s(shape), int64s(sa)),
              "unary", name, x)
        return record(out, op, (x,))

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
        if compute_of(a.dtype) is not a.dtype:  # half types in float32, narrow ints in int64; stored once
            out = a.cast(compute_of(a.dtype))._binary(op, name, b.cast(compute_of(a.dtype)))
            return out if op in COMPARE else out.cast(a.dtype)
        out = a._alloc(a.shape, dtypes.bool if op in COMPARE else a.dtype)
        shape, (sa, sb) = merge_dims(a.shape, a._strides, b._strides)
        check(a._buf.kernels.binary(op, a.dtype.code, out._ptr(), a._ptr(), b._ptr(), len(shape), int64s(shape),
                                    int64s(sa), int64s(sb)), "binary", name, a, b)
        return record(out, op, (a, b))

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
        out = a._alloc(shape, a.dtype)
        mshape, (sc, sa, sb) = merge_dims(shape, cond._strides, a._strides, b._strides)
        cond_ptr = ffi.cast("uint8_t *", cond._ptr())
        check(a._buf.kernels.where(a.dtype.itemsize, out._ptr(), cond_ptr, a._ptr(), b._ptr(), len(mshape),
                                   int64s(mshape), int64s(sc), int64s(sa), int64s(sb)), "where", "where", a, b)
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
        x = self.cast(float_of(self.dtype))
        with no_grad():
            out = (1 + (-x).exp()).reciprocal()
        return record(out, Ops.SIGMOID, (x,))

    def relu(self) -> Self:
        # not maximum(0): its gradient splits a tie (0.5 at x == 0); relu's is 0 there, as in torch and tinygrad.
        # x <= 0, not x > 0: NaN fails every comparison, and relu(NaN) is NaN, as torch gives it
        return (self <= 0).where(0, self)

    def gelu(self, approximate: str = "none") -> Self:
        """Exact GELU, x * Phi(x), as nanoGPT and torch use; approximate="tanh" is tinygrad's."""
        x = self.cast(float_of(self.dtype))
        if approximate == "tanh":
            return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)).tanh())
        return x._unary(Ops.GELU, "gelu")  # a kernel: x * Phi(x), accurate in both tails (csrc/gelu.h)

    def silu(self) -> Self:
        return self * self.sigmoid()

    def leaky_relu(self, neg_slope: float = 0.01) -> Self:
        return (self < 0).where(self * neg_slope, self)

    def abs(self) -> Self:
        if self.dtype is dtypes.bool:
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
