"""stage3_compiler: the lazy fusion compiler. stage2's Tensor API, but lazy: ops build a graph on a
small primitive set (ops.py), and realize() schedules it into fused kernels, generates their C,
compiles and runs them."""

from . import nn, optim, viz
from .device import Device
from .dtype import DType, dtypes
from .engine.realize import GlobalCounters
from .graph.symbolic import Variable
from .jit import JitError, TinyJit
from .ops import Ops
from .tensor import Tensor

__all__ = ["DType", "Device", "GlobalCounters", "JitError", "Ops", "Tensor", "TinyJit", "Variable", "dtypes", "nn",
           "optim", "viz"]
