"""The Tensor: a handle on a node of the lazy graph (`lazydata`, a LazyBuffer: graph/lazy.py).

This file holds the core (construction, properties, creation, conversion). The rest of the API
lives in mixins, one file per section of the API: movement.py, elementwise.py, reduce.py and
functional.py, each a layer on the hooks of hooks.py that this class implements, and autograd.py.
No op computes anything: each adds a node to the graph, and `realize()` (or `numpy()`, `item()`,
`tolist()`) hands the graph to the scheduler, which fuses it into kernels that the compiler
generates (engine/realize.py). numpy only converts data in and out.
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Iterator, Sequence

import numpy as np

from . import random, threads
from .autocast import autocast
from .autograd import AutogradMixin, check_requires_grad, record
from .convolution import ConvolutionMixin
from .device import buffer_class, canonical, runtime_of
from .division import DivisionMixin
from .dtype import DType, dtypes, python_type, to_dtype
from .elementwise import ElementwiseMixin
from .engine import capture, checks
from .engine.realize import realize
from .errors import ArgumentError
from .functional import FunctionalMixin
from .graph.lazy import LazyBuffer
from .graph.shapetracker import is_symbolic
from .graph.symbolic import Node, SymbolicError, layout, variables
from .movement import MovementMixin
from .ops import Ops
from .reduce import ReduceMixin
from .sampling import SamplingMixin
from .scatter import ScatterMixin
from .shape import MAX_DIMS, Shape, prod
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


# Every tensor alive, held weakly: TinyJit finds the tensors that hold the state its capture reads here
# (jit.find_holders), without a walk over every object of the process.
live_tensors: weakref.WeakSet[Tensor] = weakref.WeakSet()


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
            self._setup(src.lazydata, requires_grad)
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
        check_requires_grad("Tensor", dtype, requires_grad)
        if arr.ndim == 0:  # a Python number is a constant of the graph, not a buffer
            self._setup(LazyBuffer.const(arr.item(), dtype, device), requires_grad)
            return
        buf = buffer_class("Tensor", device).from_numpy(arr)
        if capture.CAPTURING:  # a replay would use this copy forever: TinyJit refuses it
            capture.note_upload(buf)
        self._setup(LazyBuffer.from_buffer(buf, shape, dtype, device), requires_grad)

    def _setup(self, lazydata: LazyBuffer, requires_grad: bool | None = None) -> None:
        """Every field of a tensor, set in one place."""
        self.lazydata, self.requires_grad, self.grad = lazydata, requires_grad, None
        live_tensors.add(self)

    # ---- what the graph node says ----

    @property
    def shape(self) -> Shape:
        return self.lazydata.shape

    @property
    def dtype(self) -> DType:
        return self.lazydata.dtype

    @property
    def device(self) -> str:
        return self.lazydata.device

    # ---- internal constructors: every op builds its result through these ----

    @staticmethod
    def _make(lazydata: LazyBuffer) -> Tensor:
        """The one private constructor: a tensor over a node of the graph."""
        out = Tensor.__new__(Tensor)
        out._setup(lazydata)
        return out

    def _check_dims(self, op: str, shape: Shape) -> Shape:
        if len(shape) > MAX_DIMS:
            raise ArgumentError(f"{op}: at most {MAX_DIMS} dims are supported, got shape {tuple(shape)}")
        return tuple(shape)

    @staticmethod
    def _whole(buf, shape: Shape, dtype: DType, device: str) -> Tensor:
        """A tensor over the whole of a buffer the caller filled."""
        return Tensor._make(LazyBuffer.from_buffer(buf, tuple(shape), dtype, device))

    def _like(self, data, dtype: DType | None = None) -> Tensor:
        """A tensor of data (a Python scalar, a list, an array) on self's device."""
        return Tensor(data, dtype, self.device)

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
        out = Tensor._make(LazyBuffer.const(fill_value, dtype, canonical("full", device), shape))
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
        return Tensor.full(shape, 0, dtype, canonical("empty", device))._tag(**kwargs)  # lazily zeros

    @staticmethod
    def arange(start, stop=None, step=1, dtype=None, device=None, **kwargs) -> Tensor:
        if stop is None:
            start, stop = 0, start
        if step == 0:
            raise ArgumentError("arange: step must not be zero")
        if isinstance(stop, Node):  # arange(t) for a bound Variable t: the iota of its maximum, shrunk to t
            return Tensor._symbolic_arange(start, stop, step, dtype, device)._tag(**kwargs)
        n = max(0, math.ceil((stop - start) / step))
        if dtype is None:
            is_int = all(isinstance(v, int) for v in (start, stop, step))
            dtype = dtypes.default_int if is_int else dtypes.default_float
        dtype = to_dtype(dtype, "arange")
        index = Tensor._iota(n, canonical("arange", device))
        wide = dtypes.float64 if dtype.is_float else dtypes.int64
        out = index.cast(wide)
        out = out if step == 1 else out * step  # no `* 1` or `+ 0` in the graph: a cheap arange is fused
        out = out if start == 0 else out + start  # where it is read (a causal mask's comparison)
        return out.cast(dtype)._tag(**kwargs)

    @staticmethod
    def _symbolic_arange(start, stop: Node, step, dtype, device) -> Tensor:
        if not (isinstance(start, int) and step == 1):
            raise SymbolicError(f"arange: a symbolic stop ({stop!r}) takes an int start and step 1; "
                                f"got start {start!r}, step {step!r}")
        if stop.min < start:
            raise SymbolicError(f"arange: a symbolic stop must be >= start {start} over its whole range, "
                                f"got {stop!r}")
        n = stop - start
        whole = Tensor._iota(layout(n), canonical("arange", device))
        out = whole.shrink(((0, n),))
        out = out if start == 0 else out + start
        return out.cast(to_dtype(dtype or dtypes.default_int, "arange"))

    @staticmethod
    def _iota(n: int, device: str) -> Tensor:
        buf = buffer_class("arange", device)(n * 8)
        runtime = runtime_of("arange", device)
        runtime.iota(buf.address, n)
        if capture.CAPTURING:  # a replay runs it again (engine/capture.py)
            capture.note_fixed(buf, f"{n} numbers from iota",
                               lambda out: runtime.iota(out.address, n))
        out = Tensor._whole(buf, (n,), dtypes.int64, device)
        out.lazydata.iota = True  # an index array compared with it is a lookup (codegen/lookup.picked)
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
        """Realize this tensor as a buffer of its own when it is realized (a copy kernel for a view)."""
        out = Tensor._make(self.lazydata.contiguous())
        return self if out.lazydata is self.lazydata else record(out, Ops.CONTIGUOUS, (self,))

    def clone(self) -> Tensor:
        """A copy in a buffer of its own (assign may later write into the one it was copied from)."""
        return record(Tensor._make(self.lazydata.copy()), Ops.CONTIGUOUS, (self,))

    def numpy(self) -> np.ndarray:
        sizes = self.bound().shape  # (raises for an unbound Variable)
        x = self.contiguous().realize()
        if capture.CAPTURING:  # a replay runs no Python: TinyJit refuses it
            capture.note_readback()
        # a symbolic tensor is laid out at its maximum sizes by a kernel that serves every value
        # (graph/shapetracker.py): the bound values' corner of that buffer is the tensor
        whole = tuple(layout(n) for n in self.shape)
        out = x.lazydata.realized.to_numpy(0, prod(whole), x.dtype).reshape(whole)
        return out if whole == sizes else np.ascontiguousarray(out[tuple(slice(0, n) for n in sizes)])

    def bound(self) -> Tensor:
        """This tensor at the bound values of its symbolic sizes (graph/symbolic.Variable): a view of
        concrete shape over the same elements, for what needs one (numpy, item). Itself if concrete."""
        if not is_symbolic(self.shape):
            return self
        lazy = self.lazydata
        found = lazy.st.variables | variables(lazy.base.shape)
        unbound = [v.name for v in found if v.value is None]
        if unbound:
            raise ArgumentError(f"numpy: the tensor of shape {self.shape} has Variables that are not bound: {unbound}")
        values = {v.name: v.value for v in found}
        return self._make(lazy.base._view(lazy.st.substitute(values)))

    def item(self):
        if self.bound().numel() != 1:
            raise ArgumentError(f"item: only a tensor with one element converts to a scalar, got {self.shape}")
        return python_type(self.dtype)(self.numpy().reshape(-1)[0].item())

    def tolist(self):
        return self.numpy().tolist()

    def data_ptr(self) -> int:
        """The address of the first element (on cuda a device address), for a library that reads or
        writes the memory itself, as NCCL does (common/train/collectives.py). Realizes the tensor; only
        a realized buffer (or a reshape of one) holds its elements there in order: take
        x.contiguous() first. A write there bypasses the graph: nothing computed before sees it."""
        x = self.realize().lazydata
        if not (x.is_base or x.st.contiguous) or x.realized is None:
            raise ArgumentError(f"data_ptr: the tensor of shape {self.shape} is a view, not a buffer of its own; "
                                "take x.contiguous() first")
        return x.realized.ptr(0, self.dtype)

    def to(self, device: str | None) -> Tensor:
        """A copy on `device` (self when it is there already), through host memory; gradients flow back."""
        device = canonical("to", device)
        if device == self.device:
            return self
        host = self.numpy()
        out = Tensor._whole(buffer_class("to", device).from_numpy(host), self.shape, self.dtype, device)
        return record(out, Ops.COPY, (self,))

    def _check_range(self, high: int, fail) -> None:
        checks.check_later(self, high, fail)  # the graph stays lazy: the next realize checks (engine/checks.py)

    def realize(self, *others: Tensor) -> Tensor:
        """Compute self and others now, in one schedule (tinygrad's `Tensor.realize(*grads)`)."""
        for t in others:
            if not isinstance(t, Tensor):
                raise TypeError(f"realize: expected tensors, got {type(t).__name__}")
        realize([t.lazydata for t in (self, *others)])
        return self

    def cast(self, dtype) -> Tensor:
        dtype = to_dtype(dtype, "cast")
        if dtype is self.dtype:
            return self
        return record(Tensor._make(self.lazydata.alu(Ops.CAST, arg=dtype)), Ops.CAST, (self,))

    def bitcast(self, dtype) -> Tensor:
        """The same bytes read as another dtype of the same size (tinygrad's and torch's `view(dtype)`):
        realized into a buffer of its own, which the result reads under the new dtype."""
        dtype = to_dtype(dtype, "bitcast")
        if dtype.itemsize != self.dtype.itemsize:
            raise TypeError(f"bitcast: {self.dtype.name} ({self.dtype.itemsize} bytes) to {dtype.name} "
                            f"({dtype.itemsize} bytes): expected dtypes of one size (shape {self.shape})")
        own = self.clone().realize().lazydata
        return Tensor._make(LazyBuffer.from_buffer(own.realized, self.shape, dtype, self.device))

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
