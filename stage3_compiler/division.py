"""Rounded division, remainder and shifts, written once on the Tensor API and shared by every stage
(this file is byte-identical in stage1, stage2 and stage3).

No stage has an integer division primitive, so integer quotients are built from float64 division
and then made exact with integer arithmetic, which wraps like numpy's:
1. q = floor(a / b) in float64. For int32 operands this is already exact: a and b convert exactly,
   and a non-integer a / b lies at least 1 / |b| from an integer, far more than the rounding.
2. For int64, a and b may round on the way to float64, so q can be off by up to 2^11. The
   remainder r = a - q * b is exact in integers and small, and floor(r / b) corrects q to within
   one.
3. The final remainder shows which way q is still off: floor division leaves 0 <= r < b (b > 0) or
   b < r <= 0 (b < 0); one step either way fixes it.
Truncating division and the remainder follow from the floor quotient. The steps hold while the
remainders fit int64, so for every int32 pair and for int64 divisors with |b| < 2^62.

Float operands round the float quotient: floor(a / b) and trunc(a / b), tinygrad's choice. Python
and numpy derive a float floor division from the exact remainder instead, so where a / b rounds
up onto an integer they differ (1.0 // 0.1 is 9.0 in Python, 10.0 here).
"""

from __future__ import annotations

from typing import Self

from .dtype import dtypes, rounds_once
from .errors import ArgumentError
from .hooks import TensorCore


class DivisionMixin(TensorCore):
    @rounds_once
    def _div_rounded(self, x, reflected: bool, rounding_mode: str, name: str = "div") -> Self:
        """a / b rounded down ("floor") or toward zero ("trunc"), in the operands' promoted dtype."""
        if rounding_mode not in ("floor", "trunc"):
            raise ArgumentError(f"{name}: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")
        a, b = self._int_operands(name, x, reflected)
        if a.dtype.is_float:
            q = a / b
            return q.floor() if rounding_mode == "floor" else q.trunc()
        q, r = a._floor_divmod(b, name)
        if rounding_mode == "floor":
            return q
        return q + ((r != 0) & ((a < 0) != (b < 0))).cast(q.dtype)  # a remainder against a's sign: one back

    def idiv(self, x, reflected: bool = False) -> Self:
        """Integer division truncated toward zero (tinygrad's idiv, C's /)."""
        return self._div_rounded(x, reflected, "trunc", "idiv")

    @rounds_once
    def mod(self, x, reflected: bool = False) -> Self:
        """The remainder of floor division, with the divisor's sign (Python's and torch's %)."""
        a, b = self._int_operands("mod", x, reflected)
        if a.dtype.is_float:
            return a - (a / b).floor() * b
        return a._floor_divmod(b, "mod")[1]

    def _int_operands(self, name: str, x, reflected: bool) -> tuple[Self, Self]:
        a, b = self._operands(name, x, reflected)
        if a.dtype is dtypes.bool:  # as pow: bools count as ints
            a, b = a.cast(dtypes.default_int), b.cast(dtypes.default_int)
        zero = x == 0 if not isinstance(x, TensorCore) else b.numel() and bool((b == 0).any().item())
        if not a.dtype.is_float and zero:
            raise ArgumentError(f"{name}: integer division by zero (divisor of shape {b.shape})")
        return a, b

    def _floor_divmod(self, b: Self, name: str) -> tuple[Self, Self]:
        """(floor(a / b), a - floor(a / b) * b) for ints a = self and b != 0, exactly (see the top)."""
        if self.dtype is dtypes.uint64:
            raise TypeError(f"{name}: integer division of uint64 is not supported (shape {self.shape}; torch has "
                            "none either): cast to int64 first")
        if self.dtype not in (dtypes.int32, dtypes.int64):  # the narrow ints divide exactly in int64
            q, r = self.cast(dtypes.int64)._floor_divmod(b.cast(dtypes.int64), name)
            return q.cast(self.dtype), r.cast(self.dtype)
        limit = 2.0 ** (8 * self.dtype.itemsize - 1)
        top = limit - 1024 if self.dtype is dtypes.int64 else limit - 1  # the largest float that casts back

        def estimate(num: Self) -> Self:
            return (num.cast(dtypes.float64) / b.cast(dtypes.float64)).floor().clip(-limit, top).cast(self.dtype)

        q = estimate(self)
        if self.dtype is dtypes.int64:
            q = q + estimate(self - q * b)
        r = self - q * b
        high = ((b > 0) & (r < 0)) | ((b < 0) & (r > 0))  # the remainder against b's sign: q one too high
        low = ((b > 0) & (r >= b)) | ((b < 0) & (r <= b))  # a whole b left over: q one too low
        return q - high.cast(q.dtype) + low.cast(q.dtype), r + high.where(b, 0) - low.where(b, 0)

    def __floordiv__(self, x) -> Self:
        return self._div_rounded(x, False, "floor", "floordiv")

    def __rfloordiv__(self, x) -> Self:
        return self._div_rounded(x, True, "floor", "floordiv")

    def __mod__(self, x) -> Self:
        return self.mod(x)

    def __rmod__(self, x) -> Self:
        return self.mod(x, True)

    # ---- shifts: multiplications and floor divisions by powers of two ----

    def _shift_factor(self, name: str, bits: int) -> int:
        if self.dtype.is_float or self.dtype is dtypes.bool:
            raise TypeError(f"{name}: shifts take an int tensor, got {self.dtype.name} of shape {self.shape}")
        width = 8 * self.dtype.itemsize - (0 if self.dtype.is_unsigned else 1)  # the value bits
        if not isinstance(bits, int) or not 0 <= bits < width:
            raise ArgumentError(f"{name}: shift must be an int in [0, {width}) for {self.dtype.name}, got {bits!r}")
        return 2**bits

    def lshift(self, bits: int) -> Self:
        """x << bits: x * 2^bits, wrapping like numpy."""
        return self * self._shift_factor("lshift", bits)

    def rshift(self, bits: int) -> Self:
        """x >> bits: floor(x / 2^bits), the arithmetic shift of a signed int."""
        return self._div_rounded(self._shift_factor("rshift", bits), False, "floor", "rshift")

    def __lshift__(self, bits: int) -> Self:
        return self.lshift(bits)

    def __rshift__(self, bits: int) -> Self:
        return self.rshift(bits)
