"""The `sitp` command: argument parsing, a short training run writing its loss-curve PNG and
metrics.json, and `python -m common.cli` as an entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from common.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]


def test_parser_has_train_with_options():
    args = build_parser().parse_args(["train", "softmax", "--stage", "1", "--steps", "5", "--lr", "0.1"])
    assert (args.task, args.stage, args.steps, args.lr, args.seed) == ("softmax", 1, 5, 0.1, 0)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "gpt"])


def test_module_entry_point_prints_help():
    out = subprocess.run(
        [sys.executable, "-m", "common.cli", "train", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "linreg" in out.stdout and "--stage" in out.stdout


def test_train_linreg_writes_curve_and_metrics(Tensor, tmp_path, capsys):
    assert main(["train", "linreg", "--stage", "1", "--steps", "50", "--out", str(tmp_path), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "[linreg/normal]" in printed and "[sklearn LinearRegression]" in printed
    for method in ("normal", "gd"):
        png = tmp_path / f"linreg-{method}-loss.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics[0]["metrics"]["coef_rel_err"] < 1e-8  # normal equations are exact


def test_train_softmax_small(Tensor, tmp_path):
    argv = ["train", "softmax", "--data", "digits8x8", "--steps", "20", "--out", str(tmp_path), "--quiet"]
    assert main(argv + ["--no-reference"]) == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())[0]["metrics"]
    assert metrics["test_acc"] > 0.8
