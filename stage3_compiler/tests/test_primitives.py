"""The IR is the primitive set: a whole nanoGPT training step (forward, backward, gradient
clipping and the AdamW update) builds graphs whose every node is an op of ops.PRIMITIVES; the
step's kernel count is printed (pytest -s) for the record."""

import sys

import numpy as np

from .. import GlobalCounters, Tensor, nn, optim
from .. import tensor as tensor_module
from ..ops import PRIMITIVES
from ..schedule import graph


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
