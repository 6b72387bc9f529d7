"""`sitp viz` (common/viz): the layered layout, the view the page draws, stage2's counted calls, the command's
JSON and the server's files. (The page in a browser: test_viz_browser.py.)"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import stage2_autograd
from common.cli import main
from common.viz import stage2_calls
from common.viz.cli import as_stage2
from common.viz.layout import NODE_GAP, layout
from common.viz.view import MAX_DRAWN, build

SCRIPT = '''
import numpy as np
from stage3_compiler import Tensor, TinyJit, nn, optim
Tensor.manual_seed(0)
lin = nn.Linear(16, 8)
opt = optim.SGD([lin.weight, lin.bias], lr=0.1)

@TinyJit
def step(x):
    loss = lin(x).relu().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.realize()

for i in range(5):
    step(Tensor(np.random.default_rng(i).standard_normal((4, 16)).astype(np.float32)))
'''

STAGED = """
import argparse, importlib
import numpy as np
parser = argparse.ArgumentParser()
parser.add_argument("--stage", type=int, default=3)
stage = importlib.import_module({2: "stage2_autograd", 3: "stage3_compiler"}[parser.parse_args().stage])
x = stage.Tensor(np.ones((8, 8), np.float32), requires_grad=True)
((x @ x).relu() * 2).sum().backward()
print(float(x.grad.numpy().sum()))
"""


def test_the_layout_puts_every_edge_downward_and_no_two_boxes_of_a_layer_over_each_other():
    rng = np.random.default_rng(0)
    n = 60
    edges = sorted({(int(a), int(b)) for a, b in rng.integers(0, n, (150, 2)) if a < b})
    groups = [i // 7 for i in range(n)]
    boxes = layout([f"node {i}" * (1 + i % 3) for i in range(n)], edges, groups)
    assert all(boxes[a].y < boxes[b].y for a, b in edges)
    by_row: dict[float, list] = {}
    for i, b in enumerate(boxes):
        by_row.setdefault(b.y, []).append(i)
    for row in by_row.values():
        row.sort(key=lambda i: boxes[i].x)
        gaps = [boxes[b].x - boxes[a].x - boxes[a].width for a, b in zip(row, row[1:], strict=False)]
        assert all(gap >= NODE_GAP - 1e-9 for gap in gaps)
        seen = [groups[i] for i in row]  # a group's nodes side by side in each layer
        assert all(g not in seen[:k] or seen[k - 1] == g for k, g in enumerate(seen))


def test_a_cycle_is_refused():
    with pytest.raises(ValueError, match="cycle"):
        layout(["a", "b"], [(0, 1), (1, 0)])


@pytest.fixture(scope="module")
def view(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("viz")
    script = folder / "train.py"
    script.write_text(SCRIPT)
    out = folder / "view.json"
    assert main(["viz", "--json", str(out), "--no-serve", str(script)]) == 0
    return json.loads(out.read_text())


def test_the_view_holds_every_realize_kernel_and_replay(view):
    assert view["realizes"] and all(r["drawing"]["kind"] == "lazy" for r in view["realizes"])  # small graphs
    programs = view["programs"]
    for r in view["realizes"]:
        drawing = r["drawing"]
        assert 0 < len(drawing["nodes"]) <= r["nodes"] - r["constants"] and r["nodes"] <= MAX_DRAWN
        # constants are drawn only where a kernel computes nothing else with them (a fill)
        assert sum(n["label"].split()[0] == "CONST" for n in drawing["nodes"]) <= len(r["kernels"])
        assert {o["group"] for o in drawing["outlines"]} == {k["item"] for k in r["kernels"]}
        assert all(k["program"] in programs for k in r["kernels"])
    jit, eager = view["time"]
    assert jit["title"].startswith("TinyJit step: a replay, the median of 3")
    shares = [row["share"] for row in jit["rows"]]
    assert shares == sorted(shares, reverse=True) and abs(sum(shares) - 1) < 1e-9
    for row in jit["rows"]:
        p = programs[row["program"]]
        assert row["gflops"] == pytest.approx(p["flops"] * row["launches"] / row["seconds"] / 1e9)
        assert row["gflops_of_peak"] == pytest.approx(row["gflops"] / view["peak"]["gflops"])
    assert view["peak"]["gflops"] > 0 and view["peak"]["gbs"] > 0
    assert eager["title"].startswith("the realizes run eagerly")
    assert view["stages"] is None  # not asked for


def test_a_large_realize_is_drawn_as_its_kernel_graph_with_each_kernels_part():
    nodes = [{"op": "BUFFER", "shape": ["4"], "dtype": "float32", "before": True, "kernel": None}]
    nodes += [{"op": "ADD", "shape": ["4"], "dtype": "float32", "kernel": i // 2, "arg": "", "site": None}
              for i in range(MAX_DRAWN + 1)]
    edges = [[i, i + 1] for i in range(MAX_DRAWN + 1)]
    kernels = [{"item": k, "program": "p0", "seconds": 1e-6} for k in range((MAX_DRAWN + 2) // 2)]
    recorded = {"realizes": [{"graph": {"nodes": nodes, "edges": edges}, "kernels": kernels, "passes": []}],
                "programs": {"p0": {"name": "E_4", "flops": 4, "bytes": 32, "device": "CPU"}}, "jits": [],
                "passes": {}}
    (r,) = build(recorded)["realizes"]
    assert r["drawing"]["kind"] == "kernels"
    labels = [n["label"] for n in r["drawing"]["nodes"]]
    assert labels.count("E_4") == len(kernels)
    # each kernel reads the last base of the one before (or the buffer): one buffer between each two
    assert len(r["drawing"]["edges"]) == 2 * len(kernels) - 1
    assert set(r["parts"]) == {str(k["item"]) for k in kernels}
    assert [n["label"] for n in r["parts"]["1"]["nodes"]] == ["ADD", "ADD", "ADD"]


def test_stage2s_kernel_calls_are_counted():
    x = stage2_autograd.Tensor(np.ones((8, 8), np.float32), requires_grad=True)
    with stage2_calls.counting() as calls:
        ((x @ x).relu() * 2).sum().backward()
    record = calls()
    names = {c["name"]: c["count"] for c in record["calls"]}
    assert any(n.startswith("gemm_") for n in names) and names.get("reduce", 0) >= 1
    assert record["total"] == sum(names.values()) >= 6 and record["seconds"] > 0


def test_stage2_is_run_as_the_same_program_with_stage_2():
    assert as_stage2(["nanogpt", "--stage", "3", "--steps", "2"]) == ["nanogpt", "--stage", "2", "--steps", "2"]
    assert as_stage2(["--stage=3"]) == ["--stage=2"]
    with pytest.raises(RuntimeError, match="--stage 3"):
        as_stage2(["script.py"])


def get(port: int, path: str) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.getheader("content-type"), r.read()
    finally:
        conn.close()


def serving(app, view: dict):
    """The viz server (app: common.viz.app) for a view on a free loopback port, in a thread: (server, thread, port)."""
    server = app.make_server(view, "127.0.0.1", 0)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    return server, thread, server.servers[0].sockets[0].getsockname()[1]


def test_the_server_serves_the_page_its_files_and_the_view(view):
    app = pytest.importorskip("common.viz.app", reason="sitp viz serves with the `serve` extra (fastapi, uvicorn)")
    server, thread, port = serving(app, view)
    try:
        status, kind, page = get(port, "/")
        assert status == 200 and kind.startswith("text/html") and b'src="page.js"' in page
        script, style = get(port, "/page.js"), get(port, "/page.css")
        assert script[0] == style[0] == 200
        assert script[1].startswith("text/javascript") and style[1].startswith("text/css")
        # nothing from the network (no CDN): the only address in them is SVG's namespace
        urls = re.findall(rb"https?://[^\s\"']+", page + script[2] + style[2])
        assert set(urls) <= {b"http://www.w3.org/2000/svg"}
        status, kind, body = get(port, "/view.json")
        first = json.loads(body)
        assert status == 200 and first["time"] == view["time"] and len(first["realizes"]) == len(view["realizes"])
        assert first["programs"] == {k: {"name": p["name"], "device": p["device"]} for k, p in view["programs"].items()}
        assert json.loads(get(port, "/realize/1.json")[2]) == view["realizes"][1]
        assert json.loads(get(port, "/program/p2.json")[2]) == view["programs"]["p2"]
        assert [get(port, path)[0] for path in ("/nothing.js", "/realize/999.json", "/program/q.json")] == [404] * 3
    finally:
        server.should_exit = True
        thread.join(15)


def test_stage2s_calls_stand_beside_stage3s_kernels_for_the_same_program(tmp_path):
    script, out = tmp_path / "staged.py", tmp_path / "view.json"
    script.write_text(STAGED)
    assert main(["viz", "--stage2", "--json", str(out), "--no-serve", str(script), "--stage", "3"]) == 0
    view = json.loads(out.read_text())
    stage2, stage3 = view["stages"]["stage2"], view["stages"]["stage3"]
    assert stage3["total"] == sum(len(r["kernels"]) for r in view["realizes"])
    assert stage2["total"] == sum(c["count"] for c in stage2["calls"]) > stage3["total"]  # fusion's doing
    assert any(c["name"].startswith("gemm_") for c in stage2["calls"])


def test_viz_1_records_a_whole_program_that_sitp_viz_then_loads(tmp_path):
    script, recorded, out = tmp_path / "staged.py", tmp_path / "recorded.json", tmp_path / "view.json"
    script.write_text(STAGED)
    env = {**os.environ, "VIZ": "1", "VIZ_FILE": str(recorded), "PYTHONPATH": str(Path(__file__).parents[2])}
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert f"see them with: sitp viz --load {recorded}" in run.stdout
    assert main(["viz", "--load", str(recorded), "--json", str(out), "--no-serve"]) == 0
    view = json.loads(out.read_text())
    assert view["realizes"] and view["programs"] and view["time"]


def test_a_missing_or_foreign_recording_is_refused_by_name(tmp_path, capsys):
    assert main(["viz", "--load", str(tmp_path / "none.json"), "--no-serve"]) == 1
    (tmp_path / "other.json").write_text('{"a": 1}')
    assert main(["viz", "--load", str(tmp_path / "other.json"), "--no-serve"]) == 1
    err = capsys.readouterr().err
    assert "cannot read the recording" in err and "is not a recording VIZ=1 wrote" in err
