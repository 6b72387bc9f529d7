"""CUDA C source for the cuda device's runtime kernels, as strings; nothing here imports CuPy.

``source(kind, op, dtype_in, dtype_out, ndim) -> (kernel_name, cuda_source)`` writes one kernel
specialised to one op, one dtype pair and one number of dims, the GPU twin of a C kernel of
``csrc/``. A device module compiles it once (``cupy.RawModule``) and caches it by name. An op is
named as in ops.py's ``Ops``, lower case (``Ops.CMPLT`` is "cmplt"): the table the C kernels'
dispatch codes come from. This module imports only the standard library (the ptx check loads it
alone), so it keys its tables by those names; the runtime turns a dispatch code into one with
``Ops(code).name.lower()``, and tests check that every table names real ops and that each
(op, dtype) pair has a kernel here exactly when the C kernels accept it.

Conventions (those of csrc/api.h): outputs first, then inputs, then sizes; sizes, shapes and
strides are in elements and passed as ``long long`` (numpy.int64); every pointer already points
at its tensor's first element; outputs are fresh and contiguous unless the kernel takes their
strides. Python validates everything first: kernels never check, print or trap. Every kernel is a
grid-stride loop, so any grid is correct; reductions need blockDim.x == REDUCE_THREADS.

    kind         op                          signature after the kernel name
    unary        neg recip sqrt ... gelu     (OUT *out, const IN *a, n, n0.., sa0..)
    binary       add ... xor gelu_grad       (OUT *out, const IN *a, const IN *b, n, n0.., sa0.., sb0..)
    where        -                           (T *out, const bool *c, const T *a, const T *b, n, n0..,
                                              sc0.., sa0.., sb0..)
    cast         -                           (OUT *out, const IN *a, n, n0.., sa0..)
    copy         -                           (T *out, const T *a, n, n0.., so0.., sa0..)
    reduce       reduce_add .. reduce_min    (T *out, const T *a, O, R, I, so, sr, si): (O, R, I) -> (O, I)
    arg_reduce   argmax argmin               (i64 *out, const T *a, O, R, I, so, sr, si), R >= 1
    cumsum       sum                         (T *out, const T *a, O, R, I, so, sr, si): out (O, R, I)
    gather       -                           (T *out, const T *a, const i64 *offsets, nb, m, n0.., sa0..)
    scatter_add  -                           (T *out, const T *src, const i64 *offsets, nb, m, n0.., so0..)
    fill         -                           (T *out, n, T value)
    rand         uniform                     (T *out, n, u64 seed, u64 counter)
    iota         -                           (i64 *out, n)
    matmul       -                           (T *out, const T *a, const T *b, batch, M, N, K)
    adam         -                           (T *p, T *m, T *v, const T *g, n, T decay, T l2, T b1,
                                              T c1, T b2, T c2, T step, T inv_sqrt_bc2, T eps)

``n`` is the element count of the output (product of n0..); gather's out is (nb, *shape) with
``m`` elements per block, the block b starting at ``a + offsets[b]``; scatter_add adds the
contiguous (nb, *shape) src into those blocks of out (atomically: blocks may overlap).
Reductions, arg_reduce and cumsum work on the (O, R, I) view the Python side builds, so they
take ndim = 3; fill, rand and iota are flat and take ndim = 1. matmul is the GPU twin of
csrc/gemm.c for the dtypes the GEMM ladder (float32 only) does not take: out (batch, M, N) =
a (batch, M, K) @ b (batch, K, N), all contiguous; it takes ndim = 3. adam is csrc/adam.c's
twin: one Adam/AdamW step in place, flat (ndim = 1), c1 = 1 - b1 and c2 = 1 - b2 given rounded.
"""

from __future__ import annotations

CORE = {"bool": "u8", "int32": "int", "int64": "i64", "float32": "float", "float64": "double"}
# The other eight are storage, as in the C kernels: a cast widens them to a core dtype (the half types to
# float32, the small ints to int64) before anything computes, and data moves by element size.
STORAGE = {"int8": "signed char", "int16": "short", "uint8": "u8", "uint16": "unsigned short", "uint32": "unsigned",
           "uint64": "u64", "float16": "unsigned short", "bfloat16": "unsigned short"}
CTYPES = CORE | STORAGE
UNSIGNED = {"int32": "unsigned", "int64": "u64", "uint64": "u64"}
DTYPES = tuple(CTYPES)
FLOATS = ("float32", "float64")
INTS = ("int32", "int64")
HALVES = ("float16", "bfloat16")
STORAGE_KINDS = ("cast", "copy", "where", "gather", "fill")  # the kinds that take a storage dtype
UINT64_KINDS = ("unary", "binary", "reduce", "arg_reduce")  # uint64 computes in these too (it fits no wider int)
# csrc/elementwise.c's cast pairs beyond the core dtypes among themselves (dtype.cast_hub routes any other
# pair through one of these): the small ints to and from int64, uint64 to and from the floats, the half
# types to and from float32.
CAST_HUB = ({(d, "int64") for d in ("int8", "int16", "uint8", "uint16", "uint32", "uint64")}
            | {("int64", d) for d in ("int8", "int16", "uint8", "uint16", "uint32", "uint64")}
            | {("float32", "uint64"), ("float64", "uint64"), ("uint64", "float32"), ("uint64", "float64")}
            | {(h, "float32") for h in HALVES} | {("float32", h) for h in HALVES})
MAX_NDIM = 64  # as in csrc/kernels.h
REDUCE_THREADS = 256

PRELUDE = """#ifndef SITP_PRELUDE
#define SITP_PRELUDE
typedef long long i64;
typedef unsigned long long u64;
typedef unsigned char u8;
/* Integer power by squaring through the unsigned type, wrapping like numpy (y >= 0). */
__device__ __forceinline__ int ipow_int(int x, int y) {
  unsigned r = 1, b = (unsigned)x;
  while (y > 0) { if (y & 1) r *= b; b *= b; y >>= 1; }
  return (int)r;
}
__device__ __forceinline__ i64 ipow_i64(i64 x, i64 y) {
  u64 r = 1, b = (u64)x;
  while (y > 0) { if (y & 1) r *= b; b *= b; y >>= 1; }
  return (i64)r;
}
__device__ __forceinline__ u64 ipow_u64(u64 x, u64 y) {
  u64 r = 1, b = x;
  while (y > 0) { if (y & 1) r *= b; b *= b; y >>= 1; }
  return r;
}
/* csrc/random.c's generator: SplitMix64's finaliser, so both devices draw the same stream. */
__device__ __forceinline__ u64 mix64(u64 z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
/* csrc/half.h's conversions, the same integer arithmetic on the bits: float16 and bfloat16 are 16-bit
   storage, widened to float exactly and narrowed by rounding to nearest even (a NaN to the quiet NaN). */
__device__ __forceinline__ unsigned shift_rne(unsigned x, unsigned shift) {
  return (x + ((1u << (shift - 1)) - 1u) + ((x >> shift) & 1u)) >> shift;
}
__device__ __forceinline__ float f16_to_f32(unsigned short h) {
  const float magnitude = __uint_as_float((unsigned)(h & 0x7fffu) << 13) * 0x1p112f;
  const unsigned special = (h & 0x7c00u) == 0x7c00u ? 0x7f800000u : 0u;
  return __uint_as_float(__float_as_uint(magnitude) | special | ((unsigned)(h & 0x8000u) << 16));
}
__device__ __forceinline__ unsigned short f32_to_f16(float f) {
  const unsigned u = __float_as_uint(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  const unsigned e = a >> 23, at_least = e > 102u ? e : 102u, clamped = at_least < 112u ? at_least : 112u;
  const unsigned normal = shift_rne(a - (112u << 23), 13);
  const unsigned subnormal = shift_rne((a & 0x7fffffu) | 0x800000u, 126u - clamped);
  unsigned r = a >= 0x38800000u ? normal : subnormal;
  r = a >= 0x477ff000u ? 0x7c00u : r;
  r = a > 0x7f800000u ? 0x7e00u : r;
  r &= 0u - (unsigned)(a >= 0x33000000u);
  return (unsigned short)(sign | r);
}
__device__ __forceinline__ float bf16_to_f32(unsigned short bits) { return __uint_as_float((unsigned)bits << 16); }
__device__ __forceinline__ unsigned short f32_to_bf16(float f) {
  const unsigned u = __float_as_uint(f), a = u & 0x7fffffffu;
  return a > 0x7f800000u ? (unsigned short)0x7fc0 : (unsigned short)(((u >> 16) & 0x8000u) | shift_rne(a, 16));
}
#define SITP_INF_F __int_as_float(0x7f800000)
#define SITP_INF __longlong_as_double(0x7ff0000000000000LL)
#define GRID_STRIDE(i, n) \\
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)
#endif
"""

# ---- expressions over x (and y) of the input's C type, per dtype family ----


SQRT1_2, INV_SQRT_2PI = "0.70710678118654752440", "0.39894228040143267794"  # 1/sqrt(2), 1/sqrt(2 pi)


def _float_unary(suffix: str) -> dict[str, str]:
    return {"neg": "-x", "recip": "(T)1 / x", "sqrt": f"sqrt{suffix}(x)", "exp": f"exp{suffix}(x)",
            "log": f"log{suffix}(x)", "exp2": f"exp2{suffix}(x)", "log2": f"log2{suffix}(x)",
            "sin": f"sin{suffix}(x)", "cos": f"cos{suffix}(x)", "tanh": f"tanh{suffix}(x)",
            "erf": f"erf{suffix}(x)", "abs": f"fabs{suffix}(x)", "sign": "(T)((x > 0) - (x < 0))",
            "gelu": f"x * ((T)0.5 * erfc{suffix}(-x * (T){SQRT1_2}))"}


def _gelu_slope(suffix: str) -> str:
    """g * GELU'(x), with y the incoming gradient g: csrc/gelu.h's gelu_slope (Phi by erfc: exact in both tails)."""
    return (f"y * ((T)0.5 * erfc{suffix}(-x * (T){SQRT1_2}) + x * exp{suffix}((T)-0.5 * x * x) "
            f"* (T){INV_SQRT_2PI})")


INT_UNARY = {"neg": "(T)(0 - (U)x)", "abs": "x < 0 ? (T)(0 - (U)x) : x", "sign": "(T)((x > 0) - (x < 0))",
             "not": "~x"}
UINT_UNARY = {"neg": "(T)(0 - x)", "abs": "x", "sign": "(T)(x != 0)", "not": "~x"}  # (x < 0 never holds)
UNARY = {"float32": _float_unary("f"), "float64": _float_unary(""), "int32": INT_UNARY, "int64": INT_UNARY,
         "uint64": UINT_UNARY, "bool": {"not": "(u8)!x"}}

COMPARE = {"cmplt": "x < y", "cmple": "x <= y", "cmpeq": "x == y", "cmpne": "x != y"}
FLOAT_BINARY = {"add": "x + y", "sub": "x - y", "mul": "x * y", "div": "x / y", "pow": "POW(x, y)",
                "max": "(x > y || x != x) ? x : y", "min": "(x < y || x != x) ? x : y"}  # NaN wins, like numpy
INT_BINARY = {"add": "(T)((U)x + (U)y)", "sub": "(T)((U)x - (U)y)", "mul": "(T)((U)x * (U)y)",
              "pow": "POW(x, y)", "max": "x > y ? x : y", "min": "x < y ? x : y",
              "and": "x & y", "or": "x | y", "xor": "x ^ y"}
BOOL_BINARY = {"max": "x | y", "or": "x | y", "min": "x & y", "and": "x & y", "xor": "x ^ y",
               "cmpne": "x ^ y", "cmpeq": "x == y", "cmplt": "x < y", "cmple": "x <= y"}
BINARY = {"float32": FLOAT_BINARY | COMPARE | {"gelu_grad": _gelu_slope("f")},
          "float64": FLOAT_BINARY | COMPARE | {"gelu_grad": _gelu_slope("")}, "int32": INT_BINARY | COMPARE,
          "int64": INT_BINARY | COMPARE, "uint64": INT_BINARY | COMPARE, "bool": BOOL_BINARY}
SQRT = {"float32": "sqrtf", "float64": "sqrt"}
POW = {"float32": "powf", "float64": "pow", "int32": "ipow_int", "int64": "ipow_i64", "uint64": "ipow_u64"}

LOWEST = {"float32": "-SITP_INF_F", "float64": "-SITP_INF", "int32": "(-2147483647 - 1)",
          "int64": "(-9223372036854775807LL - 1)", "uint64": "0ULL", "bool": "0"}
HIGHEST = {"float32": "SITP_INF_F", "float64": "SITP_INF", "int32": "2147483647",
           "int64": "9223372036854775807LL", "uint64": "18446744073709551615ULL", "bool": "1"}
REDUCE = {"reduce_add": ("0", "acc + x", "(T)((U)acc + (U)x)"),
          "reduce_mul": ("1", "acc * x", "(T)((U)acc * (U)x)"),
          "reduce_max": (None, "(x > acc || x != x) ? x : acc", "x > acc ? x : acc"),
          "reduce_min": (None, "(x < acc || x != x) ? x : acc", "x < acc ? x : acc")}
BOOL_REDUCE = {"reduce_max": ("0", "x | acc"), "reduce_min": ("1", "x & acc")}
ARG_BETTER = {"argmax": "y > x", "argmin": "y < x"}

KIND_OPS = {
    "unary": sorted({op for table in UNARY.values() for op in table}),
    "binary": sorted({op for table in BINARY.values() for op in table}),
    "reduce": list(REDUCE), "arg_reduce": list(ARG_BETTER), "cumsum": ["sum"], "rand": ["uniform"],
    "where": [None], "cast": [None], "copy": [None], "gather": [None], "scatter_add": [None],
    "fill": [None], "iota": [None], "matmul": [None], "adam": [None],
}
FIXED_NDIM = {"reduce": 3, "arg_reduce": 3, "cumsum": 3, "fill": 1, "rand": 1, "iota": 1, "matmul": 3, "adam": 1}


def source(kind: str, op: str | None, dtype_in: str, dtype_out: str, ndim: int) -> tuple[str, str]:
    """(kernel_name, cuda_source) of one kernel; ValueError/TypeError for a combination that has none."""
    if kind not in KIND_OPS:
        raise ValueError(f"cuda source: unknown kernel kind {kind!r}; expected one of {list(KIND_OPS)}")
    if op not in KIND_OPS[kind]:
        raise ValueError(f"cuda source {kind}: unknown op {op!r}; expected one of {KIND_OPS[kind]}")
    for d in (dtype_in, dtype_out):
        if d not in CTYPES:
            raise TypeError(f"cuda source {kind} {op}: unknown dtype {d!r}; expected one of {list(DTYPES)}")
    if kind in FIXED_NDIM and ndim != FIXED_NDIM[kind]:
        raise ValueError(f"cuda source {kind}: takes ndim = {FIXED_NDIM[kind]}, got {ndim}")
    if not 0 <= ndim <= MAX_NDIM:
        raise ValueError(f"cuda source {kind} {op}: ndim {ndim} outside 0..{MAX_NDIM}")
    _check_dtypes(kind, op, dtype_in, dtype_out)
    name = "_".join(p for p in (kind, op, dtype_in, None if dtype_out == dtype_in else dtype_out) if p)
    if kind not in FIXED_NDIM:
        name += f"_nd{ndim}"
    return name, PRELUDE + _WRITERS[kind](name, op, dtype_in, dtype_out, ndim)


def _check_dtypes(kind: str, op: str | None, dtype_in: str, dtype_out: str) -> None:
    def fail(expected: str):
        raise TypeError(f"cuda source {kind} {op}: {dtype_in} -> {dtype_out} is not supported; expected {expected}")

    computes = CORE.keys() | ({"uint64"} if kind in UINT64_KINDS else set())
    if kind not in STORAGE_KINDS and (dtype_in not in computes or dtype_out not in computes):
        fail(f"one of {sorted(computes)}: the others are storage, widened before anything computes")
    if kind == "cast" and (dtype_in not in CORE or dtype_out not in CORE):
        if (dtype_out, dtype_in) not in CAST_HUB:
            fail("a pair of csrc/elementwise.c's cast (dtype.cast_hub takes any other in two steps)")
        return
    if kind in ("unary", "binary"):
        tables = UNARY if kind == "unary" else BINARY
        if op not in tables[dtype_in]:
            fail(f"an input dtype with {op}: {[d for d in DTYPES if op in tables.get(d, {})]}")
        want = "bool" if kind == "binary" and op in COMPARE else dtype_in
        if dtype_out != want:
            fail(f"output {want}")
    elif kind == "cast":
        return
    elif kind == "arg_reduce" or kind == "iota":
        if dtype_out != "int64" or (kind == "iota" and dtype_in != "int64"):
            fail("output int64")
    elif dtype_out != dtype_in:
        fail("the same dtype in and out")
    elif kind == "reduce" and dtype_in == "bool" and op not in BOOL_REDUCE:
        fail(f"bool with {list(BOOL_REDUCE)}")
    elif kind in ("cumsum", "scatter_add", "matmul") and dtype_in == "bool":
        fail("a number dtype")
    elif kind in ("rand", "adam") and dtype_in not in FLOATS:
        fail(f"one of {FLOATS}")


# ---- pieces shared by the writers ----


def _types(dtype_in: str, dtype_out: str = "") -> str:
    lines = [f"  typedef {CTYPES[dtype_in]} T;"]
    if dtype_in in UNSIGNED:
        lines.append(f"  typedef {UNSIGNED[dtype_in]} U;")
    if dtype_out:
        lines.append(f"  typedef {CTYPES[dtype_out]} OUT;")
    return "\n".join(lines) + "\n"


def _params(ndim: int, *operands: str) -> str:
    """', i64 n0, .., i64 sa0, ..' for the shape and each operand's strides."""
    names = [f"n{d}" for d in range(ndim)] + [f"s{p}{d}" for p in operands for d in range(ndim)]
    return "".join(f", i64 {n}" for n in names)


def _offsets(ndim: int, *operands: str, index: str = "i") -> str:
    """Statements turning the linear index into each operand's element offset o<p>."""
    lines = ["    i64 " + ", ".join(f"o{p} = 0" for p in operands) + ";"]
    if ndim:
        lines.append(f"    i64 rem = {index};")
    for d in reversed(range(ndim)):
        coord = "rem" if d == 0 else f"rem % n{d}"
        lines.append(f"    {{ const i64 c = {coord}; " + ("" if d == 0 else f"rem /= n{d}; ")
                     + " ".join(f"o{p} += c * s{p}{d};" for p in operands) + " }")
    return "\n".join(lines) + "\n"


def _kernel(name: str, params: str, body: str) -> str:
    return f'extern "C" __global__ void {name}({params}) {{\n{body}}}\n'


# ---- one writer per kind ----


def _unary(name, op, dtype_in, dtype_out, ndim):
    expr = UNARY[dtype_in][op]
    body = (_types(dtype_in, dtype_out) + "  GRID_STRIDE(i, n) {\n" + _offsets(ndim, "a")
            + f"    const T x = a[oa];\n    out[i] = (OUT)({expr});\n  }}\n")
    return _kernel(name, f"{CTYPES[dtype_out]} *out, const {CTYPES[dtype_in]} *a, i64 n" + _params(ndim, "a"), body)


def _binary(name, op, dtype_in, dtype_out, ndim):
    expr = BINARY[dtype_in][op].replace("POW", POW.get(dtype_in, ""))
    body = (_types(dtype_in, dtype_out) + "  GRID_STRIDE(i, n) {\n" + _offsets(ndim, "a", "b")
            + f"    const T x = a[oa], y = b[ob];\n    out[i] = (OUT)({expr});\n  }}\n")
    t = CTYPES[dtype_in]
    return _kernel(name, f"{CTYPES[dtype_out]} *out, const {t} *a, const {t} *b, i64 n" + _params(ndim, "a", "b"), body)


def _where(name, op, dtype_in, dtype_out, ndim):
    t = CTYPES[dtype_in]
    body = ("  GRID_STRIDE(i, n) {\n" + _offsets(ndim, "c", "a", "b")
            + "    out[i] = cond[oc] ? a[oa] : b[ob];\n  }\n")
    return _kernel(name, f"{t} *out, const u8 *cond, const {t} *a, const {t} *b, i64 n" + _params(ndim, "c", "a", "b"),
                   body)


HALF_TO_F32 = {"float16": "f16_to_f32", "bfloat16": "bf16_to_f32"}
F32_TO_HALF = {"float16": "f32_to_f16", "bfloat16": "f32_to_bf16"}


def _cast(name, op, dtype_in, dtype_out, ndim):
    if dtype_in in HALVES:
        expr = f"{HALF_TO_F32[dtype_in]}(x)"
    elif dtype_out in HALVES:
        expr = f"{F32_TO_HALF[dtype_out]}(x)"
    else:
        expr = "(OUT)(x != 0)" if dtype_out == "bool" else "(OUT)x"  # to bool means "is nonzero"
    body = (_types(dtype_in, dtype_out) + "  GRID_STRIDE(i, n) {\n" + _offsets(ndim, "a")
            + f"    const T x = a[oa];\n    out[i] = {expr};\n  }}\n")
    return _kernel(name, f"{CTYPES[dtype_out]} *out, const {CTYPES[dtype_in]} *a, i64 n" + _params(ndim, "a"), body)


def _copy(name, op, dtype_in, dtype_out, ndim):
    t = CTYPES[dtype_in]
    body = "  GRID_STRIDE(i, n) {\n" + _offsets(ndim, "o", "a") + "    out[oo] = a[oa];\n  }\n"
    return _kernel(name, f"{t} *out, const {t} *a, i64 n" + _params(ndim, "o", "a"), body)


def _reduce_step(op: str, dtype: str) -> tuple[str, str]:
    if dtype == "bool":
        return BOOL_REDUCE[op]
    init, float_step, int_step = REDUCE[op]
    if init is None:
        init = LOWEST[dtype] if op == "reduce_max" else HIGHEST[dtype]
    return init, float_step if dtype in FLOATS else int_step


def _reduce(name, op, dtype_in, dtype_out, ndim):
    # One block per output element: each thread folds a strided slice of R, then a tree in shared memory.
    init, step = _reduce_step(op, dtype_in)
    body = (_types(dtype_in) + f"  __shared__ T part[{REDUCE_THREADS}];\n"
            "  for (i64 j = blockIdx.x; j < O * I; j += gridDim.x) {\n"
            "    const T *p = a + (j / I) * so + (j % I) * si;\n"
            f"    T acc = {init};\n"
            f"    for (i64 r = threadIdx.x; r < R; r += blockDim.x) {{ const T x = p[r * sr]; acc = {step}; }}\n"
            "    part[threadIdx.x] = acc;\n    __syncthreads();\n"
            "    for (int s = blockDim.x / 2; s > 0; s >>= 1) {\n"
            f"      if (threadIdx.x < s) {{ const T acc = part[threadIdx.x], x = part[threadIdx.x + s]; "
            f"part[threadIdx.x] = {step}; }}\n"
            "      __syncthreads();\n    }\n"
            "    if (threadIdx.x == 0) out[j] = part[0];\n"
            "    __syncthreads();  // part is reused for the next output\n  }\n")
    t = CTYPES[dtype_in]
    return _kernel(name, f"{t} *out, const {t} *a, i64 O, i64 R, i64 I, i64 so, i64 sr, i64 si", body)


def _arg_reduce(name, op, dtype_in, dtype_out, ndim):
    # (y, j) beats (x, i) when it is more extreme; a NaN beats any number; ties go to the lower index.
    better = ARG_BETTER[op]
    body = (_types(dtype_in) + f"  __shared__ T val[{REDUCE_THREADS}];\n  __shared__ i64 arg[{REDUCE_THREADS}];\n"
            "  auto beats = [](T y, i64 j, T x, i64 i) {\n"
            "    if (j < 0) return false;\n    if (i < 0) return true;\n"
            "    const bool xn = x != x, yn = y != y;\n"
            "    if (xn || yn) return yn && (!xn || j < i);\n"
            f"    return ({better}) || (y == x && j < i);\n  }};\n"
            "  for (i64 q = blockIdx.x; q < O * I; q += gridDim.x) {\n"
            "    const T *p = a + (q / I) * so + (q % I) * si;\n"
            "    T best = 0;\n    i64 at = -1;\n"
            "    for (i64 r = threadIdx.x; r < R; r += blockDim.x) {\n"
            "      const T y = p[r * sr];\n      if (beats(y, r, best, at)) { best = y; at = r; }\n    }\n"
            "    val[threadIdx.x] = best;\n    arg[threadIdx.x] = at;\n    __syncthreads();\n"
            "    for (int s = blockDim.x / 2; s > 0; s >>= 1) {\n"
            "      const int t = threadIdx.x;\n"
            "      if (t < s && beats(val[t + s], arg[t + s], val[t], arg[t])) {\n"
            "        val[t] = val[t + s];\n        arg[t] = arg[t + s];\n      }\n"
            "      __syncthreads();\n    }\n"
            "    if (threadIdx.x == 0) out[q] = arg[0];\n    __syncthreads();\n  }\n")
    return _kernel(name, f"i64 *out, const {CTYPES[dtype_in]} *a, i64 O, i64 R, i64 I, i64 so, i64 sr, i64 si", body)


def _cumsum(name, op, dtype_in, dtype_out, ndim):
    acc = "U" if dtype_in in INTS else "T"  # ints wrap through the unsigned type
    body = (_types(dtype_in) + "  GRID_STRIDE(j, O * I) {\n"
            "    const i64 q = j / I, c = j % I;\n    const T *p = a + q * so + c * si;\n"
            f"    T *o = out + q * R * I + c;\n    {acc} acc = 0;\n"
            f"    for (i64 r = 0; r < R; r++) {{ acc += ({acc})p[r * sr]; o[r * I] = (T)acc; }}\n  }}\n")
    t = CTYPES[dtype_in]
    return _kernel(name, f"{t} *out, const {t} *a, i64 O, i64 R, i64 I, i64 so, i64 sr, i64 si", body)


def _gather(name, op, dtype_in, dtype_out, ndim):
    t = CTYPES[dtype_in]
    body = ("  GRID_STRIDE(i, nb * m) {\n" + _offsets(ndim, "a", index="i % m")
            + "    out[i] = a[offsets[i / m] + oa];\n  }\n")
    return _kernel(name, f"{t} *out, const {t} *a, const i64 *offsets, i64 nb, i64 m" + _params(ndim, "a"), body)


def _scatter_add(name, op, dtype_in, dtype_out, ndim):
    t = CTYPES[dtype_in]
    # atomicAdd has no signed 64-bit overload; two's complement addition is the same on u64.
    add = ("atomicAdd((u64 *)(out + offsets[i / m] + oo), (u64)src[i]);" if dtype_in == "int64"
           else "atomicAdd(out + offsets[i / m] + oo, src[i]);")
    body = "  GRID_STRIDE(i, nb * m) {\n" + _offsets(ndim, "o", index="i % m") + f"    {add}\n  }}\n"
    return _kernel(name, f"{t} *out, const {t} *src, const i64 *offsets, i64 nb, i64 m" + _params(ndim, "o"), body)


def _fill(name, op, dtype_in, dtype_out, ndim):
    t = CTYPES[dtype_in]
    return _kernel(name, f"{t} *out, i64 n, {t} value", "  GRID_STRIDE(i, n) out[i] = value;\n")


def _rand(name, op, dtype_in, dtype_out, ndim):
    # Element i is a hash of (seed, counter + i), bit for bit csrc/random.c's rand_uniform.
    shift, scale = ("40", "5.9604644775390625e-08f") if dtype_in == "float32" else ("11", "1.1102230246251565e-16")
    body = (_types(dtype_in) + "  const u64 key = mix64(seed);\n  GRID_STRIDE(i, n) {\n"
            "    const u64 z = mix64(key + (counter + (u64)i + 1) * 0x9e3779b97f4a7c15ULL);\n"
            f"    out[i] = (T)(z >> {shift}) * {scale};\n  }}\n")
    return _kernel(name, f"{CTYPES[dtype_in]} *out, i64 n, u64 seed, u64 counter", body)


def _iota(name, op, dtype_in, dtype_out, ndim):
    return _kernel(name, "i64 *out, i64 n", "  GRID_STRIDE(i, n) out[i] = i;\n")


def _matmul(name, op, dtype_in, dtype_out, ndim):
    # One thread per element of out, a dot product along K: simple, and only the dtypes the GEMM
    # ladder does not take come here. Ints wrap through the unsigned type, as csrc/gemm.c's do.
    acc = "U" if dtype_in in INTS else "T"
    body = (_types(dtype_in) + "  GRID_STRIDE(i, batch * M * N) {\n"
            "    const i64 z = i / (M * N), r = (i / N) % M, c = i % N;\n"
            "    const T *pa = a + z * M * K + r * K, *pb = b + z * K * N + c;\n"
            f"    {acc} acc = 0;\n"
            f"    for (i64 k = 0; k < K; k++) acc += ({acc})pa[k] * ({acc})pb[k * N];\n"
            "    out[i] = (T)acc;\n  }\n")
    t = CTYPES[dtype_in]
    return _kernel(name, f"{t} *out, const {t} *a, const {t} *b, i64 batch, i64 M, i64 N, i64 K", body)


def _adam(name, op, dtype_in, dtype_out, ndim):
    # csrc/adam.c's loop body, one thread per element.
    body = (_types(dtype_in) + "  GRID_STRIDE(i, n) {\n"
            "    const T pi = p[i] * decay, gi = g[i] + pi * l2;\n"
            "    const T mi = m[i] * b1 + gi * c1, vi = v[i] * b2 + gi * gi * c2;\n"
            "    m[i] = mi;\n    v[i] = vi;\n"
            f"    p[i] = pi - mi * step / ({SQRT[dtype_in]}(vi) * inv_sqrt_bc2 + eps);\n  }}\n")
    t = CTYPES[dtype_in]
    scalars = ", ".join(f"{t} {s}" for s in ("decay", "l2", "b1", "c1", "b2", "c2", "step", "inv_sqrt_bc2", "eps"))
    return _kernel(name, f"{t} *p, {t} *m, {t} *v, const {t} *g, i64 n, {scalars}", body)


_WRITERS = {"unary": _unary, "binary": _binary, "where": _where, "cast": _cast, "copy": _copy,
            "reduce": _reduce, "arg_reduce": _arg_reduce, "cumsum": _cumsum, "gather": _gather,
            "scatter_add": _scatter_add, "fill": _fill, "rand": _rand, "iota": _iota,
            "matmul": _matmul, "adam": _adam}


def catalogue(ndims: tuple[int, ...] = (0, 1, 4)) -> list[tuple[str, str | None, str, str, int]]:
    """Every (kind, op, dtype_in, dtype_out, ndim) the runtime generates, elementwise kinds at each of ndims."""
    out = []
    for kind, ops in KIND_OPS.items():
        for op in ops:
            for dtype_in in DTYPES:
                for dtype_out in DTYPES:
                    for ndim in (FIXED_NDIM[kind],) if kind in FIXED_NDIM else ndims:
                        try:
                            _check_dtypes(kind, op, dtype_in, dtype_out)
                        except TypeError:
                            continue
                        if kind == "cast" and dtype_in == dtype_out:
                            continue  # a same-dtype cast is a copy
                        out.append((kind, op, dtype_in, dtype_out, ndim))
    return out
