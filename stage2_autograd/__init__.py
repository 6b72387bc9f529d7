"""stage2_autograd: stage1's strided array plus reverse-mode autodiff, `nn` layers and `optim`."""

from . import nn, optim
from .device import Device
from .dtype import DType, dtypes
from .tensor import Tensor

__all__ = ["DType", "Device", "Tensor", "dtypes", "nn", "optim"]
