"""PyTorch reference implementations of the zoo's models: the oracle for the trajectory tests.

Each module mirrors one model of common/models with the same parameter names and shapes, written
the ordinary PyTorch way (nn.Module, F.cross_entropy, F.scaled_dot_product_attention), so that a
stage's state dict copies straight in through numpy and both sides can train on the same batches.
"""

from __future__ import annotations

import numpy as np
import torch

from .cnn import CNN
from .gpt import GPT
from .mlp import MLP
from .rnn import RNN

__all__ = ["CNN", "GPT", "MLP", "RNN", "load_numpy_state"]


def load_numpy_state(module: torch.nn.Module, arrays: dict[str, np.ndarray]) -> None:
    """Copy numpy arrays into the module's state dict by name; every name must match both ways."""
    own = module.state_dict()
    missing, unexpected = sorted(set(own) - set(arrays)), sorted(set(arrays) - set(own))
    if missing or unexpected:
        raise ValueError(f"load_numpy_state: missing {missing}, unexpected {unexpected}")
    with torch.no_grad():
        for name, t in own.items():
            src = torch.from_numpy(np.ascontiguousarray(arrays[name]))
            if src.shape != t.shape:
                raise ValueError(f"load_numpy_state: {name} is {tuple(src.shape)}, expected {tuple(t.shape)}")
            t.copy_(src)
