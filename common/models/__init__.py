"""The model zoo, written once against the Tensor API; the caller passes the stage (its Tensor, or
the stage module for the models built from layers)."""

from .cnn import CNN, CNNConfig
from .glm import LinearRegression, LogisticRegression, SoftmaxRegression, Standardizer, accuracy
from .gpt import GPT, GPTConfig
from .mlp import MLP, MLPConfig
from .nanochat import NanoChat, NanoChatConfig
from .rnn import RNN, RNNConfig

__all__ = [
    "CNN",
    "CNNConfig",
    "GPT",
    "GPTConfig",
    "LinearRegression",
    "LogisticRegression",
    "MLP",
    "MLPConfig",
    "NanoChat",
    "NanoChatConfig",
    "RNN",
    "RNNConfig",
    "SoftmaxRegression",
    "Standardizer",
    "accuracy",
]
