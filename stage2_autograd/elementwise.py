"""Elementwise ops. Four primitives call a kernel (unary, binary, where, cast in tensor.py);
everything else in this file is written on top of them.

Operands are promoted first (docs/api-contract.md), then broadcast as zero-stride views, then the
dims every operand walks alike are merged so the kernel's inner loop is as long as possible.
"""

from __future__ import annotations

import math

from .autograd import record
from .ckernels import ffi, int64s, lib
from .device import check_same
from .dtype import dtypes, float_of, promote, scalar_dtype
from .shape import broadcast_shapes, merge_dims

_FLOAT_ONLY = {lib.U_RECIP, lib.U_SQRT, lib.U_EXP, lib.U_LOG, lib.U_EXP2, lib.U_LOG2, lib.U_SIN,
               lib.U_COS, lib.U_TANH, lib.U_ERF, lib.U_GELU}


class ElementwiseMixin:
    # ---- the primitives ----

    def _unary(self, op: int, name: str):
        x = self.cast(float_of(self.dtype)) if op in _FLOAT_ONLY else self
        if x.dtype is dtypes.bool and op != lib.U_NOT:
            raise TypeError(f"{name}: not supported for bool tensors of shape {self.shape}")
        if x.dtype.is_float and op == lib.U_NOT:
            raise TypeError(f"{name}: expected a bool or int tensor, got {x.dtype.name}")
        out = x._alloc(x.shape, x.dtype)
        shape, (sa,) = merge_dims(x.shape, x._strides)
        assert x._buf.kernels.unary(op, x.dtype.code, out._ptr(), x._ptr(), len(shape), int64s(shape), int64s(sa)) == 0
        return record(out, name, (x,))

    def _operands(self, name: str, other, reflected: bool = False):
        """Turn `other` into a tensor, promote both to one dtype and broadcast them to one shape."""
        from .tensor import Tensor

        if isinstance(other, Tensor):
            if other.device != self.device:  # compared inline: this runs for every binary op
                check_same(name, self, other)
            dtype = promote(self.dtype, other.dtype)
        elif isinstance(other, (bool, int, float)):
            dtype = scalar_dtype(other, self.dtype)
            other = Tensor(other, dtype, self.device)
        else:
            raise TypeError(f"{name}: cannot combine a tensor with {type(other).__name__}")
        a, b = self.cast(dtype), other.cast(dtype)
        if reflected:
            a, b = b, a
        shape = broadcast_shapes(name, a.shape, b.shape)
        return a._broadcast_to(shape), b._broadcast_to(shape)

    def _binary(self, op: int, name: str, other, reflected: bool = False):
        a, b = self._operands(name, other, reflected)
        compare = op in (lib.B_LT, lib.B_LE, lib.B_EQ, lib.B_NE)
        out = a._alloc(a.shape, dtypes.bool if compare else a.dtype)
        shape, (sa, sb) = merge_dims(a.shape, a._strides, b._strides)
        if a._buf.kernels.binary(op, a.dtype.code, out._ptr(), a._ptr(), b._ptr(), len(shape), int64s(shape),
                      int64s(sa), int64s(sb)) != 0:
            raise TypeError(f"{name}: not supported for {a.dtype.name} tensors (shapes {a.shape})")
        return record(out, name, (a, b))

    def where(self, x, y):
        """self is the condition: pick x where it is true, y elsewhere."""
        from .tensor import Tensor

        cond = self.cast(dtypes.bool)
        if not isinstance(x, Tensor) and not isinstance(y, Tensor):
            x = Tensor(x, device=self.device)
        if isinstance(x, Tensor):
            a, b = x._operands("where", y)
        else:
            b, a = y._operands("where", x)
        check_same("where", cond, a)
        shape = broadcast_shapes("where", cond.shape, a.shape)
        cond, a, b = cond._broadcast_to(shape), a._broadcast_to(shape), b._broadcast_to(shape)
        out = a._alloc(shape, a.dtype)
        mshape, (sc, sa, sb) = merge_dims(shape, cond._strides, a._strides, b._strides)
        cond_ptr = ffi.cast("uint8_t *", cond._ptr())
        assert a._buf.kernels.where(a.dtype.itemsize, out._ptr(), cond_ptr, a._ptr(), b._ptr(), len(mshape),
                         int64s(mshape), int64s(sc), int64s(sa), int64s(sb)) == 0
        return record(out, "where", (a, b), cond=cond)

    # ---- arithmetic ----

    def add(self, x, reflected: bool = False):
        return self._binary(lib.B_OR if self._both_bool(x) else lib.B_ADD, "add", x, reflected)

    def sub(self, x, reflected: bool = False):
        if self._both_bool(x):
            raise TypeError(f"sub: subtracting bool tensors is not supported (shape {self.shape}); "
                            "use ^ or logical ops")
        return self._binary(lib.B_SUB, "sub", x, reflected)

    def mul(self, x, reflected: bool = False):
        return self._binary(lib.B_AND if self._both_bool(x) else lib.B_MUL, "mul", x, reflected)

    def div(self, x, reflected: bool = False):
        """True division: ints divide as default_float."""
        a, b = self._operands("div", x, reflected)
        return a.cast(float_of(a.dtype))._binary(lib.B_DIV, "div", b.cast(float_of(a.dtype)))

    def pow(self, x, reflected: bool = False):
        a, b = self._operands("pow", x, reflected)
        if a.dtype.kind == "b":
            a, b = a.cast(dtypes.default_int), b.cast(dtypes.default_int)
        if a.dtype.is_int and b.numel() and b.min().item() < 0:
            raise ValueError(f"pow: integers to negative integer powers are not allowed (shape {b.shape})")
        return a._binary(lib.B_POW, "pow", b)

    def _both_bool(self, x) -> bool:
        other = x.dtype if hasattr(x, "dtype") else (dtypes.bool if isinstance(x, bool) else None)
        return self.dtype is dtypes.bool and other is dtypes.bool

    def neg(self):
        if self.dtype is dtypes.bool:
            raise TypeError(f"neg: negating a bool tensor is not supported (shape {self.shape}); use ~")
        return self._unary(lib.U_NEG, "neg")

    def __add__(self, x):
        return self.add(x)

    def __radd__(self, x):
        return self.add(x, True)

    def __sub__(self, x):
        return self.sub(x)

    def __rsub__(self, x):
        return self.sub(x, True)

    def __mul__(self, x):
        return self.mul(x)

    def __rmul__(self, x):
        return self.mul(x, True)

    def __truediv__(self, x):
        return self.div(x)

    def __rtruediv__(self, x):
        return self.div(x, True)

    def __pow__(self, x):
        return self.pow(x)

    def __rpow__(self, x):
        return self.pow(x, True)

    def __neg__(self):
        return self.neg()

    def __matmul__(self, x):
        return self.matmul(x)

    def __rmatmul__(self, x):
        return self.matmul(x, True)

    # ---- comparisons ----

    def __lt__(self, x):
        return self._binary(lib.B_LT, "lt", x)

    def __le__(self, x):
        return self._binary(lib.B_LE, "le", x)

    def __gt__(self, x):
        return self._binary(lib.B_LT, "gt", x, True)

    def __ge__(self, x):
        return self._binary(lib.B_LE, "ge", x, True)

    def __eq__(self, x):
        return self._binary(lib.B_EQ, "eq", x)

    def __ne__(self, x):
        return self._binary(lib.B_NE, "ne", x)

    # ---- logical / bitwise ----

    def _logical(self, op: int, name: str, x, reflected: bool = False):
        if self.dtype.is_float or getattr(x, "dtype", dtypes.bool).is_float or isinstance(x, float):
            raise TypeError(f"{name}: expected bool or int tensors, got {self.dtype.name} (shape {self.shape})")
        return self._binary(op, name, x, reflected)

    def __and__(self, x):
        return self._logical(lib.B_AND, "and", x)

    def __rand__(self, x):
        return self._logical(lib.B_AND, "and", x, True)

    def __or__(self, x):
        return self._logical(lib.B_OR, "or", x)

    def __ror__(self, x):
        return self._logical(lib.B_OR, "or", x, True)

    def __xor__(self, x):
        return self._logical(lib.B_XOR, "xor", x)

    def __rxor__(self, x):
        return self._logical(lib.B_XOR, "xor", x, True)

    def __invert__(self):
        return self._unary(lib.U_NOT, "invert")

    def logical_not(self):
        return self.cast(dtypes.bool)._unary(lib.U_NOT, "logical_not")

    # ---- unary math ----

    def reciprocal(self):
        return self._unary(lib.U_RECIP, "reciprocal")

    def exp(self):
        return self._unary(lib.U_EXP, "exp")

    def exp2(self):
        return self._unary(lib.U_EXP2, "exp2")

    def log(self):
        return self._unary(lib.U_LOG, "log")

    def log2(self):
        return self._unary(lib.U_LOG2, "log2")

    def sqrt(self):
        return self._unary(lib.U_SQRT, "sqrt")

    def rsqrt(self):
        return self.sqrt().reciprocal()

    def sin(self):
        return self._unary(lib.U_SIN, "sin")

    def cos(self):
        return self._unary(lib.U_COS, "cos")

    def tanh(self):
        return self._unary(lib.U_TANH, "tanh")

    def erf(self):
        return self._unary(lib.U_ERF, "erf")

    def sigmoid(self):
        return (1 + (-self.cast(float_of(self.dtype))).exp()).reciprocal()

    def relu(self):
        return self.maximum(0)

    def gelu(self, approximate: str = "none"):
        """Exact GELU, x * Phi(x), as nanoGPT and torch use; approximate="tanh" is tinygrad's."""
        x = self.cast(float_of(self.dtype))
        if approximate == "tanh":
            return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)).tanh())
        return x._unary(lib.U_GELU, "gelu")  # a kernel: x * Phi(x), accurate in both tails (csrc/gelu.h)

    def silu(self):
        return self * self.sigmoid()

    def leaky_relu(self, neg_slope: float = 0.01):
        return (self < 0).where(self * neg_slope, self)

    def abs(self):
        if self.dtype is dtypes.bool:
            return self
        return self._unary(lib.U_ABS, "abs")

    def sign(self):
        if self.dtype is dtypes.bool:
            return self
        return self._unary(lib.U_SIGN, "sign")

    def square(self):
        return self * self

    def maximum(self, x):
        return self._binary(lib.B_MAX, "maximum", x)

    def minimum(self, x):
        return self._binary(lib.B_MIN, "minimum", x)

    def clip(self, min_=None, max_=None):
        if min_ is None and max_ is None:
            raise ValueError("clip: at least one of min_ and max_ must be given")
        x = self if min_ is None else self.maximum(min_)
        return x if max_ is None else x.minimum(max_)

    def clamp(self, min_=None, max_=None):
        return self.clip(min_, max_)
