"""The op table: every op of this stage under one name, and the groups the code asks about.

`Ops` is the only list of the graph's ops (a kernel's own steps are codegen/uops.py's `UOps`). The
lazy graph is built from the PRIMITIVES alone, and every other op of the API is a composite of
them (exp is EXP2 of a product, matmul is RESHAPE + EXPAND + MUL + REDUCE_ADD, softmax is a
formula). The others are the API's vocabulary, never in a stage3 graph: autograd records a few of
them as one op with a rule of its own (exp, log, gelu, sigmoid...: autograd.py says why), and the
error messages name them. The derivative rules, the scheduler and the renderers all key on this
enum; a test walks a nanoGPT training step's graph and finds nothing outside PRIMITIVES.
"""

from __future__ import annotations

from enum import IntEnum, auto


class Ops(IntEnum):
    # ---- the IR: elementwise ----
    NEG = 0
    RECIP = auto()
    SQRT = auto()
    EXP2 = auto()
    POW2 = auto()  # 2^x for an integer-valued x: exp2 without its polynomial (transcendental.py's 2^n)
    LOG2 = auto()
    SIN = auto()
    ADD = auto()
    MUL = auto()
    DIV = auto()
    MAX = auto()
    CMPLT = auto()
    CMPEQ = auto()
    CMPNE = auto()
    AND = auto()
    OR = auto()
    XOR = auto()
    WHERE = auto()
    CAST = auto()
    # ---- the IR: reductions, movement (views that copy nothing), memory ----
    REDUCE_ADD = auto()
    REDUCE_MUL = auto()
    REDUCE_MAX = auto()
    RESHAPE = auto()
    PERMUTE = auto()
    EXPAND = auto()
    SHRINK = auto()
    FLIP = auto()
    PAD = auto()
    BUFFER = auto()  # a realized buffer
    CONST = auto()  # one number, viewed as any shape
    CONTIGUOUS = auto()  # a copy into a base of its own (contiguous, clone, assign)
    COPY = auto()  # a move between devices
    # ---- the API's vocabulary: recorded by autograd, never in a stage3 graph ----
    EXP = auto()
    LOG = auto()
    COS = auto()
    TANH = auto()
    ERF = auto()
    ABS = auto()
    SIGN = auto()
    NOT = auto()
    GELU = auto()
    SIGMOID = auto()
    SUB = auto()
    POW = auto()
    MIN = auto()
    CMPLE = auto()
    REDUCE_MIN = auto()
    ARGMAX = auto()
    ARGMIN = auto()
    ATTENTION = auto()  # causal attention with the online pass, with FlashAttention's backward as its rule


FLOAT_ONLY = frozenset({Ops.RECIP, Ops.SQRT, Ops.EXP, Ops.LOG, Ops.EXP2, Ops.POW2, Ops.LOG2, Ops.SIN, Ops.COS,
                        Ops.TANH, Ops.ERF, Ops.GELU, Ops.SIGMOID})  # unary ops an int input is cast to float for


# The IR: what a lazy graph may hold. AND/OR/XOR are the bitwise ops of ints and bools, REDUCE_MUL
# is prod's reduction (tinygrad keeps it too), DIV is float division, correctly rounded as numpy's
# (x * RECIP(y) rounds twice, and the mean of [-36] / 5 came out one ulp off), and POW2 is the power
# of two the math formulas scale by (a float's exponent field: a third of exp's ops were EXP2's
# polynomial of an integer, where tinygrad builds the bits with BITCAST and SHL): the only additions
# to tinygrad's minimal list, which the project's design took as the IR.
IR_ELEMENTWISE = frozenset({Ops.ADD, Ops.MUL, Ops.DIV, Ops.MAX, Ops.NEG, Ops.RECIP, Ops.EXP2, Ops.POW2, Ops.LOG2,
                            Ops.SQRT, Ops.SIN, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.WHERE, Ops.CAST, Ops.AND,
                            Ops.OR, Ops.XOR})
IR_REDUCE = frozenset({Ops.REDUCE_ADD, Ops.REDUCE_MAX, Ops.REDUCE_MUL})
IR_MOVEMENT = frozenset({Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE, Ops.PAD, Ops.SHRINK, Ops.FLIP})
IR_MEMORY = frozenset({Ops.BUFFER, Ops.CONST, Ops.CONTIGUOUS, Ops.COPY})
PRIMITIVES = IR_ELEMENTWISE | IR_REDUCE | IR_MOVEMENT | IR_MEMORY
