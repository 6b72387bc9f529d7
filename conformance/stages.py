"""The capability table: the stages the suite knows, and what each one lacks, with the reason.

A stage is present when its package imports. Every test that needs an op a stage lacks becomes a
strict xfail carrying the reason: when the stage gains the op the XPASS fails the run, and the
entry here must go. Nothing is ever skipped silently.

Every test taking `stage` runs once per device of the stage: `stage.on(device)` is the same stage
with that device first, so `devices[0]` is always the device under test (conftest.py makes it the
stage's default device for the test, so the inputs are made there).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace
from types import ModuleType

AUTOGRAD = ("backward", "detach", "requires_grad_", "no_grad")
# capabilities that are not one op of the catalogue: "train" is autograd + nn + optim (test_models.py),
# "autocast" mixed precision (test_autocast.py)
CAPABILITIES = ("train", "autocast")


@dataclass(frozen=True)
class Stage:
    name: str  # the package, also the value of --stage
    devices: tuple[str, ...]  # the first is the default device, as Tensor.device spells it
    missing: dict[str, str] = field(default_factory=dict)  # op -> why this stage lacks it
    # the devices with kernels for the half types and the small and unsigned ints (the others compute bool,
    # int32, int64, float32 and float64 only)
    new_dtype_devices: tuple[str, ...] = ("CPU",)

    @property
    def module(self) -> ModuleType:
        return importlib.import_module(self.name)

    def reason(self, op: str) -> str | None:
        return self.missing.get(op)

    def on(self, device: str) -> Stage:
        """This stage with `device` first: the device the tests run on."""
        return replace(self, devices=(device, *(d for d in self.devices if d != device)))


STAGES = (
    Stage("stage1_ndarray", devices=("CPU",),
          # detach is there (the same data as a new tensor), as tinygrad code calls it on every stage
          missing={**{op: "stage1 has no autograd (it arrives in stage2_autograd)" for op in AUTOGRAD
                      if op != "detach"},
                   "train": "stage1 has no autograd, nn or optim: the zoo trains from stage2_autograd on",
                   "autocast": "stage1 has no autograd: mixed precision arrives with it in stage2_autograd"}),
    Stage("stage2_autograd", devices=("CPU", "CUDA"), new_dtype_devices=("CPU", "CUDA")),
    Stage("stage3_compiler", devices=("CPU", "CUDA"), new_dtype_devices=("CPU", "CUDA")),
)
BY_NAME = {s.name: s for s in STAGES}


def importable(stage: Stage) -> bool:
    """True when the stage's package imports. A package that is there but fails to import is a
    bug, not an absent stage: that error propagates. A bare folder (a namespace package, no
    __init__.py yet) is absent."""
    try:
        module = stage.module
    except ModuleNotFoundError as e:
        if e.name == stage.name:
            return False
        raise
    return getattr(module, "__file__", None) is not None


def present() -> list[Stage]:
    return [s for s in STAGES if importable(s)]


def select(name: str | None) -> list[Stage]:
    """The stages a run covers: the named one (which must import), or every present one."""
    if name is None:
        return present()
    stage = BY_NAME[name]
    if not importable(stage):
        raise ModuleNotFoundError(f"--stage {name}: the package {name} is not importable", name=name)
    return [stage]
