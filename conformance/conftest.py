"""pytest wiring for the conformance suite: the --stage option, the `stage` parameter every test
takes (one per stage and device), the capability table's strict xfails, and the hypothesis profiles.

Profiles: `ci` (the default: ~100 examples per property, no deadline) and `fuzz` (5000 examples),
chosen with `--hypothesis-profile=fuzz` or SITP_HYPOTHESIS_PROFILE=fuzz.

Devices: a test runs on each device of its stage, with that device as the stage's default
(`Device.DEFAULT`) while it runs, so every tensor the test makes lands there. The cuda device runs
on CuPy and a GPU; where there is none its tests skip, saying why. SITP_CUDA_BACKEND=emulate runs
it on the CPU emulator instead (common/cuda_emulation.py: our CUDA sources built with g++), which
is how CI checks the device without a GPU; only this file reads that variable.
"""

from __future__ import annotations

import functools
import os

import pytest
from hypothesis import HealthCheck, settings

from conformance.checks import EXAMPLES
from conformance.stages import BY_NAME, STAGES, Stage, importable, select

BACKEND = os.environ.get("SITP_CUDA_BACKEND", "")
# On the emulator a GEMM rung's every CUDA thread is an OS thread, and these trajectories run
# thousands of GEMMs: measured on 2 cores, cnn 147 s and nanogpt 215 s (mlp 10 s, rnn 17 s,
# lstm 28 s). Everything else of the suite, forward and gradients, runs on the emulator (~70 s).
# The mixed-precision trajectories alike (the tensor-core rung's twins too): cnn 76-85 s, nanogpt 137-143 s.
EMULATOR_TOO_SLOW = {"test_trajectory_matches_torch[stage2_autograd-CUDA-cnn]",
                     "test_trajectory_matches_torch[stage2_autograd-CUDA-nanogpt]",
                     "test_trajectory_matches_torch[stage2_autograd-CUDA-lstm]",
                     *(f"test_mixed_precision_matches_torch_autocast[stage2_autograd-CUDA-{model}-{half}]"
                       for model in ("cnn", "nanogpt") for half in ("bfloat16", "float16"))}

settings.register_profile("ci", max_examples=100, deadline=None, print_blob=True)
settings.register_profile("fuzz", max_examples=5000, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("SITP_HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--stage", choices=sorted(BY_NAME), default=None,
                     help="run the conformance suite on this stage only (default: every stage that imports)")
    parser.addoption("--device", choices=("CPU", "CUDA"), default=None,
                     help="run on this device only (default: every device of each stage)")
    parser.addoption("--every-dtype-view", action="store_true",
                     help="also run each view case in every dtype, not in float32 alone (conformance/cases.py)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs(*ops): capability-table ops a test needs besides its `op`")
    config.addinivalue_line("markers", "dtype_view: a view case in a dtype other than float32 (--every-dtype-view)")
    config.addinivalue_line("markers", "layout_case: a case that reads a view (a layout other than contiguous)")
    config.addinivalue_line("markers", "dtype_extra: a new dtype's case beyond the default sample (cases.sample_marks)")
    try:
        stages = select(config.getoption("stage"))
    except ModuleNotFoundError as e:
        raise pytest.UsageError(str(e)) from e
    if BACKEND == "emulate":
        _install_emulator(stages)
    elif BACKEND not in ("", "cupy"):
        raise pytest.UsageError(f"SITP_CUDA_BACKEND={BACKEND!r}: expected 'emulate' or 'cupy' (or unset)")


def _install_emulator(stages: list[Stage]) -> None:
    """Run each stage's cuda device on the CPU emulator, before any cuda tensor exists."""
    from common.cuda_emulation import use_emulator

    for stage in stages:
        if "CUDA" in stage.devices:
            use_emulator(stage.name)


@functools.cache
def unavailable(name: str, device: str) -> str | None:
    """Why `device` of stage `name` cannot make tensors here (no CuPy, no GPU), or None."""
    stage = BY_NAME[name]
    if device == stage.devices[0]:
        return None
    try:
        stage.module.Tensor([0.0], device=device)
    except RuntimeError as e:
        return f"device {device} is not available here ({e}); SITP_CUDA_BACKEND=emulate runs it on the CPU emulator"
    return None


def pytest_report_header(config: pytest.Config) -> list[str]:
    found = [f"{s.name} ({'present' if importable(s) else 'absent'})" for s in STAGES]
    return [f"conformance stages: {', '.join(found)}; --stage={config.getoption('stage')}",
            f"hypothesis profile: {settings.get_current_profile_name()}",
            f"cuda backend: {BACKEND or 'cupy (when CuPy and a GPU are present)'}"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "stage" not in metafunc.fixturenames:
        return
    stages = select(metafunc.config.getoption("stage"))
    if not stages:
        raise pytest.UsageError("no stage package imports: nothing to check (see conformance/stages.py)")
    # The first device keeps the plain stage id, so test ids read as they did before devices.
    only = metafunc.config.getoption("device")
    params = [s.on(d) for s in stages for d in s.devices if only in (None, d)]
    ids = [s.name if s.devices[0] == BY_NAME[s.name].devices[0] else f"{s.name}-{s.devices[0]}" for s in params]
    metafunc.parametrize("stage", params, ids=ids)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """The device under test is the stage's default while the test runs. (A hook, not a fixture:
    hypothesis refuses function-scoped fixtures around its examples.)"""
    stage = getattr(getattr(item, "callspec", None), "params", {}).get("stage")
    device = getattr(stage.module, "Device", None) if stage is not None else None
    if device is None:
        return (yield)
    before, device.DEFAULT = device.DEFAULT, stage.devices[0]
    try:
        return (yield)
    finally:
        device.DEFAULT = before


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A view case in a dtype other than float32 is deselected unless --every-dtype-view asks for it
    (conformance/cases.py says why). A test needing an op its stage lacks is a strict xfail with the
    table's reason."""
    if not config.getoption("every_dtype_view"):
        repeats = [item for item in items if item.get_closest_marker("dtype_view")]
        if repeats:
            config.hook.pytest_deselected(items=repeats)
            items[:] = [item for item in items if not item.get_closest_marker("dtype_view")]
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        stage = params.get("stage")
        if stage is None:
            continue
        why = unavailable(stage.name, stage.devices[0])
        if why and BACKEND == "cupy":
            raise pytest.UsageError(f"SITP_CUDA_BACKEND=cupy asks for the real device, but {why}")
        if why:
            item.add_marker(pytest.mark.skip(reason=why))
            continue
        if BACKEND == "emulate" and item.name in EMULATOR_TOO_SLOW:
            item.add_marker(pytest.mark.skip(reason="minutes on the CPU emulator (conftest.py says why); "
                                                    "runs on a GPU: nox -s cuda"))
            continue
        needs = [name for mark in item.iter_markers("needs") for name in mark.args]
        if "op" in params:
            needs.append(params["op"].needs)
        reasons = dict.fromkeys(r for r in map(stage.reason, needs) if r)
        if reasons:
            item.add_marker(pytest.mark.xfail(reason="; ".join(reasons), strict=True))


def pytest_terminal_summary(terminalreporter) -> None:
    if not EXAMPLES:
        return
    profile = settings.get_current_profile_name()
    terminalreporter.section(f"hypothesis examples run (profile {profile})")
    for name, n in sorted(EXAMPLES.items()):
        terminalreporter.write_line(f"{n:8d}  {name}")
    terminalreporter.write_line(f"{sum(EXAMPLES.values()):8d}  in all")
