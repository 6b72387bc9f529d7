"""The math ops the API has and the IR does not, each written on the IR's elementwise primitives.

The IR computes ADD, MUL, NEG, RECIP, EXP2, POW2, LOG2, SQRT, SIN, CMPLT, CMPEQ, CMPNE, WHERE, MAX
and CAST; the functions here build exp, log, cos, tanh, sigmoid, erf, gelu (and gelu's derivative, the
rule autograd.py gives it), abs, sign, pow and rsqrt from them, so the scheduler fuses them into
their neighbours like any other elementwise op. They take a float32 or float64 tensor and touch it
only through the hooks `FloatTensor` names (a test parses this file to keep it so). `a - b` is
spelled `a + -b`: NEG and ADD are the primitives.

Each formula is chosen so that its error does not grow with |x| and so that inf, nan and -0.0 come
out as numpy and torch give them. Worst errors measured in units of the dtype's eps (2^-23, 2^-52),
relative to the answer ("abs" for cos, whose answer crosses zero), against numpy/scipy in float64
(mpmath for gelu's left tail), over the conformance catalogue's domains and each op's whole range
(overflow, underflow, denormals, erf and gelu to where they saturate), with numpy's and stage2's
primitives alike (tests/test_transcendental.py keeps them under about twice these):

  op       formula                                                  float32     float64
  exp      2^n * P(r), r = x - n ln2 (Cody-Waite), P(r) ~ e^r       1.8         1.0
  log      log2(x) * ln2                                            1.8         1.0
  cos      1 - 2 sin^2(x/2)                                         1.8 abs     1.5 abs
  tanh     x P(x^2) for |x| < 0.5, else (1 - e) / (1 + e),          1.4         1.9
           e = exp(-2|x|)
  sigmoid  1 / (1 + e) or e / (1 + e), e = exp(-|x|)                2.0         2.0
  erf      x P(x^2) for |x| < 0.5, else 1 - erfc(|x|)               2.9         2.8
  gelu     x Phi(x), Phi(-|x|) = erfc(|x| / sqrt 2) / 2             3.1         3.0
  gelu'    Phi(x) + x phi(x), in eps of |Phi| + |x phi|             2.1         3.0
  pow      exp2(y log2|x|), sign and special cases as np.power      3.0         2.7
  rsqrt    1 / sqrt(x)                                              1.0         0
  abs, sign                                                         exact       exact

The catalogue allows 1e-5 relative (84 eps) in float32 and 1e-12 (4500 eps) or, for composites,
1e-10 in float64. The one weak spot is pow far from 1: y log2|x| is rounded, so the error grows
like 0.85 |y log2 x| eps (measured: 100 eps, 1.2e-5, for results near 2^+-120 in float32; 470 eps
near 2^+-1000 in float64); the catalogue's bases (0.1..4) and exponents (-2..2) stay near 3 eps.

Why these formulas:
- exp(x) = exp2(x log2 e) rounds the product, an error that grows with |x|: measured 32 eps
  (3.8e-6) near float32's overflow and 222 eps in float64, inside the tolerances but 16 and 200
  times this formula's. Splitting x = n ln2 + r with n an integer and ln2 in two parts
  (the high part short enough that n * hi is exact) keeps r exact and the error at a few ulp.
- e^r, r in [0, ln2) once reduced, is a polynomial (degree 6 in float32, 11 in float64, through
  e^r at the interval's Chebyshev points), not EXP2 of r log2 e: EXP2 would reduce its argument a
  second time (round it, take the fraction, its own polynomial, two scalings, the checks of its
  range), and in float64 it is a libm call that runs one value at a time; the polynomial made exp,
  tanh and softmax faster, float64's exp most (benchmarks/results/stage3_log.md, 2026-11-27).
- erfc(z) = exp(-z^2) * erfcx(z), with erfcx(z) (z + 3) a Chebyshev series in s = (z - 3)/(z + 3)
  over all z >= 0 (the map of Numerical Recipes' erfccheb; the coefficients are our own, below),
  summed as a polynomial in s (the series converted exactly): Horner's rule takes two ops a term,
  Clenshaw's recurrence four.
  exp(-z^2) is exp(-zh^2) * exp(-(z - zh)(z + zh)) with zh = z on a coarse grid so that zh^2 is
  exact: z^2 rounded once would cost about z^2 / 2 ulp (40 at float32's underflow). The first
  factor is 2^n e^r by Cody-Waite, the second's argument t is small (under 0.14), so e^r e^t is
  one exp2 of (r + t) log2 e (the sum rounds by half an ulp of 1): two exp2 in all, not three, which
  made gelu's kernel and its derivative's faster; their worst errors went from 3.1 to 2.9 eps
  (float32) and from 3.4 to 3.0 (float64). Then that exp2 became a polynomial in r + t, which lies in
  (-0.14, 0.83): EXP2 reduced its argument again and checked its range. The worst errors stayed the
  same to 0.01 eps, and both kernels got faster again (benchmarks/results/stage3_rule_measurements.md).
- gelu and its derivative take Phi(-|x|) = erfc(|x| / sqrt 2) / 2 from erfc for all x: Phi(-|x|)
  <= 1/2, so Phi(|x|) = 1 - Phi(-|x|) does not cancel, and erf's Taylor branch near 0 (which 1 - erfc
  would cancel in erf itself) bought gelu nothing but a second formula computed beside the first in
  every lane. With Horner's rule above, gelu's worst error went from 2.8 to 3.1 eps and its
  derivative's from 1.7 to 2.1 (float32; 1.8 to 3.0 in float64), and both kernels got faster
  (benchmarks/results/stage3_log.md, 2026-11-27).
- gelu uses Phi(x) = erfc(-x / sqrt 2) / 2 and takes exp(-x^2/2) from x itself, not from the
  rounded x / sqrt 2: torch's 0.5 x (1 + erf(x / sqrt 2)) cancels to -0 below x = -5.5 (float32)
  or -8.4 (float64) where the true value is tiny but representable.
- tanh = 1 - 2 / (e^2x + 1) cancels near 0, so there tanh is its Taylor series; from |x| = 0.5
  on, e = e^(-2|x|) <= 0.37 and (1 - e) / (1 + e) loses nothing. Kahan's expm1(t) = (u - 1) t /
  log(u), u = e^t, does not cancel either (the rounding of u cancels between (u - 1) and log(u)),
  and elu keeps it, but its log is a libm call that runs one value at a time.
- Rounding to an integer is (t + 1.5 * 2^(p-1)) - 1.5 * 2^(p-1) in the float's own p-bit format;
  it needs IEEE adds that are not reassociated (C without -ffast-math, CUDA by default).
- The powers of two the formulas scale by, 2^n for an integer n, are POW2: the float's exponent
  bits, not EXP2's polynomial. The same values (both exact), a third fewer ops in exp, so a
  softmax's sum of exps runs faster (benchmarks/results/stage3_rule_measurements.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any, Protocol


class FloatTensor(Protocol):
    """The hooks these functions use, each one IR primitive (constants may be Python floats)."""

    dtype: Any

    def __add__(self, other: Any) -> FloatTensor: ...
    def __radd__(self, other: Any) -> FloatTensor: ...
    def __mul__(self, other: Any) -> FloatTensor: ...
    def __rmul__(self, other: Any) -> FloatTensor: ...
    def __neg__(self) -> FloatTensor: ...
    def __lt__(self, other: Any) -> FloatTensor: ...
    def __eq__(self, other: Any) -> FloatTensor: ...  # type: ignore[override]
    def __ne__(self, other: Any) -> FloatTensor: ...  # type: ignore[override]
    def reciprocal(self) -> FloatTensor: ...
    def exp2(self) -> FloatTensor: ...
    def pow2(self) -> FloatTensor: ...  # 2^n for an integer n: EXP2 without its polynomial
    def log2(self) -> FloatTensor: ...
    def sqrt(self) -> FloatTensor: ...
    def sin(self) -> FloatTensor: ...
    def maximum(self, other: Any) -> FloatTensor: ...
    def where(self, a: Any, b: Any) -> FloatTensor: ...
    def cast(self, dtype: Any) -> FloatTensor: ...


# ---- constants, computed once in 40 digits ----

_CTX = Context(prec=40)
_LN2_EXACT = Decimal(2).ln(_CTX)
LN2 = float(_LN2_EXACT)
LOG2E = float(_CTX.divide(1, _LN2_EXACT))
SQRT1_2 = float(_CTX.sqrt(Decimal("0.5")))
TWO_OVER_SQRT_PI = 1.1283791670955125739  # 2 / sqrt(pi)
INV_SQRT_2PI = 0.3989422804014326779  # 1 / sqrt(2 pi)


def _ln2_split(bits: int) -> tuple[float, float]:
    """ln2 = hi + lo with hi on `bits` significant bits: n * hi is exact while n has fewer than
    p - bits bits, so x - n * hi is computed without rounding."""
    hi = math.ldexp(round(math.ldexp(LN2, bits)), -bits)
    return hi, float(_LN2_EXACT - Decimal(hi))


# e^r for r in [0, ln2): the polynomial through e^r at the Chebyshev points of that interval, of
# degree 6 for float32 and 11 for float64 (interpolated in 50-digit mpmath, in powers of r;
# tests/test_transcendental.py recomputes them). Off e^r by at most 0.021 eps and 0.019 eps.
_EXP_POLYNOMIAL = {
    "float32": [
        1.0000000025307452, 0.999999642498613, 0.5000082161066548, 0.16659616597557358, 0.04195283286547857,
        0.007744451817443449, 0.0019715704621838096,
    ],
    "float64": [
        1.0, 1.0000000000000018, 0.49999999999987943, 0.16666666666990854, 0.04166666662168456,
        0.008333333701134052, 0.001388886985494254, 0.00019841916794385652, 2.478696907686569e-05,
        2.7774198867848245e-06, 2.554057837637411e-07, 3.551095573405242e-08,
    ],
}

# e^u for the small u of erfc's second factor (_erfc_parts: u = r + t, r in [0, ln2) and |t| < 0.14 in
# float32, 4e-5 in float64): a polynomial, with no range reduction to do. float32's interpolates e^u at
# the 8 Chebyshev points of [-0.14, 0.83] (off by at most 0.008 eps there); float64's t is so small that
# exp's own polynomial serves (off by at most 0.08 eps on [-5e-5, ln2 + 5e-5]). Recomputed in
# tests/test_transcendental.py.
_EXP_NEAR = {
    "float32": [
        0.9999999991901173, 0.9999999989989934, 0.5000002242810234, 0.1666661071792257, 0.041659116973914556,
        0.008377463228866934, 0.0012966191009814293, 0.0002819926739470821,
    ],
    "float64": _EXP_POLYNOMIAL["float64"],
}

# erf(x) = x * sum_n a_n x^(2n), a_n = 2/sqrt(pi) (-1)^n / (n! (2n + 1)): the Taylor series. For
# |x| < 0.5 the first dropped term is below 1e-9 (7 terms) and 1e-19 (13 terms) of the sum.
_ERF_TAYLOR = [TWO_OVER_SQRT_PI * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(13)]


def _tanh_taylor(terms: int) -> list[float]:
    """tanh(x) = x * sum_n t_n x^(2n), t_n = 4^(n+1) (4^(n+1) - 1) B_(2n+2) / (2n+2)! with the
    Bernoulli numbers B_k (exact fractions, from sum_(j<=m) C(m+1, j) B_j = 0)."""
    bernoulli = [Fraction(1)]
    for m in range(1, 2 * terms + 1):
        bernoulli.append(-sum(math.comb(m + 1, j) * bernoulli[j] for j in range(m)) / (m + 1))
    return [float(4 ** (n + 1) * (4 ** (n + 1) - 1) * bernoulli[2 * n + 2] / math.factorial(2 * n + 2))
            for n in range(terms)]


# For |x| < 0.5 each term is about 0.1 times the last: the first dropped term is below 1e-9 (9
# terms) and 1.1e-18 (18 terms) of the sum.
_TANH_NEAR = 0.5
_TANH_TAYLOR = _tanh_taylor(18)

# (z + 3) * erfcx(z) = sum_k c_k T_k(s), s = (z - 3) / (z + 3), z in [0, inf): Chebyshev
# interpolation at 64 points in 50-digit mpmath (tests/test_transcendental.py recomputes them).
# Truncated after c_11 the tail sums to 6e-9, after c_24 to 1e-17; the series is >= 0.56.
_ERFCX_CHEBYSHEV = [
    1.413438223980872, -1.1314768490746974, 0.35410810034248635, -0.08508704009908545,
    0.014615273272816639, -0.0013795571636296329, -6.429066714315945e-05, 3.9043421097724045e-05,
    -2.642785074856054e-06, -8.239440143910853e-07, 1.3247975697671355e-07, 1.919522515672645e-08,
    -5.030507163745393e-09, -5.842006410267007e-10, 1.8742323910408168e-10, 2.4373672656733487e-11,
    -6.990943839667697e-12, -1.2573115617676e-12, 2.458000580643909e-13, 7.005741632378779e-14,
    -6.732775694749609e-15, -3.843430589415152e-15, 3.3163748896188907e-18, 1.9337385406947118e-16,
    1.957552792661546e-17,
]
_ERFCX_SHIFT = 3.0


def _chebyshev_powers(coeffs: list[float]) -> list[float]:
    """sum_k coeffs[k] T_k(s) as sum_m a_m s^m, exactly in fractions (T_k+1 = 2 s T_k - T_k-1), then
    rounded: Horner's rule takes two ops a term where Clenshaw's recurrence takes four."""
    powers = [Fraction(0)] * len(coeffs)
    before, now = [Fraction(1)], [Fraction(0), Fraction(1)]  # T_0, T_1 in powers of s
    for k, c in enumerate(coeffs):
        term = before if k == 0 else now
        for m, t in enumerate(term):
            powers[m] += Fraction(c) * t
        if k >= 1:
            before, now = now, [2 * a - b for a, b in zip([Fraction(0), *now], [*before, 0, 0], strict=True)]
    return [float(a) for a in powers]


@dataclass(frozen=True)
class _Format:
    """What depends on the float format: p significand bits and the ranges of exp and erfc."""

    bits: int
    ln2_hi: float
    ln2_lo: float
    exp_limit: float  # exp(+-x) is inf / 0 beyond it; clamping there keeps n small
    erfc_limit: float  # erfc(z) underflows to 0 beyond it
    grid: int  # z on a grid of 2^-grid: z_hi^2 is exact for z below 2^(p/2 - grid)
    erf_terms: int
    erfcx_powers: list[float]  # (z + 3) erfcx(z) in powers of s = (z - 3) / (z + 3)
    tanh_terms: int
    exp_near: list[float]  # e^u for erfc's small u, in powers of u (_EXP_NEAR)

    @property
    def round_magic(self) -> float:  # t + this - this rounds t to an integer, |t| < 2^(p-2)
        return 1.5 * 2.0 ** (self.bits - 1)

    @property
    def grid_magic(self) -> float:  # the same, onto multiples of 2^-grid
        return 1.5 * 2.0 ** (self.bits - 1 - self.grid)


_FORMATS = {
    "float32": _Format(24, *_ln2_split(12), exp_limit=200.0, erfc_limit=12.0, grid=7,
                       erf_terms=7, erfcx_powers=_chebyshev_powers(_ERFCX_CHEBYSHEV[:12]), tanh_terms=9,
                       exp_near=_EXP_NEAR["float32"]),
    "float64": _Format(53, *_ln2_split(32), exp_limit=1000.0, erfc_limit=28.0, grid=20,
                       erf_terms=13, erfcx_powers=_chebyshev_powers(_ERFCX_CHEBYSHEV[:25]),
                       tanh_terms=18, exp_near=_EXP_NEAR["float64"]),
}


def _format(x: FloatTensor, op: str) -> _Format:
    name = x.dtype.name
    if name not in _FORMATS:
        raise TypeError(f"{op}: expected a float32 or float64 tensor, got {name}")
    return _FORMATS[name]


# ---- helpers on the primitives ----


def _at_most(x: FloatTensor, limit: float) -> FloatTensor:
    """min(x, limit) that keeps NaN whatever MAX does with it (NaN < anything is false)."""
    return (-x < -limit).where(limit, x)


def _clamp(x: FloatTensor, limit: float) -> FloatTensor:
    return (x < -limit).where(-limit, _at_most(x, limit))


def _floor(t: FloatTensor, f: _Format) -> FloatTensor:
    """floor(t) for |t| < 2^(p-2): round to nearest, then step down where that went up."""
    n = (t + f.round_magic) + -f.round_magic
    return (t < n).where(n + -1.0, n)


def _round_nonneg(a: FloatTensor, f: _Format) -> FloatTensor:
    """Nearest integer to a >= 0 (inf and NaN pass); floats from 2^(p-1) up are integers."""
    big = 2.0 ** (f.bits - 1)
    return (a < big).where((a + big) + -big, a)


def _horner(x: FloatTensor, coeffs: list[float]) -> FloatTensor:
    """sum_n coeffs[n] x^n."""
    acc: Any = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        acc = acc * x + c
    return acc


def _erfc_parts(z: FloatTensor, v: FloatTensor, scale: float, f: _Format) -> tuple[FloatTensor, ...]:
    """erfc(z) = (cx * e) * 2^n for finite z >= 0, given v >= 0 with z^2 = scale v^2 (scale 1 or 1/2),
    where cx = erfcx(z) and e * 2^n = exp(-z^2).

    z^2 is never rounded: v = vh + (v - vh) with vh on a grid, so exp(-scale vh^2) = 2^n e^r has an
    exact argument and an exact r (Cody-Waite), and t = -scale (v - vh)(v + vh) is small (|t| under
    0.14). e = e^(r + t) is a polynomial (f.exp_near): r + t in (-0.14, 0.83) rounds by at most half an
    ulp of 1, a third of an ulp of e. 2^n is the factor that underflows: multiplied last, it rounds into
    the denormals once. v is at most erfc's limit, so vh^2 needs no clamp before its reduction."""
    vh = (v + f.grid_magic) + -f.grid_magic
    rest = (v + -vh) * (v + vh)
    r = (z + _ERFCX_SHIFT).reciprocal()
    s = (z + -_ERFCX_SHIFT) * r
    n, reduced = _cody_waite(vh * vh * -scale, f)
    e = _horner(reduced + rest * -scale, f.exp_near)
    return _horner(s, f.erfcx_powers) * r, e, n


def _erfc_factors(z: FloatTensor, v: FloatTensor, scale: float, f: _Format) -> tuple[FloatTensor, FloatTensor]:
    """erfc(z) = small * big: small = erfcx(z) e^(r + t) is near erfcx(z) <= 1 (at most twice it),
    big = 2^n rounds into the denormals where erfc does."""
    cx, e, n = _erfc_parts(z, v, scale, f)
    return cx * e, n.pow2()


def _erf_small(x: FloatTensor, f: _Format) -> FloatTensor:
    """erf(x) for |x| < 0.5 by its Taylor series (odd, so -0.0 stays -0.0)."""
    return x * _horner(x * x, _ERF_TAYLOR[: f.erf_terms])


def _expm1(t: FloatTensor) -> FloatTensor:
    """e^t - 1 for finite t >= -40 by Kahan's trick: (u - 1) * t / log(u) with u = e^t rounded."""
    u = exp(t)
    return (u == 1.0).where(t, (u + -1.0) * t * log(u).reciprocal())


# ---- the ops ----


def _exp_reduce(x: FloatTensor, f: _Format) -> tuple[FloatTensor, FloatTensor]:
    """e^x = 2^n * e^r with n an integer and r in [0, ln2) exact (Cody-Waite), so that a caller can
    fold a small exponent into r, multiply e^r by other factors first and scale by 2^n last,
    rounding into the denormals once."""
    return _cody_waite(_clamp(x, f.exp_limit), f)


def _cody_waite(x: FloatTensor, f: _Format) -> tuple[FloatTensor, FloatTensor]:
    """_exp_reduce for an x the caller knows within +-f.exp_limit (or NaN): no clamp."""
    n = _floor(x * LOG2E, f)  # so 2^n stays finite wherever e^x does
    return n, (x + -(n * f.ln2_hi)) + -(n * f.ln2_lo)  # the first product exact


def exp(x: FloatTensor) -> FloatTensor:
    f = _format(x, "exp")
    n, r = _exp_reduce(x, f)
    return n.pow2() * _horner(r, _EXP_POLYNOMIAL[x.dtype.name])  # r is reduced: no EXP2 to reduce it again


def log(x: FloatTensor) -> FloatTensor:
    _format(x, "log")
    return x.log2() * LN2


def cos(x: FloatTensor) -> FloatTensor:
    _format(x, "cos")
    s = (x * 0.5).sin()
    return 1.0 + s * s * -2.0


def tanh(x: FloatTensor) -> FloatTensor:
    """x P(x^2) near 0, where 1 - 2 / (e^2x + 1) would cancel; (1 - e) / (1 + e) with e = e^(-2|x|)
    <= e^-1 beyond, where nothing cancels. No log (the expm1 of Kahan's trick needs one, a scalar
    libm call that kept the kernel from being vectorized)."""
    f = _format(x, "tanh")
    a = abs(x)
    e = exp(_at_most(a, 20.0) * -2.0)  # tanh(20) rounds to 1 in float64
    far = (1.0 + -e) * (1.0 + e).reciprocal()
    near = x * _horner(x * x, _TANH_TAYLOR[: f.tanh_terms])  # odd: -0.0 stays -0.0
    return (a < _TANH_NEAR).where(near, (x < 0.0).where(-far, far))


def tanh_grad(x: FloatTensor) -> FloatTensor:
    """tanh'(x) = 4e / (1 + e)^2 with e = e^(-2|x|) in (0, 1]: accurate to a few ulp everywhere and
    0 (not NaN) in the tails. 1 - tanh(x)^2, torch's form, loses the digits of tanh(x)'s rounding
    where tanh(x) is near +-1 (gelu_tanh's gradient at x = -4 came out 1% off)."""
    _format(x, "tanh")
    e = exp(abs(x) * -2.0)
    d = e + 1.0
    return e * 4.0 * (d * d).reciprocal()


def sigmoid(x: FloatTensor) -> FloatTensor:
    _format(x, "sigmoid")
    e = exp(-abs(x))  # in [0, 1]: never overflows, so both tails keep their relative accuracy
    r = (e + 1.0).reciprocal()
    return (x < 0.0).where(e * r, r)


def erf(x: FloatTensor) -> FloatTensor:
    f = _format(x, "erf")
    a = abs(x)
    z = _at_most(a, f.erfc_limit)
    small, big = _erfc_factors(z, z, 1.0, f)
    tail = 1.0 + -(small * big)
    return (a < 0.5).where(_erf_small(x, f), (x < 0.0).where(-tail, tail))


def gelu(x: FloatTensor) -> FloatTensor:
    """x Phi(x) with Phi(-|x|) = erfc(z) / 2, z = |x| / sqrt 2, and Phi(x) = 1 - Phi(-x)."""
    f = _format(x, "gelu")
    v = _at_most(abs(x), f.erfc_limit / SQRT1_2)
    z = v * SQRT1_2
    small, big = _erfc_factors(z, v, 0.5, f)  # exp(-z^2) taken from v, not from the rounded z
    half = x * 0.5
    left = (half * small) * big  # x Phi(x) for x <= 0; -inf * 0 is NaN as torch
    q = small * big * 0.5  # Phi(-|x|)
    return (-x < 0.0).where(x * (1.0 + -q), left)


def gelu_grad(x: FloatTensor) -> FloatTensor:
    """gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi), with Phi(-|x|) as in gelu.

    Far below 0 the terms have opposite signs but do not cancel (x phi is x^2 times Phi), so the sum
    keeps its accuracy. Past the clamp x phi(x) underflows: 0 (or 1) there, and NaN at +-inf as torch
    gives (its inf * 0)."""
    f = _format(x, "gelu")
    a, limit = abs(x), f.erfc_limit / SQRT1_2
    v = _at_most(a, limit)
    z = v * SQRT1_2
    cx, e, n = _erfc_parts(z, v, 0.5, f)  # exp(-x^2 / 2) = e * 2^n, n down to -1131
    # x phi(x): 2^n alone would underflow before x (up to 17 in size) multiplies it, so the scale
    # is 2^(n + 64) (exact, n <= 0) and then 2^-64, which rounds into the denormals once. The same
    # power times 2^-64 is 2^n exactly (or the 0 that 2^n rounds to): one POW2 for both.
    scaled = (n + 64.0).pow2()
    q = (cx * e) * (scaled * 2.0**-64) * 0.5  # Phi(-|x|)
    slope = ((x * (e * INV_SQRT_2PI)) * scaled) * 2.0**-64
    slope = (a < limit).where(slope, x * 0.0)  # past the clamp it underflows: +-0, and NaN at +-inf as torch
    return (x < 0.0).where(q, 1.0 + -q) + slope


def abs(x: FloatTensor) -> FloatTensor:
    _format(x, "abs")
    return (x < 0.0).where(-x, (x == 0.0).where(0.0, x))  # -0.0 becomes 0.0, as numpy


def sign(x: FloatTensor) -> FloatTensor:
    _format(x, "sign")
    # +-0 -> 0.0 (numpy's sign(-0.0)); NaN -> 0.0 too, as torch (numpy keeps NaN)
    return (-x < 0.0).cast(x.dtype) + (x < 0.0).cast(x.dtype) * -1.0


def pow(x: FloatTensor, y: FloatTensor) -> FloatTensor:
    """np.power for floats: |x|^y = 2^(y log2|x|), with the sign and the special cases of C99's pow."""
    f = _format(x, "pow")
    if y.dtype.name != x.dtype.name:
        raise TypeError(f"pow: base and exponent must have one dtype, got {x.dtype.name} and {y.dtype.name}")
    a, ay = abs(x), abs(y)
    mag = (y == 0.0).where(1.0, (a == 1.0).where(1.0, (y * a.log2()).exp2()))  # x^0 = 1^y = 1, NaN too
    negative = (x == 0.0).where(x.reciprocal(), x) < 0.0  # the sign bit, also of -0.0
    half = ay * 0.5
    odd = _round_nonneg(half, f) != half  # for integer y; +-inf count as even integers
    integer = odd.where(negative.where(-mag, mag), mag)
    # (-2)^0.5 is NaN, and so is its slope: a NaN computed from mag, not a constant (whose gradient is 0)
    fraction = (x < 0.0).where((x == -math.inf).where(mag, mag * math.nan), mag)
    return (_round_nonneg(ay, f) == ay).where(integer, fraction)


def rsqrt(x: FloatTensor) -> FloatTensor:
    _format(x, "rsqrt")
    return x.sqrt().reciprocal()  # not sqrt(1/x): 1/x overflows for denormal x
