"""Data types and the promotion lattice (tinygrad's): bool < int32 < int64 < float32 < float64."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class DType:
    name: str
    itemsize: int
    kind: str  # "b" bool, "i" signed int, "f" float
    rank: int  # position in the promotion lattice
    code: int  # the C kernels' dtype_code
    ctype: str  # the C element type, for reading one element
    np: np.dtype  # only for converting at the edges

    def __repr__(self) -> str:
        return f"dtypes.{self.name}"

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind == "i"


class dtypes:
    bool = DType("bool", 1, "b", 0, 0, "uint8_t", np.dtype(np.bool_))
    int32 = DType("int32", 4, "i", 1, 1, "int32_t", np.dtype(np.int32))
    int64 = DType("int64", 8, "i", 2, 2, "int64_t", np.dtype(np.int64))
    float32 = DType("float32", 4, "f", 3, 3, "float", np.dtype(np.float32))
    float64 = DType("float64", 8, "f", 4, 4, "double", np.dtype(np.float64))
    default_float = float32
    default_int = int64  # torch's; tinygrad's is int32 (docs/api-contract.md says why we keep int64)
    all = (bool, int32, int64, float32, float64)
    # C's names, as tinygrad and torch spell them (torch.int is int32 too)
    int, long, float, double = int32, int64, float32, float64


_BY_NAME = {dt.name: dt for dt in dtypes.all} | {"float": dtypes.float, "int": dtypes.int, "long": dtypes.long,
                                                "double": dtypes.double}


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
    raise TypeError(f"{op}: unsupported dtype {x!r}; expected one of {names}")


def promote(a: DType, b: DType) -> DType:
    """The least dtype both a and b cast to without changing kind downwards."""
    return a if a.rank >= b.rank else b


def scalar_dtype(value: object, other: DType) -> DType:
    """The dtype a Python scalar takes next to a tensor of dtype `other` (scalars are weak)."""
    if isinstance(value, bool):
        return other
    if isinstance(value, int):
        return other if other.kind != "b" else dtypes.default_int
    if isinstance(value, float):
        return other if other.is_float else dtypes.default_float
    raise TypeError(f"expected a Python bool, int or float scalar, got {type(value).__name__}")


def float_of(dt: DType) -> DType:
    """The dtype a float-only op (exp, log, /) computes in."""
    return dt if dt.is_float else dtypes.default_float
