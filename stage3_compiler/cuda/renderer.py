"""The CUDA renderer: the C renderer with six changes, so a kernel runs on a GPU (and fills it).

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
   gradient) would leave most of the GPU idle, one thread folding thousands of terms. There the
   threads of a block share out the terms of each output: the grid-stride loop walks outputs by
   block, the longest reduce loop is shared out across the block's threads, and after the reduce
   loops each accumulator is folded across the block by a tree in shared memory (`group_fold`),
   with the same fold as the loop (max keeps NaN). Which threads take which terms follows memory:
   - narrow (a block of GROUP threads folds one output): where some load lies along the shared
     loop (a weight's sum of squares), thread t takes terms t, t + GROUP, ..., so a warp reads side
     by side. A mid-sized reduction (more outputs, a row of a few hundred terms each: layernorm's
     statistics) takes a warp an output the same way.
   - wide (a block of WIDE_THREADS folds WIDE_LANES outputs side by side): where no load does (a
     weight's gradient x.T @ g sums rows; each thread holds a tile of outputs), a warp's threads
     take neighbouring outputs, whose loads lie side by side, and the WIDE_THREADS / WIDE_LANES
     threads of one output take every so-many-th term. Past the last output a lane repeats it and
     stores nothing, so that every thread meets every barrier.
   The threads of the first slice alone store, so a kernel that reads the buffer it writes (an
   in-place update) reads it unchanged.

5. LOCAL (cuda/local.py): a matmul of whole 16 x 16 blocks of tiles gets a twin in the same kernel,
   run when the launch gives a block 256 threads: the block stages each 16 steps of A and B in
   shared memory and every thread reads its tile's operands there. The plain loop stays below it for
   any other block size (the CPU emulator's one thread runs that).

6. FMA: a reduction's acc + a*b (a matmul's step) is `fmaf(a, b, acc)`, one rounding and one
   instruction, as cuBLAS computes it. Every other a*b + c rounds twice (NVRTC's --fmad=false,
   cuda/backend.py), as on the CPU, where only such a kernel's own multiply-adds fuse (codegen/fma.py's
   fused_multiply_adds).

Everything else (the arithmetic, numpy's integer wrapping and NaN rules, the index expressions) is
the C renderer's, rule for rule. A symbolic output size (a user's Variable, an argument of the
kernel) is a C expression in the grid-stride loop's bound; the grid is sized for its maximum.
"""

from __future__ import annotations

import math
import struct

from ..codegen.fma import fused_products
from ..codegen.uops import Kernel, Loop, LoopKind, UOp, UOps
from ..cpu.renderer import HALF, WIDEN, CRenderer, Source, clamped
from ..dtype import DType, dtypes
from ..graph.symbolic import Node, Var, layout, render, substitute
from ..ops import Ops
from ..passes import TABLE, Pass
from .group import GROUP, group_shape, output_loops, step
from .local import LOCAL_K, LOCAL_SIDE, LOCAL_THREADS, LocalPlan, blocks, local_plan

PRELUDE = "#define restrict __restrict__"
# the C renderer's half conversions as device functions, with CUDA's reinterpretations of a float's bits
DEVICE_HALF = (HALF.replace("static inline", "static __device__ __forceinline__").replace(
    "{ float f; __builtin_memcpy(&f, &u, 4); return f; }", "{ return __uint_as_float(u); }").replace(
    "{ unsigned int u; __builtin_memcpy(&u, &f, 4); return u; }", "{ return __float_as_uint(f); }"))


def local_tiles(kernel: Kernel) -> LocalPlan | None:
    """LOCAL's plan (cuda/local.py) for a kernel GROUP does not take: the two never meet in one kernel."""
    return local_plan(kernel) if group_shape(kernel) is None else None


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
    log2f = ""  # and log2f
    # capabilities (codegen/renderer.py): a grid, and the registers of one thread for a 4 x 8 tile
    threads = loop_blocks = split_reductions = packed_operands = narrow_tiles = False
    vector_width = 0  # a thread's lanes stay scalars (its registers are not vectors)
    grid = True

    def __init__(self):
        self.tile = (4, 8)

    def _literal(self, value, dtype: DType) -> str:
        if dtype.is_float and not math.isfinite(float(value)):
            value = float(value)
            if dtype is dtypes.float64:
                bits = struct.unpack("<Q", struct.pack("<d", abs(value) if math.isinf(value) else value))[0]
                text = f"__longlong_as_double(0x{bits:016x}LL)"
            else:  # float32, and the half types, which a kernel holds as float32
                bits = struct.unpack("<I", struct.pack("<f", abs(value) if math.isinf(value) else value))[0]
                text = f"__int_as_float(0x{bits:08x})"
            return f"-{text}" if value < 0 else text
        return super()._literal(value, dtype)

    def pow2(self, x: str, dtype: DType) -> str:
        """2**x for an integer x by the device library's ldexp (exact, subnormals too; NaN stays NaN)."""
        if dtype is dtypes.float32:
            return f"({x}!={x}?{x}:ldexpf(1.0f,(int)fmaxf(fminf({x},300.0f),-300.0f)))"
        return f"({x}!={x}?{x}:ldexp(1.0,(int)fmax(fmin({x},3000.0),-3000.0)))"

    def render(self, kernel: Kernel) -> str:
        """The kernel's CUDA C; the renderer's own passes that change it (GROUP, LOCAL) join the kernel's
        record of the passes that changed it (Kernel.passes, which DEBUG=2 prints)."""
        applied = {Pass.GROUP.value: group_shape(kernel) is not None, Pass.LOCAL.value: local_tiles(kernel) is not None}
        kernel.passes = tuple(p.value for p in TABLE if p.value in kernel.passes or applied.get(p.value, False))
        return super().render(kernel)

    def prologue(self, kernel: Kernel, pragmas: list[str]) -> list[str]:
        shape, half = group_shape(kernel), any(u.dtype is not None and u.dtype.is_half for u in kernel.uops)
        folds = [] if shape is None else sorted(set(accumulators(kernel).values()),
                                                key=lambda f: (f[0].name, f[1].name))
        return [PRELUDE, *([DEVICE_HALF] if half else []),
                *(self.group_fold(op, dtype, shape.lanes, shape.threads) for op, dtype in folds)]

    def group_fold(self, op: Ops, dtype: DType, lanes: int = 1, threads: int = GROUP) -> str:
        """A device function folding the values of the block's threads that hold the same output (lane)
        into one, by halves: the first half of the block folds the second in, then the first quarter
        the second, ... down to one slice of `lanes` threads; every thread returns its lane's value."""
        t = self.ctype(dtype)
        fold = self.update(op, dtype, "part[threadIdx.x]", "part[threadIdx.x + half]")
        lanes_c = "1" if lanes == 1 else f"blockDim.x < {lanes} ? blockDim.x : {lanes}"
        return "\n".join([
            f"__device__ __forceinline__ {t} group_{op.name.lower()}_{dtype.name}({t} v) {{",
            f"  __shared__ {t} part[{max(threads, GROUP)}];",  # room for any block up to GROUP threads
            f"  const unsigned lanes = {lanes_c};",
            "  part[threadIdx.x] = v;",
            "  __syncthreads();",
            "  for (unsigned half = blockDim.x / 2; half >= lanes; half /= 2) {",
            f"    if (threadIdx.x < half) {{ {fold} }}",
            "    __syncthreads();",
            "  }",
            "  v = part[threadIdx.x % lanes];",
            "  __syncthreads();  // all have read their lane before the next fold writes it",
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

    def body(self, kernel: Kernel, src: Source | None = None) -> list[str]:
        """The plain kernel's body; for a matmul LOCAL takes (cuda/local.py), its shared-memory twin first,
        run by a launch of LOCAL_THREADS threads a block."""
        plain = super().body(kernel, src)
        plan = local_tiles(kernel)
        if plan is None or src is not None:
            return plain
        tiled = super().body(kernel, Source(kernel, local=plan))
        return [f"  if (blockDim.x == {LOCAL_THREADS}) {{  // LOCAL: operands staged through shared memory",
                *("  " + line for line in tiled), "    return;", "  }", *plain]

    def open_local(self, src: Source) -> None:
        """LOCAL's loop over blocks of LOCAL_SIDE x LOCAL_SIDE tiles: thread (tr, tc) of block tile
        (br, bc) of batch entry bt takes the output whose flat index is gid, as the plain kernel would."""
        plan, side = src.local, LOCAL_SIDE
        a_type, b_type = self.ctype(plan.a[0].dtype), self.ctype(plan.b[0].dtype)
        src.add(f"__shared__ {a_type} As[{len(plan.a)}][{side}][{LOCAL_K + 1}];  // +1: no two threads on a bank")
        src.add(f"__shared__ {b_type} Bs[{len(plan.b)}][{side}][{LOCAL_K + 1}];")
        src.add(f"const long long tr = threadIdx.x / {side}, tc = threadIdx.x % {side};")
        src.add(f"for (long long blk = blockIdx.x; blk < {blocks(src.kernel, plan)}; blk += gridDim.x) {{")
        src.depth += 1
        across, down = plan.cols.extent // side, plan.rows.extent // side
        src.add(f"const long long bc = blk % {across}, br = blk / {across} % {down}, bt = blk / {across * down};")
        src.add(f"const long long gid = (bt * {plan.rows.extent} + br * {side} + tr) * {plan.cols.extent} "
                f"+ bc * {side} + tc;")

    def stage(self, src: Source, u: UOp, array: str, lane: int, axis: Loop, block: str) -> None:
        """LOCAL: one lane's slice of this LOCAL_K steps copied to shared memory, a value a thread: the
        LOAD's index at row (or column) t of the block tile and step k0 + kk. Consecutive threads take
        consecutive steps where the index runs along the loop (a row of A), else consecutive rows."""
        loop = src.local.loop
        if step(u.arg[0], loop.var) == 1:
            kk, t = f"threadIdx.x % {LOCAL_K}", f"threadIdx.x / {LOCAL_K}"
        else:
            kk, t = f"threadIdx.x / {LOCAL_SIDE}", f"threadIdx.x % {LOCAL_SIDE}"
        flat, bound = u.arg
        # the index with the tile's axis at the row (or column) staged and the loop at the step staged
        at = substitute(flat, {axis.var: Var("srow", 0, layout(axis.extent) - 1),
                               loop.var: Var("sk", 0, layout(loop.extent) - 1)})
        index = render(at) if bound is None else clamped(render(at), bound)
        src.add(f"{{ const long long srow = {block} * {LOCAL_SIDE} + {t}, sk = k0 + {kk};")
        value = f"data{u.srcs[0].arg}[{index}]"  # (its GLOBAL UOp may come later)
        src.add(f"  {array}[{lane}][{t}][{kk}] = {f'{WIDEN[u.dtype.name]}({value})' if u.dtype.is_half else value}; }}")

    def render_range(self, src: Source, u: UOp) -> None:
        plan = src.local
        if plan is None or u.arg is not plan.loop:
            return super().render_range(src, u)
        src.add(f"for (long long k0 = 0; k0 < {plan.loop.extent}; k0 += {LOCAL_K}) {{")
        src.depth += 1
        for lane, load in enumerate(plan.a):
            self.stage(src, load, "As", lane, plan.rows, "br")
        for lane, load in enumerate(plan.b):
            self.stage(src, load, "Bs", lane, plan.cols, "bc")
        src.add("__syncthreads();  // the block's copies are in")
        var = plan.loop.var
        src.loops += 1
        src.open_loops.append(plan.loop)
        src.add(f"for (long long {var} = k0; {var} < k0 + {LOCAL_K}; {var}++) {{")
        src.depth += 1

    def render_load(self, src: Source, u: UOp) -> None:
        plan = src.local
        lanes = {} if plan is None else {id(x): ("As", i, "tr") for i, x in enumerate(plan.a)} | \
            {id(x): ("Bs", i, "tc") for i, x in enumerate(plan.b)}
        if id(u) not in lanes:
            return super().render_load(src, u)
        array, lane, t = lanes[id(u)]
        src.names[id(u)] = u.name
        src.add(f"{self.ctype(u.dtype)} {u.name} = {array}[{lane}][{t}][{plan.loop.var} - k0];")

    def open(self, src: Source) -> None:
        """The grid-stride loop the kernel's body runs in, closed by `close`: over outputs by thread, or
        by block where a block folds each output (GROUP), or each WIDE_LANES of them side by side."""
        src.fused = fused_products(src.kernel) if Pass.FMA.value in src.kernel.passes else set()
        if src.local is not None:
            return self.open_local(src)
        n = c_product([loop.extent for loop in output_loops(src.kernel)])  # 1: a one-element output, one thread
        shape = group_shape(src.kernel)
        src.group, src.group_lanes = (None, 1) if shape is None else (shape.loop, shape.lanes)
        if src.group is None:
            src.add(f"for (long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x; gid < {n}; "
                    "gid += (long long)blockDim.x * gridDim.x) {")
        elif src.group_lanes == 1:
            src.add(f"for (long long gid = blockIdx.x; gid < {n}; gid += gridDim.x) {{")
        else:
            lanes = src.group_lanes
            src.add(f"const long long lanes = blockDim.x < {lanes} ? blockDim.x : {lanes};")
            src.add(f"for (long long first = (long long)blockIdx.x * lanes; first < {n}; "
                    "first += (long long)gridDim.x * lanes) {")
            src.depth += 1
            src.add(f"const long long mine = first + threadIdx.x % lanes, gid = mine < {n} ? mine : {n} - 1;")
            return
        src.depth += 1

    def close(self, src: Source) -> list[str]:
        return ["  }"]

    def loop_range(self, src: Source, loop: Loop) -> tuple[str, str, str]:
        """GROUP's shared reduce loop: thread t takes terms t, t + blockDim.x, ... (narrow); wide, the
        threads of slice s = t / lanes take terms s, s + slices, ..."""
        start, end, step = super().loop_range(src, loop)
        if loop is not src.group:
            return start, end, step
        if src.group_lanes == 1:
            return "threadIdx.x", end, f"{loop.var} += blockDim.x"
        return "threadIdx.x / lanes", end, f"{loop.var} += blockDim.x / lanes"

    def render_endrange(self, src: Source, u: UOp) -> None:
        """After GROUP's reduce loops: every accumulator folded across the block."""
        closed = src.open_loops[-1]
        super().render_endrange(src, u)
        if src.local is not None and closed is src.local.loop:  # LOCAL: the K-slice's loop, then k0's
            src.add("__syncthreads();  // all have read the copies before the next are written")
            src.depth -= 1
            src.add("}")
            return
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
        # GROUP: every thread holds its output's value; one writes it
        src.add("if (threadIdx.x == 0)" if src.group_lanes == 1 else "if (threadIdx.x < lanes && mine == gid)")
        src.depth += 1
        super().render_store(src, u)
        src.depth -= 1

    def render_alu(self, src: Source, u: UOp) -> None:
        if id(u) not in src.fused:  # (a fused product is written in its multiply-add)
            super().render_alu(src, u)

    def render_update(self, src: Source, u: UOp) -> None:
        acc, value = u.srcs
        if id(value) in src.fused:  # 6. a reduction's acc + a*b: one fused multiply-add
            a, b = (src.names[id(s)] for s in value.srcs)
            name = src.names[id(acc)]
            src.add(f"{name} = {'fmaf' if u.dtype is dtypes.float32 else 'fma'}({a}, {b}, {name});")
            return
        super().render_update(src, u)

    RULES = {**CRenderer.RULES, UOps.SPECIAL: render_special, UOps.RANGE: render_range, UOps.LOAD: render_load,
             UOps.ENDRANGE: render_endrange, UOps.STORE: render_store, UOps.ALU: render_alu,
             UOps.UPDATE: render_update}
