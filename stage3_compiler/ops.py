"""The op table: every op of this stage under one name, and the groups the code asks about.

`Ops` is the only list of ops. In this stage most of them are the API's vocabulary only: the lazy
graph is built from the PRIMITIVES alone (the IR of DESIGN.md), and every other op of the API
is a composite of them (exp is EXP2 of a product, matmul is RESHAPE + EXPAND + MUL + REDUCE_ADD,
softmax and GELU are formulas). The derivative rules, the scheduler and the renderers all key on
this enum; a test walks a nanoGPT training step's graph and finds nothing outside PRIMITIVES.
"""

from __future__ import annotations

from enum import IntEnum, auto


class Ops(IntEnum):
    # elementwise, one input: elementwise.c's unary()
    NEG = 0
    RECIP = auto()
    SQRT = auto()
    EXP = auto()
    LOG = auto()
    EXP2 = auto()
    LOG2 = auto()
    SIN = auto()
    COS = auto()
    TANH = auto()
    ERF = auto()
    ABS = auto()
    SIGN = auto()
    NOT = auto()
    GELU = auto()
    # elementwise, two inputs: elementwise.c's binary()
    ADD = auto()
    SUB = auto()
    MUL = auto()
    DIV = auto()
    POW = auto()
    MAX = auto()
    MIN = auto()
    CMPLT = auto()
    CMPLE = auto()
    CMPEQ = auto()
    CMPNE = auto()
    AND = auto()
    OR = auto()
    XOR = auto()
    # elementwise, the others: where() and cast()
    WHERE = auto()
    CAST = auto()
    # reductions over the middle axis of an (O, R, I) view: reduce.c
    REDUCE_ADD = auto()
    REDUCE_MUL = auto()
    REDUCE_MAX = auto()
    REDUCE_MIN = auto()
    ARGMAX = auto()
    ARGMIN = auto()
    CUMSUM = auto()
    # movement: views that copy nothing, and the copies (copy.c)
    RESHAPE = auto()
    PERMUTE = auto()
    EXPAND = auto()
    SHRINK = auto()
    FLIP = auto()
    PAD = auto()
    CAT = auto()
    INDEX = auto()
    CONTIGUOUS = auto()
    # linear algebra: the GEMM ladder and gemm.c
    MATMUL = auto()
    # autograd: a derivative kernel, a move between devices, the two composites promoted to
    # primitives with a rule of their own (reduce.py says why), and sigmoid, whose rule s (1 - s)
    # stays finite where the chain rule through 1 / (1 + e^-x) gives inf / inf (elementwise.py)
    GELU_GRAD = auto()
    COPY = auto()
    SOFTMAX = auto()
    LOG_SOFTMAX = auto()
    SIGMOID = auto()
    # the compiler's memory ops: a realized buffer, a constant, and a kernel's reads and writes
    BUFFER = auto()
    CONST = auto()
    LOAD = auto()
    STORE = auto()


UNARY = frozenset({Ops.NEG, Ops.RECIP, Ops.SQRT, Ops.EXP, Ops.LOG, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.COS,
                   Ops.TANH, Ops.ERF, Ops.ABS, Ops.SIGN, Ops.NOT, Ops.GELU})
BINARY = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.DIV, Ops.POW, Ops.MAX, Ops.MIN, Ops.CMPLT, Ops.CMPLE,
                    Ops.CMPEQ, Ops.CMPNE, Ops.AND, Ops.OR, Ops.XOR, Ops.GELU_GRAD})
COMPARE = frozenset({Ops.CMPLT, Ops.CMPLE, Ops.CMPEQ, Ops.CMPNE})  # binary ops that write bool
FLOAT_ONLY = frozenset({Ops.RECIP, Ops.SQRT, Ops.EXP, Ops.LOG, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.COS, Ops.TANH,
                        Ops.ERF, Ops.GELU, Ops.SIGMOID})  # unary ops an int input is cast to float for
REDUCE = frozenset({Ops.REDUCE_ADD, Ops.REDUCE_MUL, Ops.REDUCE_MAX, Ops.REDUCE_MIN})
ARG = frozenset({Ops.ARGMAX, Ops.ARGMIN})
MOVEMENT = frozenset({Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.SHRINK, Ops.FLIP, Ops.PAD, Ops.CAT, Ops.INDEX})


# The IR: what a lazy graph may hold. AND/OR/XOR are the bitwise ops of ints and bools, REDUCE_MUL
# is prod's reduction (tinygrad keeps it too), and DIV is float division, correctly rounded as numpy's
# (x * RECIP(y) rounds twice, and the mean of [-36] / 5 came out one ulp off): the only additions
# to DESIGN.md's list.
IR_ELEMENTWISE = frozenset({Ops.ADD, Ops.MUL, Ops.DIV, Ops.MAX, Ops.NEG, Ops.RECIP, Ops.EXP2, Ops.LOG2, Ops.SQRT,
                            Ops.SIN, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.WHERE, Ops.CAST, Ops.AND, Ops.OR,
                            Ops.XOR})
IR_REDUCE = frozenset({Ops.REDUCE_ADD, Ops.REDUCE_MAX, Ops.REDUCE_MUL})
IR_MOVEMENT = frozenset({Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE, Ops.PAD, Ops.SHRINK, Ops.FLIP})
IR_MEMORY = frozenset({Ops.BUFFER, Ops.CONST, Ops.LOAD, Ops.STORE, Ops.CONTIGUOUS, Ops.COPY})
PRIMITIVES = IR_ELEMENTWISE | IR_REDUCE | IR_MOVEMENT | IR_MEMORY
