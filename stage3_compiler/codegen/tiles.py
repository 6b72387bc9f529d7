"""TILES: a bfloat16 matmul runs on the CPU's matrix unit (Intel AMX) instead of its vector registers.

A matmul under autocast multiplies values that bfloat16 holds and sums them in float32. A vector FMA
does 16 such multiply-adds an instruction; AMX's TDPBF16PS does 16 x 16 x 32 = 8192: it multiplies a
tile of A (16 rows of 32 bfloat16s, 1 KiB) by a tile of B (32 rows of 16, stored as 16 rows of 16
pairs: two neighbouring values of K side by side, the "VNNI" layout) into a tile of C (16 x 16
float32s), summing each pair's products into C in order of K. The products of two bfloat16s are exact
in float32, so Intel's description of the instruction (each product added to C, each add rounded) gives
the bits of a plain loop over K (`acc += a * b`), the core's kernel's: the emulation below does so, bit for
bit. The hardware rounds its dot products otherwise (about a quarter of a random product's outputs
differ in their last bits), within two float32 sums' error of the core (tests/test_tiles.py).

The pass has two halves, both here:
- in the graph (`tile_operands`, from engine/schedule.rewrite_graph): a matmul whose operands are
  float32 views of bfloat16 values reads them from two copies in panels, padded with zeros to whole
  tiles (A: (M/16, K/32, 16, 32), each tile 1 KiB in a row; B: (N/32, K/2, 32, 2), a block column's
  two tiles side by side), which a loop over K reads as two streams. The bfloat16 values the copies
  take are computed once in their own order first (realized: a GELU's derivative inside a copy's
  order ran as scalars, many times slower). The product's meaning does not change (the padding adds
  zero terms), so with the pass off in lowering the core computes it from the copies as from anything
  else. The sum is marked (`LazyBuffer.tiles`); the scheduler fuses only its rounding into bfloat16
  (autocast's matmul returns its half type: `rounds_tiles`) into the kernel, and any other reader (a
  bias, a residual) runs as a kernel of its own.
- in lowering (`lower_tiles`): the marked sum's kernel loops over blocks of 2 x 2 C tiles (32 x 32
  outputs), zeroes four accumulators, and for every 32 values of K loads two tiles of A and two of B and
  runs four TDPBF16PS (eight tile registers in all); then it stores the block (rounded, where the kernel
  returns bfloat16), the last rows and columns through a scratch tile where M or N does not fill it.
  THREAD slices the loop over row blocks.

The CPU renderer writes the tile UOps as AMX's intrinsics (cpu/tiles.py), or, where the CPU has no AMX,
as C functions that do what the instructions do (SITP_TILES=emulate: how a machine without AMX tests
this path).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dtype import dtypes
from ..graph.lazy import LazyBuffer
from ..graph.symbolic import Var
from ..isa import TileUnit
from ..ops import Ops
from ..passes import Pass, on
from .heuristics import broadcast
from .item import ScheduleItem
from .layouts import matmul_product
from .renderer import Renderer
from .uops import Kernel, Loop, LoopKind, UOp, UOps

TILE_ROWS = 16  # rows of a tile of A and of C
TILE_K = 32  # bfloat16 values of K in a row of A's tile (64 bytes)
BLOCK = 2  # C tiles a pass along each output axis: 4 accumulators + 2 tiles of A + 2 of B = AMX's 8 registers
SIDE = TILE_ROWS * BLOCK  # outputs a pass takes along each axis
MIN_MULTIPLY_ADDS = 1 << 18  # a smaller product costs more in copies than the tiles save


@dataclass(frozen=True)
class TileMatmul:
    """What the tiled kernel reads: the two copies (tile by tile, padded), the product's size and the
    output's (rows are the output's outer axis)."""

    a: LazyBuffer  # the base holding (Mp / 16, Kp / 32, 16, 32) bfloat16 in memory order: `tiled`
    b: LazyBuffer  # the base holding (Np / 32, Kp / 2, 32, 2) bfloat16
    rows: int  # M, the output's outer axis
    cols: int  # N, its inner axis (the output is M x N, row-major)
    depth: int  # K
    unit: TileUnit  # the renderer's (a kernel of AMX's instructions and one of their emulation are two programs)


def padded(n: int, to: int) -> int:
    return -(-n // to) * to


def tile_axes(b: LazyBuffer) -> tuple[LazyBuffer, LazyBuffer, int, int] | None:
    """For a float32 matmul of two float32 views of bfloat16 values, with one row and one column axis
    (any other output axis of size 1): (the view varying along the rows, the one along the columns, the
    rows' axis, the columns'); rows are the output's outer axis. None otherwise."""
    mul = matmul_product(b)
    if mul is None or b.dtype is not dtypes.float32:
        return None
    k = b.arg[0]
    if not all(s.base.op is Ops.CAST and s.base.srcs[0].dtype is dtypes.bfloat16 for s in mul.srcs):
        return None
    if not all(isinstance(n, int) for n in mul.shape):
        return None
    outs = [d for d, n in enumerate(mul.shape) if d != k and n != 1]
    if len(outs) != 2:
        return None
    row, col = outs  # the output is contiguous: the earlier axis is the outer one
    x, y = mul.srcs
    for first, second in ((x, y), (y, x)):
        if broadcast(first, col) and broadcast(second, row) and not broadcast(first, row) \
                and not broadcast(second, col) and not broadcast(first, k) and not broadcast(second, k):
            return first, second, row, col
    return None


def tile_operands(b: LazyBuffer, renderer: Renderer) -> bool:
    """Put the tiles pass's copies into the graph for the matmul b and mark it (the module's docstring);
    True when it did."""
    if not on(Pass.TILES) or renderer.matrix_tiles is None or b.tiles is not None:
        return False
    found = tile_axes(b)
    if found is None:
        return False
    x, y, row, col = found
    k = b.arg[0]
    shape = b.srcs[0].shape
    m, n, depth = shape[row], shape[col], shape[k]
    if m < SIDE or n < TILE_ROWS or m * n * depth < MIN_MULTIPLY_ADDS:
        return False
    mp, np_, kp = padded(m, SIDE), padded(n, SIDE), padded(depth, TILE_K)
    a = tiled(as_matrix(x, row, k), mp, kp, TILE_ROWS, TILE_K)  # (Mp/16, Kp/32, 16, 32): a tile in a row
    w = tiled(as_matrix(y, col, k), np_, kp, SIDE, 2)  # (Np/32, Kp/2, 32, 2): a block column's two tiles
    a_view = untiled(a, m, kp)  # the copies read back as (M, Kp) and (N, Kp) float32 matrices
    w_view = untiled(w, n, kp)
    b.srcs = (placed(a_view, shape, row, k, kp).alu(Ops.MUL, placed(w_view, shape, col, k, kp)),)
    b.tiles = TileMatmul(a.base, w.base, m, n, kp, renderer.matrix_tiles)
    return True


def as_matrix(v: LazyBuffer, axis: int, k: int) -> LazyBuffer:
    """The operand view v (of a float32 widening of bfloat16 values) as a (size along `axis`, K) matrix of
    the bfloat16 values: read from them where they are a whole base (the copy then moves 16-bit values),
    else rounded back (exactly: each float32 came from a bfloat16)."""
    widened = v.base.srcs[0]
    if widened.base.buffer is None and widened.base.op is not Ops.CONST:
        # computed once in its own order (a rounded activation or gradient), not inside the copy, whose
        # order is the tiles': an expression there runs as scalars across rows (GELU's derivative, many times slower)
        widened.base.forced = True
    direct = widened.is_base and widened.shape == v.base.shape
    source = widened._view(v.st) if direct else v
    keep = (axis, k)
    one = source.shrink(tuple((0, n) if d in keep else (0, 1) for d, n in enumerate(v.shape)))
    flat = one.reshape((v.shape[min(keep)], v.shape[max(keep)]))
    ordered = flat if axis < k else flat.permute((1, 0))
    return ordered if direct else ordered.alu(Ops.CAST, arg=dtypes.bfloat16)


def tiled(x: LazyBuffer, rows: int, depth: int, panel: int, tile_k: int) -> LazyBuffer:
    """A copy of the (R, K) matrix x padded with zeros to (rows, depth), in panels: (rows / panel, depth /
    tile_k, panel, tile_k). A's panels are its tiles (16 rows of 32 values of K, 1 KiB in a row); B's hold
    a block's 32 columns, each row of the panel their values of K 2p and 2p + 1 side by side: a tile of B is
    16 of its rows, one half of each (the loop reads both halves, 2 KiB in a row). Whether x's rows or its
    columns are its memory's, the copy reads whole 64-byte lines a panel row at a time."""
    full = x.pad(((0, rows - x.shape[0]), (0, depth - x.shape[1])))
    cut = full.reshape((rows // panel, panel, depth // tile_k, tile_k))
    copy = cut.permute((0, 2, 1, 3)).contiguous()  # (a view of a whole base in its order where that is the layout)
    copy.base.forced = True  # (realized, even where no copy was needed)
    return copy


def untiled(t: LazyBuffer, r: int, depth: int) -> LazyBuffer:
    """The copy t read back as the (r, depth) float32 matrix it holds (its padding rows dropped)."""
    back = t.permute((0, 2, 1, 3)).reshape((t.shape[0] * t.shape[2], depth))
    return back.shrink(((0, r), (0, depth))).alu(Ops.CAST, arg=dtypes.float32)


def placed(x: LazyBuffer, shape: tuple[int, ...], axis: int, k: int, depth: int) -> LazyBuffer:
    """The (size along axis, depth) matrix x as an operand of the product's shape (K padded to depth)."""
    full = tuple(depth if d == k else n for d, n in enumerate(shape))
    ordered = x if axis < k else x.permute((1, 0))
    ones = tuple(full[d] if d in (axis, k) else 1 for d in range(len(full)))
    return ordered.reshape(ones).expand(full)


# ---- lowering ----

def rounds_tiles(reader: LazyBuffer, view: LazyBuffer) -> bool:
    """Is the tiled sum's reader its rounding into bfloat16 (autocast's matmul), which the tiled kernel does
    as it stores (the scheduler fuses it, engine/schedule.fuse)? Its other readers run apart."""
    return reader.op is Ops.CAST and reader.dtype is dtypes.bfloat16 and view is reader.srcs[0] \
        and view.shape == reader.shape and (view.is_base or view.st.contiguous)


def tiled_item(item: ScheduleItem) -> bool:
    """Does the kernel run on tiles (its sum marked, the pass on)?"""
    r = item.reduce
    if not on(Pass.TILES) or r is None or r.tiles is None or item.merged:
        return False
    return item.root is r or (item.root.op is Ops.CAST and item.root.srcs[0].base is r)


def lower_tiles(item: ScheduleItem, renderer: Renderer, threads: int) -> Kernel:
    """The tiled kernel's UOps (the module's docstring)."""
    t: TileMatmul = item.reduce.tiles
    out, a, b = item.root, t.a, t.b
    g = [UOp(UOps.GLOBAL, buf.dtype, (), i, f"data{i}") for i, buf in enumerate((out, a, b))]
    row_blocks, col_blocks, steps = padded(t.rows, SIDE) // SIDE, padded(t.cols, SIDE) // SIDE, t.depth // TILE_K
    threads = threads if row_blocks >= threads else 1
    i, j, s = Var("bidx0", 0, row_blocks - 1), Var("bidx1", 0, col_blocks - 1), Var("ridx0", 0, steps - 1)
    uops = [*g]

    def loop(var: Var, extent: int, kind: LoopKind) -> None:
        uops.append(UOp(UOps.RANGE, None, (), Loop(var.name, extent, kind), var.name))

    def tile(op: UOps, srcs: tuple, arg) -> None:
        uops.append(UOp(op, None, srcs, arg))

    loop(i, row_blocks, LoopKind.OUTPUT)
    loop(j, col_blocks, LoopKind.OUTPUT)
    for c in range(BLOCK * BLOCK):
        tile(UOps.TILE_ZERO, (), (c,))
    loop(s, steps, LoopKind.REDUCE)
    for r in range(BLOCK):  # A's tile (rows of block row r, K of step s), then B's (pairs of step s, block column r)
        tile(UOps.TILE_LOAD, (g[1],), (4 + r, ((i * BLOCK + r) * steps + s) * TILE_ROWS * TILE_K, TILE_K * 2))
        tile(UOps.TILE_LOAD, (g[2],), (6 + r, (j * t.depth // 2 + s * TILE_ROWS) * SIDE * 2 + r * TILE_ROWS * 2,
                                       SIDE * 2 * 2))
    for c in range(BLOCK * BLOCK):
        tile(UOps.TILE_DOT, (), (c, 4 + c // BLOCK, 6 + c % BLOCK))
    uops.append(UOp(UOps.ENDRANGE, None))
    for c in range(BLOCK * BLOCK):  # C tile c: rows (i*2 + c//2)*16.., columns (j*2 + c%2)*16..
        at = ((i * BLOCK + c // BLOCK) * TILE_ROWS, (j * BLOCK + c % BLOCK) * TILE_ROWS)
        uops.append(UOp(UOps.TILE_STORE, out.dtype, (g[0],), (c, *at, t.rows, t.cols)))
    uops += [UOp(UOps.ENDRANGE, None), UOp(UOps.ENDRANGE, None)]
    name = f"r_tiles_{t.rows}_{t.cols}_{t.depth}"
    return Kernel(name, out.shape, uops, [out, a, b], ops=2, reduce_shape=(t.rows, t.cols, t.depth),
                  threads=threads, passes=(Pass.TILES.value,))

