"""The op table: every op of this stage under one name, and the groups the code asks about.

`Ops` is the only list of ops. Its values are the dispatch codes of the C kernels: ckernels.py
writes them into the `enum op` the kernels switch on (OP_NEG, OP_ADD, ...), so Python and C
cannot disagree about which number means which op. The unary and binary kernels take an op of
the UNARY or BINARY group, `reduce` one of REDUCE, `arg_reduce` one of ARG. Movement ops and the
copies have no dispatch code: they are here because the op table names what a tensor can be
made by, and later stages key their derivative rules and their IR on the same enum.
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


UNARY = frozenset({Ops.NEG, Ops.RECIP, Ops.SQRT, Ops.EXP, Ops.LOG, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.COS,
                   Ops.TANH, Ops.ERF, Ops.ABS, Ops.SIGN, Ops.NOT, Ops.GELU})
BINARY = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.DIV, Ops.POW, Ops.MAX, Ops.MIN, Ops.CMPLT, Ops.CMPLE,
                    Ops.CMPEQ, Ops.CMPNE, Ops.AND, Ops.OR, Ops.XOR, Ops.GELU_GRAD})
COMPARE = frozenset({Ops.CMPLT, Ops.CMPLE, Ops.CMPEQ, Ops.CMPNE})  # binary ops that write bool
FLOAT_ONLY = frozenset({Ops.RECIP, Ops.SQRT, Ops.EXP, Ops.LOG, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.COS, Ops.TANH,
                        Ops.ERF, Ops.GELU})  # unary ops an int input is cast to float for
REDUCE = frozenset({Ops.REDUCE_ADD, Ops.REDUCE_MUL, Ops.REDUCE_MAX, Ops.REDUCE_MIN})
ARG = frozenset({Ops.ARGMAX, Ops.ARGMIN})
MOVEMENT = frozenset({Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.SHRINK, Ops.FLIP, Ops.PAD, Ops.CAT, Ops.INDEX})


def c_enum() -> str:
    """The C declaration of the dispatch codes, `enum op { OP_NEG = 0, ... };` (ckernels.py)."""
    members = ", ".join(f"OP_{op.name} = {op.value}" for op in Ops)
    return f"/* generated from ops.py: the op codes every kernel dispatches on */\nenum op {{ {members} }};\n"
