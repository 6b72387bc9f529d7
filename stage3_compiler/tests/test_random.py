"""Our generator: streams defined by the seed alone, reproducible bit for bit from a Python model
of the C hash, uniform and normal draws with the right moments."""

from .. import Tensor, dtypes

MASK = (1 << 64) - 1


def mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def reference_uniform_f32(seed: int, counter: int, n: int) -> list[float]:
    key = mix64(seed)
    return [(mix64((key + (counter + i + 1) * 0x9E3779B97F4A7C15) & MASK) >> 40) * 2.0**-24 for i in range(n)]


def test_stream_matches_the_reference_hash():
    Tensor.manual_seed(1234)
    first = Tensor.rand(5).tolist()
    second = Tensor.rand(3).tolist()
    assert first == reference_uniform_f32(1234, 0, 5)
    assert second == reference_uniform_f32(1234, 5, 3)


def test_same_seed_same_numbers_different_seed_different_numbers():
    Tensor.manual_seed(7)
    a = Tensor.randn(100).tolist()
    Tensor.manual_seed(7)
    b = Tensor.randn(100).tolist()
    Tensor.manual_seed(8)
    c = Tensor.randn(100).tolist()
    assert a == b
    assert a != c


def test_moments():
    Tensor.manual_seed(0)
    u = Tensor.rand(200_000)
    assert abs(u.mean().item() - 0.5) < 0.005
    assert 0 <= u.min().item() and u.max().item() < 1
    n = Tensor.randn(200_000)
    assert abs(n.mean().item()) < 0.01
    assert abs(n.std().item() - 1) < 0.01
    r = Tensor.randint(100_000, low=3, high=7)
    assert r.dtype is dtypes.int64 and r.min().item() == 3 and r.max().item() == 6


def test_float64_draws():
    Tensor.manual_seed(0)
    u = Tensor.rand(1000, dtype=dtypes.float64)
    assert u.dtype is dtypes.float64 and 0 <= u.min().item() and u.max().item() < 1
