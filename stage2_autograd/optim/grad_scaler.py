"""Dynamic loss scaling, for training with float16 activations (torch's GradScaler, same defaults).

float16's smallest normal number is 6.1e-5 and its smallest subnormal 6e-8: the gradients of a float16
activation are often smaller and flush to zero on the way back. Multiplying the loss by a large
`scale` before backward multiplies every gradient by it and lifts them into range; the parameters'
float32 gradients are divided by it again before the optimizer sees them. Too large a scale makes a
gradient overflow to inf instead: then that step is skipped (the parameters and the optimizer's state
are left as they were) and the scale halves. After `growth_interval` steps in a row without an
overflow it doubles, so it stays near the largest that fits.

The scaler keeps only numbers; the caller runs the steps (common/train/loop.py):

    scaled = loss * scaler.scale          # backward from this
    if scaler.found_nonfinite(grads).item():  skip the step
    else:  gradients * (1 / scaler.scale), clip, step
    scaler.update(found)

bfloat16 has float32's exponent range and needs none of this.
"""

from __future__ import annotations

from ..dtype import dtypes
from ..errors import ArgumentError
from ..tensor import Tensor


class GradScaler:
    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000):
        if not (init_scale > 0 and growth_factor > 1 and 0 < backoff_factor < 1 and growth_interval >= 1):
            raise ArgumentError(f"GradScaler: need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 and "
                                f"growth_interval >= 1; got {init_scale}, {growth_factor}, {backoff_factor}, "
                                f"{growth_interval}")
        self.scale = float(init_scale)
        self.growth_factor, self.backoff_factor, self.growth_interval = growth_factor, backoff_factor, growth_interval
        self.good_steps = 0  # steps since the last overflow (or growth)
        self.skipped = 0  # steps skipped since the start

    @staticmethod
    def found_nonfinite(grads: list[Tensor]) -> Tensor:
        """A 0-d bool tensor: does any of the gradients hold an inf or a NaN? (One small kernel a gradient
        and one over their answers; the caller reads it back once.)"""
        if not grads:
            return Tensor(False)
        with Tensor.no_grad():
            bad = [g.isfinite().logical_not().any() for g in grads]
            return bad[0].stack(*bad[1:]).any() if len(bad) > 1 else bad[0]

    def update(self, found_nonfinite: bool) -> None:
        """After a step: back off on an overflow (the step was skipped), grow after growth_interval good ones."""
        if found_nonfinite:
            self.scale *= self.backoff_factor
            self.good_steps = 0
            self.skipped += 1
            return
        self.good_steps += 1
        if self.good_steps == self.growth_interval:
            self.scale *= self.growth_factor
            self.good_steps = 0

    def state_dict(self) -> dict[str, Tensor]:
        """The scale and counters as float64 tensors (a checkpoint stores them beside the optimizer's state)."""
        return {name: Tensor(float(value), dtype=dtypes.float64)
                for name, value in (("scale", self.scale), ("good_steps", self.good_steps), ("skipped", self.skipped))}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        missing = sorted({"scale", "good_steps", "skipped"} - set(state))
        if missing:
            raise KeyError(f"GradScaler.load_state_dict: missing {missing}")
        self.scale = float(state["scale"].item())
        self.good_steps, self.skipped = int(state["good_steps"].item()), int(state["skipped"].item())
