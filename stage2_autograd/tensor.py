"""The Tensor: a typed, strided view (shape, strides, offset) over a Buffer we own.

This file holds the core (construction, properties, creation, conversion). The rest of the API
lives in mixins, one file per section of the API: movement.py, elementwise.py, reduce.py and
functional.py, each a layer on the hooks of hooks.py that this class implements, and autograd.py. Every
computation ends in a kernel of the tensor's device, `x._buf.kernels` (device.py), whose status
`check` reads; numpy only converts data in and out.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence

import numpy as np

from . import random, threads
from .autocast import autocast
from .autograd import AutogradMixin, check_requires_grad, record
from .ckernels import ffi, int64s
from .convolution import ConvolutionMixin
from .device import buffer_class, canonical, check
from .division import DivisionMixin
from .dtype import DType, cast_hub, dtypes, python_type, to_dtype
from .elementwise import ElementwiseMixin
from .errors import ArgumentError
from .functional import FunctionalMixin
from .movement import MovementMixin
from .ops import Ops
from .reduce import ReduceMixin
from .sampling import SamplingMixin
from .scatter import ScatterMixin
from .shape import MAX_DIMS, Shape, contiguous_strides, is_contiguous, merge_dims, prod
from .sorting import SortingMixin
from .surface import SurfaceMixin


def argfix(*x) -> tuple:
    """Accept both f(2, 3) and f((2, 3))."""
    if len(x) == 1 and isinstance(x[0], (tuple, list)):
        return tuple(x[0])
    return tuple(x)


def _check_shape(op: str, shape: Sequence[int]) -> Shape:
    shape = tuple(shape)
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise ArgumentError(f"{op}: shape must be non-negative ints, got {shape}")
    if len(shape) > MAX_DIMS:
        raise ArgumentError(f"{op}: at most {MAX_DIMS} dims are supported, got {len(shape)}")
    return tuple(int(n) for n in shape)


def _from_python(data, dtype: DType | None) -> np.ndarray:
    """Python scalars and (nested) lists enter through numpy, with our default dtypes."""
    try:
        arr = np.asarray(data)
    except ValueError:
        raise ArgumentError("Tensor: nested lists must be rectangular (ragged lists are not supported)") from None
    if arr.dtype == object:
        raise ArgumentError("Tensor: nested lists must be rectangular and hold only numbers")
    if dtype is None:
        if arr.dtype.kind == "f":
            dtype = dtypes.default_float
        elif arr.dtype.kind in "iu":
            dtype = dtypes.default_int
        elif arr.dtype.kind == "b":
            dtype = dtypes.bool
        else:
            raise TypeError(f"Tensor: cannot make a tensor from {arr.dtype} data")
    return arr.astype(dtype.np)


class Tensor(MovementMixin, ElementwiseMixin, ReduceMixin, FunctionalMixin,
             ConvolutionMixin, ScatterMixin, DivisionMixin, SamplingMixin, SortingMixin, SurfaceMixin, AutogradMixin):
    training: bool = False

    def __init__(self, data, dtype=None, device: str | None = None, requires_grad: bool | None = None):
        device = canonical("Tensor", device if device is not None or not isinstance(data, Tensor)
                           else data.device)  # a tensor stays where it is unless a device is named
        dtype = None if dtype is None else to_dtype(dtype, "Tensor")
        if isinstance(data, Tensor):
            src = (data if dtype is None else data.cast(dtype)).to(device)
            check_requires_grad("Tensor", src.dtype, requires_grad)
            self._setup(src._buf, src.shape, src._strides, src._offset, src.dtype, device, requires_grad)
            return
        if isinstance(data, np.ndarray):
            if dtype is None:
                dtype = to_dtype(data.dtype, "Tensor")
            else:
                to_dtype(data.dtype, "Tensor")  # only the types we know convert
            arr = data.astype(dtype.np)
        elif isinstance(data, (int, float, bool, list, tuple, np.generic)):
            arr = _from_python(data, dtype)
            dtype = to_dtype(arr.dtype, "Tensor")
        else:
            raise TypeError(f"Tensor: cannot make a tensor from {type(data).__name__}")
        shape = _check_shape("Tensor", arr.shape)
        buf = buffer_class("Tensor", device).from_numpy(arr)
        check_requires_grad("Tensor", dtype, requires_grad)
        self._setup(buf, shape, contiguous_strides(shape), 0, dtype, device, requires_grad)

    def _setup(self, buf, shape: Shape, strides: Shape, offset: int, dtype: DType, device: str,
               requires_grad: bool | None = None) -> None:
        """Every field of a tensor, set in one place."""
        self._buf, self.shape, self._strides, self._offset = buf, tuple(shape), tuple(strides), offset
        self.dtype, self.device, self.requires_grad, self.grad = dtype, device, requires_grad, None

    # ---- internal constructors: every op builds its result through these ----

    @staticmethod
    def _make(buf, shape: Shape, strides: Shape, offset: int, dtype: DType, device: str) -> Tensor:
        """The one private constructor: a view (shape, strides, offset) of dtype over buf."""
        out = Tensor.__new__(Tensor)
        out._setup(buf, shape, strides, offset, dtype, device)
        return out

    def _view(self, base: Tensor, shape: Shape, strides: Shape, offset: int) -> Tensor:
        """A tensor sharing base's memory. Callers keep every element inside the buffer."""
        if len(shape) > MAX_DIMS:
            raise ArgumentError(f"view: at most {MAX_DIMS} dims are supported, got shape {tuple(shape)}")
        out = Tensor._make(base._buf, shape, strides, offset, base.dtype, base.device)
        assert out._in_bounds(), f"view {shape} {strides} +{offset} steps outside its buffer"
        return out

    def _in_bounds(self) -> bool:
        """Every element a view can reach lies inside its buffer (kernels trust this)."""
        if prod(self.shape) == 0:
            return True
        lo = self._offset + sum((n - 1) * s for n, s in zip(self.shape, self._strides, strict=True) if s < 0)
        hi = self._offset + sum((n - 1) * s for n, s in zip(self.shape, self._strides, strict=True) if s > 0)
        return 0 <= lo and hi < max(self._buf.nbytes // self.dtype.itemsize, 1)

    def _alloc(self, shape: Shape, dtype: DType) -> Tensor:
        """A fresh contiguous tensor on self's device whose every element the caller will write."""
        return Tensor._whole(type(self._buf)(prod(shape) * dtype.itemsize), shape, dtype, self.device)

    @staticmethod
    def _empty(shape: Shape, dtype: DType, device: str) -> Tensor:
        """_alloc for the creation methods, which have a device name and no tensor yet."""
        return Tensor._whole(buffer_class("Tensor", device)(prod(shape) * dtype.itemsize), shape, dtype, device)

    @staticmethod
    def _whole(buf, shape: Shape, dtype: DType, device: str) -> Tensor:
        """A contiguous tensor over the whole of buf."""
        return Tensor._make(buf, shape, contiguous_strides(shape), 0, dtype, device)

    def _like(self, data, dtype: DType | None = None) -> Tensor:
        """A tensor of data (a Python scalar, a list, an array) on self's device."""
        return Tensor(data, dtype, self.device)

    def _ptr(self):
        return self._buf.ptr(self._offset, self.dtype)

    def _is_contiguous(self) -> bool:
        return is_contiguous(self.shape, self._strides)

    # ---- properties ----

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return prod(self.shape)

    @property
    def T(self) -> Tensor:
        return self.permute(*reversed(range(self.ndim)))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<Tensor {self.shape} {self.dtype.name} on {self.device}>"

    __hash__ = object.__hash__

    # ---- creation ----

    @staticmethod
    def full(shape, fill_value, dtype=None, device=None, **kwargs) -> Tensor:
        shape = _check_shape("full", argfix(shape) if not isinstance(shape, int) else (shape,))
        if dtype is None:
            dtype = _from_python(fill_value, None).dtype
        dtype = to_dtype(dtype, "full")
        out = Tensor._empty(shape, dtype, canonical("full", device))
        out._buf.fill(prod(shape), dtype, python_type(dtype)(fill_value))
        return out._tag(**kwargs)

    @staticmethod
    def zeros(*shape, dtype=None, **kwargs) -> Tensor:
        return Tensor.full(argfix(*shape), 0.0, dtype or dtypes.default_float, **kwargs)

    @staticmethod
    def ones(*shape, dtype=None, **kwargs) -> Tensor:
        return Tensor.full(argfix(*shape), 1.0, dtype or dtypes.default_float, **kwargs)

    @staticmethod
    def empty(*shape, dtype=None, device=None, **kwargs) -> Tensor:
        shape = _check_shape("empty", argfix(*shape))
        dtype = to_dtype(dtype or dtypes.default_float, "empty")
        return Tensor._empty(shape, dtype, canonical("empty", device))._tag(**kwargs)

    @staticmethod
    def arange(start, stop=None, step=1, dtype=None, device=None, **kwargs) -> Tensor:
        if stop is None:
            start, stop = 0, start
        if step == 0:
            raise ArgumentError("arange: step must not be zero")
        n = max(0, math.ceil((stop - start) / step))
        if dtype is None:
            is_int = all(isinstance(v, int) for v in (start, stop, step))
            dtype = dtypes.default_int if is_int else dtypes.default_float
        dtype = to_dtype(dtype, "arange")
        index = Tensor._iota(n, canonical("arange", device))
        wide = dtypes.float64 if dtype.is_float else dtypes.int64
        return (index.cast(wide) * step + start).cast(dtype)._tag(**kwargs)

    @staticmethod
    def _iota(n: int, device: str) -> Tensor:
        out = Tensor._empty((n,), dtypes.int64, device)
        out._buf.kernels.iota(ffi.cast("int64_t *", out._ptr()), n)
        return out

    @staticmethod
    def linspace(start, stop, steps: int, dtype=None, device=None, **kwargs) -> Tensor:
        if steps < 0:
            raise ArgumentError(f"linspace: steps must be non-negative, got {steps}")
        dtype = to_dtype(dtype or dtypes.default_float, "linspace")
        device = canonical("linspace", device)
        if steps == 1:
            return Tensor.full((1,), start, dtype, device, **kwargs)
        step = (stop - start) / max(steps - 1, 1)
        return (Tensor._iota(steps, device).cast(dtypes.float64) * step + start).cast(dtype)._tag(**kwargs)

    @staticmethod
    def eye(n: int, m: int | None = None, dtype=None, device=None, **kwargs) -> Tensor:
        m = n if m is None else m
        device = canonical("eye", device)
        rows, cols = Tensor._iota(n, device).reshape(n, 1), Tensor._iota(m, device).reshape(1, m)
        return (rows == cols).cast(dtype or dtypes.default_float)._tag(**kwargs)

    @staticmethod
    def manual_seed(seed: int = 0) -> None:
        random.manual_seed(seed)

    @staticmethod
    def rand(*shape, dtype=None, device=None, **kwargs) -> Tensor:
        shape = _check_shape("rand", argfix(*shape))
        dtype = to_dtype(dtype or dtypes.default_float, "rand")
        if not dtype.is_float:
            raise TypeError(f"rand: dtype must be a float type, got {dtype.name}")
        device = canonical("rand", device)
        if dtype.is_half:  # uniform on the half type's grid of [0, 1): rounding a float32 draw could give 1
            steps = 2.0 ** (11 if dtype is dtypes.float16 else 8)
            return (Tensor.rand(*shape, device=device) * steps).floor().div(steps).cast(dtype)._tag(**kwargs)
        buf = random.uniform_buffer(prod(shape), dtype, buffer_class("rand", device))
        return Tensor._whole(buf, shape, dtype, device)._tag(**kwargs)

    @staticmethod
    def randn(*shape, dtype=None, device=None, **kwargs) -> Tensor:
        # Box-Muller on two uniform draws; 1 - u keeps the log's argument in (0, 1].
        shape = argfix(*shape)
        if dtype is not None and to_dtype(dtype, "randn").is_half:  # drawn in float32, rounded once
            return Tensor.randn(*shape, device=device).cast(dtype)._tag(**kwargs)
        u1, u2 = Tensor.rand(*shape, dtype=dtype, device=device), Tensor.rand(*shape, dtype=dtype, device=device)
        return ((1 - u1).log() * -2).sqrt().mul((u2 * (2 * math.pi)).cos())._tag(**kwargs)

    @staticmethod
    def randint(*shape, low: int = 0, high: int = 10, dtype=None, device=None, **kwargs) -> Tensor:
        if high <= low:
            raise ArgumentError(f"randint: need low < high, got low={low}, high={high}")
        u = Tensor.rand(*shape, dtype=dtypes.float64, device=device)
        return ((u * (high - low)).cast(dtypes.int64) + low).cast(dtype or dtypes.default_int)._tag(**kwargs)

    @staticmethod
    def uniform(*shape, low: float = 0.0, high: float = 1.0, dtype=None, device=None, **kwargs) -> Tensor:
        return (Tensor.rand(*shape, dtype=dtype, device=device) * (high - low) + low)._tag(**kwargs)

    @staticmethod
    def normal(*shape, mean: float = 0.0, std: float = 1.0, dtype=None, device=None, **kwargs) -> Tensor:
        return (Tensor.randn(*shape, dtype=dtype, device=device) * std + mean)._tag(**kwargs)

    @staticmethod
    def kaiming_uniform(*shape, a: float = 0.01, **kwargs) -> Tensor:
        shape = _check_shape("kaiming_uniform", argfix(*shape))
        bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a**2)) / math.sqrt(max(prod(shape[1:]), 1))
        return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs)

    @staticmethod
    def glorot_uniform(*shape, **kwargs) -> Tensor:
        shape = _check_shape("glorot_uniform", argfix(*shape))
        bound = math.sqrt(6.0 / max(shape[0] + prod(shape[1:]), 1))
        return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs)

    def full_like(self, fill_value, dtype=None, device=None, **kwargs) -> Tensor:
        return Tensor.full(self.shape, fill_value, dtype or self.dtype, device or self.device, **kwargs)

    def zeros_like(self, dtype=None, **kwargs) -> Tensor:
        return self.full_like(0, dtype, **kwargs)

    def ones_like(self, dtype=None, **kwargs) -> Tensor:
        return self.full_like(1, dtype, **kwargs)

    def _tag(self, requires_grad: bool | None = None) -> Tensor:
        """Apply the creation keyword every constructor accepts besides device (which they made it on)."""
        check_requires_grad("Tensor", self.dtype, requires_grad)
        self.requires_grad = requires_grad
        return self

    # ---- conversion ----

    def contiguous(self) -> Tensor:
        if self._is_contiguous():
            return self
        out = self._alloc(self.shape, self.dtype)
        shape, (so, sa) = merge_dims(self.shape, out._strides, self._strides)
        check(self._buf.kernels.copy_strided(self.dtype.itemsize, out._ptr(), int64s(so), self._ptr(),
                                             int64s(sa), len(shape), int64s(shape)), "copy_strided", "contiguous", self)
        return record(out, Ops.CONTIGUOUS, (self,))

    def clone(self) -> Tensor:
        """A contiguous copy that shares no memory with self."""
        out = self._alloc(self.shape, self.dtype)
        out._copy_into(self)
        return record(out, Ops.CONTIGUOUS, (self,))

    def numpy(self) -> np.ndarray:
        x = self.contiguous()
        return x._buf.to_numpy(x._offset, x.numel(), x.dtype).reshape(x.shape)

    def item(self):
        if self.numel() != 1:
            raise ArgumentError(f"item: only a tensor with one element converts to a scalar, got {self.shape}")
        return self._buf.read(self._offset, self.dtype)

    def tolist(self):
        return self.numpy().tolist()

    def data_ptr(self) -> int:
        """The address of the first element (on cuda a device address), for a library that reads or
        writes the memory itself, as NCCL does (common/train/collectives.py). Only a contiguous
        tensor's elements lie there in order: take x.contiguous() first."""
        if not self._is_contiguous():
            raise ArgumentError(f"data_ptr: the tensor of shape {self.shape} (strides {self._strides}) is not "
                                "contiguous; take x.contiguous() first")
        p = self._ptr()
        return p if isinstance(p, int) else int(ffi.cast("uintptr_t", p))

    def to(self, device: str | None) -> Tensor:
        """A copy on `device` (self when it is there already), through host memory; gradients flow back."""
        device = canonical("to", device)
        if device == self.device:
            return self
        x = self.contiguous()
        host = x._buf.to_numpy(x._offset, x.numel(), x.dtype)
        out = Tensor._whole(buffer_class("to", device).from_numpy(host), x.shape, x.dtype, device)
        return record(out, Ops.COPY, (self,))

    def _check_range(self, high: int, fail) -> None:
        if self.numel():
            low, top = int(self.min().item()), int(self.max().item())
            if low < 0 or top >= high:
                raise fail(low, top)

    def realize(self, *others: Tensor) -> Tensor:
        """Compute self and others now (tinygrad's `Tensor.realize(*grads)`); here every op already ran."""
        for t in others:
            if not isinstance(t, Tensor):
                raise TypeError(f"realize: expected tensors, got {type(t).__name__}")
        return self

    def cast(self, dtype) -> Tensor:
        dtype = to_dtype(dtype, "cast")
        if dtype is self.dtype:
            return self
        hub = cast_hub(self.dtype, dtype)
        if hub is not None:  # a pair without a loop of its own goes through one that has both
            return self.cast(hub).cast(dtype)
        out = self._alloc(self.shape, dtype)
        shape, (sa,) = merge_dims(self.shape, self._strides)
        check(self._buf.kernels.cast(dtype.code, self.dtype.code, out._ptr(), self._ptr(), len(shape),
                                     int64s(shape), int64s(sa)), "cast", "cast", self)
        return record(out, Ops.CAST, (self,))

    def bitcast(self, dtype) -> Tensor:
        """The same bytes read as another dtype of the same size (tinygrad's and torch's `view(dtype)`)."""
        dtype = to_dtype(dtype, "bitcast")
        if dtype.itemsize != self.dtype.itemsize:
            raise TypeError(f"bitcast: {self.dtype.name} ({self.dtype.itemsize} bytes) to {dtype.name} "
                            f"({dtype.itemsize} bytes): expected dtypes of one size (shape {self.shape})")
        x = self.contiguous()
        return Tensor._make(x._buf, x.shape, x._strides, x._offset, dtype, x.device)

    def float(self) -> Tensor:
        return self.cast(dtypes.float32)

    def half(self) -> Tensor:
        return self.cast(dtypes.float16)

    def bfloat16(self) -> Tensor:
        return self.cast(dtypes.bfloat16)

    def double(self) -> Tensor:
        return self.cast(dtypes.float64)

    def int(self) -> Tensor:
        return self.cast(dtypes.int32)

    def long(self) -> Tensor:
        return self.cast(dtypes.int64)

    def bool(self) -> Tensor:
        return self.cast(dtypes.bool)

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise ArgumentError(f"bool: the truth value of a tensor of shape {self.shape} is ambiguous")
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())


    # ---- threads and modes ----

    @staticmethod
    def set_num_threads(n: int) -> None:
        """Every threaded kernel (the GEMM, the OpenMP loops) uses n threads from now on (threads.py)."""
        threads.set_num_threads(n)

    @staticmethod
    def get_num_threads() -> int:
        return threads.get_num_threads()

    @staticmethod
    def autocast(dtype=dtypes.bfloat16, enabled: bool = True):
        """`with Tensor.autocast(dtypes.bfloat16):` runs matmuls, convolutions and attention in the half
        type, softmax, norms and losses in float32 (mixed precision: autocast.py)."""
        return autocast(dtype, enabled)

    @staticmethod
    @contextlib.contextmanager
    def train(mode: bool = True) -> Iterator[None]:
        """`with Tensor.train():` turns on training behaviour (dropout, batch statistics)."""
        before, Tensor.training = Tensor.training, mode
        try:
            yield
        finally:
            Tensor.training = before
