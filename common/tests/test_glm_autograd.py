"""The GLMs of stage1 train on stage2 with autograd and reach the same fit.

The models of common/models/glm.py state a loss and its hand-derived gradient. On stage2 we keep
only the loss and let backward() find the gradient: it must equal the hand-derived one (float64,
to 1e-10), and gradient descent driven by it must end where stage1's hand-derived run ends (same
steps, same momentum) and where sklearn ends (coefficients for least squares, accuracy for the
classifiers), with the bars test_glm.py uses on stage1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from common.data import load_diabetes, load_digits8x8, load_vader_bow
from common.models.glm import LinearRegression, LogisticRegression, SoftmaxRegression, accuracy
from common.train.glm import gradient_descent
from common.train.reference import relative_error, sklearn_linreg, sklearn_logistic


class AutogradGLM:
    """A GLM whose gradients come from backward() on its loss instead of its hand-derived formulas."""

    def __init__(self, model: Any):
        self.model = model

    @property
    def params(self) -> list:
        return self.model.params

    @params.setter
    def params(self, value: list) -> None:
        self.model.params = value

    def loss_and_grads(self, x, y):
        self.model.params = [p.detach().requires_grad_() for p in self.model.params]
        loss, _ = self.model.loss_and_grads(x, y)  # only the loss is used
        loss.backward()
        return loss.detach(), [p.grad for p in self.model.params]


def _models(T: type, d: int) -> list:
    return [LinearRegression(T, d, dtype="float64"), LogisticRegression(T, d, l2=0.1, dtype="float64"),
            SoftmaxRegression(T, d, 3, l2=0.1, dtype="float64")]


def test_autograd_equals_hand_derived_gradients(stage2):
    T = stage2.Tensor
    rng = np.random.default_rng(0)
    x = T(rng.normal(size=(9, 4)))
    targets = [T(rng.normal(size=(9, 1))), T((rng.random((9, 1)) > 0.5).astype(np.float64)),
               T(rng.integers(0, 3, 9))]
    for model, y in zip(_models(T, 4), targets, strict=True):
        model.params = [T(rng.normal(size=p.shape)) for p in model.params]
        _, hand = model.loss_and_grads(x, y)
        _, auto = AutogradGLM(model).loss_and_grads(x, y)
        for h, a in zip(hand, auto, strict=True):
            np.testing.assert_allclose(a.numpy(), h.numpy(), rtol=1e-10, atol=1e-12)


def _fit_both(stage1, stage2, make_model, x, y, steps, lr, dtype):
    """Gradient descent on stage1 (hand-derived) and on stage2 (autograd); the final parameters."""
    out = []
    for stage, wrap in ((stage1, lambda m: m), (stage2, AutogradGLM)):
        T = stage.Tensor
        model = make_model(T)
        gradient_descent(wrap(model), T(x, dtype=dtype), T(y), steps, lr, momentum=0.9, progress=False)
        out.append((model, [p.numpy() for p in model.params]))
    return out


def test_linreg_same_fit(stage1, stage2):
    data = load_diabetes(seed=0)
    ref = sklearn_linreg(data)
    x = data.x_train.astype(np.float64)
    xs = (x - x.mean(0)) / x.std(0)
    (_, p1), (_, p2) = _fit_both(stage1, stage2, lambda T: LinearRegression(T, x.shape[1], dtype="float64"),
                                 xs, data.y_train.reshape(-1, 1).astype(np.float64), 500, 0.3, "float64")
    for a, b in zip(p1, p2, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-9)
    coef = p2[0].reshape(-1) / x.std(0)
    assert relative_error(coef, ref["coef"]) < 1e-4


def test_softmax_same_fit(stage1, stage2):
    data = load_digits8x8(seed=0)
    l2 = 1.0 / len(data.y_train)
    (m1, p1), (m2, p2) = _fit_both(stage1, stage2, lambda T: SoftmaxRegression(T, 64, 10, l2=l2),
                                   data.x_train, data.y_train, 100, 0.5, "float32")
    for a, b in zip(p1, p2, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-5)  # float32, 100 steps of rounding
    T = stage2.Tensor
    ours = accuracy(m2.predict(T(data.x_test)), T(data.y_test))
    assert ours == pytest.approx(accuracy(m1.predict(stage1.Tensor(data.x_test)), stage1.Tensor(data.y_test)),
                                 abs=1 / len(data.y_test))
    assert ours > sklearn_logistic(data)["test_acc"] - 0.03


def test_logreg_same_fit(stage1, stage2, vader_fetched):
    data = load_vader_bow(seed=0, max_vocab=500)
    l2 = 1.0 / len(data.y_train)
    y = data.y_train.reshape(-1, 1).astype(np.float32)
    (m1, p1), (m2, p2) = _fit_both(stage1, stage2, lambda T: LogisticRegression(T, 500, l2=l2),
                                   data.x_train, y, 60, 2.0, "float32")
    for a, b in zip(p1, p2, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-5)
    T = stage2.Tensor
    ours = accuracy(m2.predict(T(data.x_test)), T(data.y_test.reshape(-1, 1) == 1))
    assert ours > sklearn_logistic(data)["test_acc"] - 0.03
