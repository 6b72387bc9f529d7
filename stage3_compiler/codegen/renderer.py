"""What codegen may ask of the target before it writes a kernel: a renderer's capabilities. The
heuristics (heuristics.py), the options' checks (opts.py) and the scheduler's operand layouts
(layouts.py) read these flags instead of asking which device a kernel runs on; the C renderer
(cpu/renderer.py) and the CUDA renderer (cuda/renderer.py) set them and turn a Kernel into source.
"""

from __future__ import annotations

from ..isa import TileUnit
from .uops import Kernel


class Renderer:
    tile: tuple[int, int] = (4, 8)  # a matmul's register tile: rows x columns (heuristics.matmul_tile)
    threads: bool = False  # THREAD: a kernel's outermost loop split across CPU threads (OpenMP)
    loop_blocks: bool = False  # BLOCK: an output loop cut into cache blocks, moved outermost
    split_reductions: bool = False  # SPLIT pays: a loop of partial sums the C compiler vectorizes
    split_parts: int = 8  # SPLIT's partial sums: float32s in one vector register (AVX2 8, AVX-512 16)
    packed_operands: bool = False  # matmul operands read from copies packed in panels (layouts.py)
    narrow_tiles: bool = False  # a matmul whose operand is computed in its loop takes one row a pass
    grid: bool = False  # the output indices come from a grid of threads (UOps.SPECIAL), not loops
    vector_width: int = 0  # float32s in a vector value an upcast kernel's lanes are packed into (vectorize.py)
    local_memory: bool = False  # LOCAL and GROUP as options (GPU shared memory): named in opts.py, not built
    matrix_tiles: TileUnit | None = None  # a bfloat16 matmul runs on a matrix unit's tiles (codegen/tiles.py)

    def render(self, kernel: Kernel) -> str:
        raise NotImplementedError
