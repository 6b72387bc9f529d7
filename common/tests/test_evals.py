"""sitp eval (common/chat/evals.py): cloze items are well formed (the true continuation among four, from the
val text), the code runner passes HumanEval's canonical solutions and fails a wrong one and a hang within its
time limit, and every task runs on a tiny checkpoint with a score in [0, 1] beside its chance level; the CLI
prints the table and appends it to a report card."""

from __future__ import annotations

import pytest

from common.chat import evals
from common.chat.backend import ChatBackend
from common.cli import main
from common.data.gutenberg import pretraining_text


def test_cloze_items_come_from_the_val_text():
    val = pretraining_text().val
    items = evals.cloze_items(5, seed=1)
    assert len(items) == 5 and items == evals.cloze_items(5, seed=1)  # fixed by the seed
    for item in items:
        assert len(item["choices"]) == evals.CHOICES and 0 <= item["answer"] < evals.CHOICES
        true = item["context"] + " " + item["choices"][item["answer"]]
        assert " ".join(true.split()) in " ".join(val.split())


def test_the_code_runner_on_humaneval():
    problems = evals.humaneval_problems()
    assert len(problems) == 164
    for problem in problems[:3]:
        assert evals.run_program(evals.check_program(problem, problem["canonical_solution"]), timeout=10)
        assert not evals.run_program(evals.check_program(problem, "    return None\n"), timeout=10)
    assert not evals.run_program("while True:\n    pass\n", timeout=1)
    assert evals.cut_completion("    return x\n\ndef other():\n    pass") == "    return x\n"


def test_every_task_runs_with_its_chance_level(chat_checkpoint):
    backend = ChatBackend.load(chat_checkpoint, 2)
    results = evals.run_evals(backend, evals.TASKS, {"cloze": 6, "arithmetic": 2, "humaneval": 2})
    assert [r.task for r in results] == list(evals.TASKS)
    for r in results:
        assert 0.0 <= r.score <= 1.0 and r.n in (2, 6)
    assert results[0].chance == 0.25
    with pytest.raises(ValueError, match="unknown task"):
        evals.run_evals(backend, ("mmlu",))


def test_the_command_prints_and_appends_the_table(chat_checkpoint, tmp_path, capsys):
    report = tmp_path / "report.md"
    report.write_text("# nanochat report card\n")
    assert main(["eval", "--ckpt", chat_checkpoint, "--tasks", "cloze", "-n", "4", "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "| cloze | accuracy |" in out and "| 0.250 |" in out
    assert "## Evals" in report.read_text() and "| cloze | accuracy |" in report.read_text()
