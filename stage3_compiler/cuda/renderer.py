"""The CUDA renderer: the C renderer with four changes, so a kernel runs on a GPU (and fills it).

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

4. GROUP: a reduction with few outputs and many terms (a gradient norm's sum of squares, a bias's
   gradient) would leave most of the GPU idle, one thread folding thousands of terms. There a block
   of GROUP threads takes each output: the grid-stride loop walks outputs by block, the longest
   reduce loop is shared out across the block's threads (thread t takes terms t, t + GROUP, ...),
   and after the reduce loops each accumulator is folded across the block by a tree in shared
   memory (`group_fold`), with the same fold as the loop (max keeps NaN). Thread 0 alone stores,
   so a kernel that reads the buffer it writes (an in-place update) reads it unchanged.

Everything else (the arithmetic, numpy's integer wrapping and NaN rules, the index expressions) is
the C renderer's, rule for rule. A symbolic output size (a user's Variable, an argument of the
kernel) is a C expression in the grid-stride loop's bound; the grid is sized for its maximum.
"""

from __future__ import annotations

import math
import struct

from ..codegen.uops import Kernel, Loop, LoopKind, UOp, UOps
from ..cpu.renderer import CRenderer, Source
from ..dtype import DType, dtypes
from ..graph.symbolic import Node, layout, render
from ..ops import Ops

PRELUDE = "#define restrict __restrict__"
GROUP = 128  # threads of a block that fold one output together (a power of two: the tree halves it)
GROUP_OUTPUTS_BELOW = 16384  # fewer outputs than this (~ one per core of a large GPU) leave it idle ...
GROUP_TERMS_FROM = 1024  # ... when each has at least this many terms to fold (8 a thread)
WARP = 32


def output_loops(kernel: Kernel) -> list[Loop]:
    """The kernel's output indices (its SPECIALs), outermost first."""
    return [u.arg for u in kernel.uops if u.op is UOps.SPECIAL]


def output_size(kernel: Kernel) -> int:
    """How many flat output indices the grid-stride loop walks at most (1 for a one-element output;
    a symbolic size at its maximum); the launch sizes its grid by it."""
    return math.prod(layout(loop.extent) for loop in output_loops(kernel))


def group_loop(kernel: Kernel) -> Loop | None:
    """GROUP: the reduce loop a block's threads share out; None where one thread per output fills the
    GPU. The innermost, whose terms usually lie side by side in memory (a warp's loads then meet in a
    few cache lines), unless it is shorter than a warp: then the longest."""
    loops = [u.arg for u in kernel.uops if u.op is UOps.RANGE and u.arg.kind is LoopKind.REDUCE]
    if not loops or output_size(kernel) >= GROUP_OUTPUTS_BELOW:
        return None
    if math.prod(layout(loop.extent) for loop in loops) < GROUP_TERMS_FROM:
        return None
    if layout(loops[-1].extent) >= WARP:
        return loops[-1]
    return max(reversed(loops), key=lambda loop: layout(loop.extent))


def accumulators(kernel: Kernel) -> dict[int, tuple[Ops, DType]]:
    """id(ACC) -> the reduce op that folds into it and its dtype."""
    return {id(u.srcs[0]): (u.arg, u.dtype) for u in kernel.uops if u.op is UOps.UPDATE}


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
    vector_width = 0  # a thread's lanes stay scalars (its registers are not vectors)
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
        if group_loop(kernel) is None:
            return [PRELUDE]
        folds = sorted(set(accumulators(kernel).values()), key=lambda f: (f[0].name, f[1].name))
        return [PRELUDE, *(self.group_fold(op, dtype) for op, dtype in folds)]

    def group_fold(self, op: Ops, dtype: DType) -> str:
        """A device function folding one value of every thread of the block into one, by halves: the
        first half folds the second in, then the first quarter the second, ... (all threads return it)."""
        t = self.ctype(dtype)
        fold = self.update(op, dtype, "part[threadIdx.x]", "part[threadIdx.x + half]")
        return "\n".join([
            f"__device__ __forceinline__ {t} group_{op.name.lower()}_{dtype.name}({t} v) {{",
            f"  __shared__ {t} part[{GROUP}];",
            "  part[threadIdx.x] = v;",
            "  __syncthreads();",
            "  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {",
            f"    if (threadIdx.x < half) {{ {fold} }}",
            "    __syncthreads();",
            "  }",
            "  v = part[0];",
            "  __syncthreads();  // all have read part[0] before the next fold writes it",
            "  return v;",
            "}"])

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
        """The grid-stride loop the kernel's body runs in, closed by `close`: over outputs by thread, or
        by block where a block folds each output (GROUP)."""
        n = c_product([loop.extent for loop in output_loops(src.kernel)])  # 1: a one-element output, one thread
        src.group = group_loop(src.kernel)
        if src.group is not None:
            src.add(f"for (long long gid = blockIdx.x; gid < {n}; gid += gridDim.x) {{")
        else:
            src.add(f"for (long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x; gid < {n}; "
                    "gid += (long long)blockDim.x * gridDim.x) {")
        src.depth += 1

    def close(self, src: Source) -> list[str]:
        return ["  }"]

    def loop_range(self, src: Source, loop: Loop) -> tuple[str, str, str]:
        """GROUP's shared reduce loop: thread t takes terms t, t + blockDim.x, ..."""
        start, end, step = super().loop_range(src, loop)
        return ("threadIdx.x", end, f"{loop.var} += blockDim.x") if loop is src.group else (start, end, step)

    def render_endrange(self, src: Source, u: UOp) -> None:
        """After GROUP's reduce loops: every accumulator folded across the block."""
        closed = src.open_loops[-1]
        super().render_endrange(src, u)
        if src.group is None or closed.kind is not LoopKind.REDUCE:
            return
        if any(loop.kind is LoopKind.REDUCE for loop in src.open_loops):
            return
        for acc, (op, dtype) in accumulators(src.kernel).items():
            name = src.names[acc]
            src.add(f"{name} = group_{op.name.lower()}_{dtype.name}({name});")

    def render_store(self, src: Source, u: UOp) -> None:
        if src.group is None:
            return super().render_store(src, u)
        src.add("if (threadIdx.x == 0)")  # GROUP: every thread holds the value; one writes it
        src.depth += 1
        super().render_store(src, u)
        src.depth -= 1

    RULES = {**CRenderer.RULES, UOps.SPECIAL: render_special, UOps.ENDRANGE: render_endrange,
             UOps.STORE: render_store}
