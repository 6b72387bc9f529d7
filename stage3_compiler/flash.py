"""FlashAttention from the API: attention recorded as one op whose derivative rule recomputes.

With the online pass on (passes.py), `scaled_dot_product_attention` (functional.py) asks `flash_applies`
and records attention through `flash_attention`: the forward as the formulas it always is, plus the
rows' log-sum-exp, and one ATTENTION node whose rule is FlashAttention's backward
(autograd.attention_grads). The scheduler's online rule (engine/online.py) then makes the forward one
kernel.
"""

from __future__ import annotations

import math

from .autocast import autocast
from .autograd import GradMode, attention_scores, no_grad, record
from .dtype import dtypes
from .graph.lazy import mark_recomputed
from .ops import Ops
from .passes import Pass, on


def flash_applies(q, k, v) -> bool:
    """Is attention over these recorded as one op with FlashAttention's backward? With the online pass
    on (passes.py), when a gradient is wanted, for float32 or half heads (all three of one type) of concrete
    shapes that need no broadcasting."""
    return (on(Pass.ONLINE) and GradMode.enabled and any(t.requires_grad for t in (q, k, v))
            and q.dtype is k.dtype is v.dtype and (q.dtype is dtypes.float32 or q.dtype.is_half)
            and q.ndim >= 2 and q.ndim == k.ndim == v.ndim
            and all(isinstance(n, int) for t in (q, k, v) for n in t.shape)
            and q.shape[:-2] == k.shape[:-2] == v.shape[:-2] and q.shape[-1] == k.shape[-1] > 0
            and k.shape[-2] == v.shape[-2] > 0 and q.shape[-2] > 0)


def flash_attention(query, key, value, causal: bool):
    """Attention recorded as one op, whose rule is FlashAttention's backward (autograd.attention_grads).
    Beside the output, the forward keeps each row's log-sum-exp of the scores, m + log l for the
    row's max m and sum of exps l, from which the backward recomputes the probabilities instead
    of reading them from memory. With the online pass (on unless PASSES=-online) one kernel computes both: the
    online softmax's loop ends with the row's m and l, and writes the log-sum-exp beside the output
    (engine/online.py).
    The scores are marked recomputed: where the output is realized before the backward asks for the
    log-sum-exp, its max and sum (two kernels) compute them in their loops rather than store them.
    Half heads (autocast's) are widened: the scores, the online softmax and the sums run in float32, as a half
    matmul's sums do, and the output is rounded to the half type once; the casts carry the gradients."""
    if query.dtype.is_half:
        with autocast(enabled=False):  # its products in float32, not lowered again
            out = flash_attention(*(t.float().contiguous() for t in (query, key, value)), causal)
        out.lazydata.base.forced = True  # its own kernel's output, the log-sum-exp beside it, not fused into the cast
        return out.cast(query.dtype)
    scale = 1 / math.sqrt(query.shape[-1])
    with no_grad():
        scores = attention_scores(query, key, scale, causal)
        mark_recomputed([scores.lazydata], [query.lazydata, key.lazydata])
        top = scores.max(-1, keepdim=True)
        e = (scores - top).exp()
        total = e.sum(-1, keepdim=True)
        out, lse = (e / total) @ value, top + total.log()
        lse.lazydata.base.forced = True
        out.lazydata.base.along = (lse.lazydata,)  # realized with the output, by its kernel
    return record(out, Ops.ATTENTION, (query, key, value), lse=lse, scale=scale, causal=causal, memo={})
