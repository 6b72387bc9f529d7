"""The nanochat pipeline end to end at a tiny size: every phase trains, checkpoints, resumes and reports, and the
chat backend answers from the final checkpoint on every stage with the same greedy tokens."""

from __future__ import annotations

import json

import numpy as np
import pytest

from common.chat.backend import ChatBackend
from common.chat.pipeline import PHASES, NanochatSettings, run_pipeline
from common.chat.report import chat_checks, write_report
from common.cli import main
from common.stages import load_stage
from common.train.loop import CHECKPOINT, learning_rate
from common.train.optimizers import ParamGroups
from common.train.tasks import TrainConfig


def tiny_settings() -> NanochatSettings:
    return NanochatSettings(depth=1, vocab_size=300, sequence_len=32, batch_size=2,
                            steps={"base": 4, "mid": 3, "sft": 3}, tokenizer_bytes=40_000,
                            eval_every=2, eval_batches=1)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("nanochat")
    report = run_pipeline(load_stage(2), out, tiny_settings(), progress=False, log=lambda *_: None)
    return out, report


def test_every_phase_trains_and_checkpoints(run):
    out, report = run
    assert (out / "tokenizer.bpe").is_file()
    for phase in PHASES:
        info = report["phases"][phase]
        assert (out / phase / CHECKPOINT).is_file()
        assert info["steps"] == tiny_settings().steps[phase]
        assert np.isfinite(info["final_train_loss"]) and 0 < info["val_bpb"] < 30
    assert report["tokenizer"]["vocab_size"] == 300
    assert report["tokenizer"]["bytes_per_token"] > 1.0  # merges make tokens longer than a byte


def test_resume_skips_finished_phases(run):
    out, report = run
    again = run_pipeline(load_stage(2), out, tiny_settings(), resume=True, progress=False, log=lambda *_: None)
    for phase in PHASES:  # nothing left to train: the same weights, so the same val bits per byte
        assert again["phases"][phase]["val_bpb"] == pytest.approx(report["phases"][phase]["val_bpb"], rel=1e-6)
        assert again["phases"][phase]["final_train_loss"] == report["phases"][phase]["final_train_loss"]


def test_stage3_trains_the_pipeline_as_stage2_does(run, tmp_path):
    """Every phase on stage3 (jitted steps, fused kernels): the losses stage2 has, to float32 reduction-order noise."""
    _, report = run
    lazy = run_pipeline(load_stage(3), tmp_path, tiny_settings(), progress=False, log=lambda *_: None)
    for phase in PHASES:
        ours, eager = lazy["phases"][phase], report["phases"][phase]
        assert ours["final_train_loss"] == pytest.approx(eager["final_train_loss"], rel=1e-3, abs=1e-3)
        assert ours["val_bpb"] == pytest.approx(eager["val_bpb"], rel=1e-3)


def test_report_card(run, tmp_path):
    out, report = run
    backend = ChatBackend.load(report["checkpoint"], 2)
    report = {**report, "chat": chat_checks(backend, seeds=2)}
    text = write_report(report, tmp_path / "report.md").read_text()
    for needed in ("## Tokenizer", "| base |", "| mid |", "| sft |", "## Chat", "of 2 seeds"):
        assert needed in text
    json.dumps(report)  # the report is plain data


def test_greedy_chat_is_the_same_on_every_stage(run):
    _, report = run
    messages = [{"role": "user", "content": "hi there"}]
    replies = [list(ChatBackend.load(report["checkpoint"], s).reply_tokens(messages, temperature=0.0, max_tokens=8))
               for s in (1, 2, 3)]
    assert len(replies[0]) > 0
    assert replies[0] == replies[1] == replies[2]


def test_chat_command_one_shot(run, capsys):
    _, report = run
    assert main(["chat", "--ckpt", report["checkpoint"], "--stage", "1", "-p", "hello", "--max-tokens", "5"]) == 0
    assert capsys.readouterr().out.endswith("\n")


def test_chat_command_rejects_a_zoo_checkpoint(tmp_path, capsys):
    assert main(["train", "nanogpt", "--stage", "2", "--steps", "1", "--quiet", "--out", str(tmp_path),
                 "--set", "n_layer=1", "--set", "n_embd=16", "--set", "n_head=2", "--samples", "0"]) == 0
    assert main(["chat", "--ckpt", str(tmp_path / CHECKPOINT)]) == 1
    assert "not a nanochat one" in capsys.readouterr().err


def test_warmdown_schedule():
    cfg = TrainConfig(steps=10, lr=2.0, schedule="warmdown", warmdown=0.2)
    lrs = [learning_rate(cfg, s, None) for s in range(10)]
    assert lrs[:9] == [2.0] * 9  # constant, then down by 1/2 of the rate per step over the last 2 steps
    assert lrs[9] == pytest.approx(1.0)


def test_param_group_scales():
    class Opt:
        lr = 0.0

    a, b = Opt(), Opt()
    groups = ParamGroups([a, b], scales=[0.02, 0.004])
    groups.lr = 0.5
    assert (a.lr, b.lr) == (pytest.approx(0.01), pytest.approx(0.002)) and groups.lr == pytest.approx(0.5)
    with pytest.raises(ValueError, match="one positive lr scale per optimizer"):
        ParamGroups([a, b], scales=[1.0])
