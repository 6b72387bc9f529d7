"""The viz page in a real headless Chromium (chromium.py), over a recorded nanoGPT training step on stage3: the
graph is drawn, the time chart lists the step's kernels, a click opens one, and stepping through
its passes shows each pass's changes, then the source that ran. A screenshot of each tab is written to
$SITP_VIZ_SCREENSHOTS (a folder) when it is set. Skips, saying so, without Chromium or the `serve` extra."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

import stage3_compiler as st
from common.models.gpt import GPT, GPTConfig
from common.train.optimizers import build_optimizer
from common.viz.peak import measure
from common.viz.view import build
from stage3_compiler.viz.record import recording

from .chromium import BROWSERS, Chromium, find_chromium
from .test_viz import serving

CONFIG = GPTConfig(block_size=16, vocab_size=65, n_layer=1, n_head=2, n_embd=32)  # small: it compiles cold in CI


def recorded_nanogpt_step() -> dict:
    """Five jitted AdamW steps of a small nanoGPT (eager, capture, three replays), recorded."""
    st.Tensor.manual_seed(0)
    model = GPT(st, CONFIG)
    opt = build_optimizer(st, model, "adamw", 1e-3, 0.1, (0.9, 0.99))
    rng = np.random.default_rng(0)

    @st.TinyJit
    def train_step(x, y):
        loss = model.loss(x, y).realize()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    with recording() as r:
        for _ in range(5):
            ids = rng.integers(0, CONFIG.vocab_size, (4, CONFIG.block_size + 1))
            train_step(st.Tensor(ids[:, :-1]), st.Tensor(ids[:, 1:]))
    return build(r.to_json(), asdict(measure()), None, "a nanoGPT step")


@pytest.fixture(scope="module")
def page():
    app = pytest.importorskip("common.viz.app", reason="sitp viz serves with the `serve` extra (fastapi, uvicorn)")
    binary = find_chromium()
    if binary is None:
        pytest.skip(f"no Chromium found (looked for {', '.join(BROWSERS)} on PATH and $SITP_CHROMIUM); "
                    "on Debian: apt-get install -y --no-install-recommends chromium")
    view = recorded_nanogpt_step()
    server, thread, port = serving(app, view)
    browser = Chromium(binary)
    try:
        browser.send("Page.navigate", url=f"http://127.0.0.1:{port}/")
        browser.wait_for("document.body?.dataset.ready === '1'", "the loaded view")
        yield browser, view
    finally:
        browser.close()
        server.should_exit = True
        thread.join(15)


def screenshot(browser: Chromium, name: str) -> None:
    folder = os.environ.get("SITP_VIZ_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        browser.screenshot(Path(folder) / f"viz-{name}.png")


def test_the_graph_of_a_realize_is_drawn_with_its_kernels_outlined(page):
    browser, view = page
    # the realize with the most kernels is shown first: the step's backward
    shown = int(browser.evaluate("document.getElementById('realize').value"))
    assert len(view["realizes"][shown]["kernels"]) == max(len(r["kernels"]) for r in view["realizes"])
    drawing = view["realizes"][shown]["drawing"]
    assert browser.evaluate("document.querySelectorAll('#canvas .node').length") == len(drawing["nodes"]) > 100
    assert browser.evaluate("document.querySelectorAll('#canvas .outline').length") == len(drawing["outlines"]) > 10
    screenshot(browser, "graph")


def test_a_kernel_opens_from_the_time_chart_and_steps_through_its_passes(page):
    browser, view = page
    browser.click("#tab-time")
    rows = browser.wait_for("document.querySelectorAll('.time-row[data-key]').length", "the time chart")
    table = view["time"][0]
    assert table["title"].startswith("TinyJit train_step") and rows == len(table["rows"])
    screenshot(browser, "time")
    # the slowest kernel that at least two passes changed
    slowest = next(row for row in table["rows"] if len(view["programs"][row["program"]]["steps"]) >= 3)
    browser.click(f".time-row[data-key={slowest['program']}]")
    name = browser.wait_for("document.getElementById('kernel-name')?.textContent", "the opened kernel")
    assert name == slowest["name"]
    program = view["programs"][slowest["program"]]
    assert browser.evaluate("document.getElementById('kernel-source').textContent") == program["source"]
    seen = [browser.evaluate("document.getElementById('step-name').textContent")]
    assert seen[0].startswith("the core alone")
    while not browser.evaluate("document.getElementById('step-next').disabled"):
        browser.click("#step-next")
        seen.append(browser.evaluate("document.getElementById('step-name').textContent"))
        changed = browser.evaluate("document.querySelectorAll('#kernel-code .add, #kernel-code .del').length")
        assert changed > 0, f"{seen[-1]} shows no change"
        if seen[-1].startswith("+ vectorize"):
            screenshot(browser, "kernel-vectorize")
    assert [s.split(":")[0] for s in seen[1:]] == [f"+ {s['pass']}" for s in program["steps"][1:]]
    assert len(seen) == len(program["steps"]) >= 3
    screenshot(browser, "kernel")


def test_stage2_is_not_in_a_recording_of_stage3_alone(page):
    browser, _ = page
    browser.click("#tab-stages")
    assert "stage2 was not recorded" in browser.evaluate("document.getElementById('stages').textContent")
