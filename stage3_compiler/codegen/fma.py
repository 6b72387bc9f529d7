"""The fma pass: which multiply-adds a kernel fuses into one instruction (one rounding).

A fused multiply-add computes a*b + c with one rounding where a multiply and an add round twice, so
fusing changes a result's last bits. The core fuses none (the C compiler's -ffp-contract=off, NVRTC's
--fmad=false), so a formula gives the same bits in every kernel that computes it. This pass fuses
where no comparison can see the difference: a reduction's own acc + a*b (a matmul's step, as every
BLAS computes it), and the sums FlashAttention's kernels compute inside their terms. The CPU renderer
asks for it per kernel (a pragma: `fused_multiply_adds`), the CUDA renderer per product (`fmaf`:
`fused_products`), each where lowering found the pass changed the kernel (`Kernel.passes`).
"""

from __future__ import annotations

from ..ops import Ops
from .uops import Kernel, UOp, UOps


def adds_a_product(u: UOp) -> bool:
    """Is u a float reduction's step acc + a*b (an UPDATE adding a MUL)?"""
    return u.op is UOps.UPDATE and u.arg is Ops.REDUCE_ADD and u.dtype.is_float and \
        u.srcs[1].op is UOps.ALU and u.srcs[1].arg is Ops.MUL


def fused_multiply_adds(kernel: Kernel) -> bool:
    """May gcc fuse this kernel's a*b + c into one instruction (an FMA, one rounding)? Only where the
    only such sums are its reduction's own acc + a*b: a matmul's, as every BLAS computes it. Its
    product and add were two instructions on two of the core's ports (compiler.FLAGS keeps them
    apart), so a core whose adds run on its two FMA ports ran nanoGPT's matmul tiles at half its
    peak (benchmarks/results/stage3_rule_measurements.md). Any other multiply feeding an add (an
    epilogue's, a layernorm computed into an operand, the polynomial of EXP2F) keeps the flag off for
    the whole kernel: the same formula computed in another kernel must give the same bits (a max's
    gradient finds the maximum by ==).

    But for FlashAttention's kernels (`Kernel.nested`: sums computed in their terms), which compute
    values no kernel stores (each pair's score, exp, dp) into attention's output and gradients, which
    nothing compares with another kernel's by ==: their dot products, exps and sums fuse too, and
    both kernels run faster so (benchmarks/results/stage3_online_softmax.md)."""
    if kernel.nested:
        return True

    def product(u: UOp) -> bool:
        u = u.srcs[0] if u.op is UOps.ALU and u.arg is Ops.NEG else u
        return u.op is UOps.ALU and u.arg is Ops.MUL and u.dtype.is_float

    accumulated = False
    for u in kernel.uops:
        if adds_a_product(u):
            accumulated = True
        elif u.op is UOps.ALU and u.arg in (Ops.ADD, Ops.SUB) and u.dtype.is_float and any(map(product, u.srcs)):
            return False
        elif u.op is UOps.ALU and u.arg in (Ops.EXP2, Ops.POW2, Ops.LOG2):  # inline functions with sums of products
            return False
    return accumulated


def fused_products(kernel: Kernel) -> set[int]:
    """The products a float reduction's sum reads and nothing else does: its acc + a*b is one fmaf."""
    readers: dict[int, int] = {}
    for u in kernel.uops:
        for s in u.srcs:
            readers[id(s)] = readers.get(id(s), 0) + 1
    return {id(u.srcs[1]) for u in kernel.uops if adds_a_product(u) and readers[id(u.srcs[1])] == 1}
