"""The CUDA renderer: the C renderer's output with three changes, so a kernel runs on a GPU.

1. The declaration. `extern "C" __global__`: a kernel launched from the host, under its plain name
   (no C++ mangling), which is how the runtime finds it in the compiled module.
2. The threads. The C kernel walks its output with one loop per dim; here those loops become one
   grid-stride loop over the flattened output index, each thread taking every
   (blocks x threads)-th entry, and the loop indices come back from the flat one by div and mod.
   Any grid is correct, a grid of one thread too (the CPU emulator runs that one). A reduction's
   loops stay inside: each thread folds its own output entries.
3. What C's headers gave. NVRTC compiles without system headers, so there is no <math.h>: the math
   functions (exp2f, log2f, sqrtf, sinf and their double twins) are CUDA's device library under
   the same names, C's `restrict` is spelled `__restrict__`, and NAN / INFINITY / HUGE_VAL are
   written as their bit patterns.

Everything else (the arithmetic, numpy's integer wrapping and NaN rules, the index expressions) is
the C renderer's, line for line: rendered by it, then wrapped here.
"""

from __future__ import annotations

import math
import struct
from dataclasses import replace

from ..dtype import DType, dtypes
from ..lower import Kernel, UOp
from ..renderer import CRenderer

PRELUDE = "#define restrict __restrict__"
OUTPUT_LOOP = "gidx"  # lower.py names the output loops gidx0, gidx1, ... and the reduce loops ridx...


def split_output_loops(uops: list[UOp]) -> tuple[list[tuple[str, int]], list[UOp]]:
    """(var, extent) of each output loop, outermost first, and the UOps without those loops (their
    RANGE and the ENDRANGE that closes each)."""
    loops: list[tuple[str, int]] = []
    body: list[UOp] = []
    open_ranges: list[bool] = []  # per open RANGE: is it an output loop?
    for u in uops:
        if u.op == "RANGE":
            is_output = u.arg[0].startswith(OUTPUT_LOOP)
            open_ranges.append(is_output)
            if is_output:
                loops.append(u.arg)
                continue
        elif u.op == "ENDRANGE" and open_ranges.pop():
            continue
        body.append(u)
    return loops, body


def output_size(kernel: Kernel) -> int:
    """How many flat output indices the grid-stride loop walks (1 for a one-element output); the
    launch sizes its grid by it."""
    return math.prod(n for _, n in split_output_loops(kernel.uops)[0])


def index_lines(loops: list[tuple[str, int]], pad: str) -> list[str]:
    """Each output loop's index from the flat one (`gid`): gidx_d = gid / stride_d % extent_d."""
    lines, stride = [], math.prod(n for _, n in loops)
    for d, (var, n) in enumerate(loops):
        stride //= n
        value = "gid" if stride == 1 else f"gid / {stride}"
        if d > 0:  # the outermost index is below its extent already: gid < the product of them all
            value = f"{value} % {n}" if stride == 1 else f"({value}) % {n}"
        lines.append(f"{pad}long long {var} = {value};")
    return lines


class CUDARenderer(CRenderer):
    kernel_prefix = 'extern "C" __global__ '
    gcc_pragmas = False
    exp2f = ""  # CUDA's own exp2f: the device library's, already a formula the GPU runs per thread

    def _literal(self, value, dtype: DType) -> str:
        if dtype.is_float and not math.isfinite(float(value)):
            value = float(value)
            if dtype is dtypes.float32:
                bits = struct.unpack("<I", struct.pack("<f", abs(value) if math.isinf(value) else value))[0]
                text = f"__int_as_float(0x{bits:08x})"
            else:
                bits = struct.unpack("<Q", struct.pack("<d", abs(value) if math.isinf(value) else value))[0]
                text = f"__longlong_as_double(0x{bits:016x}LL)"
            return f"-{text}" if value < 0 else text
        return super()._literal(value, dtype)

    def render(self, kernel: Kernel) -> str:
        loops, body = split_output_loops(kernel.uops)
        lines = super().render(replace(kernel, uops=body)).splitlines()
        start = next(i for i, line in enumerate(lines) if line.endswith("{") and f" {kernel.name}(" in line)
        signature, inner, close = lines[start], lines[start + 1:-1], lines[-1]
        n = math.prod(extent for _, extent in loops)  # 1 when the output is one element: one thread works
        grid_stride = (f"  for (long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x; gid < {n}; "
                       "gid += (long long)blockDim.x * gridDim.x) {")
        out = [PRELUDE, signature, grid_stride, *index_lines(loops, "    "), *("  " + line for line in inner), "  }",
               close]
        return "\n".join(out) + "\n"
