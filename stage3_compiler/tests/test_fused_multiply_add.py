"""A reduction's acc + a*b as one fused multiply-add (codegen/fma.fused_multiply_adds): which kernels
gcc may contract, and that a matmul really rounds once a step where the CPU has FMA."""

import numpy as np
import pytest

from .. import Tensor
from ..codegen.fma import fused_multiply_adds
from ..codegen.heuristics import heuristic_opts
from ..codegen.lower import lower
from ..cpu import compiler
from .test_opts import CPU, last_item, rand

CONTRACT = '#pragma GCC optimize ("fp-contract=fast")'


def kernel_of(t: Tensor):
    item = last_item(t)
    return lower(item, CPU, heuristic_opts(item, CPU, 1))


def test_a_matmul_and_a_dot_product_fuse_their_multiply_adds():
    for t in (rand(64, 64) @ rand(64, 64, seed=1), (rand(300) * rand(300, seed=1)).sum()):
        kernel = kernel_of(t)
        assert fused_multiply_adds(kernel) and CONTRACT in CPU.render(kernel)


def test_any_other_product_feeding_a_sum_keeps_the_kernel_unfused():
    a, b = rand(64, 64), rand(64, 64, seed=1)
    cases = {"an epilogue's x*2 + 1": (a @ b) * 2 + 1,
             "EXP2F's polynomial in the epilogue": (a @ b).exp(),
             "a sum without products": a.sum(axis=1)}
    for name, t in cases.items():
        kernel = kernel_of(t)
        assert not fused_multiply_adds(kernel), name
        assert CONTRACT not in CPU.render(kernel), name


def test_flash_attentions_kernel_fuses_and_the_unfused_softmax_does_not(monkeypatch):
    # FlashAttention's forward computes each pair's score and exp in its loop, values no kernel stores or
    # compares (Kernel.nested): its products and adds fuse, its exp's polynomial too. The unfused
    # softmax's kernels compute the same exp, which must keep its bits from kernel to kernel.
    q, k, v = rand(2, 2, 32, 16), rand(2, 2, 32, 16, seed=1), rand(2, 2, 32, 16, seed=2)
    monkeypatch.setenv("PASSES", "+online")
    fused = kernel_of(q.scaled_dot_product_attention(k, v, is_causal=True))
    assert fused.nested and fused_multiply_adds(fused) and CONTRACT in CPU.render(fused)
    monkeypatch.setenv("PASSES", "-online")
    kernel = kernel_of(q.scaled_dot_product_attention(k, v, is_causal=True))
    assert not kernel.nested  # (its last kernel, probabilities @ v, is a matmul: that one fuses)
    assert not fused_multiply_adds(kernel_of((q @ k.transpose(-2, -1)).softmax(-1)))


@pytest.mark.skipif(b"__FMA__" not in compiler.macros(), reason="the compiler targets a CPU without FMA")
def test_a_matmul_rounds_once_a_step():
    # (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11 as a float32 product; fused with the
    # first step's -(1 + 2^-11), the 2^-24 survives
    x = np.array([[-(1 + 2.0**-11), 1 + 2.0**-12]], np.float32)
    y = np.array([[1.0], [1 + 2.0**-12]], np.float32)
    got = (Tensor(x) @ Tensor(y)).numpy()
    assert got.tolist() == [[2.0**-24]], got
