"""The schedule cache (schedule_cache.py): a graph of the same structure is scheduled once; what its
key must tell apart (a constant, a shape, two reads of one buffer against reads of two) misses; a
cached schedule computes what a fresh one does, assigns in place included; eager training steps stop
scheduling after their warm-up and train exactly as without the cache."""

import numpy as np
import pytest

from .. import Tensor, nn, optim
from ..engine import schedule_cache


def rand(*shape, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


class NoCache(dict):
    def __setitem__(self, key, value):  # scheduled every time
        pass


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(schedule_cache, "SCHEDULES", {})
    monkeypatch.setattr(schedule_cache, "STATS", schedule_cache.CacheStats())
    return schedule_cache


def test_the_same_structure_is_scheduled_once(fresh):
    for seed in range(3):  # new tensors each time: the values differ, the graph's structure does not
        x, w = rand(8, 16, seed=seed), rand(16, 4, seed=seed + 10)
        got = ((x @ w).relu() + 1).softmax(-1).numpy()
        xn, wn = x.numpy(), w.numpy()
        z = np.maximum(xn @ wn, 0) + 1
        want = np.exp(z - z.max(-1, keepdims=True))
        np.testing.assert_allclose(got, want / want.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert fresh.STATS.hits == 2 * fresh.STATS.misses  # every realize of the 2nd and 3rd round hit


def test_what_the_key_must_tell_apart_misses(fresh):
    a, b = rand(6, 5), rand(6, 5, seed=1)
    (a * 2.0 + b).realize()
    (a * 3.0 + b).realize()  # another constant
    (rand(5, 6) * 2.0 + rand(5, 6)).realize()  # another shape
    (a * 2.0 + a).realize()  # one buffer read twice, not two buffers
    (a * -0.0 + b).realize()  # -0.0 is not 0.0
    (a * 0.0 + b).realize()
    assert fresh.STATS.hits == 0 and fresh.STATS.misses == 6
    got = (a * 2.0 + a).numpy()
    np.testing.assert_allclose(got, a.numpy() * 3, rtol=1e-6)
    assert fresh.STATS.hits == 1


def test_a_cached_schedule_assigns_in_place_or_not_as_a_fresh_one(fresh):
    p = Tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    own = p.lazydata.buffer
    for _ in range(3):
        p.assign(p * 2 + 1).realize()  # read at its own index: written in place
        assert p.lazydata.buffer is own
    q = Tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    for _ in range(3):
        q.assign(q.flip(0) + 1).realize()  # read at another index: a new buffer, every time
    np.testing.assert_array_equal(p.numpy(), ((np.arange(12).reshape(4, 3) * 2 + 1) * 2 + 1) * 2 + 1)
    np.testing.assert_array_equal(q.numpy(), np.arange(12).reshape(4, 3)[::-1] + 3)
    assert fresh.STATS.hits >= 4


def train(steps: int, misses: list[int] | None = None) -> list[float]:
    Tensor.manual_seed(0)
    model = [nn.Linear(12, 32), nn.Linear(32, 5)]
    params = [t for layer in model for t in (layer.weight, layer.bias)]
    opt = optim.AdamW(params, lr=1e-2)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x = Tensor(rng.standard_normal((16, 12)).astype(np.float32))
        y = Tensor(rng.integers(0, 5, 16))
        loss = model[1](model[0](x).gelu()).cross_entropy(y)
        loss.backward()
        optim.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        if misses is not None:
            misses.append(schedule_cache.STATS.misses)
    return losses


def test_eager_training_steps_stop_scheduling_and_train_as_without_the_cache(fresh, monkeypatch):
    misses: list[int] = []
    cached = train(4, misses)
    assert misses[1] == misses[2] == misses[3] and fresh.STATS.hits > 0  # steps 3 and 4 schedule nothing new
    monkeypatch.setattr(schedule_cache, "SCHEDULES", NoCache())
    assert train(4) == cached
