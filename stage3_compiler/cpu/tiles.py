"""The tiles pass's C (codegen/tiles.py): AMX's tile instructions, or C that does what they do.

A tile register holds 16 rows of 64 bytes. Before a thread uses them it loads a configuration (palette
1, each of the 8 registers 16 rows of 64 bytes); Linux gives a process the registers' state only once it
asks (isa.matrix_unit). The
intrinsics take a register's number as a constant, so the renderer writes each UOp with its number
in the text. Where the CPU has no AMX, SITP_TILES=emulate writes the same calls as C functions over a
thread's own array of 8 tiles, doing what the instructions do: TDPBF16PS adds the two products of
each pair of K to C one after the other, each add rounded, as Intel's pseudocode does. (The hardware
also flushes subnormal inputs and results to zero, which the functions do not.)
"""

from __future__ import annotations

from ..codegen.uops import Kernel, UOp, UOps
from ..dtype import dtypes
from ..graph.symbolic import render
from ..isa import TileUnit

# The block's rows and columns past the output's end (M or N not a multiple of 16) go through a scratch
# tile; the rest is stored in place.
STORE = r"""static inline void sitp_tile_edge(float* out, const float* tile, long long row, long long col,
                                  long long rows, long long cols) {
  for (long long r = 0; r < 16 && row + r < rows; r++)
    for (long long c = 0; c < 16 && col + c < cols; c++) out[(row + r) * cols + col + c] = tile[r * 16 + c];
}
#define sitp_tile_store(t, out, row, col, rows, cols) do { \
  if ((row) + 16 <= (rows) && (col) + 16 <= (cols)) sitp_tile_stored(t, (out) + (row) * (cols) + (col), (cols) * 4); \
  else { float sitp_scratch[256]; sitp_tile_stored(t, sitp_scratch, 64); \
         sitp_tile_edge(out, sitp_scratch, row, col, rows, cols); } } while (0)
"""

AMX = r"""#include <immintrin.h>
struct sitp_tile_config {
  unsigned char palette, start_row, reserved[14]; unsigned short colsb[16]; unsigned char rows[16];
};
static inline void sitp_tile_config(void) {
  struct sitp_tile_config config = {0};
  config.palette = 1;
  for (int t = 0; t < 8; t++) { config.colsb[t] = 64; config.rows[t] = 16; }
  _tile_loadconfig(&config);
}
#define sitp_tile_release() _tile_release()
#define sitp_tile_zero(t) _tile_zero(t)
#define sitp_tile_load(t, p, stride) _tile_loadd(t, p, stride)
#define sitp_tile_stored(t, p, stride) _tile_stored(t, p, stride)
#define sitp_tile_dot(c, a, b) _tile_dpbf16ps(c, a, b)
""" + STORE

EMULATED = r"""static _Thread_local unsigned char sitp_tiles[8][16][64];
static inline void sitp_tile_config(void) {}
static inline void sitp_tile_release(void) {}
static inline void sitp_tile_zero(int t) { __builtin_memset(sitp_tiles[t], 0, sizeof(sitp_tiles[t])); }
static inline void sitp_tile_load(int t, const void* p, long long stride) {
  for (int r = 0; r < 16; r++) __builtin_memcpy(sitp_tiles[t][r], (const unsigned char*)p + r * stride, 64);
}
static inline void sitp_tile_stored(int t, void* p, long long stride) {
  for (int r = 0; r < 16; r++) __builtin_memcpy((unsigned char*)p + r * stride, sitp_tiles[t][r], 64);
}
static inline float sitp_tile_bf16(const unsigned char* p) {
  unsigned short h; __builtin_memcpy(&h, p, 2);
  unsigned int u = (unsigned int)h << 16; float f; __builtin_memcpy(&f, &u, 4); return f;
}
static inline void sitp_tile_dot(int c, int a, int b) {
  for (int m = 0; m < 16; m++)
    for (int k = 0; k < 16; k++)
      for (int n = 0; n < 16; n++) {
        float acc; __builtin_memcpy(&acc, &sitp_tiles[c][m][4 * n], 4);
        acc += sitp_tile_bf16(&sitp_tiles[a][m][4 * k]) * sitp_tile_bf16(&sitp_tiles[b][k][4 * n]);
        acc += sitp_tile_bf16(&sitp_tiles[a][m][4 * k + 2]) * sitp_tile_bf16(&sitp_tiles[b][k][4 * n + 2]);
        __builtin_memcpy(&sitp_tiles[c][m][4 * n], &acc, 4);
      }
}
""" + STORE

HEADERS = {TileUnit.AMX: AMX, TileUnit.EMULATED: EMULATED}

# A tile of sums rounded into bfloat16 as it is stored (autocast's matmul returns its half type): through the
# scratch tile, a row of 16 rounded together (cpu/renderer.py's HALF: sitp_to_bf16)
ROUNDED = r"""static inline void sitp_tile_round(unsigned short* out, const float* tile, long long row, long long col,
                                   long long rows, long long cols) {
  long long width = cols - col < 16 ? cols - col : 16;
  for (long long r = 0; r < 16 && row + r < rows; r++)
    for (long long c = 0; c < width; c++) out[(row + r) * cols + col + c] = sitp_to_bf16(tile[r * 16 + c]);
}
#define sitp_tile_store_bf16(t, out, row, col, rows, cols) do { \
  float sitp_scratch[256]; sitp_tile_stored(t, sitp_scratch, 64); \
  sitp_tile_round(out, sitp_scratch, row, col, rows, cols); } while (0)
"""


def header(unit: TileUnit | None, kernel: Kernel) -> str:
    if unit is None:
        raise RuntimeError("render: a tiled kernel (codegen/tiles.py) needs a matrix unit; this renderer has none")
    rounds = any(u.op is UOps.TILE_STORE and u.dtype is not dtypes.float32 for u in kernel.uops)
    return HEADERS[unit] + (ROUNDED if rounds else "")


def tile_line(u: UOp, names: dict[int, str]) -> str:
    """One tile UOp as a line of C."""
    if u.op is UOps.TILE_ZERO:
        return f"sitp_tile_zero({u.arg[0]});"
    if u.op is UOps.TILE_LOAD:
        t, index, stride = u.arg
        return f"sitp_tile_load({t}, {names[id(u.srcs[0])]} + {render(index)}, {stride});"
    if u.op is UOps.TILE_DOT:
        return f"sitp_tile_dot({', '.join(map(str, u.arg))});"
    t, row, col, rows, cols = u.arg
    store = "sitp_tile_store" if u.dtype is dtypes.float32 else "sitp_tile_store_bf16"
    return f"{store}({t}, {names[id(u.srcs[0])]}, {render(row)}, {render(col)}, {rows}, {cols});"
