"""Sorting (sorting.py, the same text in every stage) against torch, each library in its own block:
top-50 of GPT-2-sized logits (1, 50257), a batch of long lines (64, 4096), and the crossover of
the two ways a stage sorts (ranks, n^2; the bitonic network, n log^2 n) on (256, n) lines.
Correctness is checked before timing.

Run with `pytest benchmarks/test_sort.py --benchmark-only --benchmark-columns=median,min,rounds`."""

import importlib

import numpy as np
import pytest

rng = np.random.default_rng(0)
LOGITS = rng.standard_normal((1, 50257)).astype(np.float32)
LINES = rng.standard_normal((64, 4096)).astype(np.float32)
STAGES = ["stage1_ndarray", "stage2_autograd", "stage3_compiler"]


def _run(stage: str, x: np.ndarray, op: str):
    T = importlib.import_module(stage).Tensor
    t = T(x)
    if op == "topk":
        return lambda: t.topk(50)[0].numpy()
    return lambda: t.sort(-1)[0].numpy()


def _torch(x: np.ndarray, op: str):
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(x)
    if op == "topk":
        return lambda: torch.topk(t, 50)[0].numpy()
    return lambda: torch.sort(t, dim=-1, stable=True)[0].numpy()


@pytest.mark.parametrize("impl", STAGES + ["torch"])
@pytest.mark.parametrize("op, x", [("topk", LOGITS), ("sort", LINES)], ids=["topk50_of_50257", "sort_64x4096"])
def test_sort(benchmark, impl, op, x):
    fn = _torch(x, op) if impl == "torch" else _run(impl, x, op)
    want = -np.sort(-x, -1)[:, :50] if op == "topk" else np.sort(x, -1)
    np.testing.assert_array_equal(fn(), want)  # (stage3: the first call compiles, outside the timing)
    benchmark.group = op
    benchmark.extra_info["impl"] = impl
    benchmark(fn)


@pytest.mark.parametrize("way", ["ranks", "network"])
@pytest.mark.parametrize("n", [32, 64, 128, 256])
def test_crossover(benchmark, monkeypatch, way, n):
    """stage1 sorting (256, n) lines each way: where NETWORK_FROM should sit."""
    sorting = importlib.import_module("stage1_ndarray.sorting")
    monkeypatch.setattr(sorting, "NETWORK_FROM", 10**9 if way == "ranks" else 1)
    x = rng.standard_normal((256, n)).astype(np.float32)
    fn = _run("stage1_ndarray", x, "sort")
    np.testing.assert_array_equal(fn(), np.sort(x, -1))
    benchmark.group = f"crossover n={n}"
    benchmark.extra_info["impl"] = way
    benchmark(fn)
