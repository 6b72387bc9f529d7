"""Learning-rate schedules as plain functions of the step (the caller sets optimizer.lr each step)."""

from __future__ import annotations

import math


def cosine_lr(step: int, *, lr: float, warmup: int, total: int, min_lr: float = 0.0) -> float:
    """nanoGPT's get_lr: linear warmup lr*(step+1)/(warmup+1), then a cosine from lr down to min_lr
    at step `total`, and min_lr after it."""
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    if step > total:
        return min_lr
    ratio = (step - warmup) / max(total - warmup, 1)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def linear_rampdown_lr(step: int, *, lr: float, total: int, warmdown_frac: float) -> float:
    """nanochat's schedule: lr held constant, then ramped linearly to 0 over the last
    warmdown_frac of the `total` steps."""
    if not 0 <= warmdown_frac <= 1:
        raise ValueError(f"linear_rampdown_lr: warmdown_frac must be in [0, 1], got {warmdown_frac}")
    warmdown = round(warmdown_frac * total)
    if step < total - warmdown:
        return lr
    return lr * max(total - step, 0) / max(warmdown, 1)
