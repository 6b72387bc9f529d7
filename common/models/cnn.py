"""A LeNet-5-style convolutional classifier (LeCun et al. 1998) for 28x28 digit images.

conv 5x5 (6 maps, padded to keep 28x28) -> ReLU -> 2x2 max-pool -> conv 5x5 (16 maps) -> ReLU ->
2x2 max-pool -> three linear layers (400 -> 120 -> 84 -> 10). ReLU and max-pool replace the
original's scaled tanh and trainable subsampling, as modern re-implementations do.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .layers import layers_of

Tensor = Any


@dataclass(frozen=True)
class CNNConfig:
    n_classes: int = 10
    channels: tuple[int, int] = (6, 16)
    hidden: tuple[int, int] = (120, 84)


class CNN:
    def __init__(self, stage: ModuleType, config: CNNConfig):
        nn = layers_of(stage)
        c1, c2 = config.channels
        h1, h2 = config.hidden
        self.config = config
        self.conv1 = nn.Conv2d(1, c1, 5, padding=2)
        self.conv2 = nn.Conv2d(c1, c2, 5)
        self.fc1 = nn.Linear(c2 * 5 * 5, h1)
        self.fc2 = nn.Linear(h1, h2)
        self.fc3 = nn.Linear(h2, config.n_classes)

    def __call__(self, x: Tensor) -> Tensor:
        """x (B, 1, 28, 28) float -> logits (B, n_classes)."""
        if x.ndim != 4 or tuple(x.shape[1:]) != (1, 28, 28):
            raise ValueError(f"CNN: expected images (B, 1, 28, 28), got {x.shape}")
        x = self.conv1(x).relu().max_pool2d(2)  # (B, c1, 14, 14)
        x = self.conv2(x).relu().max_pool2d(2)  # (B, c2, 5, 5)
        x = x.reshape(x.shape[0], -1)  # (B, c2*25)
        x = self.fc2(self.fc1(x).relu()).relu()  # (B, h2)
        return self.fc3(x)  # (B, n_classes)

    def loss(self, x: Tensor, labels: Tensor) -> Tensor:
        return self(x).sparse_categorical_crossentropy(labels)
