"""pytest wiring for the conformance suite: the --stage option, the `stage` parameter every test
takes, the capability table's strict xfails, and the hypothesis profiles.

Profiles: `ci` (the default: ~100 examples per property, no deadline) and `fuzz` (5000 examples),
chosen with `--hypothesis-profile=fuzz` or SITP_HYPOTHESIS_PROFILE=fuzz.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from conformance.checks import EXAMPLES
from conformance.stages import BY_NAME, STAGES, importable, select

settings.register_profile("ci", max_examples=100, deadline=None, print_blob=True)
settings.register_profile("fuzz", max_examples=5000, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("SITP_HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--stage", choices=sorted(BY_NAME), default=None,
                     help="run the conformance suite on this stage only (default: every stage that imports)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs(*ops): capability-table ops a test needs besides its `op`")
    try:
        select(config.getoption("stage"))
    except ModuleNotFoundError as e:
        raise pytest.UsageError(str(e)) from e


def pytest_report_header(config: pytest.Config) -> list[str]:
    found = [f"{s.name} ({'present' if importable(s) else 'absent'})" for s in STAGES]
    return [f"conformance stages: {', '.join(found)}; --stage={config.getoption('stage')}",
            f"hypothesis profile: {settings.get_current_profile_name()}"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "stage" not in metafunc.fixturenames:
        return
    stages = select(metafunc.config.getoption("stage"))
    if not stages:
        raise pytest.UsageError("no stage package imports: nothing to check (see conformance/stages.py)")
    metafunc.parametrize("stage", stages, ids=[s.name for s in stages])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test needing an op its stage lacks is a strict xfail with the table's reason."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        stage = params.get("stage")
        if stage is None:
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
