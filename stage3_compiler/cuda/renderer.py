"""The CUDA renderer: the C renderer with three changes, so a kernel runs on a GPU.

1. The declaration. `extern "C" __global__`: a kernel launched from the host, under its plain name
   (no C++ mangling), which is how the runtime finds it in the compiled module.
2. The threads. The renderer has a grid (`grid = True`), so the lowering writes each output index
   as a SPECIAL instead of a loop (codegen/lower.py). The kernel's body runs inside one grid-stride
   loop over the flattened output index, each thread taking every (blocks x threads)-th entry, and
   each SPECIAL is that flat index's coordinate, by div and mod. Any grid is correct, a grid of one
   thread too (the CPU emulator runs that one). A reduction's loops stay inside: each thread folds
   its own output entries.
3. What C's headers gave. NVRTC compiles without system headers, so there is no <math.h>: the math
   functions (exp2f, log2f, sqrtf, sinf and their double twins) are CUDA's device library under
   the same names, C's `restrict` is spelled `__restrict__`, and NAN / INFINITY / HUGE_VAL are
   written as their bit patterns.

Everything else (the arithmetic, numpy's integer wrapping and NaN rules, the index expressions) is
the C renderer's, rule for rule. A symbolic output size (a user's Variable, an argument of the
kernel) is a C expression in the grid-stride loop's bound; the grid is sized for its maximum.
"""

from __future__ import annotations

import math
import struct

from ..codegen.uops import Kernel, Loop, UOp, UOps
from ..cpu.renderer import CRenderer, Source
from ..dtype import DType, dtypes
from ..graph.symbolic import Node, layout, render

PRELUDE = "#define restrict __restrict__"


def output_loops(kernel: Kernel) -> list[Loop]:
    """The kernel's output indices (its SPECIALs), outermost first."""
    return [u.arg for u in kernel.uops if u.op is UOps.SPECIAL]


def output_size(kernel: Kernel) -> int:
    """How many flat output indices the grid-stride loop walks at most (1 for a one-element output;
    a symbolic size at its maximum); the launch sizes its grid by it."""
    return math.prod(layout(loop.extent) for loop in output_loops(kernel))


def c_product(extents: list) -> str:
    """The product of loop extents as C: an int, or symbolic sizes multiplied in the kernel."""
    number = math.prod(e for e in extents if not isinstance(e, Node))
    symbolic = [f"({render(e)})" for e in extents if isinstance(e, Node)]
    return "*".join([*([str(number)] if number != 1 or not symbolic else []), *symbolic])


class CUDARenderer(CRenderer):
    kernel_prefix = 'extern "C" __global__ '
    gcc_pragmas = False
    exp2f = ""  # CUDA's own exp2f: the device library's, already a formula the GPU runs per thread
    # capabilities (codegen/renderer.py): a grid, and the registers of one thread for a 4 x 8 tile
    threads = loop_blocks = split_reductions = packed_operands = narrow_tiles = False
    grid = True

    def __init__(self):
        self.tile = (4, 8)

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

    def prologue(self, kernel: Kernel, pragmas: list[str]) -> list[str]:
        return [PRELUDE]

    def render_special(self, src: Source, u: UOp) -> None:
        """An output index from the flat one (`gid`): gidx_d = gid / stride_d % extent_d."""
        loops = output_loops(src.kernel)
        d = next(i for i, loop in enumerate(loops) if loop.var == u.arg.var)
        stride = c_product([loop.extent for loop in loops[d + 1:]])
        value = "gid" if stride == "1" else f"gid / ({stride})" if "*" in stride else f"gid / {stride}"
        if d > 0:  # the outermost index is below its extent already: gid < the product of them all
            extent = c_product([u.arg.extent])
            value = f"{value} % {extent}" if stride == "1" else f"({value}) % {extent}"
        src.add(f"long long {u.arg.var} = {value};")

    def open(self, src: Source) -> None:
        """The grid-stride loop the kernel's body runs in, closed by `close`."""
        n = c_product([loop.extent for loop in output_loops(src.kernel)])  # 1: a one-element output, one thread
        src.add(f"for (long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x; gid < {n}; "
                "gid += (long long)blockDim.x * gridDim.x) {")
        src.depth += 1

    def close(self, src: Source) -> list[str]:
        return ["  }"]

    RULES = {**CRenderer.RULES, UOps.SPECIAL: render_special}
