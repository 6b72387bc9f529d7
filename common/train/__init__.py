"""Training loops, sklearn references and loss curves."""

from .curves import save_loss_curve
from .glm import TrainResult, gradient_descent, train_linreg, train_logreg, train_softmax

__all__ = [
    "TrainResult",
    "gradient_descent",
    "save_loss_curve",
    "train_linreg",
    "train_logreg",
    "train_softmax",
]
