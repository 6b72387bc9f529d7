"""Layers: small classes that own their parameters and call the functional ops (torch's names,
shapes and initialisations, tinygrad's plain-object style: a layer is any object with tensors in
its attributes, and `nn.state` finds them by walking those attributes).

Where torch and tinygrad spell a constructor differently, both spellings work and torch's
defaults win (docs/api-contract.md lists each case). One file a family:
- linear.py: Linear, Embedding, Dropout;
- conv.py: convolutions and transposed convolutions over 1, 2 or 3 spatial dims;
- norm.py: batch, layer, group, instance and RMS normalisation;
- recurrent.py: the LSTM and GRU cells, and multi-layer LSTM and GRU modules over them.
"""

from __future__ import annotations

from . import state
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Dropout, Embedding, Linear
from .norm import (
    BatchNorm,
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    GroupNorm,
    InstanceNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LayerNorm,
    LayerNorm2d,
    RMSNorm,
)
from .recurrent import GRU, LSTM, GRUCell, LSTMCell

__all__ = ["GRU", "LSTM", "BatchNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "Conv1d", "Conv2d", "Conv3d",
           "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "Dropout", "Embedding", "GRUCell", "GroupNorm",
           "InstanceNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LSTMCell", "LayerNorm",
           "LayerNorm2d", "Linear", "RMSNorm", "state"]
