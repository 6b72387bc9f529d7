"""Stage kernels against numpy in the same run: elementwise add and a sum on 1M float32
elements, a transpose-copy and a matmul on 1024x1024 float32. Correctness is checked before timing.

Run with `nox -s bench`; `python -m benchmarks.report` turns the JSON into a ratio table."""

import numpy as np
import pytest

from stage1_ndarray import Tensor

N = 1 << 20
SIDE = 1024
rng = np.random.default_rng(0)
a_np = rng.standard_normal(N).astype(np.float32)
b_np = rng.standard_normal(N).astype(np.float32)
m_np = rng.standard_normal((SIDE, SIDE)).astype(np.float32)
n_np = rng.standard_normal((SIDE, SIDE)).astype(np.float32)
a, b, m, n = Tensor(a_np), Tensor(b_np), Tensor(m_np), Tensor(n_np)

CASES = {
    "add_1M": (lambda: a + b, lambda: a_np + b_np, 1e-6),
    "sum_1M": (lambda: a.sum(), lambda: a_np.sum(), 1e-4),
    "transpose_copy_1024": (lambda: m.T.contiguous(), lambda: np.ascontiguousarray(m_np.T), 0),
    "matmul_1024": (lambda: m @ n, lambda: m_np @ n_np, 1e-3),
}


def as_numpy(x):
    return x.numpy() if isinstance(x, Tensor) else np.asarray(x)


@pytest.mark.parametrize("impl", ["stage1", "numpy"])
@pytest.mark.parametrize("case", list(CASES))
def test_kernel(benchmark, case, impl):
    ours, reference, tol = CASES[case]
    np.testing.assert_allclose(as_numpy(ours()), as_numpy(reference()), rtol=tol, atol=tol)
    benchmark.group = case
    benchmark.extra_info["impl"] = impl
    benchmark(ours if impl == "stage1" else reference)
