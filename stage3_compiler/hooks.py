"""The hooks the API is layered on. tensor.py's Tensor implements them; each mixin (movement.py,
elementwise.py, reduce.py, functional.py) builds its section of the API on them and on the
sections below it, and never imports Tensor. A mixin makes a new tensor through `_make` (over a
node of the lazy graph) or `_like`, on the device of the tensor it was called on, and asks
`isinstance(x, TensorCore)` whether an argument is a tensor.
"""

from __future__ import annotations

from typing import Any, Self

from .dtype import DType
from .shape import Shape


class TensorCore:
    """What every mixin may rely on: the graph node and the constructors of tensor.py."""

    shape: Shape
    dtype: DType
    device: str
    training: bool
    lazydata: Any  # the LazyBuffer this tensor stands for (graph/lazy.py)

    @staticmethod
    def _make(lazydata: Any) -> Any:
        """A tensor over a node of the graph."""
        raise NotImplementedError

    def _like(self, data: Any, dtype: DType | None = None) -> Self:
        """A tensor of `data` (a Python scalar, a list, a numpy array) on self's device."""
        raise NotImplementedError

    def _check_dims(self, op: str, shape: Shape) -> Shape:
        """shape, if a tensor may have it (at most MAX_DIMS dims)."""
        raise NotImplementedError

    def cast(self, dtype: Any) -> Self:
        raise NotImplementedError

    def _check_range(self, high: int, fail: Any) -> None:
        """Raise fail(lowest, highest) unless every value of this int tensor lies in [0, high): an index
        bound that only the data knows (eager stages: now; the lazy stage: at the next realize)."""
        raise NotImplementedError

    def contiguous(self) -> Self:
        raise NotImplementedError
