"""The IR is the primitive set: a whole nanoGPT training step (forward, backward, gradient
clipping and the AdamW update) builds graphs whose every node is an op of ops.PRIMITIVES; the
step's kernel count is printed (pytest -s) for the record."""

import sys

import numpy as np
import pytest

from .. import GlobalCounters, Tensor, dtypes, nn, optim
from .. import tensor as tensor_module
from ..engine.schedule import graph
from ..ops import PRIMITIVES


def test_a_nanogpt_training_step_uses_only_primitives(monkeypatch):
    from common.models.gpt import GPT, GPTConfig  # the zoo's model, written once on the Tensor API

    stage = sys.modules[Tensor.__module__.rsplit(".", 1)[0]]
    Tensor.manual_seed(0)
    model = GPT(stage, GPTConfig(block_size=16, vocab_size=30, n_layer=2, n_head=2, n_embd=32, dropout=0.0))
    opt = optim.AdamW(nn.state.get_parameters(model), lr=1e-3, weight_decay=0.1)
    rng = np.random.default_rng(0)
    x, y = Tensor(rng.integers(0, 30, (4, 16))), Tensor(rng.integers(0, 30, (4, 16)))
    seen: set = set()
    real = tensor_module.realize

    def recording(outs):
        seen.update(b.op for b in graph(outs))
        real(outs)

    monkeypatch.setattr(tensor_module, "realize", recording)
    GlobalCounters.reset()
    with Tensor.train():
        loss = model.loss(x, y)
        loss.backward()
        loss.item()
    optim.clip_grad_norm_(opt.params, 1.0)
    opt.step()
    assert seen and seen <= PRIMITIVES, sorted(op.name for op in seen - PRIMITIVES)
    print(f"nanoGPT step (2 layers, 32 wide): {GlobalCounters.kernel_count} kernels; "
          f"ops: {sorted(op.name for op in seen)}")


@pytest.mark.parametrize("shape", [(3, 4), (3, 8), (2, 3, 4), (5, 16)])
def test_a_flipped_int_tensor_summed_as_floats(shape):
    """gcc 12.2 at -O3 vectorized this loop wrongly (backward int loads converted to float, after
    unrolling the inner loop completely): the sum of a flipped (3, 4) came out -12 instead of -18, and
    hypothesis found mean() wrong on such a view. The renderer keeps these kernels from its loop vectorizer."""
    a = np.arange(np.prod(shape), dtype=np.int32).reshape(shape) - 7
    axes = tuple(range(len(shape)))
    assert Tensor(a).flip(axes).cast(dtypes.float32).sum().item() == a.sum()
    assert Tensor(a).flip(axes).mean().item() == pytest.approx(a.mean(), rel=1e-6)
    np.testing.assert_array_equal(Tensor(a).flip(axes).cast(dtypes.float32).sum(-1).numpy(),
                                  np.flip(a, axes).astype(np.float32).sum(-1))


@pytest.mark.parametrize("dtype", [dtypes.int32, dtypes.float32, dtypes.float64])
@pytest.mark.parametrize("rows, before", [(4, 1), (4, 2), (9, 3), (64, 1)])
def test_a_leading_pad_of_pairs_read_twice(rows, before, dtype):
    """gcc 12.2's loop vectorizer again (AVX2 and AVX-512): a gated load in a loop nest whose inner loop
    runs twice read the rows right after a leading pad as zeros. Hypothesis found it as
    `x + x.contiguous()` of a (1, 1, 4, 2) int32 tensor padded by one row (the merge pass's two outputs;
    two rows of padding fail with one output too)."""
    a = (np.arange(rows * 2).reshape(1, 1, rows, 2) * 7 - 50).astype(dtype.np)
    x = Tensor(a).pad(((0, 0), (0, 0), (before, 0), (0, 0)))
    padded = np.pad(a, ((0, 0), (0, 0), (before, 0), (0, 0)))
    np.testing.assert_array_equal((x + x.contiguous()).numpy(), padded + padded)
    np.testing.assert_array_equal((x * 2).numpy(), padded * 2)


@pytest.mark.parametrize("shape", [(4, 2), (4, 2, 1), (4, 4), (64, 2), (3, 4, 2)])
def test_a_flipped_float_tensor_summed(shape):
    """The same gcc bug without a cast: a float sum over a view flipped along two axes (the inner loop
    unrolled, its loads grouped backwards) read one element past the buffer and skipped two; hypothesis
    found it as mean() of a flipped (4, 2, 1). Powers of two make every order of the sum exact."""
    a = (2.0 ** (np.arange(np.prod(shape)) % 20)).astype(np.float32).reshape(shape)
    axes = tuple(range(len(shape)))
    assert Tensor(a).flip(axes).sum().item() == a.sum()
    np.testing.assert_array_equal(Tensor(a).flip(axes).sum(-1).numpy(), np.flip(a, axes).sum(-1))
