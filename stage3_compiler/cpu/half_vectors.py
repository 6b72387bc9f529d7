"""The vectorize pass's half-type lanes in C (codegen/vectorize.py): a kernel holds a float16 or
bfloat16 value as a float, so a vector of them is a float vector, `floatxN`. What differs from
float32's vectors is memory: a load reads N 16-bit patterns as one vector and widens them, lane by
lane the same bits as the scalar widening (cpu/renderer.py's HALF); a store, and a cast into the half
type, round each lane as the scalar code does. Only the vectorize pass makes such vectors.
"""

from __future__ import annotations

# The widening of a vector of bits (uint16xN `raw`): bfloat16's are float32's top half; float16's
# exponent and mantissa move to float32's places, a multiply by 2^112 rebiases the exponent (exact, and
# right for subnormals too), then inf and NaN get float32's all-ones exponent and every lane its sign.
WIDEN_VECTOR = {
    "bfloat16": "((floatx{n})(__builtin_convertvector({raw}, uint32x{n}) << 16))",
    "float16": "({{ uint32x{n} e = __builtin_convertvector({raw}, uint32x{n}); "
               "floatx{n} f = (floatx{n})((e & 0x7fffu) << 13) * 0x1p112f; "
               "(floatx{n})((uint32x{n})f | ((e & 0x8000u) << 16) | "
               "((uint32x{n})((e & 0x7fffu) >= 0x7c00u) & 0x7f800000u)); }})"}
BIT_VECTORS = ("uint16", "uint32")  # the vector types WIDEN_VECTOR uses, N lanes of each


def load(name: str, vector: str, half: str, lanes: int, address: str, gate: str | None) -> str:
    """`vector name` = the half values at `address` (a pointer expression), widened; where `gate` is
    given, zeros unless it holds (one scalar gate for every lane)."""
    raw = f"{name}_bits"
    read = f"uint16x{lanes} {raw}; __builtin_memcpy(&{raw}, {address}, sizeof({raw}));"
    value = WIDEN_VECTOR[half].format(n=lanes, raw=raw)
    if gate is not None:
        return f"{vector} {name} = {{0}}; if ({gate}) {{ {read} {name} = {value}; }}"
    return f"{read} {vector} {name} = {value};"


def rounded(name: str, vector: str, x: str, lanes: int, widen: str, narrow: str) -> str:
    """`vector name` = the lanes of x rounded into the half type (narrowed, widened back)."""
    return f"{vector} {name} = {{{', '.join(f'{widen}({narrow}({x}[{k}]))' for k in range(lanes))}}};"


def store(pointer: str, index: str, value: str, lanes: int, narrow: str) -> list[str]:
    """Each lane of value rounded into the half type and stored, as the scalar stores would."""
    return [f"{pointer}[{index} + {k}] = {narrow}({value}[{k}]);" for k in range(lanes)]
