"""tinygrad's sampling helpers, written once on rand and the Tensor API and shared by every stage (this
file is byte-identical in stage1, stage2 and stage3). Each stage's random stream (random.py) draws
the numbers, so a seed gives the same samples as the stage's own rand would.
"""

from __future__ import annotations

from typing import Self

from .dtype import dtypes
from .errors import ArgumentError
from .hooks import TensorCore


class SamplingMixin(TensorCore):
    def _like_kwargs(self, kwargs: dict) -> dict:
        dtype = self.dtype if self.dtype.is_float else dtypes.default_float
        return {"dtype": dtype, "device": self.device, **kwargs}

    def rand_like(self, **kwargs) -> Self:
        """Uniform [0, 1) numbers of self's shape, dtype (float) and device."""
        return self.rand(*self.shape, **self._like_kwargs(kwargs))

    def randn_like(self, **kwargs) -> Self:
        return self.randn(*self.shape, **self._like_kwargs(kwargs))

    def empty_like(self, **kwargs) -> Self:
        return self.empty(*self.shape, **{"dtype": self.dtype, "device": self.device, **kwargs})

    def bernoulli(self) -> Self:
        """self holds probabilities: 1 with that probability, else 0, in self's float dtype."""
        if not self.dtype.is_float:
            raise TypeError(f"bernoulli: expected float probabilities, got {self.dtype.name} of shape {self.shape}")
        return (self.rand_like() < self).cast(self.dtype)

    def multinomial(self, num_samples: int = 1, replacement: bool = False) -> Self:
        """Class indices drawn with the probabilities of self's weights (1-D, or 2-D: one row a draw):
        a uniform number falls into one step of the weights' running sum. Without replacement only
        one sample is drawn, as in tinygrad."""
        if self.ndim not in (1, 2) or not self.dtype.is_float or 0 in self.shape:
            raise ArgumentError(f"multinomial: expected float weights of shape (n,) or (rows, n) with n > 0, "
                                f"got {self.dtype.name} {self.shape}")
        if not isinstance(num_samples, int) or num_samples < 1 or (not replacement and num_samples != 1):
            raise ArgumentError(f"multinomial: num_samples must be >= 1, and 1 without replacement, got {num_samples}")
        weights = self if self.ndim == 2 else self.unsqueeze(0)
        steps = weights.cumsum(1)
        steps = (steps / steps[:, -1:]).unsqueeze(1)  # (rows, 1, n), its last step exactly 1
        draws = self.rand(weights.shape[0], num_samples, 1, dtype=self.dtype, device=self.device)
        picked = (draws >= steps).sum(2)  # the steps a draw has passed: its class
        return picked if self.ndim == 2 else picked[0]

    @classmethod
    def randperm(cls, n: int, device: str | None = None, dtype=None) -> Self:
        """A random permutation of 0..n-1: the order that sorts n uniform numbers (n^2 work, as sort)."""
        if not isinstance(n, int) or n < 0:
            raise ArgumentError(f"randperm: n must be an int >= 0, got {n!r}")
        return cls.rand(n, device=device).argsort().cast(dtype or dtypes.default_int)
