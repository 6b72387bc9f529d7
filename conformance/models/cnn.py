"""Reference for common/models/cnn.py: LeNet-5 with ReLU and max-pooling."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class CNN(nn.Module):
    def __init__(self, n_classes: int, channels: tuple[int, int], hidden: tuple[int, int]):
        super().__init__()
        c1, c2 = channels
        self.conv1 = nn.Conv2d(1, c1, 5, padding=2)
        self.conv2 = nn.Conv2d(c1, c2, 5)
        self.fc1 = nn.Linear(c2 * 25, hidden[0])
        self.fc2 = nn.Linear(hidden[0], hidden[1])
        self.fc3 = nn.Linear(hidden[1], n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc2(F.relu(self.fc1(x.flatten(1)))))
        return self.fc3(x)

    def loss(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self(x), labels)
