"""The C renderer: a kernel's linear UOps become C source, one UOp a line, through a table from
each UOp to the method that writes it (`RULES`). It is the base of the CUDA renderer, a small
subclass that changes how a kernel is declared and renders the output indices from its grid.

Arithmetic follows the C kernels of the earlier stages (numpy's semantics): ints wrap through the
unsigned type, max propagates NaN, a cast to bool means "is nonzero", bools are bytes holding 0 or
1. Float constants are written in hex, so the compiled value is exactly the Python one.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any

from ..codegen.renderer import Renderer
from ..codegen.uops import Kernel, Loop, LoopKind, UOp, UOps
from ..dtype import DType, dtypes, rounded
from ..graph.symbolic import Node, descends, render
from ..ops import Ops
from ..passes import Pass
from . import half_vectors, tiles

UNSIGNED = {"int8": "unsigned char", "int16": "unsigned short", "int32": "unsigned int", "int64": "unsigned long long",
            "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
            "uint64": "unsigned long long"}
CTYPES = {"bool": "unsigned char", "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
          **{name: c for name, c in UNSIGNED.items() if name.startswith("u")}, "float32": "float", "float64": "double"}
# A half type lives in memory as its 16 bits and in a kernel as a float: a load widens it, a store or a
# cast into it rounds to nearest even (and the lowering casts every op's result into its half type:
# codegen/lower.py's EXACT_IN_HALF).
HALF_STORAGE = "unsigned short"
WIDEN = {"float16": "sitp_from_f16", "bfloat16": "sitp_from_bf16"}
NARROW = {"float16": "sitp_to_f16", "bfloat16": "sitp_to_bf16"}
# bytes an entry, of the dtypes vectors hold (codegen/vectorize.py; int32: a float32 comparison's mask;
# uint16 and uint32: a half type's bits, as a vector load reads them and widens them)
DTYPE_SIZE = {"float32": 4, "float64": 8, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4}
# a vector type's name where the C type's has a space: int64x16, not long longx16
VECTOR_NAMES = {"int64": "int64", "uint16": "uint16", "uint32": "uint32"}
LIBM = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SQRT: "sqrt", Ops.SIN: "sin"}

# The conversions of the half types (their bits in an unsigned short), integer arithmetic on the bits
# as stage1's csrc/half.h (which says why not gcc's _Float16, and why selects and not branches: so that
# gcc vectorizes a loop of them): rounding to nearest even, NaN kept quiet.
HALF = r"""#ifndef SITP_HALF
#define SITP_HALF
static inline float sitp_bits_f32(unsigned int u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
static inline unsigned int sitp_f32_bits(float f) { unsigned int u; __builtin_memcpy(&u, &f, 4); return u; }
static inline unsigned int sitp_shift_rne(unsigned int x, unsigned int shift) {
  return (x + ((1u << (shift - 1)) - 1u) + ((x >> shift) & 1u)) >> shift; }
static inline float sitp_from_f16(unsigned short h) {
  float magnitude = sitp_bits_f32((unsigned int)(h & 0x7fffu) << 13) * 0x1p112f;
  unsigned int special = (h & 0x7c00u) == 0x7c00u ? 0x7f800000u : 0u;
  return sitp_bits_f32(sitp_f32_bits(magnitude) | special | ((unsigned int)(h & 0x8000u) << 16)); }
static inline unsigned short sitp_to_f16(float f) {
  unsigned int u = sitp_f32_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  unsigned int e = a >> 23, at_least = e > 102u ? e : 102u, clamped = at_least < 112u ? at_least : 112u;
  unsigned int normal = sitp_shift_rne(a - (112u << 23), 13);
  unsigned int subnormal = sitp_shift_rne((a & 0x7fffffu) | 0x800000u, 126u - clamped);
  unsigned int r = a >= 0x38800000u ? normal : subnormal;
  r = a >= 0x477ff000u ? 0x7c00u : r;
  r = a > 0x7f800000u ? 0x7e00u : r;
  r &= 0u - (unsigned int)(a >= 0x33000000u);
  return (unsigned short)(sign | r); }
static inline float sitp_from_bf16(unsigned short b) { return sitp_bits_f32((unsigned int)b << 16); }
static inline unsigned short sitp_to_bf16(float f) {
  unsigned int u = sitp_f32_bits(f), a = u & 0x7fffffffu;
  return a > 0x7f800000u ? 0x7fc0 : (unsigned short)(((u >> 16) & 0x8000u) | sitp_shift_rne(a, 16)); }
#endif"""


# 2**x for float32, within 1 ulp of 2**x rounded once from float64 for every one of the 2**32
# floats (`python -m benchmarks.exp2f_check` runs them all in C, with our flags). Unlike a call
# into libm it is a formula, so a loop of it is vectorized (with -fno-trapping-math the selects
# below become blends); with libm's call a GELU kernel's loop stayed scalar and far slower.
# 2**x = 2**n * 2**f with n = round(x) and f in [-0.5, 0.5]; 2**f by its Taylor series to degree 7
# (truncation error below 1e-8), in float: in double, each vector of 8 floats was two of 4 doubles and
# their conversions, which made an exp kernel slower; 2**n as two power-of-two factors, so the
# subnormal results round once and 2**128 overflows to inf as it should. Below -151 the answer is 0
# (under half the smallest subnormal): such a lane (a masked softmax entry, exp(-inf)) computes from
# c = 0 and is replaced, because the subnormal arithmetic it would do takes a microcode assist an
# op, and a causal softmax masks half its entries (benchmarks/results/stage3_rule_measurements.md).
EXP2F = r"""#ifndef SITP_EXP2F
#define SITP_EXP2F
static inline __attribute__((always_inline)) float sitp_exp2f(float x) {
  float c = x > -151.0f ? (x > 129.0f ? 129.0f : x) : 0.0f;  /* NaN too: 0 */
  float n = (c + 0x1.8p23f) - 0x1.8p23f;
  float f = c - n;
  float p = 1.0f + f * (0x1.62e430p-1f + f * (0x1.ebfbe0p-3f + f * (0x1.c6b08ep-5f +
            f * (0x1.3b2ab6p-7f + f * (0x1.5d87fep-10f + f * (0x1.430912p-13f + f * 0x1.ffcbfcp-17f))))));
  int ni = (int)n, n1 = ni >> 1, n2 = ni - n1;
  union { unsigned int u; float f; } s1 = {(unsigned int)(n1 + 127) << 23}, s2 = {(unsigned int)(n2 + 127) << 23};
  float r = (p * s1.f) * s2.f;
  return x > -151.0f ? r : x != x ? x : 0.0f;
}
#endif"""

# log2(x) for float32, within 1 ulp of log2(x) computed in float64 and rounded once for every one of
# the 2**32 floats (`python -m benchmarks.exp2f_check` runs them all), inf, -inf, -0.0 and NaN as C's.
# A formula, not libm's call, so a loop of it is vectorized. x = m 2^e with m in [sqrt 1/2, sqrt 2)
# (a subnormal scaled by 2^23 first), and log2 m = 2 atanh(s) / ln 2 with s = (m - 1) / (m + 1),
# |s| < 0.172, an odd series to s^13 (its first dropped term is below 1e-11 of the sum), in double, so
# that s and the sum with e round once, at the end. Vectorized, it beats libm's log2f
# (benchmarks/results/stage3_rule_measurements.md).
LOG2F = r"""#ifndef SITP_LOG2F
#define SITP_LOG2F
static inline __attribute__((always_inline)) float sitp_log2f(float x) {
  union { float f; unsigned int u; } w = {x < 0x1p-126f ? x * 0x1p23f : x};  /* a subnormal scaled up */
  int e = (int)(w.u >> 23) - (x < 0x1p-126f ? 150 : 127);
  union { unsigned int u; float f; } m1 = {(w.u & 0x7fffffu) | 0x3f800000u};  /* x = m 2^e, m in [1, 2) */
  double m = m1.f > 0x1.6a09e6p+0f ? 0.5 * m1.f : m1.f;  /* in [sqrt 1/2, sqrt 2) */
  e += m1.f > 0x1.6a09e6p+0f;
  double s = (m - 1.0) / (m + 1.0), s2 = s * s;  /* ln m = 2 atanh s: |s| < 0.172 */
  double p = 0x1.71547652b82fep+1 + s2 * (0x1.ec709dc3a03fdp-1 + s2 * (0x1.2776c50ef9bffp-1 +
             s2 * (0x1.a61762a7aded9p-2 + s2 * (0x1.484b13d7c02a9p-2 + s2 * (0x1.0c9a84994022dp-2 +
             s2 * 0x1.c68f568d31761p-3)))));
  float r = (float)((double)e + s * p);
  return x > 0.0f ? (x < __builtin_inff() ? r : x) : x == 0.0f ? -__builtin_inff() : __builtin_nanf("");
}
#endif"""

# 2**x for an integer x (a fraction is dropped, toward 0): the power of two the math formulas scale
# by (transcendental.py's 2^n), EXP2F above without its polynomial. Two power-of-two factors, so a
# subnormal result rounds once and 2**128 (2**1024) overflows to inf; NaN stays NaN. Exp takes it for
# its 2^n, not sitp_exp2f(n): the same bits without a polynomial, so a softmax's sum of exps runs
# faster (benchmarks/results/stage3_rule_measurements.md).
POW2 = r"""#ifndef SITP_POW2
#define SITP_POW2
static inline __attribute__((always_inline)) float sitp_pow2f(float x) {
  float c = x > -151.0f ? (x > 129.0f ? 129.0f : x) : 0.0f;  /* NaN too: 0 */
  int n = (int)c, n1 = n >> 1, n2 = n - n1;
  union { unsigned int u; float f; } s1 = {(unsigned int)(n1 + 127) << 23}, s2 = {(unsigned int)(n2 + 127) << 23};
  return x > -151.0f ? s1.f * s2.f : x != x ? x : 0.0f;
}
static inline __attribute__((always_inline)) double sitp_pow2(double x) {
  double c = x > -1076.0 ? (x > 1025.0 ? 1025.0 : x) : 0.0;  /* NaN too: 0 */
  long long n = (long long)c, n1 = n >> 1, n2 = n - n1;
  union { unsigned long long u; double f; } s1 = {(unsigned long long)(n1 + 1023) << 52},
                                             s2 = {(unsigned long long)(n2 + 1023) << 52};
  return x > -1076.0 ? s1.f * s2.f : x != x ? x : 0.0;
}
#endif"""
# POW2 on a vector of float32 (codegen/vectorize.py packs a block of terms' exps): sitp_pow2f lane by lane, its
# selects as masks; the same bits in every lane.
POW2_VECTOR = r"""static inline __attribute__((always_inline)) floatx{n} sitp_pow2fx{n}(floatx{n} x) {{
  intx{n} in = x > -151.0f, top = x > 129.0f, nan = x != x;
  floatx{n} c = (floatx{n})((((intx{n})x & ~top) | ((intx{n})((floatx{n}){{0}} + 129.0f) & top)) & in);
  intx{n} n = __builtin_convertvector(c, intx{n}), n1 = n >> 1, n2 = n - n1;
  floatx{n} two = (floatx{n})((n1 + 127) << 23) * (floatx{n})((n2 + 127) << 23);
  return (floatx{n})(((intx{n})two & in) | ((intx{n})x & nan));
}}"""


@dataclass
class Source:
    """What rendering one kernel has written so far."""

    kernel: Kernel
    lines: list[str] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)  # id(UOp) -> its C variable or expression
    depth: int = 1  # indentation: open braces
    loops: int = 0  # RANGEs opened so far (THREAD slices the first)
    open_loops: list[Loop] = field(default_factory=list)  # the loops open now, innermost last
    group: Loop | None = None  # GROUP (cuda/renderer.py): the reduce loop a block's threads share
    group_lanes: int = 1  # GROUP: outputs a block takes side by side (1: a block folds one output)
    local: Any = None  # LOCAL (cuda/local.py): the plan of a matmul staged through shared memory
    fused: set[int] = field(default_factory=set)  # products a multiply-add consumes (cuda/renderer.py)

    def add(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)


def value_type(dtype: DType) -> DType:
    """The type a kernel holds a value of dtype in: a half type's is float32 (every C type is its own)."""
    return dtypes.float32 if dtype.is_half else dtype


def clamped(index: str, bound: int) -> str:
    """An index as C, held inside [0, bound] (the C compiler computes it once)."""
    return f"(({index})<0?0:({index})>{bound}?{bound}:({index}))"


def vector_name(name: str) -> str:
    return VECTOR_NAMES.get(name, CTYPES[name])


def vector_pow2(kernel: Kernel) -> set[int]:
    """The lane counts of the float32 vectors a kernel takes POW2 of."""
    return {u.lanes for u in kernel.uops if u.op is UOps.ALU and u.arg is Ops.POW2 and u.lanes > 1}


class CRenderer(Renderer):
    kernel_prefix = ""
    exp2f = "sitp_exp2f"  # float32 EXP2: our own (EXP2F below), which the C compiler can vectorize
    log2f = "sitp_log2f"  # float32 LOG2: our own too (LOG2F)
    gcc_pragmas = True  # the pragmas of `pragmas` (a GPU renderer keeps only the kernel itself)
    # capabilities (codegen/renderer.py): the CPU's
    threads = loop_blocks = split_reductions = packed_operands = narrow_tiles = True
    vector_width = 16  # float32s in one vector register: an upcast kernel's lanes as vectors (codegen/vectorize.py)

    def __init__(self, vector_width: int = 16, registers: int = 32):
        # The CPU's vector registers (cpu/compiler.vector_registers): an upcast kernel's vectors are one
        # register wide, since a C vector type wider than the CPU's registers is split by gcc into
        # pieces it keeps in memory, between which every operation shuffles. A matmul's register tile
        # is then two registers wide and as many rows as the registers allow: 8 rows (16 accumulators,
        # two of B's, A's broadcasts) where there are 32, 6 where there are 16 (12 accumulators: eight
        # are just the FMA latency times the two FMA pipes, and any stall then shows; rows that 6 does not
        # divide take it with the overlap pass, codegen/overlap.py). A step of K loads the tile's rows and
        # two registers of B for 2 x rows multiply-adds.
        self.vector_width = vector_width
        self.tile = (8 if registers >= 32 else 6, 2 * vector_width)
        # SPLIT's partials, one vector register of them (heuristics.split_axis: on rows long enough)
        self.split_parts = vector_width

    def ctype(self, dtype: DType, lanes: int = 1) -> str:
        """The C type of a value; of a vector of `lanes` of them, its typedef (`vector_types`). A vector
        of bools is a float32 comparison's mask: ints, -1 where true and 0 where false."""
        if lanes > 1 and dtype is dtypes.bool:
            return f"intx{lanes}"
        dtype = value_type(dtype)
        return CTYPES[dtype.name] if lanes == 1 else f"{vector_name(dtype.name)}x{lanes}"

    def storage(self, dtype: DType) -> str:
        """The C type of a buffer's element."""
        return HALF_STORAGE if dtype.is_half else CTYPES[dtype.name]

    def vector_types(self, kernel: Kernel) -> list[str]:
        """The typedefs of the vector types a kernel uses: gcc's vector extension, whose +, * and - act
        lane by lane and compile to vector instructions (split into several where the CPU's are narrower)."""
        used = {("int32" if u.dtype is dtypes.bool else value_type(u.dtype).name, u.lanes)
                for u in kernel.uops if u.lanes > 1}
        used |= {("int32", n) for name, n in set(used) if name == "float32" and vector_pow2(kernel)}  # its exponents
        used |= half_vectors.bit_vectors(kernel) if used else set()  # (only the vectorize pass makes vectors)
        return [f"typedef {CTYPES[name]} {vector_name(name)}x{n} __attribute__((vector_size({n * DTYPE_SIZE[name]})));"
                for name, n in sorted(used)] + [POW2_VECTOR.format(n=n) for n in sorted(vector_pow2(kernel))]

    def const(self, value, dtype: DType) -> str:
        text = self._literal(value, dtype)
        return f"({text})" if text.startswith("-") else text  # `-` then a negative literal is `--`

    def _literal(self, value, dtype: DType) -> str:
        if dtype.is_half:  # the value the half type holds, as the float the kernel computes with
            value, dtype = rounded(float(value), dtype), dtypes.float32
        if dtype is dtypes.bool:
            return "1" if value else "0"
        if dtype.is_int:
            if int(value) == -(2**63):  # C has no literal for it: 9223372036854775808 is out of range
                return "(-9223372036854775807LL-1)"
            suffix = {dtypes.int64: "LL", dtypes.uint64: "ULL", dtypes.uint32: "U"}.get(dtype, "")
            return f"{int(value)}{suffix}"
        value = float(value)
        if math.isnan(value):  # what <math.h>'s NAN, INFINITY and HUGE_VAL expand to (see `prologue`)
            return '__builtin_nanf("")' if dtype is dtypes.float32 else '__builtin_nan("")'
        if math.isinf(value):
            inf = "__builtin_inff()" if dtype is dtypes.float32 else "__builtin_huge_val()"
            return inf if value > 0 else f"(-{inf})"
        if dtype is dtypes.float32:
            value = struct.unpack("f", struct.pack("f", value))[0]  # rounded as the kernel will hold it
            return f"{value.hex()}f"
        return value.hex()

    def libm(self, op: Ops, dtype: DType) -> str:
        """The function a LIBM op calls: C's (sqrtf, sin, ...) or, for float32 EXP2 and LOG2, our own."""
        dtype = value_type(dtype)
        if op is Ops.EXP2 and dtype is dtypes.float32 and self.exp2f:
            return self.exp2f
        if op is Ops.LOG2 and dtype is dtypes.float32 and self.log2f:
            return self.log2f
        return f"{LIBM[op]}{'f' if dtype is dtypes.float32 else ''}"

    def pow2(self, x: str, dtype: DType) -> str:
        """2**x for an integer x: POW2 above."""
        dtype = value_type(dtype)
        return f"sitp_pow2{'f' if dtype is dtypes.float32 else ''}({x})"

    def alu(self, op: Ops, dtype: DType, args: list[str], src_dtype: DType) -> str:
        a = args
        t = src_dtype
        if op in LIBM:
            return f"{self.libm(op, t)}({a[0]})"
        if op is Ops.POW2:
            return self.pow2(a[0], t)
        if op is Ops.RECIP:
            return f"(({self.ctype(t)})1/{a[0]})"
        if op is Ops.WHERE:
            return f"({a[0]}?{a[1]}:{a[2]})"
        if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ):
            sym = {Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.CMPEQ: "=="}[op]
            return f"({a[0]}{sym}{a[1]})"
        if op is Ops.MAX:
            if t.is_float:
                return f"(({a[0]}>{a[1]}||{a[0]}!={a[0]})?{a[0]}:{a[1]})"
            return f"({a[0]}>{a[1]}?{a[0]}:{a[1]})"
        if op in (Ops.AND, Ops.OR, Ops.XOR):
            return f"({a[0]}{ {Ops.AND: '&', Ops.OR: '|', Ops.XOR: '^'}[op] }{a[1]})"
        if t.is_int and op in (Ops.ADD, Ops.MUL, Ops.NEG):  # wrap like numpy, without signed overflow
            u, c = UNSIGNED[t.name], self.ctype(t)
            if op is Ops.NEG:
                return f"(({c})(0-({u}){a[0]}))"
            return f"(({c})(({u}){a[0]}{'+' if op is Ops.ADD else '*'}({u}){a[1]}))"
        if op is Ops.NEG:
            return f"(-{a[0]})"
        if op is Ops.ADD:
            return f"({a[0]}+{a[1]})"
        if op is Ops.MUL:
            return f"({a[0]}*{a[1]})"
        if op is Ops.DIV:
            return f"({a[0]}/{a[1]})"
        raise NotImplementedError(f"render: no C for {op.name}")

    def update(self, op: Ops, dtype: DType, acc: str, value: str, select: bool = False) -> str:
        """acc folded with value. `select`: a max as a select, not a branch (SPLIT's partials, in a loop
        the C compiler vectorizes only when every statement in it is a plain assignment)."""
        if op is Ops.REDUCE_ADD:
            return f"{acc} = {self.alu(Ops.ADD if dtype is not dtypes.bool else Ops.OR, dtype, [acc, value], dtype)};"
        if op is Ops.REDUCE_MUL:
            return f"{acc} = {self.alu(Ops.MUL if dtype is not dtypes.bool else Ops.AND, dtype, [acc, value], dtype)};"
        if dtype is dtypes.bool:
            return f"{acc} = ({acc}|{value});"
        if select:  # `|`, not `||`: a short circuit is a branch, which stops the vectorizer
            nan = f"|({value}!={value})" if dtype.is_float else ""
            return f"{acc} = (({value}>{acc}){nan})?{value}:{acc};"
        if dtype.is_float:  # NaN wins, as numpy's max
            return f"if ({value}>{acc}||{value}!={value}) {acc} = {value};"
        return f"if ({value}>{acc}) {acc} = {value};"

    def load_index(self, u) -> str:
        """A LOAD's index; clamped into the buffer when the lowering found it can leave it (a padded
        view's index where the padding is: the value read there is thrown away)."""
        flat, bound = u.arg
        return render(flat) if bound is None else clamped(render(flat), bound)

    def params(self, kernel: Kernel) -> list[str]:
        """The buffers (outputs first), then the user's Variables by name (a symbolic size's value)."""
        return [*(f"{'const ' if i >= kernel.outputs else ''}{self.storage(b.dtype)}* restrict data{i}"
                  for i, b in enumerate(kernel.buffers)), *(f"const long long {v.name}" for v in kernel.variables)]

    def signature(self, kernel: Kernel) -> str:
        if kernel.threads > 1:  # THREAD: the loops live in the part function, see threaded()
            return f"static __attribute__((noinline)) void {kernel.name}_part(long long part, " \
                   f"{', '.join(self.params(kernel))})"
        return f"{self.kernel_prefix}void {kernel.name}({', '.join(self.params(kernel))})"

    def threaded(self, kernel: Kernel) -> list[str]:
        """THREAD: the kernel runs its part function once per thread, each taking a slice of the
        outermost loop. (An OpenMP loop written around the kernel's own loops is outlined into a
        function that reads the buffers through a struct: their `restrict` is lost, and a matmul
        tile ran far slower so.)"""
        args = ", ".join([*(f"data{i}" for i in range(len(kernel.buffers))), *(v.name for v in kernel.variables)])
        return [f"{self.kernel_prefix}void {kernel.name}({', '.join(self.params(kernel))}) {{",
                f"  #pragma omp parallel for num_threads({kernel.threads}) schedule(static)",
                f"  for (long long part = 0; part < {kernel.threads}; part++) {kernel.name}_part(part, {args});",
                "}"]

    def pragmas(self, kernel: Kernel) -> list[str]:
        if not self.gcc_pragmas:
            return []
        # An upcast kernel's lanes are vectorized as one block (gcc's SLP); left on, gcc's loop
        # vectorizer vectorizes the reduction loop instead, across strided loads: a matmul's
        # backward ran far slower that way. (Other compilers ignore the pragmas.) push/pop keep
        # the setting to this kernel when several share one file (compiler.compile_kernels).
        slp = kernel.upcast > 1
        # SPLIT's loop over the partials: gcc's PRE pass rewrites a negated select chain in it (a
        # softmax backward's row sum, with the causal mask) into a shape its if-conversion refuses,
        # and the loop stays scalar (it vectorizes without PRE: see opts.SPLIT)
        no_pre = any(u.op is UOps.ACCS for u in kernel.uops)
        # gcc 12.2's loop vectorizer miscompiles a loop that reads memory backwards in groups (an inner
        # loop unrolled completely) and folds or converts what it reads: the sum of a flipped (4, 2)
        # tensor read one element past the buffer and skipped two (renderer tests), and the sum of a
        # flipped int tensor as floats came out wrong. Such kernels (flips, not a training step's)
        # skip the loop vectorizer.
        backwards = any(u.op in (UOps.CAST, UOps.UPDATE) for u in kernel.uops) and \
            any(u.op is UOps.LOAD and descends(u.arg[0]) for u in kernel.uops)
        # It also miscompiles a gated load (a pad's) in a loop nest whose innermost loop runs twice: the
        # rows right after a leading pad of an (n, 2) tensor read as zeros, with AVX2 and AVX-512 (not
        # SSE), in any element type (conformance's view chains found it; test_views has the case).
        ranges = [u.arg for u in kernel.uops if u.op is UOps.RANGE]
        gated_pairs = bool(ranges) and ranges[-1].extent == 2 and \
            any(u.op is UOps.LOAD and len(u.srcs) > 1 for u in kernel.uops)
        return [*(['#pragma GCC optimize ("no-tree-loop-vectorize")'] if slp or backwards or gated_pairs else []),
                *(['#pragma GCC optimize ("no-tree-pre")'] if no_pre else []),
                *(['#pragma GCC optimize ("fp-contract=fast")'] if Pass.FMA.value in kernel.passes else [])]

    def prologue(self, kernel: Kernel, pragmas: list[str]) -> list[str]:
        """What comes before the kernel's signature: the math functions it calls. These are libm's
        prototypes, not <math.h>: parsing the header took a fifth of a small kernel's compile
        (benchmarks/compile_cost.py), and the constants are the builtins its macros expand to
        (`_literal`). (sitp_exp2f comes first and is always inlined: gcc does not inline a function
        compiled under other optimize settings, and a call in the loop stops its vectorization; so
        does POW2's sitp_pow2f.)"""
        calls = {self.libm(u.arg, u.srcs[0].dtype): self.ctype(u.srcs[0].dtype)
                 for u in kernel.uops if u.op is UOps.ALU and u.arg in LIBM}
        protos = [f"{t} {name}({t});" for name, t in sorted(calls.items()) if name not in (self.exp2f, self.log2f)]
        pow2 = any(u.op is UOps.ALU and u.arg is Ops.POW2 for u in kernel.uops)
        half = any(u.dtype is not None and u.dtype.is_half for u in kernel.uops)
        tiled = [tiles.header(self.matrix_tiles, kernel)] if Pass.TILES.value in kernel.passes else []
        return [*protos, *([HALF] if half else []), *tiled,
                *([EXP2F] if self.exp2f in calls else []), *([LOG2F] if self.log2f in calls else []),
                *([POW2] if pow2 else []),
                *self.vector_types(kernel), *(["#pragma GCC push_options", *pragmas] if pragmas else [])]

    def render(self, kernel: Kernel) -> str:
        pragmas = self.pragmas(kernel)
        lines = [*self.prologue(kernel, pragmas), self.signature(kernel) + " {", *self.body(kernel), "}"]
        if kernel.threads > 1:
            lines += self.threaded(kernel)
        if pragmas:
            lines.append("#pragma GCC pop_options")
        return "\n".join(lines) + "\n"

    def body(self, kernel: Kernel, src: Source | None = None) -> list[str]:
        """The kernel's body: what `open` writes, each UOp by its rule (RULES), what `close` writes."""
        src = src or Source(kernel)
        self.open(src)
        for u in kernel.uops:
            rule = self.RULES.get(u.op)
            if rule is None:
                raise NotImplementedError(f"render: {type(self).__name__} has no rule for UOp {u.op.name}")
            rule(self, src, u)
        return [*src.lines, *self.close(src)]

    def open(self, src: Source) -> None:
        """Lines before the first UOp, inside the kernel's body (the CUDA renderer opens its grid loop; a
        tiled kernel's thread configures its tiles)."""
        if Pass.TILES.value in src.kernel.passes:
            src.add("sitp_tile_config();")

    def close(self, src: Source) -> list[str]:
        """Lines after the last UOp, inside the kernel's body."""
        return ["  sitp_tile_release();"] if Pass.TILES.value in src.kernel.passes else []

    # ---- one method per UOp (RULES) ----

    def render_global(self, src: Source, u: UOp) -> None:
        src.names[id(u)] = f"data{u.arg}"

    def loop_range(self, src: Source, loop: Loop) -> tuple[str, str, str]:
        """A loop's start, end and step as C (the CUDA renderer shares GROUP's loop across threads)."""
        start, end = (render(x) if isinstance(x, Node) else str(x) for x in (loop.start, loop.extent))
        if src.loops == 0 and src.kernel.threads > 1 and start == "0":  # THREAD: this part's slice of the outer loop
            threads, n = src.kernel.threads, end if not isinstance(loop.extent, Node) else f"({end})"
            start, end = f"part*{n}/{threads}", f"(part+1)*{n}/{threads}"
        return start, end, f"{loop.var}++"

    def render_range(self, src: Source, u: UOp) -> None:
        loop = u.arg
        start, end, step = self.loop_range(src, loop)
        src.loops += 1
        src.open_loops.append(loop)
        if loop.kind is LoopKind.PARTIALS and self.gcc_pragmas:  # SPLIT's partials: gcc unrolls so short
            src.add("#pragma GCC unroll 1")  # a loop before it vectorizes it (then it cannot)
        src.add(f"for (long long {loop.var} = {start}; {loop.var} < {end}; {step}) {{")
        src.depth += 1

    def render_endrange(self, src: Source, u: UOp) -> None:
        src.open_loops.pop()
        src.depth -= 1
        src.add("}")

    def render_if(self, src: Source, u: UOp) -> None:
        src.add(f"if ({src.names[id(u.srcs[0])]}) {{")
        src.depth += 1

    def render_endif(self, src: Source, u: UOp) -> None:
        src.depth -= 1
        src.add("}")

    def render_const(self, src: Source, u: UOp) -> None:
        src.names[id(u)] = self.const(u.arg, u.dtype)

    def render_cond(self, src: Source, u: UOp) -> None:
        src.names[id(u)] = f"({render(u.arg)})"

    def render_acc(self, src: Source, u: UOp) -> None:
        src.names[id(u)] = f"acc{len(src.names)}"
        init = self.const(u.arg, u.dtype)
        init = init if u.lanes == 1 else "{" + ", ".join([init] * u.lanes) + "}"
        src.add(f"{self.ctype(u.dtype, u.lanes)} {src.names[id(u)]} = {init};")

    def render_accs(self, src: Source, u: UOp) -> None:
        """SPLIT's partial accumulators: an array the partials' loop indexes."""
        src.names[id(u)] = f"acc{len(src.names)}"
        identity, n = u.arg
        init = ", ".join([self.const(identity, u.dtype)] * n)
        src.add(f"{self.ctype(u.dtype)} {src.names[id(u)]}[{n}] = {{{init}}};")

    def render_part(self, src: Source, u: UOp) -> None:
        src.names[id(u)] = f"{src.names[id(u.srcs[0])]}[{render(u.arg)}]"

    def render_load(self, src: Source, u: UOp) -> None:
        src.names[id(u)] = u.name
        if u.lanes > 1 and u.dtype.is_half:
            address = f"{src.names[id(u.srcs[0])]} + {self.load_index(u)}"
            gate = src.names[id(u.srcs[1])] if len(u.srcs) > 1 else None
            src.add(half_vectors.load(u.name, self.ctype(u.dtype, u.lanes), u.dtype.name, u.lanes, address, gate))
            return
        if u.lanes > 1:  # consecutive entries, at any alignment: memcpy is how C says an unaligned vector load
            load = f"__builtin_memcpy(&{u.name}, {src.names[id(u.srcs[0])]} + {self.load_index(u)}, sizeof({u.name}));"
            if len(u.srcs) > 1:  # gated by one scalar for every lane: all of it or zeros
                src.add(f"{self.ctype(u.dtype, u.lanes)} {u.name} = {{0}}; if ({src.names[id(u.srcs[1])]}) {load}")
            else:
                src.add(f"{self.ctype(u.dtype, u.lanes)} {u.name}; {load}")
            return
        value = f"{src.names[id(u.srcs[0])]}[{self.load_index(u)}]"
        if u.dtype.is_half:
            value = f"{WIDEN[u.dtype.name]}({value})"
        if len(u.srcs) > 1:  # gated: read only where the gate holds (a masked load, where the loop vectorizes)
            zero = self.const(False if u.dtype is dtypes.bool else 0, u.dtype)
            value = f"({src.names[id(u.srcs[1])]}?{value}:{zero})"
        src.add(f"{self.ctype(u.dtype)} {u.name} = {value};")

    def render_cast(self, src: Source, u: UOp) -> None:
        src.names[id(u)] = u.name
        if u.lanes > 1 and not u.dtype.is_half:  # half lanes as float32: the floats they hold
            src.add(f"{self.ctype(u.dtype, u.lanes)} {u.name} = {src.names[id(u.srcs[0])]};")
            return
        if u.lanes > 1:  # lanes rounded into a half type (vectorize.HALF_CASTS)
            src.add(half_vectors.rounded(u.name, self.ctype(u.dtype, u.lanes), src.names[id(u.srcs[0])], u.lanes,
                                         u.dtype.name))
            return
        x, t = src.names[id(u.srcs[0])], self.ctype(u.dtype)
        if u.dtype is dtypes.bool:
            value = f"({t})({x}!=0)"
        elif u.srcs[0].dtype is dtypes.bool:  # a select: gcc vectorizes no (float) of a comparison of 64-bit ints
            value = f"({x}?({t})1:({t})0)"
        else:
            value = f"({t})({x})"
        if u.dtype.is_half:  # rounded now, as a store would round it
            value = f"{WIDEN[u.dtype.name]}({NARROW[u.dtype.name]}({value}))"
        src.add(f"{t} {u.name} = {value};")

    def render_alu(self, src: Source, u: UOp) -> None:
        src.names[id(u)] = u.name
        src_dtype = u.srcs[-1].dtype if u.arg is Ops.WHERE else u.srcs[0].dtype
        names = [src.names[id(s)] for s in u.srcs]
        if u.arg is Ops.WHERE and u.srcs[0].lanes > 1:  # a mask's select, bit by bit (C has no vector ?:)
            mask, ints = names[0], self.ctype(dtypes.bool, u.lanes)
            expr = f"({self.ctype(u.dtype, u.lanes)})((({ints}){names[1]}&{mask})|(({ints}){names[2]}&~{mask}))"
        elif u.arg is Ops.POW2 and u.lanes > 1:
            expr = f"sitp_pow2fx{u.lanes}({names[0]})"
        elif u.dtype is dtypes.bool and u.lanes > 1 and src_dtype is dtypes.int64:  # 64-bit lanes' mask, narrowed
            wide = self.alu(u.arg, u.dtype, names, src_dtype)
            expr = f"__builtin_convertvector({wide}, {self.ctype(u.dtype, u.lanes)})"
        else:
            expr = self.alu(u.arg, u.dtype, names, src_dtype)  # (a vector's: the same)
        src.add(f"{self.ctype(u.dtype, u.lanes)} {u.name} = {expr};")

    def render_update(self, src: Source, u: UOp) -> None:
        acc, value = u.srcs
        src.add(self.update(u.arg, u.dtype, src.names[id(acc)], src.names[id(value)], acc.op is UOps.PART))

    def render_store(self, src: Source, u: UOp) -> None:
        if u.lanes > 1 and u.srcs[1].dtype.is_half:
            src.add(half_vectors.store(src.names[id(u.srcs[0])], render(u.arg), src.names[id(u.srcs[1])], u.lanes,
                                       u.srcs[1].dtype.name))
            return
        if u.lanes > 1:
            value = src.names[id(u.srcs[1])]
            src.add(f"__builtin_memcpy({src.names[id(u.srcs[0])]} + {render(u.arg)}, &{value}, sizeof({value}));")
            return
        value, stored = src.names[id(u.srcs[1])], u.srcs[1]
        if stored.op is UOps.LOAD and stored.dtype.is_half and len(stored.srcs) == 1:  # a half value copied: its bits
            value = f"{src.names[id(stored.srcs[0])]}[{self.load_index(stored)}]"
        elif stored.dtype.is_half:
            value = f"{NARROW[stored.dtype.name]}({value})"
        src.add(f"{src.names[id(u.srcs[0])]}[{render(u.arg)}] = {value};")

    def render_vec(self, src: Source, u: UOp) -> None:
        src.names[id(u)] = u.name
        lanes = ", ".join(src.names[id(s)] for s in (u.srcs if len(u.srcs) == u.lanes else u.srcs * u.lanes))
        src.add(f"{self.ctype(u.dtype, u.lanes)} {u.name} = {{{lanes}}};")

    def render_gep(self, src: Source, u: UOp) -> None:
        src.names[id(u)] = u.name
        src.add(f"{self.ctype(u.dtype)} {u.name} = {src.names[id(u.srcs[0])]}[{u.arg}];")

    def render_shuffle(self, src: Source, u: UOp) -> None:
        src.names[id(u)] = u.name
        v, w = src.names[id(u.srcs[0])], src.names[id(u.srcs[-1])]  # (two vectors: lanes of both, the second's after)
        src.add(f"{self.ctype(u.dtype, u.lanes)} {u.name} = __builtin_shufflevector({v}, {w}, "
                f"{', '.join(str(k) for k in u.arg)});")

    def render_tile(self, src: Source, u: UOp) -> None:
        src.add(tiles.tile_line(u, src.names))

    RULES = {UOps.GLOBAL: render_global, UOps.RANGE: render_range, UOps.ENDRANGE: render_endrange,
             UOps.IF: render_if, UOps.ENDIF: render_endif,
             UOps.CONST: render_const, UOps.COND: render_cond, UOps.ACC: render_acc, UOps.ACCS: render_accs,
             UOps.PART: render_part, UOps.LOAD: render_load, UOps.CAST: render_cast, UOps.ALU: render_alu,
             UOps.UPDATE: render_update, UOps.STORE: render_store, UOps.VEC: render_vec, UOps.GEP: render_gep,
             UOps.SHUFFLE: render_shuffle, UOps.TILE_ZERO: render_tile, UOps.TILE_LOAD: render_tile,
             UOps.TILE_DOT: render_tile, UOps.TILE_STORE: render_tile}
