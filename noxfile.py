"""Sessions: `nox` runs the default test sessions (what CI runs); `nox -l` lists them all."""

from __future__ import annotations

import os
import subprocess

import nox

nox.options.default_venv_backend = "venv"


def install(session: nox.Session, *extras: str) -> None:
    session.install("-e", f".[{','.join(extras)}]" if extras else ".")


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff over the whole tree."""
    session.install("ruff")
    session.run("ruff", "check", ".")


@nox.session
def stage1(session: nox.Session) -> None:
    """Install stage1, run its own tests and the conformance suite against it."""
    install(session, "test")
    session.run("pytest", "-q", "stage1_ndarray/tests", "conformance", "--stage", "stage1_ndarray",
                *session.posargs)


@nox.session(default=False)
def conformance(session: nox.Session) -> None:
    """The conformance suite against every stage present (each stage session already runs its part)."""
    install(session, "test")
    session.run("pytest", "-q", "conformance", *session.posargs)


@nox.session
def models(session: nox.Session) -> None:
    """Data loaders and the models of common/ on real data (fetches the VADER sdist once)."""
    install(session, "test", "data")
    session.run("python", "-m", "common.data.fetch")
    session.run("pytest", "-q", "common/tests", *session.posargs)


@nox.session
def asan(session: nox.Session) -> None:
    """Rebuild the C kernels with AddressSanitizer and run the conformance suite under it."""
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(libasan):
        session.skip("gcc has no libasan here")
    install(session, "test")
    env = {"SITP_SANITIZE": "address", "LD_PRELOAD": libasan,
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1"}  # CPython itself is not leak-clean
    session.run("python", "-c", "import stage1_ndarray", env=env)
    session.run("pytest", "-q", "-p", "no:cacheprovider", "conformance", "stage1_ndarray/tests",
                "--stage", "stage1_ndarray", *session.posargs, env=env)


@nox.session(default=False)
def fuzz(session: nox.Session) -> None:
    """The long hypothesis profile over views, indexing and broadcasting."""
    install(session, "test")
    session.run("pytest", "-q", "conformance/test_views_hypothesis.py", "--hypothesis-profile=fuzz",
                "--hypothesis-show-statistics", *session.posargs)


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """pytest-benchmark of the stage kernels against numpy; JSON under benchmarks/results/."""
    install(session, "test")
    session.run("pytest", "benchmarks", "--benchmark-only", "--benchmark-json",
                "benchmarks/results/kernels.json", *session.posargs)
    session.run("python", "-m", "benchmarks.report", "benchmarks/results/kernels.json")


@nox.session(default=False)
def gemm(session: nox.Session) -> None:
    """The CPU GEMM ladder leaderboard: every variant x size, 1 and 2 threads, vs OpenBLAS and torch."""
    install(session, "test", "gemm")
    session.error("gemm: the leaderboard suite is not written yet")


@nox.session(default=False, venv_backend="none")
def diff(session: nox.Session) -> None:
    """The lesson between two stages: `nox -s diff -- 1 2`."""
    session.run("python", "-m", "common.stagediff", *(session.posargs or ["1", "2"]))
