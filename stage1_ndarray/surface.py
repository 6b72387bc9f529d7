"""tinygrad's Tensor surface beyond the core API, written once on that API and shared by every stage.

This file is byte-identical in stage1, stage2 and stage3: it calls only public Tensor methods each
stage already has (where, comparisons, abs, exp, log, sqrt, sin, cos, tanh, sigmoid, maximum,
cast, the arithmetic operators), so a stage gets these ops, and in stage2 and stage3 their
gradients, from its own primitives.

Two rules keep the formulas accurate and their gradients finite:
- Where a textbook formula cancels (exp(x) - 1 near 0, log(1 + x) near 0, sinh near 0, acosh near
  1), a short series takes over on a small interval, with as many terms as the dtype needs.
- Every branch of a `where` gets an input that is safe in that branch (`_safe`), because backward
  multiplies the unselected branch's derivative by 0, and 0 * inf is NaN.

Rounding (floor, ceil, trunc, round) goes through an int64 round trip, which carries no gradient;
the result depends on x only through a where, so backward gives 0 as torch does. Integer tensors
pass through the rounding ops unchanged, as in tinygrad.
"""

from __future__ import annotations

import math
from typing import Self

from .dtype import dtypes, float_of, rounds_once
from .errors import ArgumentError
from .hooks import TensorCore
from .shape import broadcast_shapes, normalize_axes, normalize_axis

# 2^(p-1), p the significand's bits: every float this large is an integer
_INTEGRAL = {"float16": 2.0**10, "bfloat16": 2.0**7, "float32": 2.0**23, "float64": 2.0**52}
_HUGE = {"float16": 2.0**6, "bfloat16": 2.0**4, "float32": 2.0**12, "float64": 2.0**26}  # where 1 + x^2 rounds to x^2
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_LN2 = math.log(2.0)


def _shape(op: str, args: tuple) -> tuple:
    """f(2, 3) and f((2, 3)) alike; every dim a non-negative int."""
    shape = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise ArgumentError(f"{op}: shape must be non-negative ints, got {shape}")
    return shape


def _terms(dtype, float32: int, float64: int) -> int:
    return float64 if dtype is dtypes.float64 else float32  # the half types compute in float32


class SurfaceMixin(TensorCore):
    # ---- helpers ----

    def _floated(self, op: str) -> Self:
        self._is_integer(op)  # refuses bool
        return self.cast(float_of(self.dtype))

    def _other(self, op: str, other) -> Self:
        """other as a tensor of self's dtype family, after checking that the shapes broadcast, so that
        a mismatch names this op rather than the first primitive inside it."""
        if isinstance(other, TensorCore):
            broadcast_shapes(op, self.shape, other.shape)
            return other
        return self.full_like(other)  # not self * 0 + other: that is NaN wherever self is inf or NaN

    def _is_integer(self, op: str) -> bool:
        """Rounding an integer tensor leaves it as it is; a bool tensor is refused."""
        if self.dtype is dtypes.bool:
            raise TypeError(f"{op}: not supported for bool tensors of shape {self.shape}")
        return not self.dtype.is_float

    def _safe(self, ok: Self, fallback: float) -> Self:
        """self where ok, else a harmless constant: the input of a where branch used only where ok."""
        return ok.where(self, fallback)

    def _magnitude(self) -> Self:
        """|x| whose derivative at 0 is 1, not abs's 0: for odd functions computed on |x|."""
        return (self < 0).where(-self, self)

    def _odd(self, r: Self) -> Self:
        """An odd function from its value r at |x|: -r for negative x, and x itself at +-0 (each
        odd function here has f(0) = 0 and f'(0) = 1, so both the sign and the gradient hold)."""
        return (self == 0).where(self, (self < 0).where(-r, r))

    def _signed_zero(self, r: Self) -> Self:
        """r, except that a zero takes self's sign (numpy's trunc(-0.5) is -0.0), with gradient 0."""
        return (r == 0).where(self * 0.0, r)

    def _series(self, coeffs: list[float]) -> Self:
        """sum_k coeffs[k] self^k by Horner's rule."""
        acc = self * coeffs[-1] + coeffs[-2]
        for c in reversed(coeffs[:-2]):
            acc = acc * self + c
        return acc

    def _expm1(self) -> Self:
        """e^x - 1: its Taylor series for |x| < 1/2, where exp(x) - 1 would cancel."""
        small = self.abs() < 0.5
        n = _terms(self.dtype, 9, 16)
        x = self._safe(small, 0.0)
        series = x * x._series([1.0 / math.factorial(k + 1) for k in range(n)])
        return small.where(series, self._safe(~small, 1.0).exp() - 1.0)

    def _log1p(self) -> Self:
        """log(1 + x) = 2 atanh(s), s = x / (2 + x), by atanh's series for |x| < 1/2, where
        log(1 + x) would lose the digits of x that 1 + x rounds away."""
        small = self.abs() < 0.5
        n = _terms(self.dtype, 7, 17)
        s = self._safe(small, 0.0) / (self._safe(small, 0.0) + 2.0)
        series = s * (s * s)._series([2.0 / (2 * k + 1) for k in range(n)])
        return small.where(series, (self._safe(~small, 1.0) + 1.0).log())

    # ---- rounding ----

    def trunc(self) -> Self:
        if self._is_integer("trunc"):
            return self
        x = self
        small = x.abs() < _INTEGRAL[x.dtype.name]  # false for inf and nan: they pass through
        t = x._safe(small, 0.0).cast(dtypes.int64).cast(x.dtype)  # an int carries no gradient
        return x._signed_zero(small.where(t, x))

    def floor(self) -> Self:
        if self._is_integer("floor"):
            return self
        t = self.trunc()
        return (t > self).where(t - 1.0, t)

    def ceil(self) -> Self:
        if self._is_integer("ceil"):
            return self
        t = self.trunc()
        return (t < self).where(t + 1.0, t)

    def round(self) -> Self:
        """To the nearest integer, halves to even (numpy, torch and tinygrad alike)."""
        if self._is_integer("round"):
            return self
        f = self.floor()
        d = self - f  # in [0, 1), exact (rounded only where both choices give 0)
        odd = (f * 0.5).trunc() * 2.0 != f
        up = (d > 0.5) | ((d == 0.5) & odd)
        return self._signed_zero(up.where(f + 1.0, f))

    # ---- float classes ----

    def isnan(self) -> Self:
        return self != self

    def isinf(self, detect_positive: bool = True, detect_negative: bool = True) -> Self:
        positive, negative = self == math.inf, self == -math.inf
        if detect_positive and detect_negative:
            return positive | negative
        return positive if detect_positive else negative if detect_negative else positive & negative

    def isfinite(self) -> Self:
        return (self == self) & (self.abs() != math.inf)

    def isclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Self:
        """|self - other| <= atol + rtol |other| for finite values (numpy's and torch's test), and
        equal values, infinities included."""
        o = self._other("isclose", other)
        near = (self - o).abs() <= o.abs() * rtol + atol  # (inf - 1 <= inf * rtol: only finites count)
        close = (self == o) | (near & self.isfinite() & o.isfinite())
        return (close | (self.isnan() & o.isnan())) if equal_nan else close

    # ---- sign and interpolation ----

    def copysign(self, other) -> Self:
        """|self| with the sign of other, its sign bit included (-0.0 counts as negative)."""
        x = self._floated("copysign")
        o = x._other("copysign", other)
        negative = (o < 0) | ((o == 0) & (o.reciprocal() < 0))
        return negative.where(-x.abs(), x.abs())

    def lerp(self, end, weight) -> Self:
        if isinstance(weight, TensorCore):
            broadcast_shapes("lerp", self.shape, getattr(end, "shape", ()), weight.shape)
        return self + (self._other("lerp", end) - self) * weight

    def logaddexp(self, other) -> Self:
        """log(e^x + e^y) = max + log1p(e^-|x - y|); x == y (infinities too) is x + ln2."""
        x = self._floated("logaddexp")
        y = x._other("logaddexp", other)
        tie = x == y
        d = -(x._safe(~tie, 0.0) - y._safe(~tie, 0.0)).abs()
        return tie.where((x + y) * 0.5 + math.log(2.0), x.maximum(y) + d.exp()._log1p())

    # ---- trigonometric and hyperbolic ----

    @rounds_once
    def tan(self) -> Self:
        x = self._floated("tan")
        return x.sin() / x.cos()

    @rounds_once
    def atan(self) -> Self:
        """Three half-angle steps, atan(x) = 2 atan(x / (1 + sqrt(1 + x^2))), bring |x| below
        tan(pi/16) = 0.2, where atan's odd series converges fast; 8 times that is the answer.
        Beyond _HUGE, atan(x) = pi/2 - atan(1/x) = pi/2 - 1/x to the last bit."""
        x = self._floated("atan")
        a = x.abs()
        huge = a > _HUGE[x.dtype.name]
        y = x._safe(~huge, 0.0)
        for _ in range(3):
            y = y / ((y * y + 1.0).sqrt() + 1.0)
        n = _terms(x.dtype, 6, 12)
        near = y * (y * y)._series([(-1.0) ** k / (2 * k + 1) for k in range(n)]) * 8.0
        far = math.pi / 2 - a._safe(huge, 1.0).reciprocal()
        return huge.where((x < 0).where(-far, far), near)

    @rounds_once
    def asin(self) -> Self:
        x = self._floated("asin")
        return (x / ((1.0 - x) * (1.0 + x)).sqrt()).atan()

    @rounds_once
    def acos(self) -> Self:
        x = self._floated("acos")
        return ((1.0 - x) / (1.0 + x)).sqrt().atan() * 2.0

    def sinh(self) -> Self:
        """Its odd Taylor series for |x| < 1, where (e^x - e^-x) / 2 would cancel."""
        x = self._floated("sinh")
        small = x.abs() < 1.0
        s = x._safe(small, 0.0)
        n = _terms(x.dtype, 7, 10)
        series = s * (s * s)._series([1.0 / math.factorial(2 * k + 1) for k in range(n)])
        big = x._safe(~small, 1.0)
        return small.where(series, (big - _LN2).exp() - (-big - _LN2).exp())

    def cosh(self) -> Self:
        """e^(x - ln2) + e^(-x - ln2): e^x / 2 would overflow first, where cosh(89) is a finite float32."""
        x = self._floated("cosh")
        return (x - _LN2).exp() + (-x - _LN2).exp()

    @rounds_once
    def atanh(self) -> Self:
        """atanh(|x|) = log1p(2|x| / (1 - |x|)) / 2, odd: a log1p of a positive argument."""
        x = self._floated("atanh")
        a = x._magnitude()
        return x._odd((a * 2.0 / (1.0 - a))._log1p() * 0.5)

    @rounds_once
    def asinh(self) -> Self:
        """log1p(a + a^2 / (1 + sqrt(1 + a^2))) for a = |x|, which is log(a + sqrt(a^2 + 1)) without
        its cancellation near 0; beyond _HUGE, log(a) + ln2."""
        x = self._floated("asinh")
        a = x._magnitude()
        huge = a > _HUGE[x.dtype.name]
        s = a._safe(~huge, 0.0)
        near = (s + s * s / ((s * s + 1.0).sqrt() + 1.0))._log1p()
        return x._odd(huge.where(a._safe(huge, 1.0).log() + math.log(2.0), near))

    @rounds_once
    def acosh(self) -> Self:
        """log1p(t + sqrt(2t + t^2)) for t = x - 1 (exact near 1, where log(x + sqrt(x^2 - 1))
        cancels); beyond _HUGE, log(x) + ln2."""
        x = self._floated("acosh")
        huge = x > _HUGE[x.dtype.name]
        t = x._safe(~huge, 1.0) - 1.0
        near = (t + (t * 2.0 + t * t).sqrt())._log1p()
        return huge.where(x._safe(huge, 1.0).log() + math.log(2.0), near)

    # ---- activations ----

    def elu(self, alpha: float = 1.0) -> Self:
        x = self._floated("elu")
        return (x > 0).where(x, x._safe(~(x > 0), 0.0)._expm1() * alpha)

    def celu(self, alpha: float = 1.0) -> Self:
        x = self._floated("celu")
        return (x > 0).where(x, (x._safe(~(x > 0), 0.0) / alpha)._expm1() * alpha)

    def selu(self) -> Self:
        return self.elu(_SELU_ALPHA) * _SELU_SCALE

    def softplus(self, beta: float = 1.0, threshold: float = 20.0) -> Self:
        """log(1 + e^(beta x)) / beta as max(bx, 0) + log1p(e^-|bx|), and x itself past the
        threshold, as torch."""
        x = self._floated("softplus")
        bx = x * beta
        stable = (bx.maximum(0.0) + (-bx.abs()).exp()._log1p()) / beta
        return (bx > threshold).where(x, stable)

    def softsign(self) -> Self:
        x = self._floated("softsign")
        return x / (x.abs() + 1.0)

    def mish(self) -> Self:
        x = self._floated("mish")
        return x * x.softplus().tanh()

    def swish(self) -> Self:
        return self.silu()

    def quick_gelu(self) -> Self:
        x = self._floated("quick_gelu")
        return x * (x * 1.702).sigmoid()

    def relu6(self) -> Self:
        return self.clip(0, 6)

    def hardtanh(self, min_val: float = -1.0, max_val: float = 1.0) -> Self:
        return self.clip(min_val, max_val)

    def hardsigmoid(self, alpha: float = 1 / 6, beta: float = 0.5) -> Self:
        return (self._floated("hardsigmoid") * alpha + beta).clip(0.0, 1.0)

    def hardswish(self) -> Self:
        x = self._floated("hardswish")
        return x * (x + 3.0).relu6() * (1 / 6)

    def leakyrelu(self, neg_slope: float = 0.01) -> Self:
        """tinygrad 0.9's name for leaky_relu."""
        return self.leaky_relu(neg_slope)

    def logsigmoid(self) -> Self:
        return -(-self._floated("logsigmoid")).softplus()

    # ---- reductions and scans ----

    def any(self, axis=None, keepdim: bool = False) -> Self:
        normalize_axes("any", axis, self.ndim, self.shape)  # so that a bad axis names this op
        return (self != 0).sum(axis, keepdim=keepdim) > 0  # a count: False over nothing, as numpy

    def all(self, axis=None, keepdim: bool = False) -> Self:
        normalize_axes("all", axis, self.ndim, self.shape)
        return (self == 0).sum(axis, keepdim=keepdim) == 0  # True over nothing

    def var_mean(self, axis=None, keepdim: bool = False, correction: int = 1) -> tuple[Self, Self]:
        normalize_axes("var_mean", axis, self.ndim, self.shape)
        return self.var(axis, keepdim, correction), self.mean(axis, keepdim)

    def std_mean(self, axis=None, keepdim: bool = False, correction: int = 1) -> tuple[Self, Self]:
        normalize_axes("std_mean", axis, self.ndim, self.shape)
        return self.std(axis, keepdim, correction), self.mean(axis, keepdim)

    def _scan(self, op: str, axis: int | None, fill, reduce: str) -> Self:
        """out[i] = reduce over j <= i of x[j] along axis: x seen along a new axis a + 1 beside it,
        replaced by `fill` (the reduction's identity) where j > i, then reduced over a + 1. It holds
        n^2 elements per line, fine for the lengths a scan sees here (stage1 and stage2's cumsum
        are kernels)."""
        if axis is None:
            return self.flatten()._scan(op, 0, fill, reduce)
        if self.ndim == 0:
            return self.reshape(1)._scan(op, 0, fill, reduce).reshape(())
        a = normalize_axis(op, axis, self.ndim, self.shape)
        n = self.shape[a]
        earlier = self.arange(n, device=self.device).reshape(-1, 1) >= self.arange(n, device=self.device).reshape(1, -1)
        earlier = earlier.reshape((1,) * a + (n, n) + (1,) * (self.ndim - a - 1))
        masked = earlier.where(self.unsqueeze(a), self.full((), fill, self.dtype, self.device))
        return getattr(masked, reduce)(a + 1)

    def _extreme_value(self, largest: bool):
        if self.dtype.is_float:
            return math.inf if largest else -math.inf
        if self.dtype is dtypes.bool:
            return largest
        bits = 8 * self.dtype.itemsize - 1
        return 2**bits - 1 if largest else -(2**bits)

    def cumprod(self, axis: int | None = 0) -> Self:
        return self._scan("cumprod", axis, 1, "prod")

    def cummax(self, axis: int | None = 0) -> Self:
        """The running maximum (values only, as tinygrad; NaN, once seen, stays)."""
        return self._scan("cummax", axis, self._extreme_value(False), "max")

    def cummin(self, axis: int | None = 0) -> Self:
        return self._scan("cummin", axis, self._extreme_value(True), "min")

    def logcumsumexp(self, axis: int | None = 0) -> Self:
        """log of the running sum of exp, each prefix by logsumexp (its own maximum subtracted, so a
        small early term is not lost to a later large one)."""
        x = self._floated("logcumsumexp")
        return x._scan("logcumsumexp", axis, -math.inf, "logsumexp")

    # ---- padding modes ----

    def pad2d(self, padding, value: float = 0.0) -> Self:
        """tinygrad 0.9's name for pad in torch's flat form: (left, right, top, bottom) pads (or, negative,
        crops) the last two dims."""
        return self.pad(padding, value)

    def _pad_mode(self, pads: list[tuple[int, int]], mode: str) -> Self:
        """pad(mode="reflect" | "replicate" | "circular"), one dim after another (so corners come out
        as numpy's and torch's): the border built from shrinks of x (flipped for reflect, a size-1 edge
        expanded for replicate, the other end for circular) and cat'ed on either side. A negative amount
        crops first, and the rest pads what is left, as in torch."""
        if mode not in ("reflect", "replicate", "circular"):
            raise ArgumentError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
        if any(b < 0 or a < 0 for b, a in pads):
            crop = tuple((max(-b, 0), n - max(-a, 0)) for n, (b, a) in zip(self.shape, pads, strict=True))
            if any(lo > hi for lo, hi in crop):
                raise ArgumentError(f"pad: padding {pads} crops more than shape {self.shape} holds")
            return self.shrink(crop)._pad_mode([(max(b, 0), max(a, 0)) for b, a in pads], mode)
        out = self
        for d, (before, after) in enumerate(pads):
            n = self.shape[d]
            limit = n - 1 if mode == "reflect" else n if mode == "circular" else math.inf
            if not (before or after):
                continue
            if n == 0 or max(before, after) > limit:
                raise ArgumentError(f"pad: {mode} padding {pads[d]} of dim {d} of shape {self.shape} must be at "
                                    f"most {limit if limit != math.inf else 'any'}")

            def part(src: Self, lo: int, hi: int, dim: int = d) -> Self:
                return src.shrink(tuple((lo, hi) if k == dim else None for k in range(src.ndim)))

            if mode == "reflect":
                left, right = part(out, 1, before + 1).flip(d), part(out, n - 1 - after, n - 1).flip(d)
            elif mode == "circular":
                left, right = part(out, n - before, n), part(out, 0, after)
            else:
                left = part(out, 0, 1).expand(tuple(before if k == d else s for k, s in enumerate(out.shape)))
                right = part(out, n - 1, n).expand(tuple(after if k == d else s for k, s in enumerate(out.shape)))
            pieces = [p for p, size in ((left, before), (out, n), (right, after)) if size]
            out = pieces[0].cat(*pieces[1:], dim=d)
        return out

    # ---- indexing ----

    def masked_fill(self, mask: Self, value) -> Self:
        broadcast_shapes("masked_fill", self.shape, mask.shape)
        return mask.where(value, self)

    def gather(self, dim: int, index: Self) -> Self:
        """out[..i..] = self[..index[..i..]..] along dim (torch's gather): each index compared with
        every position along dim, the match selected and summed over them, so the gradient flows
        back through the select. Index values are checked (one read back to Python)."""
        d = normalize_axis("gather", dim, self.ndim, self.shape)
        if not isinstance(index, TensorCore) or index.dtype.is_float or index.dtype is dtypes.bool:
            raise TypeError(f"gather: index must be an int tensor, got {getattr(index, 'dtype', type(index))}")
        if index.ndim != self.ndim or any(i > n for k, (i, n) in enumerate(zip(index.shape, self.shape, strict=True))
                                          if k != d):
            raise ArgumentError(f"gather: index of shape {index.shape} does not fit input {self.shape} on dim {d}: "
                                "same ndim, and no larger on the other dims")
        n = self.shape[d]
        if index.numel() and (int(index.min().item()) < 0 or int(index.max().item()) >= n):
            raise IndexError(f"gather: index values must lie in [0, {n}) for input {self.shape} on dim {d}")
        x = self.shrink(tuple(None if k == d else (0, i) for k, i in enumerate(index.shape)))
        positions = self.arange(n, device=self.device).reshape((1,) * (d + 1) + (n,) + (1,) * (self.ndim - d - 1))
        hit = index.unsqueeze(d + 1) == positions  # (.., m, n, ..): index d's value is position n?
        picked = hit.where(x.unsqueeze(d), self.full((), 0, self.dtype, self.device)).sum(d + 1)
        return picked.cast(self.dtype)

    def masked_select(self, mask: Self) -> Self:
        """The elements where mask is True, in order, as a 1-D tensor (its length read back to Python
        once): element i goes to slot k when it is selected and k selected elements precede it."""
        shape = broadcast_shapes("masked_select", self.shape, mask.shape)
        if mask.dtype is not dtypes.bool:
            raise TypeError(f"masked_select: mask must be a bool tensor, got {mask.dtype.name} of shape {mask.shape}")
        return self.expand(shape)._select_mask(mask.expand(shape))  # x[mask] over every dim (scatter.py)

    def unfold(self, dim: int, size: int, step: int) -> Self:
        """The windows of `size` elements every `step` along dim, as a new last dim (torch's unfold):
        dim becomes the window count."""
        d = normalize_axis("unfold", dim, self.ndim, self.shape)
        n = self.shape[d] if self.ndim else 1
        if not (isinstance(size, int) and isinstance(step, int)) or size < 0 or step < 1 or size > n:
            raise ArgumentError(f"unfold: size {size!r} and step {step!r} need 0 <= size <= {n} (dim {d} of "
                                f"shape {self.shape}) and step >= 1")
        count = (n - size) // step + 1
        windows = [self.shrink(tuple((i * step, i * step + size) if k == d else None for k in range(self.ndim)))
                   for i in range(count)]
        stacked = windows[0].stack(*windows[1:], dim=d)  # (.., count, size, ..)
        return stacked.permute(*[k for k in range(stacked.ndim) if k != d + 1], d + 1)

    def roll(self, shifts, dims=None) -> Self:
        """Elements shifted along dims, wrapping around (torch's roll); no dims: over the flat tensor."""
        if dims is None:
            return self.flatten().roll(shifts, 0).reshape(self.shape)
        shifts, dims = (shifts, dims) if isinstance(shifts, (tuple, list)) else ((shifts,), (dims,))
        if len(shifts) != len(dims):
            raise ArgumentError(f"roll: {len(shifts)} shifts for {len(dims)} dims on shape {self.shape}")
        out = self
        for shift, dim in zip(shifts, dims, strict=True):
            d = normalize_axis("roll", dim, self.ndim, self.shape)
            n = self.shape[d]
            s = shift % n if n else 0
            if s:
                tail = out.shrink(tuple((n - s, n) if k == d else None for k in range(self.ndim)))
                head = out.shrink(tuple((0, n - s) if k == d else None for k in range(self.ndim)))
                out = tail.cat(head, dim=d)
        return out

    def diag(self) -> Self:
        """A 1-D tensor as the diagonal of a square matrix; a 2-D one's main diagonal (torch's diag)."""
        if self.ndim == 2:
            return self.diagonal()
        if self.ndim != 1:
            raise ArgumentError(f"diag: expected a 1-D or 2-D tensor, got shape {self.shape}")
        n = self.shape[0]
        eye = self.arange(n, device=self.device).reshape(n, 1) == self.arange(n, device=self.device).reshape(1, n)
        return eye.where(self.reshape(n, 1), self.full((), 0, self.dtype, self.device))

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Self:
        """The diagonal of dims (dim1, dim2) as a new last dim (torch's diagonal), by views only:
        a k x k block flattened, padded by k and read as rows of k + 1 has the diagonal in its first column."""
        if self.ndim < 2:
            raise ArgumentError(f"diagonal: expected at least 2 dims, got shape {self.shape}")
        a, b = normalize_axis("diagonal", dim1, self.ndim, self.shape), normalize_axis("diagonal", dim2, self.ndim,
                                                                                          self.shape)
        if a == b:
            raise ArgumentError(f"diagonal: dim1 and dim2 are the same dim {a} of shape {self.shape}")
        x = self.permute(*[k for k in range(self.ndim) if k not in (a, b)], a, b)
        rows, cols = x.shape[-2], x.shape[-1]
        r0, c0 = max(-offset, 0), max(offset, 0)
        k = max(min(rows - r0, cols - c0), 0)
        lead = x.shape[:-2]
        r0, c0 = min(r0, rows), min(c0, cols)
        x = x.shrink(tuple(None for _ in lead) + ((r0, r0 + k), (c0, c0 + k)))
        if k == 0:
            return x.reshape(lead + (0,))
        flat = x.reshape(lead + (k * k,)).pad(tuple((0, 0) for _ in lead) + ((0, k),))
        return flat.reshape(lead + (k, k + 1)).shrink(tuple(None for _ in lead) + (None, (0, 1))).reshape(lead + (k,))

    def repeat_interleave(self, repeats, dim: int | None = None) -> Self:
        """Each element repeated `repeats` times in place along dim (flattened first when dim is None).
        repeats is an int, or an int tensor or list with a count for each element (read back to
        Python once: the output's length depends on them), then the rows are picked by index."""
        if dim is None:
            return self.flatten().repeat_interleave(repeats, 0)
        d = normalize_axis("repeat_interleave", dim, self.ndim, self.shape)
        if isinstance(repeats, (TensorCore, list, tuple)):
            counts = repeats.tolist() if isinstance(repeats, TensorCore) else list(repeats)
            if isinstance(repeats, TensorCore) and (repeats.dtype.is_float or repeats.dtype is dtypes.bool) \
                    or not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
                raise TypeError(f"repeat_interleave: repeats must hold ints, got {getattr(repeats, 'dtype', repeats)}")
            counts = counts * self.shape[d] if len(counts) == 1 else counts
            if len(counts) != self.shape[d] or any(c < 0 for c in counts):
                raise ArgumentError(f"repeat_interleave: repeats {counts} must be {self.shape[d]} counts >= 0 "
                                    f"(dim {d} of shape {self.shape})")
            return self[(slice(None),) * d + ([i for i, c in enumerate(counts) for _ in range(c)],)]
        if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 0:
            raise TypeError(f"repeat_interleave: repeats must be an int >= 0 or a tensor of them, got {repeats!r}")
        x = self.unsqueeze(d + 1)
        shape = x.shape[: d + 1] + (repeats,) + x.shape[d + 2:]
        return x.expand(shape).reshape(self.shape[:d] + (self.shape[d] * repeats,) + self.shape[d + 1:])

    def meshgrid(self, *others: Self, indexing: str = "ij") -> tuple[Self, ...]:
        """Coordinate grids from 1-D tensors (numpy's meshgrid: "ij" or "xy", which swaps the first two); a
        0-d tensor counts as one of length 1, as in torch."""
        if indexing not in ("ij", "xy"):
            raise ArgumentError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
        tensors = tuple(t.reshape(1) if t.ndim == 0 else t for t in (self, *others))
        if any(t.ndim != 1 for t in tensors):
            raise ArgumentError(f"meshgrid: expected 1-D tensors, got shapes {[t.shape for t in tensors]}")
        sizes = [t.shape[0] for t in tensors]
        if indexing == "xy" and len(sizes) > 1:
            sizes[0], sizes[1] = sizes[1], sizes[0]
        grids = []
        for i, t in enumerate(tensors):
            axis = (1 - i if i < 2 else i) if indexing == "xy" and len(sizes) > 1 else i
            grids.append(t.reshape(tuple(-1 if k == axis else 1 for k in range(len(sizes)))).expand(tuple(sizes)))
        return tuple(grids)

    # ---- linear algebra and losses ----

    @staticmethod
    def einsum(formula: str, *operands):
        """Einstein summation (numpy's and torch's "ij,jk->ik"; without "->" the output is the
        broadcast dims of "..." then every letter used once, in alphabetical order). A letter twice
        in one operand takes its diagonal first (a trace). Each operand is then permuted to one
        letter order and broadcast along the letters it lacks, and the product is summed over the
        letters the output drops."""
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = tuple(operands[0])
        spec = formula.replace(" ", "")
        inputs, arrow, output = spec.partition("->")
        terms = inputs.split(",")
        plain = [t.replace("...", "") for t in terms + [output]]
        if not operands or len(terms) != len(operands) or not all(t.isalpha() for t in plain if t) \
                or any(t.count("...") > 1 for t in terms + [output]):
            raise ArgumentError(f"einsum: {formula!r} does not fit {len(operands)} operands of shapes "
                                f"{[getattr(o, 'shape', None) for o in operands]}: expected one group of letters "
                                "(and at most one '...') per operand")
        # "..." stands for the dims no letter names, right-aligned across operands as in broadcasting:
        # give them letters of their own, the last ones to the trailing dims
        spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in spec]
        width = max([x.ndim - len(t) + 3 for t, x in zip(terms, operands, strict=True) if "..." in t] + [0])
        if width > len(spare) or any("..." in t and x.ndim < len(t) - 3 for t, x in zip(terms, operands, strict=True)):
            raise ArgumentError(f"einsum: '...' of {formula!r} does not fit operands of shapes "
                                f"{[o.shape for o in operands]}")
        dots = "".join(spare[:width])
        terms = [t.replace("...", dots[width - (x.ndim - len(t) + 3):]) if "..." in t else t
                 for t, x in zip(terms, operands, strict=True)]
        letters = sorted(set("".join(terms)) - set(dots))
        if not arrow:
            output = dots + "".join(c for c in letters if "".join(terms).count(c) == 1)
        output = output.replace("...", dots)
        letters = sorted(set("".join(terms)))
        if len(set(output)) != len(output) or set(output) - set(letters):
            raise ArgumentError(f"einsum: {formula!r}: the output repeats a letter or names one no operand has")
        operands = list(operands)
        for k, (term, x) in enumerate(zip(terms, operands, strict=True)):
            if len(term) != x.ndim:
                raise ArgumentError(f"einsum: operand {term!r} of {formula!r} has shape {x.shape}, "
                                    f"expected {len(term)} dims")
            while len(set(term)) != len(term):  # a repeated letter: its diagonal, moved to the end
                c = next(c for c in term if term.count(c) > 1)
                i, j = term.index(c), term.index(c, term.index(c) + 1)
                if x.shape[i] != x.shape[j]:
                    raise ArgumentError(f"einsum: letter {c!r} of {formula!r} has sizes {x.shape[i]} and {x.shape[j]}")
                x, term = x.diagonal(0, i, j), term[:i] + term[i + 1:j] + term[j + 1:] + c
            terms[k], operands[k] = term, x
        sizes: dict[str, int] = {}
        for term, x in zip(terms, operands, strict=True):
            for c, n in zip(term, x.shape, strict=True):
                have = sizes.get(c)
                if have is None or have == 1:
                    sizes[c] = n
                elif n not in (have, 1):  # a size-1 dim broadcasts, as in torch
                    raise ArgumentError(f"einsum: letter {c!r} of {formula!r} has sizes {have} and {n}")
        half = next((x.dtype for x in operands if x.dtype.is_half), None)  # computed in float32, rounded once
        operands = [x.cast(dtypes.float32) if x.dtype is half else x for x in operands]
        product = None
        for term, x in zip(terms, operands, strict=True):
            order = [term.index(c) for c in letters if c in term]
            aligned = x.permute(*order) if order else x
            aligned = aligned.reshape(tuple(x.shape[term.index(c)] if c in term else 1 for c in letters))
            product = aligned if product is None else product * aligned
        product = product.expand(tuple(sizes[c] for c in letters))
        summed = [d for d, c in enumerate(letters) if c not in output]
        out = product.sum(tuple(summed)) if summed else product
        kept = [c for c in letters if c in output]
        out = out.permute(*[kept.index(c) for c in output]) if output else out
        return out.cast(half) if half is not None and out.dtype is dtypes.float32 else out

    def nll_loss(self, target, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        """self: log-probabilities (N, C, ...) or (C,); target: class indices (N, ...) (torch's nll_loss):
        -weight[y] * self[y], averaged over the weights of the targets that are not ignore_index."""
        axis = 1 if self.ndim >= 2 else 0
        x = self.transpose(axis, -1) if axis == 1 and self.ndim > 2 else self
        C = x.shape[-1]
        if target.shape != x.shape[:-1] or target.dtype.is_float:
            raise ArgumentError(f"nll_loss: target {target.shape} ({target.dtype.name}) must be int class indices "
                                f"shaped like input {self.shape} without its class dim")
        kept = target != ignore_index
        labels = kept.where(target, 0)
        shapes = f"(input {self.shape}, target {target.shape})"
        labels._check_range(C, lambda low, top: IndexError(
            f"nll_loss: targets must lie in [0, {C}) or equal ignore_index {ignore_index}; got values in "
            f"[{low}, {top}] {shapes}"))
        hit = labels.unsqueeze(-1) == self.arange(C, device=self.device)
        picked = hit.where(x, 0.0).sum(-1)
        w = kept.where(hit.where(weight, 0.0).sum(-1) if weight is not None else 1.0, 0.0).cast(self.dtype)
        loss = -(w * kept.where(picked, 0.0))
        if reduction == "none":
            return loss
        if reduction == "sum":
            return loss.sum()
        if reduction == "mean":
            return loss.sum() / w.sum()
        raise ArgumentError(f"nll_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")

    # ---- initializers ----

    @classmethod
    def scaled_uniform(cls, *shape, **kwargs) -> Self:
        """Uniform in [-1, 1) / sqrt(numel) (tinygrad's)."""
        shape = _shape("scaled_uniform", shape)
        bound = max(math.prod(shape), 1) ** -0.5
        return cls.uniform(*shape, low=-bound, high=bound, **kwargs)

    @classmethod
    def kaiming_normal(cls, *shape, a: float = 0.01, **kwargs) -> Self:
        """Normal with std sqrt(2 / (1 + a^2)) / sqrt(fan_in), fan_in the product of shape[1:]."""
        shape = _shape("kaiming_normal", shape)
        std = math.sqrt(2.0 / (1 + a * a)) / math.sqrt(max(math.prod(shape[1:]), 1))
        return cls.normal(*shape, mean=0.0, std=std, **kwargs)

    # ---- bitwise, by name ----

    def sequential(self, layers) -> Self:
        """Each layer called on the one before's output, in order (tinygrad's Tensor.sequential, which
        its MNIST example calls): x.sequential([f, g]) is g(f(x)); no layers give x itself."""
        out = self
        for layer in layers:
            if not callable(layer):
                raise TypeError(f"sequential: every layer must be callable, got {type(layer).__name__}")
            out = layer(out)
        return out

    def bitwise_and(self, other) -> Self:
        return self & other

    def bitwise_or(self, other) -> Self:
        return self | other

    def bitwise_xor(self, other) -> Self:
        return self ^ other

    def bitwise_not(self) -> Self:
        return ~self
