"""Linear algebra and the NN functional ops. matmul and solve call kernels; the rest are composites
written on the primitives (the same text in every stage)."""

from __future__ import annotations

import math
from typing import Self

from .autocast import lowered, widened
from .autograd import no_grad, record
from .device import check, check_same
from .dtype import compute_of, dtypes, float_of, promote
from .errors import ArgumentError
from .gemm import batched_matmul
from .hooks import TensorCore
from .ops import Ops
from .shape import broadcast_shapes, normalize_axis


def _product(dtype, out, a3, b3, count: int, M: int, N: int, K: int) -> None:
    """out = a3 @ b3 (count products of one dtype) on their device: the CPU's GEMM ladder, or the device's runtime."""
    if out.device == "CPU":
        batched_matmul(dtype, out, a3, b3, count, M, N, K)
    else:
        check(out._buf.kernels.matmul(dtype.code, out._ptr(), a3._ptr(), b3._ptr(), count, M, N, K),
              "matmul", "matmul", a3, b3)


class FunctionalMixin(TensorCore):
    # ---- linear algebra ----

    def matmul(self, x, reflected: bool = False) -> Self:
        """numpy's matmul: 1-D operands gain a dim that is dropped again; batch dims broadcast."""
        a, b = (x, self) if reflected else (self, x)
        a, b = lowered(*(t if isinstance(t, TensorCore) else self._like(t) for t in (a, b)))
        return a._matmul(b)

    def _matmul(a, b) -> Self:  # (a's and b's own types: what autocast chose, or what they had)
        check_same("matmul", a, b)
        if a.ndim == 0 or b.ndim == 0:
            raise ArgumentError(f"matmul: both operands need at least 1 dim, got shapes {a.shape} and {b.shape}")
        dtype = promote(a.dtype, b.dtype)
        if dtype is dtypes.bool:
            raise TypeError(f"matmul: bool operands are not supported (shapes {a.shape} and {b.shape})")
        wide = dtypes.int64 if dtype is dtypes.uint64 else compute_of(dtype)  # (the GEMMs take no uint64)
        if wide is not dtype and not dtype.is_half:  # the small ints multiply in int64 (low bits wrap alike)
            return a.cast(dtype).cast(wide)._matmul(b.cast(dtype).cast(wide)).cast(dtype)
        a2 = a.unsqueeze(0) if a.ndim == 1 else a
        b2 = b.unsqueeze(-1) if b.ndim == 1 else b
        (M, K), (K2, N) = a2.shape[-2:], b2.shape[-2:]
        if K != K2:
            raise ArgumentError(f"matmul: shapes {a.shape} and {b.shape} are not aligned: "
                                f"expected a.shape[-1] ({K}) == b.shape[-2] ({K2})")
        try:
            batch = broadcast_shapes("matmul", a2.shape[:-2], b2.shape[:-2])
        except ValueError:
            raise ArgumentError(f"matmul: the batch dims of shapes {a.shape} and {b.shape} cannot broadcast") from None
        count = math.prod(batch)
        if a2.ndim > 2 and b2.ndim == 2:
            # (..., M, K) @ (K, N) is one (count*M, K) @ (K, N) GEMM: fold the batch into the rows
            # instead of copying b once per batch (a Linear layer on a (B, T, C) input).
            out = a2.reshape(count * M, K)._matmul(b2).reshape(batch + (M, N))
            return out.squeeze(-1) if b.ndim == 1 else out
        a3 = a2.cast(dtype)._broadcast_to(batch + (M, K))
        b3 = b2.cast(dtype)._broadcast_to(batch + (K, N))
        # The CPU's float32 and bfloat16 rungs read any view through its strides (float16 through its float32
        # copy); other kernels take row-major.
        if (dtype is not dtypes.float32 and not dtype.is_half) or a3.device != "CPU":
            a3, b3 = a3.contiguous(), b3.contiguous()
        out = a3._alloc(batch + (M, N), dtype)
        if dtype is dtypes.float16:  # the float32 GEMM on widened copies, rounded once: the graph keeps the halves
            with no_grad():
                product, f32 = a3._alloc(batch + (M, N), dtypes.float32), dtypes.float32
                _product(f32, product, a3.cast(f32), b3.cast(f32), count, M, N, K)
                out = product.cast(dtype)
        else:  # bfloat16 too: the CPU's bfloat16 rung, the cuda device's tensor-core rung
            _product(dtype, out, a3, b3, count, M, N, K)
        out = record(out, Ops.MATMUL, (a3, b3))
        if a.ndim == 1:
            out = out.squeeze(-2)
        if b.ndim == 1:
            out = out.squeeze(-1)
        return out

    def dot(self, x) -> Self:
        return self.matmul(x)

    def linear(self, weight, bias=None) -> Self:
        """x @ weight + bias, weight shaped (in, out) as in tinygrad."""
        x, weight, bias = lowered(self, weight, bias)
        out = x @ weight
        return out if bias is None else out + bias

    def solve(self, b) -> Self:
        """x with self @ x = b for a square self (n, n); b is (n,) or (n, k). Float64 works best."""
        if self.ndim != 2 or self.shape[0] != self.shape[1]:
            raise ArgumentError(f"solve: expected a square matrix (n, n), got shape {self.shape}")
        n = self.shape[0]
        if b.ndim not in (1, 2) or b.shape[0] != n:
            raise ArgumentError(f"solve: b must be ({n},) or ({n}, k), got shape {b.shape}")
        check_same("solve", self, b)
        if self.device != "CPU":
            # No solver on other devices: a small dense solve runs on the CPU with our C kernel, and
            # the answer is copied back.
            return self.to("CPU").solve(b.to("CPU")).to(self.device)
        dtype = float_of(promote(self.dtype, b.dtype))
        # The kernel works in place, so hand it private copies.
        a_work = self.cast(dtype).clone()
        rhs = b.reshape(n, -1).cast(dtype).clone()
        if a_work._buf.kernels.solve(dtype.code, a_work._ptr(), rhs._ptr(), n, rhs.shape[1]) != 0:
            raise ArgumentError(f"solve: the matrix of shape {self.shape} is singular")
        return rhs.reshape(b.shape)

    # ---- normalisation and activation helpers ----

    def layernorm(self, axis=-1, eps: float = 1e-5) -> Self:
        x = widened(self)
        x = x.cast(float_of(x.dtype))
        centered = x - x.mean(axis, keepdim=True)
        return centered * (centered.square().mean(axis, keepdim=True) + eps).rsqrt()

    def batchnorm(self, weight, bias, mean, invstd, axis=1) -> Self:
        """(x - mean) * invstd * weight + bias with statistics already computed: mean, invstd (1 /
        sqrt(var + eps)), weight and bias (either may be None) are indexed by the dims in `axis` (an
        int or a tuple) and broadcast over the others. BatchNorm, GroupNorm and InstanceNorm end here."""
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        axes = tuple(normalize_axis("batchnorm", a, self.ndim, self.shape) for a in axes)
        shape = tuple(s if d in axes else 1 for d, s in enumerate(self.shape))

        def along(name: str, t):
            if t.shape != tuple(self.shape[d] for d in axes):
                raise ArgumentError(f"batchnorm: {name} has shape {t.shape}, expected the sizes of axis {axis} "
                                    f"of input {self.shape}: {tuple(self.shape[d] for d in axes)}")
            return t.reshape(shape)

        x = (self - along("mean", mean)) * along("invstd", invstd)
        if weight is not None:
            x = x * along("weight", weight)
        return x if bias is None else x + along("bias", bias)

    def dropout(self, p: float = 0.5) -> Self:
        if not 0 <= p <= 1:
            raise ArgumentError(f"dropout: p must be in [0, 1], got {p}")
        if not self.training or p == 0:
            return self
        if p == 1:
            return self * 0
        keep = self.rand(*self.shape, device=self.device) >= p
        return keep.where(self * (1 / (1 - p)), 0.0)

    def one_hot(self, num_classes: int) -> Self:
        if not self.dtype.is_int:
            raise TypeError(f"one_hot: expected an int tensor, got {self.dtype.name}")
        return self._one_hot(num_classes, dtypes.default_int)  # ints, as torch and tinygrad give

    def _one_hot(self, num_classes: int, dtype) -> Self:
        return (self.unsqueeze(-1) == self.arange(num_classes, device=self.device)).cast(dtype)

    # ---- attention ----

    def scaled_dot_product_attention(self, key, value, attn_mask=None, dropout_p: float = 0.0,
                                     is_causal: bool = False, enable_gqa: bool = False) -> Self:
        """softmax(q @ k^T / sqrt(d) + mask) @ v; self is the query (..., H, T, d). With enable_gqa,
        key and value may have fewer heads (dim -3), each shared by a group of query heads."""
        self, key, value = lowered(self, key, value)  # (autocast: the heads in its half type)
        if enable_gqa and self.ndim >= 3 and key.ndim >= 3 and key.shape[-3] != self.shape[-3]:
            if key.shape[-3] == 0 or self.shape[-3] % key.shape[-3] or value.shape[-3] != key.shape[-3]:
                raise ArgumentError(f"scaled_dot_product_attention: {self.shape[-3]} query heads cannot share "
                                    f"key {key.shape} and value {value.shape} heads in equal groups")
            group = self.shape[-3] // key.shape[-3]
            key, value = key.repeat_interleave(group, -3), value.repeat_interleave(group, -3)
        scores = self @ key.transpose(-2, -1) * (1 / math.sqrt(self.shape[-1]))  # (..., T, S)
        if is_causal:
            T, S = scores.shape[-2:]
            # the causal mask as a comparison of row and column indices, not a tril of ones: two ops
            # the scores kernel computes in its loop instead of a (T, S) buffer a kernel writes first
            attn_mask = self.arange(T, device=self.device).unsqueeze(-1) >= self.arange(S, device=self.device)
        if attn_mask is not None:
            if attn_mask.dtype is dtypes.bool:
                scores = attn_mask.where(scores, float("-inf"))
            else:
                scores = scores + attn_mask
        return scores.softmax(-1).dropout(dropout_p) @ value

    def tril(self, diagonal: int = 0) -> Self:
        rows, cols = self.shape[-2:]
        keep = self.arange(rows, device=self.device).unsqueeze(-1) + diagonal >= self.arange(cols, device=self.device)
        return keep.where(self, self.zeros_like())

    def triu(self, diagonal: int = 0) -> Self:
        rows, cols = self.shape[-2:]
        keep = self.arange(rows, device=self.device).unsqueeze(-1) + diagonal <= self.arange(cols, device=self.device)
        return keep.where(self, self.zeros_like())

    # ---- losses ----

    def sparse_categorical_crossentropy(self, Y, ignore_index: int = -1, label_smoothing: float = 0.0,
                                        reduction: str = "mean", name: str = "sparse_categorical_crossentropy") -> Self:
        """self: logits (..., C); Y: class indices (...). Entries equal to ignore_index count for nothing."""
        C = self.shape[-1]
        if Y.shape != self.shape[:-1]:
            raise ArgumentError(f"{name}: targets {Y.shape} must match logits {self.shape} "
                                "without the last dim")
        mask = Y != ignore_index
        labels = mask.where(Y, 0)
        shapes = f"(logits {self.shape}, targets {Y.shape})"
        labels._check_range(C, lambda low, top: IndexError(
            f"{name}: target labels must lie in [0, {C}) or equal ignore_index {ignore_index}; "
            f"got values in [{low}, {top}] {shapes}"))
        # log_softmax's value at the label, x[label] - max - log(sum(exp(x - max))), with x[label]
        # picked from x itself: that sum reads only x, so it shares the max's loop over the classes
        x = widened(self)
        x = x.cast(float_of(x.dtype))
        m = x.max(-1, keepdim=True)
        log_sum = (x - m).exp().sum(-1, keepdim=True).log()
        picked = ((x * labels._one_hot(C, x.dtype)).sum(-1, keepdim=True) - m - log_sum).squeeze(-1)
        nll = -picked if label_smoothing == 0 else \
            -(1 - label_smoothing) * picked - label_smoothing * self.log_softmax(-1).mean(-1)
        nll = mask.where(nll, 0.0)
        return _reduce_loss(nll, reduction, mask.sum(), "sparse_categorical_crossentropy")

    def cross_entropy(self, Y, reduction: str = "mean", label_smoothing: float = 0.0) -> Self:
        """self: logits (N, C, ...) or (C,); Y: indices (N, ...) or probabilities like self (torch)."""
        axis = 1 if self.ndim >= 2 else 0
        logits = self.transpose(axis, -1) if axis == 1 and self.ndim > 2 else self
        if Y.dtype.is_float:
            target = Y.transpose(axis, -1) if axis == 1 and self.ndim > 2 else Y
            C = logits.shape[-1]
            target = target * (1 - label_smoothing) + label_smoothing / C
            nll = -(logits.log_softmax(-1) * target).sum(-1)
            return _reduce_loss(nll, reduction, None, "cross_entropy")
        return logits.sparse_categorical_crossentropy(Y, ignore_index=-100, label_smoothing=label_smoothing,
                                                      reduction=reduction, name="cross_entropy")

    def binary_crossentropy(self, Y, reduction: str = "mean") -> Self:
        """self: probabilities in [0, 1]; log is clamped at -100 like torch."""
        p = widened(self)
        logp = p.log().maximum(-100)
        log1mp = (1 - p).log().maximum(-100)
        return _reduce_loss(-(Y * logp + (1 - Y) * log1mp), reduction, None, "binary_crossentropy")

    def binary_crossentropy_logits(self, Y, reduction: str = "mean", pos_weight=None) -> Self:
        """self: logits; computed as max(x, 0) - x*y + log(1 + exp(-|x|)), stable for large |x|.
        pos_weight scales the positive term: (1 - y) x + (1 + (w - 1) y) log(1 + exp(-x)), as torch."""
        x = widened(self)
        x = x.cast(float_of(x.dtype))
        if pos_weight is None:
            loss = x.maximum(0) - x * Y + (1 + (-x.abs()).exp()).log()
        else:
            softplus_neg = (-x).maximum(0) + (1 + (-x.abs()).exp()).log()  # log(1 + exp(-x))
            loss = (1 - Y) * x + (1 + (pos_weight - 1) * Y) * softplus_neg
        return _reduce_loss(loss, reduction, None, "binary_crossentropy_logits")


def _reduce_loss(loss, reduction: str, count, name: str):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / count if count is not None else loss.mean()
    raise ArgumentError(f"{name}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")

