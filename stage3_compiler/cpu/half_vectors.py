"""The vectorize pass's half-type lanes in C (codegen/vectorize.py): a kernel holds a float16 or
bfloat16 value as a float, so a vector of them is a float vector, `floatxN`. What differs from
float32's vectors is memory: a load reads N 16-bit patterns as one vector and widens them; a store,
and a cast into the half type, round the lanes and narrow them. Both are the scalar conversions of
cpu/renderer.py's HALF written with gcc's vector operators, lane by lane the same bits (selects by
masks, as C has no vector `?:`), so a loop of them stays vectorized. Only the vectorize pass makes such
vectors.
"""

from __future__ import annotations

from ..codegen.uops import Kernel, UOp, UOps

# The widening of a vector of bits (uint32xN `bits`, each lane's low 16 bits): bfloat16's are float32's
# top half; float16's exponent and mantissa move to float32's places, a multiply by 2^112 rebiases the
# exponent (exact, and right for subnormals too), then inf and NaN get float32's all-ones exponent and
# every lane its sign.
WIDEN_VECTOR = {
    "bfloat16": "((floatx{n})(({bits}) << 16))",
    "float16": "({{ uint32x{n} e = {bits}; "
               "floatx{n} f = (floatx{n})((e & 0x7fffu) << 13) * 0x1p112f; "
               "(floatx{n})((uint32x{n})f | ((e & 0x8000u) << 16) | "
               "((uint32x{n})((e & 0x7fffu) >= 0x7c00u) & 0x7f800000u)); }})"}

# The rounding of a float vector `x` to the half type's bits (in uint32xN lanes), to nearest even.
# bfloat16: float32's top half rounded (the sign rides along: no magnitude carries into it), a NaN the
# quiet 0x7fc0. float16: normal results shift the rebiased exponent and mantissa by 13; subnormal ones
# shift the mantissa with its implicit bit by 126 - e, e clamped to [102, 112]; overflow to inf, NaN to
# 0x7e00, magnitudes below half the smallest subnormal to 0; then the sign.
NARROW_VECTOR = {
    "bfloat16": "({{ uint32x{n} u = (uint32x{n})({x}), nan = (uint32x{n})((u & 0x7fffffffu) > 0x7f800000u); "
                "(((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) & ~nan) | (nan & 0x7fc0u); }})",
    "float16": "({{ uint32x{n} u = (uint32x{n})({x}), a = u & 0x7fffffffu, e = a >> 23; "
               "uint32x{n} low = (uint32x{n})(e < 102u), high = (uint32x{n})(e > 112u); "
               "uint32x{n} s = 126u - ((e & ~low & ~high) | (102u & low) | (112u & high)); "
               "uint32x{n} m = (a & 0x7fffffu) | 0x800000u, b = a - (112u << 23); "
               "uint32x{n} sub = (m + ((u - u + 1u) << (s - 1u)) - 1u + ((m >> s) & 1u)) >> s; "
               "uint32x{n} normal = (b + 0xfffu + ((b >> 13) & 1u)) >> 13; "
               "uint32x{n} is_normal = (uint32x{n})(a >= 0x38800000u), inf = (uint32x{n})(a >= 0x477ff000u); "
               "uint32x{n} nan = (uint32x{n})(a > 0x7f800000u), zero = (uint32x{n})(a < 0x33000000u); "
               "uint32x{n} r = (normal & is_normal) | (sub & ~is_normal); "
               "r = (0x7c00u & inf) | (r & ~inf); r = (0x7e00u & nan) | (r & ~nan); "
               "(r & ~zero) | ((u >> 16) & 0x8000u); }})"}


def holds_half(u: UOp) -> bool:
    """Does u load, compute or store half-type values?"""
    dtype = u.srcs[1].dtype if u.op is UOps.STORE else u.dtype
    return dtype is not None and dtype.is_half


def bit_vectors(kernel: Kernel) -> set[tuple[str, int]]:
    """(type, lanes) of the vectors of bits the kernel's half-type vectors need: N lanes of uint16 and uint32."""
    return {(bits, u.lanes) for u in kernel.uops if u.lanes > 1 and holds_half(u) for bits in ("uint16", "uint32")}


def load(name: str, vector: str, half: str, lanes: int, address: str, gate: str | None) -> str:
    """`vector name` = the half values at `address` (a pointer expression), widened; where `gate` is
    given, zeros unless it holds (one scalar gate for every lane)."""
    raw = f"{name}_bits"
    read = f"uint16x{lanes} {raw}; __builtin_memcpy(&{raw}, {address}, sizeof({raw}));"
    value = WIDEN_VECTOR[half].format(n=lanes, bits=f"__builtin_convertvector({raw}, uint32x{lanes})")
    if gate is not None:
        return f"{vector} {name} = {{0}}; if ({gate}) {{ {read} {name} = {value}; }}"
    return f"{read} {vector} {name} = {value};"


def rounded(name: str, vector: str, x: str, lanes: int, half: str) -> str:
    """`vector name` = the lanes of x rounded into the half type (narrowed, widened back)."""
    bits = NARROW_VECTOR[half].format(n=lanes, x=x)
    return f"{vector} {name} = {WIDEN_VECTOR[half].format(n=lanes, bits=bits)};"


def store(pointer: str, index: str, value: str, lanes: int, half: str) -> str:
    """The lanes of value rounded into the half type and stored as one vector of 16-bit patterns."""
    bits = f"__builtin_convertvector({NARROW_VECTOR[half].format(n=lanes, x=value)}, uint16x{lanes})"
    return (f"{{ uint16x{lanes} {value}_bits = {bits}; "
            f"__builtin_memcpy({pointer} + {index}, &{value}_bits, sizeof({value}_bits)); }}")
