"""Generalized linear models with hand-derived gradients, written once against the Tensor API.

Stage1 has no autograd, so every model states its loss and the gradient of that loss worked
out by hand, a few lines apart (as micrograd puts an op beside its derivative). Nothing here
imports a stage: the caller passes the stage's ``Tensor`` class, so the same code runs on every
stage that has the ops it uses. All shapes are 2-D: a batch ``x`` is (n, d), targets ``y`` are
(n, 1) (or class indices (n,) for softmax), so only 2-D matmul is needed.

A gradient ``Xᵀ G`` is computed as ``(Gᵀ X)ᵀ``: that transposes the small (n, k) matrix instead
of the large (n, d) data matrix, which the GEMM kernel would otherwise copy every step.
"""

from __future__ import annotations

from typing import Any

# The Tensor class of whichever stage the caller chose; typed loosely on purpose, because
# no stage may be imported here.
Tensor = Any


def _xt_matmul(x: Tensor, g: Tensor) -> Tensor:
    """xᵀ @ g for x (n, d), g (n, k) -> (d, k), transposing only the small g."""
    return (g.T @ x).T


class Standardizer:
    """Zero mean, unit variance per column, with statistics taken from the training data.

    Population statistics (correction=0), as sklearn's StandardScaler. A constant column gets
    std 1 so it maps to 0 instead of dividing by zero.
    """

    def __init__(self, x: Tensor) -> None:
        self.mean = x.mean(axis=0, keepdim=True)  # (1, d)
        std = x.std(axis=0, keepdim=True, correction=0)  # (1, d)
        self.std = (std == 0).where(1.0, std)

    def __call__(self, x: Tensor) -> Tensor:
        return (x - self.mean) / self.std


class LinearRegression:
    """y ≈ x @ w + b with loss L = mean((x @ w + b - y)²) / 2.

    dL/dw = xᵀ r / n and dL/db = mean(r), where r = x @ w + b - y is the residual.
    """

    def __init__(self, Tensor: type, n_features: int, dtype: str = "float64") -> None:
        self.Tensor = Tensor
        self.params = [Tensor.zeros(n_features, 1, dtype=dtype), Tensor.zeros(1, 1, dtype=dtype)]

    def __call__(self, x: Tensor) -> Tensor:
        w, b = self.params
        return x @ w + b  # (n, 1)

    def loss(self, x: Tensor, y: Tensor) -> Tensor:
        r = self(x) - y
        return (r * r).mean() / 2

    def loss_and_grads(self, x: Tensor, y: Tensor) -> tuple[Tensor, list[Tensor]]:
        n = x.shape[0]
        r = self(x) - y  # (n, 1)
        loss = (r * r).mean() / 2
        dw = _xt_matmul(x, r) / n  # (d, 1)
        db = r.mean(axis=0, keepdim=True)  # (1, 1)
        return loss, [dw, db]

    def fit_normal_equations(self, x: Tensor, y: Tensor) -> None:
        """Exact least squares: append a ones column A = [x, 1] and solve (AᵀA) θ = Aᵀy.

        Forming AᵀA squares the condition number, so call this on standardized features
        in float64; a singular AᵀA (e.g. a duplicated column) raises ValueError.
        """
        n, d = x.shape
        a = x.cat(self.Tensor.ones(n, 1, dtype=x.dtype), dim=1)  # (n, d + 1)
        theta = (a.T @ a).solve(a.T @ y)  # (d + 1, 1)
        self.params = [theta[:d], theta[d:]]


class LogisticRegression:
    """P(y = 1 | x) = sigmoid(z), z = x @ w + b, with L2 on w (not on b), as sklearn's objective.

    L = mean(softplus(z) - y z) + l2 / 2 * |w|², the mean binary cross-entropy written on
    logits. sklearn minimises C * sum(log-loss) + |w|² / 2; dividing by C n gives our L with
    l2 = 1 / (C n). dL/dz = (sigmoid(z) - y) / n, so dL/dw = xᵀ dz + l2 w, dL/db = sum(dz).
    """

    def __init__(self, Tensor: type, n_features: int, l2: float = 0.0, dtype: str = "float32") -> None:
        self.l2 = l2
        self.params = [Tensor.zeros(n_features, 1, dtype=dtype), Tensor.zeros(1, 1, dtype=dtype)]

    def __call__(self, x: Tensor) -> Tensor:
        w, b = self.params
        return x @ w + b  # (n, 1) logits

    def predict(self, x: Tensor) -> Tensor:
        return self(x) > 0  # (n, 1) bool: sigmoid(z) > 1/2 exactly when z > 0

    def loss_and_grads(self, x: Tensor, y: Tensor) -> tuple[Tensor, list[Tensor]]:
        w, _ = self.params
        n = x.shape[0]
        z = self(x)  # (n, 1)
        # softplus(z) = log(1 + e^z) = max(z, 0) + log(1 + e^-|z|): never overflows. maximum, not relu: at
        # z = 0 (every row, with the zero start) maximum's tie gives slope 1/2, softplus's, where relu gives 0
        softplus = z.maximum(0) + ((-z.abs()).exp() + 1).log()
        loss = (softplus - y * z).mean() + (w * w).sum() * (self.l2 / 2)
        dz = (z.sigmoid() - y) / n  # (n, 1)
        dw = _xt_matmul(x, dz) + w * self.l2  # (d, 1)
        db = dz.sum(axis=0, keepdim=True)  # (1, 1)
        return loss, [dw, db]


class SoftmaxRegression:
    """P(class | x) = softmax(x @ W + b) over k classes, with L2 on W.

    L = -mean over rows of log softmax(z)[y] + l2 / 2 * |W|². With Y the one-hot labels,
    dL/dz = (softmax(z) - Y) / n, so dL/dW = xᵀ dz + l2 W and dL/db = column sums of dz.
    """

    def __init__(
        self, Tensor: type, n_features: int, n_classes: int, l2: float = 0.0, dtype: str = "float32"
    ) -> None:
        self.Tensor, self.n_classes, self.l2 = Tensor, n_classes, l2
        self.params = [
            Tensor.zeros(n_features, n_classes, dtype=dtype),
            Tensor.zeros(1, n_classes, dtype=dtype),
        ]

    def __call__(self, x: Tensor) -> Tensor:
        w, b = self.params
        return x @ w + b  # (n, k) logits

    def predict(self, x: Tensor) -> Tensor:
        return self(x).argmax(axis=1)  # (n,) int64

    def one_hot(self, y: Tensor) -> Tensor:
        """(n,) class indices -> (n, k) float rows with a single 1."""
        classes = self.Tensor.arange(self.n_classes).reshape(1, self.n_classes)  # (1, k)
        return (y.reshape(-1, 1) == classes).cast(self.params[0].dtype)  # (n, k)

    def loss_and_grads(self, x: Tensor, y: Tensor) -> tuple[Tensor, list[Tensor]]:
        w, _ = self.params
        n = x.shape[0]
        y_hot = self.one_hot(y)  # (n, k)
        logp = self(x).log_softmax(axis=1)  # (n, k), stable: z - logsumexp(z)
        loss = -(y_hot * logp).sum() / n + (w * w).sum() * (self.l2 / 2)
        dz = (logp.exp() - y_hot) / n  # (n, k)
        dw = _xt_matmul(x, dz) + w * self.l2  # (d, k)
        db = dz.sum(axis=0, keepdim=True)  # (1, k)
        return loss, [dw, db]


def accuracy(pred: Tensor, y: Tensor) -> float:
    """Fraction of rows where the prediction equals the label (shapes must match)."""
    return (pred == y).cast("float64").mean().item()
