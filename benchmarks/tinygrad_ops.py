"""tinygrad's own op suite (its test/test_ops.py, torch as the oracle) run against one stage, unchanged,
through a thin shim: `import tinygrad` resolves to the stage's Tensor, Device and dtypes.

The suite is tinygrad's code, so it is not in this repository; its source distribution on PyPI carries it:

    pip download tinygrad==0.9.2 --no-binary :all: --no-deps -d /tmp/tinygrad
    python -m benchmarks.tinygrad_ops --stage 3 --sdist /tmp/tinygrad/tinygrad-0.9.2.tar.gz

stage1 has no autograd, so it runs forward-only (the suite's own FORWARD_ONLY switch). The pass fraction
counts the tests that ran: passed / (passed + failed); a test the suite skips itself is not counted.
`--report FILE` writes each failure's first line, grouped by test, for reading the gaps.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tarfile
import tempfile
import types
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
STAGES = {"1": "stage1_ndarray", "2": "stage2_autograd", "3": "stage3_compiler"}
SUITE = "test_ops.py"

# The conftest placed beside the extracted suite: it installs the shim before pytest imports the suite.
CONFTEST = "from benchmarks.tinygrad_ops import install_shim\n\ninstall_shim()\n"


def getenv(key: str, default=0):
    """tinygrad.helpers.getenv: an environment variable read as the default's type."""
    return type(default)(os.environ.get(key, default))


def install_shim() -> None:
    """Make `tinygrad`, `tinygrad.helpers` and `tinygrad.tensor` resolve to the stage named in the environment."""
    name = os.environ["SITP_TINYGRAD_STAGE"]
    stage, device = importlib.import_module(name), importlib.import_module(name + ".device")
    tinygrad = types.ModuleType("tinygrad")
    tinygrad.Tensor, tinygrad.Device, tinygrad.dtypes = stage.Tensor, device.Device, stage.dtypes
    helpers = types.ModuleType("tinygrad.helpers")
    # CI on: the suite prints no timings and skips what tinygrad skips on its CI machines.
    helpers.getenv, helpers.IMAGE, helpers.DEBUG, helpers.CI = getenv, 0, 0, 1
    tensor = types.ModuleType("tinygrad.tensor")
    tensor.Tensor = stage.Tensor
    tensor._to_np_dtype = lambda dtype: None if dtype is None else dtype.np
    tinygrad.helpers, tinygrad.tensor = helpers, tensor
    sys.modules.update({"tinygrad": tinygrad, "tinygrad.helpers": helpers, "tinygrad.tensor": tensor})


class Outcome(NamedTuple):
    name: str
    status: str  # passed, failed or skipped
    message: str  # the failure's first line; empty when it passed


def extract_suite(sdist: Path, into: Path) -> Path:
    """Copy test/test_ops.py out of tinygrad's source distribution."""
    with tarfile.open(sdist) as tar:
        member = next((m for m in tar.getmembers() if m.name.endswith("/test/" + SUITE)), None)
        if member is None:
            raise SystemExit(f"{sdist} holds no test/{SUITE}")
        (into / SUITE).write_bytes(tar.extractfile(member).read())
    return into / SUITE


def first_line(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[0][:200] if lines else ""


def read_junit(path: Path) -> list[Outcome]:
    outcomes = []
    for case in ET.parse(path).iter("testcase"):
        name = case.get("name", "")
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if bad is not None:
            outcomes.append(Outcome(name, "failed", first_line(bad.get("message")) or first_line(bad.text)))
        elif case.find("skipped") is not None:
            outcomes.append(Outcome(name, "skipped", ""))
        else:
            outcomes.append(Outcome(name, "passed", ""))
    return outcomes


def run_suite(stage: str, suite: Path, workers: int, select: str | None) -> list[Outcome]:
    (suite.parent / "conftest.py").write_text(CONFTEST)
    junit = suite.parent / "junit.xml"
    env = dict(os.environ, SITP_TINYGRAD_STAGE=stage, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")]), SITP_CUDA_BACKEND=os.environ.get("SITP_CUDA_BACKEND", "emulate"))
    if stage == STAGES["1"]:
        env["FORWARD_ONLY"] = "1"
    cmd = [sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider", "--rootdir", str(suite.parent),
           f"--junitxml={junit}", "-o", "junit_family=xunit1"]
    if workers > 1:
        cmd += ["-n", str(workers)]
    if select:
        cmd += ["-k", select]
    subprocess.run(cmd, env=env, cwd=suite.parent, stdout=subprocess.DEVNULL, check=False)
    if not junit.exists():
        raise SystemExit("pytest wrote no results: run the command above by hand to see why")
    return read_junit(junit)


def report(stage: str, outcomes: list[Outcome]) -> str:
    passed = sum(o.status == "passed" for o in outcomes)
    failed = [o for o in outcomes if o.status == "failed"]
    skipped = sum(o.status == "skipped" for o in outcomes)
    ran = passed + len(failed)
    lines = [f"# tinygrad's test_ops.py on {stage}", "",
             f"passed {passed} of {ran} that ran ({100 * passed / max(ran, 1):.1f}%); skipped by the suite {skipped}",
             ""]
    lines += [f"- `{o.name}`: {o.message}" for o in sorted(failed)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", required=True, choices=[*STAGES, *STAGES.values()])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--sdist", type=Path, help="tinygrad's source distribution (.tar.gz) from PyPI")
    source.add_argument("--suite", type=Path, help="a test_ops.py already on disk")
    parser.add_argument("--workers", type=int, default=min(os.cpu_count() or 1, 4))
    parser.add_argument("-k", dest="select", help="pytest's -k: run only the matching tests")
    parser.add_argument("--report", type=Path, help="write the summary and every failure here (markdown)")
    args = parser.parse_args()
    stage = STAGES.get(args.stage, args.stage)
    with tempfile.TemporaryDirectory(prefix="tinygrad_ops_") as tmp:
        suite = Path(tmp) / SUITE
        if args.sdist:
            extract_suite(args.sdist, Path(tmp))
        else:
            suite.write_bytes(args.suite.read_bytes())
        outcomes = run_suite(stage, suite, args.workers, args.select)
    text = report(stage, outcomes)
    if args.report:
        args.report.write_text(text)
    print(text.splitlines()[2])


if __name__ == "__main__":
    main()
