"""Data types and the promotion lattice (tinygrad's; docs/api-contract.md compares it with torch's).

Thirteen types: bool, four signed and four unsigned ints, and four floats. float16 and bfloat16 are
storage types: an op reads them as float32, computes in float32 and rounds once when it stores.
"""

from __future__ import annotations

import functools
import math
import struct
from dataclasses import dataclass
from enum import Enum

import ml_dtypes
import numpy as np


class Kind(Enum):
    BOOL = "b"
    SIGNED = "i"
    UNSIGNED = "u"
    FLOAT = "f"


@dataclass(frozen=True, eq=False)
class DType:
    name: str
    itemsize: int
    kind: Kind
    code: int  # the C kernels' dtype_code
    ctype: str  # the C type that holds one element (a half type's raw bits in stage1's kernels)
    np: np.dtype  # only for converting at the edges

    def __repr__(self) -> str:
        return f"dtypes.{self.name}"

    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_int(self) -> bool:
        """Signed or unsigned integers (not bool)."""
        return self.kind in (Kind.SIGNED, Kind.UNSIGNED)

    @property
    def is_unsigned(self) -> bool:
        return self.kind is Kind.UNSIGNED

    @property
    def is_half(self) -> bool:
        """float16 or bfloat16: stored in two bytes, computed in float32."""
        return self.is_float and self.itemsize == 2


def _dt(name: str, itemsize: int, kind: Kind, code: int, ctype: str, npdt) -> DType:
    return DType(name, itemsize, kind, code, ctype, np.dtype(npdt))


class dtypes:
    bool = _dt("bool", 1, Kind.BOOL, 0, "uint8_t", np.bool_)
    int32 = _dt("int32", 4, Kind.SIGNED, 1, "int32_t", np.int32)
    int64 = _dt("int64", 8, Kind.SIGNED, 2, "int64_t", np.int64)
    float32 = _dt("float32", 4, Kind.FLOAT, 3, "float", np.float32)
    float64 = _dt("float64", 8, Kind.FLOAT, 4, "double", np.float64)
    int8 = _dt("int8", 1, Kind.SIGNED, 5, "int8_t", np.int8)
    int16 = _dt("int16", 2, Kind.SIGNED, 6, "int16_t", np.int16)
    uint8 = _dt("uint8", 1, Kind.UNSIGNED, 7, "uint8_t", np.uint8)
    uint16 = _dt("uint16", 2, Kind.UNSIGNED, 8, "uint16_t", np.uint16)
    uint32 = _dt("uint32", 4, Kind.UNSIGNED, 9, "uint32_t", np.uint32)
    uint64 = _dt("uint64", 8, Kind.UNSIGNED, 10, "uint64_t", np.uint64)
    float16 = _dt("float16", 2, Kind.FLOAT, 11, "uint16_t", np.float16)
    bfloat16 = _dt("bfloat16", 2, Kind.FLOAT, 12, "uint16_t", ml_dtypes.bfloat16)
    default_float = float32
    default_int = int64  # torch's; tinygrad's is int32 (docs/api-contract.md says why we keep int64)
    all = (bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64)
    ints = (int8, int16, int32, int64, uint8, uint16, uint32, uint64)
    floats = (float16, bfloat16, float32, float64)
    # C's and torch's other names (torch.int is int32, torch.half float16)
    int, long, float, double, half, char, short, uchar = int32, int64, float32, float64, float16, int8, int16, uint8


_BY_NAME = {dt.name: dt for dt in dtypes.all} | {
    "float": dtypes.float, "int": dtypes.int, "long": dtypes.long, "double": dtypes.double, "half": dtypes.half}

# Each type's direct successors: a value of the type converts to them exactly (the last ints go to the
# half floats, where tinygrad puts them and torch does too).
_UP: dict[DType, tuple[DType, ...]] = {
    dtypes.bool: (dtypes.int8, dtypes.uint8),
    dtypes.int8: (dtypes.int16,), dtypes.int16: (dtypes.int32,), dtypes.int32: (dtypes.int64,),
    dtypes.int64: (dtypes.float16, dtypes.bfloat16),
    dtypes.uint8: (dtypes.int16, dtypes.uint16), dtypes.uint16: (dtypes.int32, dtypes.uint32),
    dtypes.uint32: (dtypes.int64, dtypes.uint64), dtypes.uint64: (dtypes.float16, dtypes.bfloat16),
    dtypes.float16: (dtypes.float32,), dtypes.bfloat16: (dtypes.float32,), dtypes.float32: (dtypes.float64,),
    dtypes.float64: (),
}


def _above(dt: DType) -> frozenset[DType]:
    """dt and every type it promotes to."""
    out = {dt}
    for up in _UP[dt]:
        out |= _above(up)
    return frozenset(out)


_ABOVE = {dt: _above(dt) for dt in dtypes.all}


def to_dtype(x: DType | str | np.dtype | type, op: str = "dtype") -> DType:
    """Accept a DType, its name, or a numpy dtype; anything else is a TypeError."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str) and x in _BY_NAME:
        return _BY_NAME[x]
    if x is float:
        return dtypes.default_float
    if x is int:
        return dtypes.default_int
    if x is bool:
        return dtypes.bool
    try:
        npdt = np.dtype(x)
    except TypeError:
        npdt = None
    for dt in dtypes.all:
        if npdt == dt.np:
            return dt
    names = ", ".join(dt.name for dt in dtypes.all)
    raise TypeError(f"{op}: unsupported dtype {npdt.name if npdt is not None else repr(x)}; expected one of {names}")


def promote(a: DType, b: DType) -> DType:
    """The least type both a and b promote to: the join of the lattice above. int64 and uint64 (and a
    type above one of them only) have two least common types, float16 and bfloat16: that is an error."""
    if a is b:
        return a
    common = _ABOVE[a] & _ABOVE[b]
    least = [dt for dt in common if _ABOVE[dt] >= common]
    if len(least) != 1:
        raise TypeError(f"promote: {a.name} and {b.name} have no least common dtype; cast one of them first")
    return least[0]


def scalar_dtype(value: object, other: DType) -> DType:
    """The dtype a Python scalar takes next to a tensor of dtype `other` (scalars are weak)."""
    if isinstance(value, bool):
        return other
    if isinstance(value, int):
        return other if other.kind is not Kind.BOOL else dtypes.default_int
    if isinstance(value, float):
        return other if other.is_float else dtypes.default_float
    raise TypeError(f"expected a Python bool, int or float scalar, got {type(value).__name__}")


def float_of(dt: DType) -> DType:
    """The dtype a float-only op (exp, log, /) returns."""
    return dt if dt.is_float else dtypes.default_float


# The types stage1's and stage2's C kernels compute in (stage3's renderer writes every type's C).
KERNEL_TYPES = (dtypes.bool, dtypes.int32, dtypes.int64, dtypes.uint64, dtypes.float32, dtypes.float64)


def compute_of(dt: DType) -> DType:
    """The dtype a C kernel computes dt in: float32 for the half types, int64 for the narrow ints (whose
    low bits wrap alike there), the type itself otherwise."""
    if dt in KERNEL_TYPES:
        return dt
    return dtypes.float32 if dt.is_half else dtypes.int64


def cast_hub(src: DType, dst: DType) -> DType | None:
    """None where the C cast kernel has a loop from src to dst; else the type a cast goes through
    (float32 beside a half type, int64 otherwise), which has loops both ways (csrc/elementwise.c)."""
    core = (dtypes.bool, dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64)
    pair = {src, dst}
    if src in core and dst in core or dtypes.float32 in pair and pair <= {dtypes.float32, *dtypes.floats[:2]} \
            or dtypes.int64 in pair and all(t.is_int for t in pair) \
            or dtypes.uint64 in pair and pair & {dtypes.float32, dtypes.float64}:
        return None
    return dtypes.float32 if src.is_half or dst.is_half else dtypes.int64


def python_type(dt: DType) -> type:
    """The Python type an element of dt converts to."""
    return bool if dt.kind is Kind.BOOL else int if dt.is_int else float


def _float32_bits(value: float) -> int:
    """The bits of value rounded to float32 (out of its range: inf, as C's conversion gives)."""
    try:
        return struct.unpack("<I", struct.pack("<f", value))[0]
    except OverflowError:
        return 0x7F800000 if value > 0 else 0xFF800000


def half_bits(value: float, dt: DType) -> int:
    """The 16 bits of a half type that hold value, rounded to nearest even through float32 as the C
    kernels round (csrc/half.h); NaN is the quiet NaN."""
    f32 = _float32_bits(value)
    if dt is dtypes.bfloat16:
        if (f32 & 0x7FFFFFFF) > 0x7F800000:
            return 0x7FC0
        return ((f32 + 0x7FFF + ((f32 >> 16) & 1)) >> 16) & 0xFFFF
    wide = struct.unpack("<f", struct.pack("<I", f32))[0]
    try:
        return struct.unpack("<H", struct.pack("<e", wide))[0]
    except OverflowError:  # beyond float16's largest finite value after rounding
        return 0x7C00 if wide > 0 else 0xFC00


def half_value(bits: int, dt: DType) -> float:
    """The float the 16 bits of a half type hold."""
    if dt is dtypes.bfloat16:
        return struct.unpack("<f", struct.pack("<I", (bits & 0xFFFF) << 16))[0]
    return struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]


def rounded(value: float, dt: DType) -> float:
    """value as a half type holds it (NaN stays NaN)."""
    return value if math.isnan(value) else half_value(half_bits(value, dt), dt)


def rounds_once(method):
    """A composite op (many ops inside) on a half type computes in float32 and rounds once at the end,
    as torch's kernels do: each inner op rounding to 8 or 11 bits would stack its errors, and the floor
    of a rounded quotient can land on the wrong integer. Tensor arguments of the same half type are
    widened with self; anything else passes as it is."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        if not self.dtype.is_half:
            return method(self, *args, **kwargs)
        half = self.dtype

        def widened(a):
            return a.cast(dtypes.float32) if getattr(a, "dtype", None) is half else a

        out = method(self.cast(dtypes.float32), *map(widened, args), **{k: widened(v) for k, v in kwargs.items()})
        return out.cast(half) if out.dtype is dtypes.float32 else out

    return run
