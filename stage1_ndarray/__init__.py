"""stage1_ndarray: a strided n-dimensional array on C kernels (forward only, no autograd)."""

from .dtype import DType, dtypes
from .tensor import Tensor

__all__ = ["DType", "Tensor", "dtypes"]
