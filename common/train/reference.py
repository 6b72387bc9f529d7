"""scikit-learn fits on the same splits: the oracle our GLMs are checked against.

sklearn is an optional dependency (the ``data`` and ``test`` extras), so it is imported inside
each function. These run on numpy and never feed a result back into training.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..data.split import Split


def sklearn_linreg(data: Split) -> dict[str, np.ndarray | float]:
    """Ordinary least squares on the raw features: coefficients, intercept, test RMSE."""
    from sklearn.linear_model import LinearRegression

    fit = LinearRegression().fit(data.x_train, data.y_train)
    rmse = float(np.sqrt(np.mean((fit.predict(data.x_test) - data.y_test) ** 2)))
    return {"coef": fit.coef_.copy(), "intercept": float(fit.intercept_), "test_rmse": rmse}


def sklearn_logistic(data: Split, C: float = 1.0, max_iter: int = 1000) -> dict[str, float]:
    """sklearn's LogisticRegression (lbfgs, L2 with inverse strength C): val/test accuracy and
    its training objective in our units, mean cross-entropy + |w|² / (2 C n), to compare losses.

    With more than two classes this is the multinomial (softmax) model, sklearn's default.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        # a capped max_iter keeps the CLI quick; the accuracy is what we compare
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = LogisticRegression(C=C, max_iter=max_iter).fit(data.x_train, data.y_train)
    x, y = data.x_train.astype(np.float64), data.y_train
    logp = fit.predict_log_proba(x)  # (n, classes), columns in fit.classes_ order
    cross_entropy = -np.mean(logp[np.arange(len(y)), np.searchsorted(fit.classes_, y)])
    objective = cross_entropy + float(np.sum(fit.coef_.astype(np.float64) ** 2)) / (2 * C * len(y))
    return {
        "val_acc": float(fit.score(data.x_val, data.y_val)),
        "test_acc": float(fit.score(data.x_test, data.y_test)),
        "train_objective": float(objective),
    }


def relative_error(ours: np.ndarray, ref: np.ndarray) -> float:
    """max_i |ours_i - ref_i| / |ref_i|: every coefficient must match, not just the big ones."""
    ours, ref = np.asarray(ours, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    return float(np.max(np.abs(ours - ref) / np.maximum(np.abs(ref), np.finfo(np.float64).tiny)))
