"""numpy references, in float64, for the ops numpy has no twin for.

Each is the textbook definition written for clarity, not speed: the catalogue calls them on
float64 copies of the inputs and casts the answer to the dtype the contract promises.
"""

from __future__ import annotations

import math

import numpy as np

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


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1) -> np.ndarray:
    """Cross-correlation of x (N, C, H, W) with w (O, C/groups, kh, kw), summed tap by tap."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, ho, wo))
    for g in range(groups):
        xg, wg = x[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    if b is not None:
        out += b.reshape(1, o, 1, 1)
    return out


def pool2d(x, kernel_size=(2, 2), stride=None, padding=0, dilation=1, mode="max") -> np.ndarray:
    """Max or average pooling over the last two axes; average counts the zero padding (the
    default of tinygrad and torch), max pads with -inf."""
    (kh, kw) = _pair(kernel_size)
    (sh, sw) = _pair(stride if stride is not None else kernel_size)
    (ph, pw), (dh, dw) = _pair(padding), _pair(dilation)
    fill = -np.inf if mode == "max" else 0.0
    pads = [(0, 0)] * (x.ndim - 2) + [(ph, ph), (pw, pw)]
    xp = np.pad(x, pads, constant_values=fill)
    h, w = x.shape[-2:]
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    taps = [xp[..., i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw]
            for i in range(kh) for j in range(kw)]
    stacked = np.stack(taps)
    return stacked.max(axis=0) if mode == "max" else stacked.mean(axis=0)


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


def binary_crossentropy_logits(x, y) -> np.ndarray:
    return binary_crossentropy(sigmoid(x), y)
