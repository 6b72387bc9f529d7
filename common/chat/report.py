"""The pipeline's report card: what was trained, how well, how fast, on what machine, and what it says.

``chat_checks`` asks the finished model the two questions the issue's goal names: a greeting, and
"what is 37*91?" over 20 seeds, counting the samples that call the calculator and the ones whose reply
holds the right product. ``write_report`` renders everything as markdown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GREETING = "Hello! How are you?"
CALCULATION, PRODUCT = "what is 37*91?", str(37 * 91)


def chat_checks(backend: Any, seeds: int = 20, temperature: float = 0.6, top_k: int = 50) -> dict[str, Any]:
    """Samples of the greeting (3 seeds) and tool-use counts on the calculation (``seeds`` seeds)."""
    python_start = backend.tokenizer.special_id("<|python_start|>")
    greet = [backend.reply([{"role": "user", "content": GREETING}], temperature=temperature, top_k=top_k,
                           max_tokens=64, seed=s) for s in range(3)]
    calc, used_tool, correct = [], 0, 0
    for seed in range(seeds):
        tokens = list(backend.reply_tokens([{"role": "user", "content": CALCULATION}], temperature=temperature,
                                           top_k=top_k, max_tokens=64, seed=seed))
        text = backend.tokenizer.decode(tokens)
        calc.append(text)
        used_tool += python_start in tokens
        correct += PRODUCT in text
    return {"greeting": greet, "calculation": calc, "used_tool": used_tool, "correct": correct, "seeds": seeds,
            "temperature": temperature, "top_k": top_k}


def _quote(text: str) -> str:
    return "`" + text.replace("`", "'").replace("\n", " ⏎ ") + "`"


def write_report(report: dict[str, Any], path: str | Path) -> Path:
    s, tok, machine = report["settings"], report["tokenizer"], report["machine"]
    lines = [
        "# nanochat report card", "",
        f"Stage `{report['stage']}`, total {report['seconds'] / 60:.1f} min on {machine['cpu']} "
        f"({machine['cores']} cores), Python {machine['python']}.", "",
        "## Config", "", "```json", json.dumps(s, indent=2), "```", "",
        "## Tokenizer", "",
        f"{tok['vocab_size']} tokens, trained in {tok['seconds']:.1f} s; {tok['bytes_per_token']:.2f} bytes per "
        "token on the pretraining val text.", "",
        "## Phases", "",
        "| phase | steps | time | final train loss | val loss (last eval) | val bits/byte |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, p in report["phases"].items():
        last = f"{p['val_history'][-1][1]:.4f}" if p["val_history"] else "-"
        lines.append(f"| {name} | {p['steps']} | {p['seconds']:.0f} s | {p['final_train_loss']:.4f} | {last} | "
                     f"{p['val_bpb']:.4f} |")
    checks = report.get("chat")
    if checks:
        lines += ["", "## Chat", "",
                  f"Sampling at temperature {checks['temperature']}, top-k {checks['top_k']}.", "",
                  f"**{GREETING}**", ""]
        lines += [f"- seed {i}: {_quote(t)}" for i, t in enumerate(checks["greeting"])]
        lines += ["", f"**{CALCULATION}**: the calculator was called in {checks['used_tool']} of {checks['seeds']} "
                      f"seeds; {checks['correct']} of {checks['seeds']} replies contain {PRODUCT}.", ""]
        lines += [f"- seed {i}: {_quote(t)}" for i, t in enumerate(checks["calculation"][:5])]
    lines += ["", f"Final checkpoint: `{report['checkpoint']}`", ""]
    path = Path(path)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
