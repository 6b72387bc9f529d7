"""The model zoo, written once against the Tensor API; the caller passes the stage's Tensor."""

from .glm import LinearRegression, LogisticRegression, SoftmaxRegression, Standardizer, accuracy

__all__ = ["LinearRegression", "LogisticRegression", "SoftmaxRegression", "Standardizer", "accuracy"]
