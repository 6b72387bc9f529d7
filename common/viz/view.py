"""What the page shows, built from a recording (stage3_compiler/viz/record.py) as plain data: the page's
JavaScript only draws it, and `sitp viz --json` writes exactly this.

- `realizes`: each realize's kernels, and its drawing: the lazy graph laid out (layout.py) with each
  kernel's bases outlined, or, for a graph too large to draw node by node (a training step's backward:
  tens of thousands of nodes), the kernel graph (kernels and the buffers between them), with each
  kernel's own part of the lazy graph drawn when it is opened;
- `programs`: each kernel's record (options and why, buffers, the passes' steps), and what its runs took;
- `time`: the kernels by measured time, for each TinyJit's replays (the median of each kernel over the
  replays) and for the realizes run eagerly, each with its share, GFLOP/s and GB/s against the
  machine's measured peak (peak.py);
- `stages`: stage2's kernel calls beside stage3's kernels for the same program, where both were recorded.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from .layout import layout, outline

MAX_DRAWN = 1500  # nodes of a lazy graph drawn node by node; a larger realize is drawn as its kernel graph


def node_label(node: dict) -> str:
    arg = f" {node['arg']}" if node.get("arg") else ""
    return f"{node['op']}{arg}"


def node_title(node: dict) -> str:
    """The hover text: op, shape, dtype and the user's line."""
    shape = f"({', '.join(node['shape'])})"
    site = node.get("site")
    where = f"\n{site['file']}:{site['line']}\n{site['code']}" if site else ""
    return f"{node_label(node)}\n{shape} {node['dtype']}{where}"


def drawing(labels: list[str], titles: list[str], edges: list, groups: list, kinds: list[str]) -> dict:
    boxes = layout(labels, [tuple(e) for e in edges], groups)
    members = defaultdict(list)
    for i, g in enumerate(groups):
        if g is not None:
            members[g].append(i)
    nodes = [{"x": b.x, "y": b.y, "w": b.width, "h": b.height, "label": label, "title": title, "group": g,
              "kind": kind} for b, label, title, g, kind in zip(boxes, labels, titles, groups, kinds, strict=True)]
    outlines = [{"group": g, **vars(outline(boxes, m))} for g, m in members.items()]
    width = max((b.x + b.width for b in boxes), default=0)
    height = max((b.y + b.height for b in boxes), default=0)
    return {"nodes": nodes, "edges": edges, "outlines": outlines, "width": width, "height": height}


def without_constants(graph: dict) -> dict:
    """The graph less its constants and their views (the page would fill with them), but those a kernel computes
    nothing else with (a fill), edges renumbered."""
    nodes, edges = graph["nodes"], graph["edges"]
    busy = {n.get("kernel") for n in nodes if n["op"] not in ("CONST", "VIEW", "BUFFER")}
    const = {i for i, n in enumerate(nodes) if n["op"] == "CONST" and n.get("kernel") in busy | {None}}
    const |= {d for s, d in edges if s in const and nodes[d]["op"] == "VIEW"}
    keep = [i for i in range(len(nodes)) if i not in const]
    at = {old: new for new, old in enumerate(keep)}
    return {"nodes": [nodes[i] for i in keep], "edges": [[at[s], at[d]] for s, d in edges if s in at and d in at]}


def lazy_drawing(graph: dict) -> dict:
    graph = without_constants(graph)
    nodes = graph["nodes"]
    kinds = ["buffer" if n.get("before") else "view" if n["op"] == "VIEW" else "op" for n in nodes]
    return {"kind": "lazy", **drawing([node_label(n) for n in nodes], [node_title(n) for n in nodes],
                                      graph["edges"], [n.get("kernel") for n in nodes], kinds)}


def kernel_drawing(graph: dict, kernels: list[dict], programs: dict) -> dict:
    """Kernels as boxes and the buffers between them: what each kernel loads (a buffer realized before, or
    another kernel's output), with an edge from the kernel that wrote it."""
    nodes = graph["nodes"]
    owner = [n.get("kernel") for n in nodes]
    base_of = {d: s for s, d in graph["edges"] if nodes[d]["op"] == "VIEW"}  # a view reads its base only
    reads = defaultdict(set)  # kernel (item) -> the bases it loads
    for s, d in graph["edges"]:
        base = base_of.get(s, s)
        if owner[d] is not None and owner[base] != owner[d]:
            reads[owner[d]].add(base)
    items = sorted({k["item"] for k in kernels})
    names = {k["item"]: programs[k["program"]]["name"] for k in kernels}
    buffers = sorted({b for r in reads.values() for b in r})
    at = {("kernel", item): i for i, item in enumerate(items)}
    at.update({("buffer", b): len(items) + j for j, b in enumerate(buffers)})
    labels = [names[item] for item in items] + [f"({', '.join(nodes[b]['shape'])}) {nodes[b]['dtype']}"
                                                for b in buffers]
    titles = [f"kernel {item}: {names[item]}" for item in items] + [node_title(nodes[b]) for b in buffers]
    edges = [[at[("buffer", b)], at[("kernel", item)]] for item, r in reads.items() if item in names for b in r]
    edges += [[at[("kernel", owner[b])], at[("buffer", b)]] for b in buffers if owner[b] in names]
    kinds = ["kernel"] * len(items) + ["buffer"] * len(buffers)
    return {"kind": "kernels", **drawing(labels, titles, edges, [*items, *[None] * len(buffers)], kinds)}


def kernel_part(graph: dict, item: int) -> dict:
    """One kernel's share of the lazy graph: the bases it computes and the nodes they read directly."""
    nodes = graph["nodes"]
    inside = {i for i, n in enumerate(nodes) if n.get("kernel") == item}
    edges = [(s, d) for s, d in graph["edges"] if d in inside]
    keep = sorted(inside | {s for s, _ in edges})
    index = {n: i for i, n in enumerate(keep)}
    part = {"nodes": [nodes[i] for i in keep], "edges": [[index[s], index[d]] for s, d in edges]}
    return lazy_drawing(part)


def realize_view(i: int, realize: dict, programs: dict) -> dict:
    graph = realize["graph"]
    big = len(graph["nodes"]) > MAX_DRAWN
    view = {"index": i, "nodes": len(graph["nodes"]), "constants": sum(n["op"] == "CONST" for n in graph["nodes"]),
            "kernels": realize["kernels"], "passes": realize["passes"],
            "drawing": kernel_drawing(graph, realize["kernels"], programs) if big else lazy_drawing(graph)}
    if big:
        view["parts"] = {str(k["item"]): kernel_part(graph, k["item"]) for k in realize["kernels"]}
    return view


def time_rows(seconds: dict[str, float], launches: dict[str, int], programs: dict, peak: dict | None) -> list[dict]:
    """One row a kernel (program), largest first: seconds, share of the total, GFLOP/s and GB/s (and their
    fractions of the peak, where one was measured)."""
    total = sum(seconds.values()) or 1.0
    rows = []
    for key, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
        p = programs[key]
        per_launch = s / max(launches[key], 1)
        gflops = p["flops"] / per_launch / 1e9 if per_launch else 0.0
        gbs = p["bytes"] / per_launch / 1e9 if per_launch else 0.0
        row = {"program": key, "name": p["name"], "seconds": s, "share": s / total, "launches": launches[key],
               "gflops": gflops, "gbs": gbs}
        if peak:
            row.update(gflops_of_peak=gflops / peak["gflops"], gbs_of_peak=gbs / peak["gbs"])
        rows.append(row)
    return rows


def jit_time(jit: dict, programs: dict, peak: dict | None) -> dict | None:
    """A TinyJit's step: each kernel's median over the replays, summed per program."""
    replays = jit["replays"]
    if not replays:
        return None
    seconds, launches = defaultdict(float), defaultdict(int)
    for k, key in enumerate(jit["kernels"]):
        if key is None:
            continue
        seconds[key] += statistics.median(r[k] for r in replays)
        launches[key] += 1
    step = statistics.median(sum(r) for r in replays)
    return {"title": f"TinyJit {jit['name']}: a replay, the median of {len(replays)}", "step_seconds": step,
            "rows": time_rows(seconds, launches, programs, peak)}


def eager_time(realizes: list[dict], programs: dict, peak: dict | None) -> dict | None:
    seconds, launches = defaultdict(float), defaultdict(int)
    for r in realizes:
        for k in r["kernels"]:
            seconds[k["program"]] += k["seconds"]
            launches[k["program"]] += 1
    if not seconds:
        return None
    on_gpu = any(programs[key]["device"] != "CPU" for key in seconds)
    return {"title": f"the realizes run eagerly ({len(realizes)}), every launch summed"
                     + (" (on the cuda device: the launches' times; their kernels run after)" if on_gpu else ""),
            "step_seconds": sum(seconds.values()), "rows": time_rows(seconds, launches, programs, peak)}


def stages_view(recording: dict, stage2: dict | None) -> dict | None:
    """stage2's kernel calls beside stage3's kernels, for the same program."""
    if stage2 is None:
        return None
    launches = defaultdict(int)
    for r in recording["realizes"]:
        for k in r["kernels"]:
            launches[recording["programs"][k["program"]]["name"]] += 1
    for jit in recording["jits"]:
        for key in jit["kernels"]:
            if key is not None:
                launches[recording["programs"][key]["name"]] += len(jit["replays"])
    stage3 = [{"name": n, "count": c} for n, c in sorted(launches.items(), key=lambda kv: -kv[1])]
    return {"stage2": stage2, "stage3": {"calls": stage3, "total": sum(launches.values())}}


def build(recording: dict, peak: dict | None = None, stage2: dict | None = None, title: str = "") -> dict:
    programs = recording["programs"]
    times = [t for t in (jit_time(j, programs, peak) for j in recording["jits"]) if t is not None]
    eager = eager_time(recording["realizes"], programs, peak)
    return {"title": title, "peak": peak, "passes": recording["passes"], "programs": programs,
            "realizes": [realize_view(i, r, programs) for i, r in enumerate(recording["realizes"])],
            "time": times + ([eager] if eager else []), "stages": stages_view(recording, stage2)}
