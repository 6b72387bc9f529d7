"""Rendering: a kernel's linear UOps become C source, one UOp a line. The C renderer is the base;
a GPU renderer is a small subclass that changes how a kernel is declared and how its outer loops
map to threads.

Arithmetic follows the C kernels of the earlier stages (numpy's semantics): ints wrap through the
unsigned type, max propagates NaN, a cast to bool means "is nonzero", bools are bytes holding 0 or
1. Float constants are written in hex, so the compiled value is exactly the Python one.
"""

from __future__ import annotations

import math

from .dtype import DType, dtypes
from .lower import Kernel
from .ops import Ops
from .symbolic import descends, render

CTYPES = {"bool": "unsigned char", "int32": "int", "int64": "long long", "float32": "float", "float64": "double"}
UNSIGNED = {"int32": "unsigned int", "int64": "unsigned long long"}
LIBM = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SQRT: "sqrt", Ops.SIN: "sin"}


# 2**x for float32, within 1 ulp of 2**x rounded once from float64 for every one of the 2**32
# floats (`python -m benchmarks.exp2f_check` runs them all in C, with our flags). Unlike a call
# into libm it is a formula, so a loop of it is vectorized (with -fno-trapping-math the selects
# below become blends): a GELU kernel runs 13x faster. 2**x = 2**n * 2**f with n = round(x) and f
# in [-0.5, 0.5]; 2**f by its Taylor series to degree 7 (truncation error below 1e-8), in float: in
# double, each vector of 8 floats was two of 4 doubles and their conversions, and an exp kernel
# took 3.6 ns an element on a Zen 3 core, 1.9 in float; 2**n as two power-of-two factors, so the
# subnormal results round once and 2**128 overflows to inf as it should.
EXP2F = r"""#ifndef SITP_EXP2F
#define SITP_EXP2F
static inline __attribute__((always_inline)) float sitp_exp2f(float x) {
  float c = x != x ? 0.0f : x < -151.0f ? -151.0f : x > 129.0f ? 129.0f : x;
  float n = (c + 0x1.8p23f) - 0x1.8p23f;
  float f = c - n;
  float p = 1.0f + f * (0x1.62e430p-1f + f * (0x1.ebfbe0p-3f + f * (0x1.c6b08ep-5f +
            f * (0x1.3b2ab6p-7f + f * (0x1.5d87fep-10f + f * (0x1.430912p-13f + f * 0x1.ffcbfcp-17f))))));
  int ni = (int)n, n1 = ni >> 1, n2 = ni - n1;
  union { unsigned int u; float f; } s1 = {(unsigned int)(n1 + 127) << 23}, s2 = {(unsigned int)(n2 + 127) << 23};
  float r = (p * s1.f) * s2.f;
  return x != x ? x : r;
}
#endif"""


class CRenderer:
    kernel_prefix = ""
    exp2f = "sitp_exp2f"  # float32 EXP2: our own (EXP2F below), which the C compiler can vectorize
    loop_indent = "  "
    gcc_pragmas = True  # the SLP setting below (a GPU renderer keeps only the kernel itself)

    def ctype(self, dtype: DType) -> str:
        return CTYPES[dtype.name]

    def const(self, value, dtype: DType) -> str:
        text = self._literal(value, dtype)
        return f"({text})" if text.startswith("-") else text  # `-` then a negative literal is `--`

    def _literal(self, value, dtype: DType) -> str:
        if dtype is dtypes.bool:
            return "1" if value else "0"
        if dtype.is_int:
            return f"{int(value)}LL" if dtype is dtypes.int64 else str(int(value))
        value = float(value)
        if math.isnan(value):
            return "NAN" if dtype is dtypes.float32 else "(double)NAN"
        if math.isinf(value):
            return ("INFINITY" if value > 0 else "(-INFINITY)") if dtype is dtypes.float32 else \
                ("HUGE_VAL" if value > 0 else "(-HUGE_VAL)")
        if dtype is dtypes.float32:
            import struct

            value = struct.unpack("f", struct.pack("f", value))[0]  # rounded as the kernel will hold it
            return f"{value.hex()}f"
        return value.hex()

    def alu(self, op: Ops, dtype: DType, args: list[str], src_dtype: DType) -> str:
        a = args
        t = src_dtype
        if op is Ops.EXP2 and t is dtypes.float32 and self.exp2f:
            return f"{self.exp2f}({a[0]})"
        if op in LIBM:
            return f"{LIBM[op]}{'f' if t is dtypes.float32 else ''}({a[0]})"
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
        if bound is None:
            return render(flat)
        i = render(flat)
        return f"(({i})<0?0:({i})>{bound}?{bound}:({i}))"  # the C compiler computes i once

    def params(self, kernel: Kernel) -> list[str]:
        return [f"{'const ' if i >= kernel.outputs else ''}{self.ctype(b.dtype)}* restrict data{i}"
                for i, b in enumerate(kernel.buffers)]

    def signature(self, kernel: Kernel) -> str:
        if kernel.threads > 1:  # THREAD: the loops live in the part function, see threaded()
            return f"static __attribute__((noinline)) void {kernel.name}_part(long long part, " \
                   f"{', '.join(self.params(kernel))})"
        return f"{self.kernel_prefix}void {kernel.name}({', '.join(self.params(kernel))})"

    def threaded(self, kernel: Kernel) -> list[str]:
        """THREAD: the kernel runs its part function once per thread, each taking a slice of the
        outermost loop. (An OpenMP loop written around the kernel's own loops is outlined into a
        function that reads the buffers through a struct: their `restrict` is lost, and a matmul
        tile ran 7x slower so.)"""
        args = ", ".join(f"data{i}" for i in range(len(kernel.buffers)))
        return [f"{self.kernel_prefix}void {kernel.name}({', '.join(self.params(kernel))}) {{",
                f"  #pragma omp parallel for num_threads({kernel.threads}) schedule(static)",
                f"  for (long long part = 0; part < {kernel.threads}; part++) {kernel.name}_part(part, {args});",
                "}"]

    def render(self, kernel: Kernel) -> str:
        exp2f = self.exp2f and any(u.op == "ALU" and u.arg is Ops.EXP2 and u.dtype is dtypes.float32
                                   for u in kernel.uops)
        # An upcast kernel's lanes are vectorized as one block (gcc's SLP); left on, gcc's loop
        # vectorizer vectorizes the reduction loop instead, across strided loads: a matmul's
        # backward ran 10x slower that way. (Other compilers ignore the pragmas.) push/pop keep
        # the setting to this kernel when several share one file (runtime.compile_kernels).
        slp = kernel.upcast > 1 and self.gcc_pragmas
        # SPLIT's loop over the partials: gcc's PRE pass rewrites a negated select chain in it (a
        # softmax backward's row sum, with the causal mask) into a shape its if-conversion refuses,
        # and the loop stays scalar (5.4 ms; vectorized without PRE: see opts.SPLIT)
        no_pre = self.gcc_pragmas and any(u.op == "ACCS" for u in kernel.uops)
        # gcc 12.2 miscompiles a loop that converts values it loads backwards, after it unrolled an
        # inner loop completely: the sum of a flipped (3, 4) int tensor as floats came out -12, not
        # -18 (renderer test). Such kernels (flips, not a training step's) skip the loop vectorizer.
        reversed_cast = self.gcc_pragmas and any(u.op == "CAST" for u in kernel.uops) and \
            any(u.op == "LOAD" and descends(u.arg[0]) for u in kernel.uops)
        pragmas = [*(['#pragma GCC optimize ("no-tree-loop-vectorize")'] if slp or reversed_cast else []),
                   *(['#pragma GCC optimize ("no-tree-pre")'] if no_pre else [])]
        # (sitp_exp2f comes first and is always inlined: gcc does not inline a function compiled
        # under other optimize settings, and a call in the loop stops its vectorization.)
        lines = ["#include <math.h>", *([EXP2F] if exp2f else []),
                 *(["#pragma GCC push_options", *pragmas] if pragmas else []),
                 self.signature(kernel) + " {"]
        depth = 1
        names: dict[int, str] = {}
        ranges = 0
        for u in kernel.uops:
            pad = "  " * depth
            if u.op == "GLOBAL":
                names[id(u)] = f"data{u.arg}"
            elif u.op == "RANGE":
                var, n = u.arg
                start, end = "0", str(n)
                if ranges == 0 and kernel.threads > 1:  # THREAD: this part's slice of the outermost loop
                    start, end = f"part*{n}/{kernel.threads}", f"(part+1)*{n}/{kernel.threads}"
                ranges += 1
                if var == "sidx" and self.gcc_pragmas:  # SPLIT's partials: gcc unrolls so short a loop
                    lines.append(f"{pad}#pragma GCC unroll 1")  # before it vectorizes it (then it cannot)
                lines.append(f"{pad}for (long long {var} = {start}; {var} < {end}; {var}++) {{")
                depth += 1
            elif u.op == "ENDRANGE":
                depth -= 1
                lines.append("  " * depth + "}")
            elif u.op == "CONST":
                names[id(u)] = self.const(u.arg, u.dtype)
            elif u.op == "COND":
                names[id(u)] = f"({render(u.arg)})"
            elif u.op == "ACC":
                names[id(u)] = f"acc{len(names)}"
                lines.append(f"{pad}{self.ctype(u.dtype)} {names[id(u)]} = {self.const(u.arg, u.dtype)};")
            elif u.op == "ACCS":  # SPLIT's partial accumulators: an array the partials' loop indexes
                names[id(u)] = f"acc{len(names)}"
                identity, n = u.arg
                lines.append(f"{pad}{self.ctype(u.dtype)} {names[id(u)]}[{n}] = "
                             f"{{{', '.join([self.const(identity, u.dtype)] * n)}}};")
            elif u.op == "PART":
                names[id(u)] = f"{names[id(u.srcs[0])]}[{render(u.arg)}]"
            elif u.op == "LOAD":
                names[id(u)] = u.name
                lines.append(f"{pad}{self.ctype(u.dtype)} {u.name} = {names[id(u.srcs[0])]}[{self.load_index(u)}];")
            elif u.op == "CAST":
                names[id(u)] = u.name
                x, t = names[id(u.srcs[0])], self.ctype(u.dtype)
                value = f"({t})({x}!=0)" if u.dtype is dtypes.bool else f"({t})({x})"
                lines.append(f"{pad}{t} {u.name} = {value};")
            elif u.op == "ALU":
                names[id(u)] = u.name
                src_dtype = u.srcs[-1].dtype if u.arg is Ops.WHERE else u.srcs[0].dtype
                expr = self.alu(u.arg, u.dtype, [names[id(s)] for s in u.srcs], src_dtype)
                lines.append(f"{pad}{self.ctype(u.dtype)} {u.name} = {expr};")
            elif u.op == "UPDATE":
                lines.append(pad + self.update(u.arg, u.dtype, names[id(u.srcs[0])], names[id(u.srcs[1])],
                                               u.srcs[0].op == "PART"))
            elif u.op == "STORE":
                buf, value = names[id(u.srcs[0])], names[id(u.srcs[1])]
                lines.append(f"{pad}{buf}[{render(u.arg)}] = {value};")
            else:
                raise NotImplementedError(f"render: unknown UOp {u.op}")
        lines.append("}")
        if kernel.threads > 1:
            lines += self.threaded(kernel)
        if pragmas:
            lines.append("#pragma GCC pop_options")
        return "\n".join(lines) + "\n"
