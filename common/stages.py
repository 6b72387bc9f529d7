"""Choosing a stage at run time: model code never imports one, the caller picks it here."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

STAGES: dict[int, str] = {1: "stage1_ndarray", 2: "stage2_autograd", 3: "stage3_compiler"}


def load_stage(stage: int) -> ModuleType:
    """Import a stage package by number; its ``Tensor`` is what the models are given."""
    if stage not in STAGES:
        raise ValueError(f"load_stage: stage must be one of {sorted(STAGES)}, got {stage}")
    try:
        module = importlib.import_module(STAGES[stage])
    except ImportError as e:
        raise RuntimeError(f"load_stage: stage {stage} ({STAGES[stage]}) is not importable: {e}") from e
    if os.environ.get("SITP_CUDA_BACKEND") == "emulate":  # the cuda device on the CPU emulator, as in the tests
        from .cuda_emulation import use_emulator

        use_emulator(STAGES[stage])
    return module
