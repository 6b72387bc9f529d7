"""The C renderer's float32 EXP2 and LOG2 are its own formulas (renderer.EXP2F, renderer.LOG2F), not
libm's exp2f and log2f: checked here against 2**x and log2(x) computed in float64 and rounded once, to
within one ulp, over random float32 bit patterns and the edges. (numpy's own float32 exp2 is 2 ulp off
near 2**127.)"""

import numpy as np

from .. import Tensor


def test_float32_exp2_is_within_one_ulp_everywhere():
    """Over a sweep of every float32 exponent and the edges: overflow, the subnormal range,
    infinities and NaN."""
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 127.0, 127.99999, 128.0, 129.0, -126.0, -126.5, -149.0,
                      -149.5, -150.0, -151.0, -1000.0, 1000.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30],
                     dtype=np.float32)
    x = np.concatenate([bits.view(np.float32), edges])
    with np.errstate(over="ignore"):
        ref = np.exp2(x.astype(np.float64)).astype(np.float32)  # rounded once from float64
    got = Tensor(x).exp2().numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    finite = ~np.isnan(ref)
    ulps = np.abs(got[finite].view(np.int32).astype(np.int64) - ref[finite].view(np.int32).astype(np.int64))
    assert ulps.max() <= 1, (x[finite][ulps.argmax()], got[finite][ulps.argmax()], ref[finite][ulps.argmax()])


def test_pow2_is_the_exact_power_of_two():
    """POW2 (2^n for an integer n, the formulas' scale) from the float's exponent bits: exact over
    the whole range, subnormals included, 0 below it, inf above, NaN kept; a fraction dropped."""
    for dtype, low, high in ((np.float32, -160, 140), (np.float64, -1100, 1030)):
        n = np.arange(low, high, dtype=dtype)
        with np.errstate(over="ignore"):
            ref = np.array([np.ldexp(1.0, int(k)) for k in n]).astype(dtype)  # exact, then rounded once
        got = Tensor(n).pow2().numpy()
        assert got.dtype == dtype and got.tobytes() == ref.tobytes(), n[got != ref][:5]
        edges = Tensor(np.array([np.nan, np.inf, -np.inf, 3.75, -3.75], dtype)).pow2().numpy()
        np.testing.assert_array_equal(edges, np.array([np.nan, np.inf, 0.0, 8.0, 0.125], dtype))


def test_float32_log2_is_within_one_ulp_everywhere():
    """Over random bit patterns (negatives among them: NaN) and the edges: subnormals, 0 and -0 (-inf),
    the largest float, the infinities and NaN, and the floats around 1 and sqrt 2, where the
    formula's reduction switches."""
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    near = np.array([1.0, 2.0, 0.5, np.sqrt(2), np.sqrt(0.5)], np.float32)
    around = np.concatenate([np.nextafter(near, np.inf), np.nextafter(near, 0), near])
    edges = np.array([0.0, -0.0, 1e-45, 1e-40, 1.1754942e-38, 1.1754944e-38, 3.4028235e38, np.inf, -np.inf,
                      np.nan, -1.0, -1e-45], np.float32)
    x = np.concatenate([bits.view(np.float32), around.astype(np.float32), edges])
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = np.log2(x.astype(np.float64)).astype(np.float32)
    got = Tensor(x).log2().numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    finite = ~np.isnan(ref)
    ulps = np.abs(got[finite].view(np.int32).astype(np.int64) - ref[finite].view(np.int32).astype(np.int64))
    assert ulps.max() <= 1, (x[finite][ulps.argmax()], got[finite][ulps.argmax()], ref[finite][ulps.argmax()])
