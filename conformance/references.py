"""numpy references for the catalogue: twins of movement ops whose numpy spelling differs, the
float64 definitions of ops numpy has no twin for (gelu, softmax, attention, losses...; convolution,
pooling and scatter are in references_conv.py),
and the laws that random ops must follow.

Each is the textbook definition written for clarity, not speed: the catalogue calls them on
float64 copies of the inputs and casts the answer to the dtype the contract promises.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .cases import expect

# ---- movement and reductions whose numpy spelling differs ----


def shrink(a: np.ndarray, arg: tuple) -> np.ndarray:
    return a[tuple(slice(None) if p is None else slice(*p) for p in arg)]


def pad(a: np.ndarray, arg: tuple) -> np.ndarray:
    return np.pad(a, [(0, 0) if p is None else p for p in arg])


def pad_mode(a: np.ndarray, arg: tuple, mode: str) -> np.ndarray:
    """pad(mode=...) as torch: a negative amount crops first, then numpy's mode pads what is left."""
    pairs = [(0, 0) if p is None else p for p in arg]
    a = a[tuple(slice(max(-b, 0), n - max(-e, 0)) for n, (b, e) in zip(a.shape, pairs, strict=True))]
    return np.pad(a, [(max(b, 0), max(e, 0)) for b, e in pairs],
                  mode={"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode])


def pad_flat(a: np.ndarray, flat: tuple, value: float) -> np.ndarray:
    """torch's flat padding, last dim first: (left, right, top, bottom, ...); a negative amount crops."""
    pairs = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)][::-1]
    pairs = [(0, 0)] * (a.ndim - len(pairs)) + pairs
    a = a[tuple(slice(max(-b, 0), n - max(-e, 0)) for n, (b, e) in zip(a.shape, pairs, strict=True))]
    return np.pad(a, [(max(b, 0), max(e, 0)) for b, e in pairs], constant_values=value)


def getitem_torch(a: np.ndarray, key: Any) -> np.ndarray:
    """torch's (and tinygrad's) indexing where it differs from numpy's: an int beside index arrays
    selects first, like a basic index, so it neither joins the arrays' broadcast nor separates them;
    a list holding arrays or slices is a tuple of indices."""
    if isinstance(key, list) and any(isinstance(k, (list, tuple, np.ndarray, slice)) for k in key):
        key = tuple(key)
    key = key if isinstance(key, tuple) else (key,)
    is_int = [isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in key]
    # first the ints (None and ... as they are, everything else kept whole), then the rest on what is left
    ints = tuple(k if i or k is None or k is Ellipsis else slice(None) for k, i in zip(key, is_int, strict=True))
    rest = tuple(slice(None) if k is None else k for k, i in zip(key, is_int, strict=True) if not i)
    return a[ints][rest]


def squeeze(a: np.ndarray, axis: Any = None) -> np.ndarray:
    """torch and tinygrad leave a dim that is not 1 alone where numpy would raise."""
    if axis is None:
        return np.squeeze(a)
    return np.squeeze(a, axis) if a.shape[axis] == 1 else a


def expand(a: np.ndarray, shape: tuple) -> np.ndarray:
    """-1 keeps the size of the dim it lines up with (from the right)."""
    shape = tuple(a.shape[i - len(shape) + a.ndim] if n == -1 else n for i, n in enumerate(shape))
    return np.broadcast_to(a, shape)


def unflatten(a: np.ndarray, dim: int, sizes: tuple) -> np.ndarray:
    d = dim % a.ndim
    return a.reshape(a.shape[:d] + tuple(sizes) + a.shape[d + 1:])


def chunk(a: np.ndarray, chunks: int, dim: int = 0) -> list[np.ndarray]:
    size = -(-a.shape[dim] // chunks)
    return np.split(a, range(size, a.shape[dim], size), axis=dim)


def split(a: np.ndarray, sizes: Any, dim: int = 0) -> list[np.ndarray]:
    if isinstance(sizes, int):
        return np.split(a, range(sizes, a.shape[dim], sizes), axis=dim)
    return np.split(a, np.cumsum(sizes)[:-1], axis=dim)


def flatten(a: np.ndarray, start_dim: int = 0, end_dim: int = -1) -> np.ndarray:
    """torch's flatten: a 0-d tensor becomes shape (1,)."""
    if a.ndim == 0:
        return a.reshape(1)
    s, e = start_dim % a.ndim, end_dim % a.ndim
    return a.reshape(a.shape[:s] + (math.prod(a.shape[s:e + 1]),) + a.shape[e + 1:])


def var(a: np.ndarray, axis: Any, keepdim: bool, correction: int = 1) -> np.ndarray:
    return np.var(a, axis=axis, keepdims=keepdim, ddof=correction)


def std(a: np.ndarray, axis: Any, keepdim: bool, correction: int = 1) -> np.ndarray:
    return np.std(a, axis=axis, keepdims=keepdim, ddof=correction)


def arg_extreme(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """numpy's argmax/argmin already return the first index of the extreme value; axis=None is
    the index into the flattened tensor."""

    def ref(a: np.ndarray, axis: Any, keepdim: bool) -> np.ndarray:
        if axis is None:
            return np.asarray(fn(a.reshape(-1))).reshape((1,) * a.ndim if keepdim else ())
        return fn(a, axis=axis, keepdims=keepdim)

    return ref


# ---- elementwise, reductions and NN functional, in float64 ----

_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x: np.ndarray) -> np.ndarray:
    return _erf(x) if x.size else np.zeros(x.shape)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact gelu: x * Phi(x)."""
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def silu(x: np.ndarray) -> np.ndarray:
    return x * sigmoid(x)


def leaky_relu(x: np.ndarray, neg_slope: float = 0.01) -> np.ndarray:
    return np.where(x > 0, x, x * neg_slope)


def logsumexp(x: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True) if x.size else np.zeros([1] * x.ndim)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return x - logsumexp(x, axis=axis, keepdims=True)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.exp(log_softmax(x, axis))


def layernorm(x: np.ndarray, axis: int = -1, eps: float = 1e-5) -> np.ndarray:
    mean = x.mean(axis=axis, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axis, keepdims=True)  # biased, as in torch and tinygrad
    return (x - mean) / np.sqrt(var + eps)


def batchnorm(x, weight, bias, mean, invstd, axis=1):
    """(x - mean) * invstd * weight + bias, the four indexed by the dims in axis (numpy or torch arrays)."""
    axes = {a % x.ndim for a in ((axis,) if isinstance(axis, int) else axis)}
    shape = [s if d in axes else 1 for d, s in enumerate(x.shape)]
    return (x - mean.reshape(shape)) * invstd.reshape(shape) * weight.reshape(shape) + bias.reshape(shape)


def attention(q, k, v, attn_mask=None, is_causal=False) -> np.ndarray:
    """softmax(q k^T / sqrt(d) + mask) v over the last two axes."""
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        lq, lk = scores.shape[-2:]
        scores = np.where(np.tril(np.ones((lq, lk), dtype=bool)), scores, -np.inf)
    if attn_mask is not None:
        scores = np.where(attn_mask, scores, -np.inf) if attn_mask.dtype == bool else scores + attn_mask
    return softmax(scores, -1) @ v


def cross_entropy(x, y) -> np.ndarray:
    """Mean over the batch of -log softmax(x)[target]; y holds class indices (int) or
    probabilities (float) over the class axis 1, as in torch."""
    logp = log_softmax(x, axis=1)
    if np.issubdtype(y.dtype, np.integer):
        picked = np.take_along_axis(logp, np.expand_dims(y, 1), axis=1)
        return -picked.mean()
    return -(y * logp).sum(axis=1).mean()


def sparse_categorical_crossentropy(x, y, ignore_index=-1) -> np.ndarray:
    """Mean of -log softmax(x)[y] over the entries whose label is not ignore_index; classes on the
    last axis (tinygrad)."""
    logp = log_softmax(x, axis=-1)
    keep = y != ignore_index
    safe = np.where(keep, y, 0)
    picked = np.take_along_axis(logp, safe[..., None], axis=-1)[..., 0]
    return -(picked * keep).sum() / keep.sum()


def binary_crossentropy(p, y) -> np.ndarray:
    return -(y * np.log(p) + (1 - y) * np.log(1 - p)).mean()


def nll_loss(x, y, weight=None, ignore_index: int = -100, reduction: str = "mean") -> np.ndarray:
    """torch's nll_loss: class dim 1 (or 0 for one sample), weights of the kept targets as the mean's divisor."""
    x = np.moveaxis(x, 1, -1) if x.ndim >= 2 else x
    kept = y != ignore_index
    labels = np.where(kept, y, 0)
    picked = np.take_along_axis(x, labels[..., None], -1)[..., 0]
    w = np.where(kept, (weight[labels] if weight is not None else 1.0), 0.0)
    loss = -w * np.where(kept, picked, 0.0)
    return {"none": loss, "sum": loss.sum(), "mean": loss.sum() / w.sum()}[reduction]


def binary_crossentropy_logits(x, y) -> np.ndarray:
    return binary_crossentropy(sigmoid(x), y)


# ---- random ops: laws, not values ----


def random_law(lo: float, hi: float, mean: float, std: float) -> Callable[..., None]:
    """Values in [lo, hi), and a sample mean/std within 7 standard errors of the law's."""

    def check(x: np.ndarray, **_: Any) -> None:
        expect(x.size and np.all(x >= lo) and np.all(x < hi), (x.min(), x.max()))
        n = x.size
        expect(abs(x.mean() - mean) < 7 * std / math.sqrt(n) + 1e-3, x.mean())
        expect(abs(x.std() - std) < 0.05 * std + 1e-3, x.std())

    return check


def init_law(bound: Callable[[tuple], float]) -> Callable[..., None]:
    """Weight initialisers: uniform in [-bound, bound], reaching near the bound, centred."""

    def check(x: np.ndarray, shape: tuple, **_: Any) -> None:
        b = bound(shape)
        expect(np.all(np.abs(x) <= b), (np.abs(x).max(), b))
        expect(np.abs(x).max() > 0.8 * b and abs(x.mean()) < 0.1 * b, (np.abs(x).max(), x.mean(), b))

    return check


def normal_init_law(std: Callable[[tuple], float]) -> Callable[..., None]:
    """Normal initialisers: centred, with the law's standard deviation (to 5%)."""

    def check(x: np.ndarray, shape: tuple, **_: Any) -> None:
        s = std(shape)
        expect(abs(x.mean()) < 7 * s / math.sqrt(x.size) and abs(x.std() - s) < 0.05 * s, (x.mean(), x.std(), s))

    return check


def kaiming_bound(shape: tuple, a: float = 0.01) -> float:
    return math.sqrt(2.0 / (1 + a * a)) * math.sqrt(3.0 / math.prod(shape[1:]))


def glorot_bound(shape: tuple) -> float:
    return math.sqrt(6.0 / (shape[0] + math.prod(shape[1:])))


def three_draws(T, seed: int):
    """Two draws after the same seed, the draw that follows the second, and one after another seed."""
    T.manual_seed(seed)
    a = T.rand(64).numpy()
    T.manual_seed(seed)
    b = T.rand(64).numpy()
    following = T.rand(64).numpy()
    T.manual_seed(seed + 1)
    c = T.rand(64).numpy()
    return a, b, following, c


def seed_law(draws, **_: Any) -> None:
    a, b, following, c = draws
    expect(np.array_equal(a, b), "the same seed must give the same draw")
    expect(not np.array_equal(b, following), "the stream must move on after a draw")
    expect(not np.array_equal(a, c), "another seed must give another draw")


def randint_law(x: np.ndarray, low: int, high: int, **_: Any) -> None:
    expect(x.dtype in (np.int32, np.int64), x.dtype)
    expect(np.all(x >= low) and np.all(x < high), (x.min(), x.max()))
    expect(set(np.unique(x)) == set(range(low, high)), np.unique(x))


def bernoulli_law(x: np.ndarray, **_: Any) -> None:
    """0s and 1s, a quarter of them 1 (the case's probabilities are all 0.25)."""
    expect(set(np.unique(x)) <= {0.0, 1.0}, np.unique(x))
    expect(abs(x.mean() - 0.25) < 7 * math.sqrt(0.25 * 0.75 / x.size), x.mean())


def multinomial_law(x: np.ndarray, **_: Any) -> None:
    """Draws from the case's weights (1, 2, 0, 5) / 8, one row of samples a row of weights."""
    p = np.array([1, 2, 0, 5]) / 8
    expect(x.dtype.kind == "i" and x.min() >= 0 and x.max() < 4, (x.dtype, x.min(), x.max()))
    for row in x.reshape(-1, x.shape[-1]):
        share = np.bincount(row, minlength=4) / row.size
        expect(np.all(np.abs(share - p) < 7 * np.sqrt(p * (1 - p) / row.size) + 1e-9), share)


def randperm_law(x: np.ndarray, **_: Any) -> None:
    expect(x.dtype.kind == "i" and np.array_equal(np.sort(x), np.arange(x.size)), x)
    expect(x.size < 10 or not np.array_equal(x, np.arange(x.size)), x)


def dropout_train(T, x, p: float):
    """x and x.dropout(p) with Tensor.training switched on for the call only."""
    old = T.training
    T.training = True
    try:
        return x, x.dropout(p)
    finally:
        T.training = old


def dropout_law(got: Any, p: float) -> None:
    """Each element is dropped (0) or scaled by 1/(1-p); about a fraction p is dropped."""
    x, y = (t.numpy().astype(np.float64) for t in got)
    kept = y != 0
    np.testing.assert_allclose(y[kept], x[kept] / (1 - p), rtol=1e-6)
    n = x.size
    expect(abs((~kept).mean() - p) < 7 * math.sqrt(p * (1 - p) / n), (~kept).mean())
