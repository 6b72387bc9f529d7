// sitp viz: draws the view the server built (view.py) into four tabs: the graph of a realize, the kernels
// pass by pass, their time, and stage2's calls beside stage3's kernels. Plain DOM and SVG, no library.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#d9534f", "#5b8def", "#3aa655", "#e08e0b", "#9b59b6", "#16a2b8", "#c0392b", "#7f8c8d"];
let view = null; // the summary (app.summary); a realize's drawing and a kernel's record are fetched when opened
const realizes = {};
const programs = {};
let opened = null; // the program key of the kernel open in the Kernels tab
let step = 0; // the pass step shown for it
let codeKind = "source"; // "source" or "uops"

function el(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== null) node.textContent = text;
  return node;
}

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

function showTab(name) {
  for (const panel of document.querySelectorAll(".panel")) panel.classList.toggle("active", panel.id === name);
  for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.tab === name);
}

// ---- the graph ----

function drawGraph(drawing, onOpen) {
  const canvas = document.getElementById("canvas");
  canvas.replaceChildren();
  const root = svg("g");
  canvas.appendChild(root);
  for (const box of drawing.outlines) {
    root.appendChild(svg("rect", {class: "outline", x: box.x, y: box.y, width: box.width, height: box.height,
                                  stroke: COLORS[box.group % COLORS.length]}));
  }
  for (const [a, b] of drawing.edges) {
    const s = drawing.nodes[a], d = drawing.nodes[b];
    const x1 = s.x + s.w / 2, y1 = s.y + s.h, x2 = d.x + d.w / 2, y2 = d.y, mid = (y1 + y2) / 2;
    root.appendChild(svg("path", {class: "edge", d: `M${x1},${y1} C${x1},${mid} ${x2},${mid} ${x2},${y2}`}));
  }
  drawing.nodes.forEach((n) => {
    const g = svg("g", {class: `node ${n.kind}` + (n.group !== null ? " clickable" : "")});
    const fill = n.kind === "op" && n.group !== null ? COLORS[n.group % COLORS.length] + "33" : null;
    g.appendChild(svg("rect", {x: n.x, y: n.y, width: n.w, height: n.h, rx: 4, ...(fill ? {fill} : {})}));
    const title = svg("title");
    title.textContent = n.title;
    g.appendChild(title);
    const text = svg("text", {x: n.x + 8, y: n.y + n.h / 2 + 4});
    text.textContent = n.label;
    g.appendChild(text);
    if (n.group !== null) g.addEventListener("click", () => onOpen(n.group));
    root.appendChild(g);
  });
  panZoom(canvas, root, drawing.width, drawing.height);
}

function panZoom(canvas, root, width, height) {
  const box = canvas.getBoundingClientRect();
  // the whole drawing where it fits at a readable size; else its top, at the smallest readable size
  let scale = Math.max(0.4, Math.min(1, box.width / (width + 40), box.height / (height + 40)));
  let x = 20, y = 20, drag = null;
  const apply = () => root.setAttribute("transform", `translate(${x},${y}) scale(${scale})`);
  canvas.onwheel = (e) => {
    e.preventDefault();
    const factor = e.deltaY < 0 ? 1.15 : 1 / 1.15, r = canvas.getBoundingClientRect();
    const px = e.clientX - r.left, py = e.clientY - r.top;
    x = px - (px - x) * factor;
    y = py - (py - y) * factor;
    scale *= factor;
    apply();
  };
  canvas.onmousedown = (e) => { drag = [e.clientX - x, e.clientY - y]; };
  canvas.onmousemove = (e) => { if (drag) { x = e.clientX - drag[0]; y = e.clientY - drag[1]; apply(); } };
  canvas.onmouseup = canvas.onmouseleave = () => { drag = null; };
  apply();
}

async function fetched(cache, key, path) {
  if (!(key in cache)) cache[key] = await (await fetch(path)).json();
  return cache[key];
}

async function showRealize(i) {
  const r = await fetched(realizes, i, `realize/${i}.json`);
  const kernels = r.kernels.length;
  document.getElementById("realize-info").textContent =
    `${r.nodes} nodes (${r.constants} constants, not drawn), ${kernels} kernel${kernels === 1 ? "" : "s"}` +
    (r.drawing.kind === "kernels" ? " (too many nodes to draw one by one: the kernel graph; click a kernel for its part)" : "");
  const programOf = (item) => (r.kernels.find((k) => k.item === item) || {}).program;
  const open = (item) => {
    if (r.parts && r.drawing.kind === "kernels" && document.getElementById("canvas").dataset.part !== String(item)) {
      document.getElementById("canvas").dataset.part = String(item);
      drawGraph(r.parts[String(item)], () => openKernel(programOf(item)));
      return;
    }
    if (programOf(item)) openKernel(programOf(item));
  };
  document.getElementById("canvas").dataset.part = "";
  drawGraph(r.drawing, open);
}

// ---- the kernels ----

function listKernels() {
  const list = document.getElementById("kernel-list");
  for (const [key, p] of Object.entries(view.programs)) {
    const item = el("li", {class: "kernel-item", "data-key": key}, `${p.name}  ${p.device}`);
    item.addEventListener("click", () => openKernel(key));
    list.appendChild(item);
  }
}

function codeBlock(id, full, diff) {
  const pre = el("pre", {class: "code", id});
  if (full !== undefined) {
    pre.textContent = full;
    return pre;
  }
  if (!diff.length) pre.appendChild(el("span", {class: "gap"}, "(no change)"));
  for (const [tag, line] of diff) {
    const cls = {"+": "add", "-": "del", "@": "gap", " ": "ctx"}[tag];
    pre.appendChild(el("span", {class: cls}, (tag === "@" ? "@@ " : tag + " ") + line));
  }
  return pre;
}

async function openKernel(key) {
  await fetched(programs, key, `program/${key}.json`);
  opened = key;
  step = 0;
  showTab("kernels");
  for (const li of document.querySelectorAll(".kernel-item")) li.classList.toggle("active", li.dataset.key === key);
  renderKernel();
}

function renderKernel() {
  const p = programs[opened], s = p.steps[step];
  const detail = document.getElementById("kernel-detail");
  detail.replaceChildren();
  detail.appendChild(el("h2", {id: "kernel-name"}, p.name));
  if (p.site) detail.appendChild(el("p", {}, `built at ${p.site.file}:${p.site.line}: ${p.site.code}`));
  detail.appendChild(el("p", {}, `${p.device}, ${p.threads} thread(s); ${p.flops.toLocaleString()} ALU ops, ` +
                               `${p.bytes.toLocaleString()} bytes of buffers; passes that changed it: ` +
                               (p.passes.join(", ") || "none")));
  const why = el("ul", {id: "kernel-why"});
  for (const line of p.why) why.appendChild(el("li", {}, line));
  detail.appendChild(el("h3", {}, "Options, and why"));
  detail.appendChild(why);
  const buffers = el("table");
  buffers.appendChild(el("tr")).append(el("th", {}, "buffer"), el("th", {}, "shape"), el("th", {}, "dtype"),
                                       el("th", {class: "num"}, "bytes"));
  for (const b of p.buffers) {
    buffers.appendChild(el("tr")).append(el("td", {}, b.role), el("td", {}, `(${b.shape.join(", ")})`),
                                         el("td", {}, b.dtype), el("td", {class: "num"}, b.bytes.toLocaleString()));
  }
  detail.appendChild(buffers);
  detail.appendChild(el("h3", {}, "Pass by pass"));
  const bar = el("div", {class: "steps"});
  const prev = el("button", {id: "step-prev"}, "◀ previous");
  const next = el("button", {id: "step-next"}, "next ▶");
  prev.disabled = step === 0;
  next.disabled = step === p.steps.length - 1;
  prev.onclick = () => { step -= 1; renderKernel(); };
  next.onclick = () => { step += 1; renderKernel(); };
  bar.appendChild(prev);
  p.steps.forEach((st, i) => {
    const chip = el("span", {class: "step" + (i === step ? " active" : "")}, i === 0 ? "core" : "+ " + st.pass);
    chip.onclick = () => { step = i; renderKernel(); };
    bar.appendChild(chip);
  });
  bar.appendChild(next);
  const kind = el("button", {id: "code-kind"}, codeKind === "source" ? "show UOps" : "show source");
  kind.onclick = () => { codeKind = codeKind === "source" ? "uops" : "source"; renderKernel(); };
  bar.appendChild(kind);
  detail.appendChild(bar);
  const passInfo = view.passes[s.pass];
  detail.appendChild(el("p", {id: "step-name"}, step === 0
    ? `the core alone (with the passes that shaped its schedule): options ${s.opts.join(" ") || "none"}`
    : `+ ${s.pass}` + (passInfo ? `: ${passInfo.what} (${passInfo.where.join(", ")})` : "") +
      `; options ${s.opts.join(" ") || "none"}; the lines it changed:`));
  const full = step === 0 ? (codeKind === "source" ? s.source : s.uops) : undefined;
  const diff = step === 0 ? [] : (codeKind === "source" ? s.source_diff : s.uops_diff);
  detail.appendChild(codeBlock("kernel-code", full, diff));
  detail.appendChild(el("h3", {}, "The source that ran"));
  detail.appendChild(codeBlock("kernel-source", p.source));
}

// ---- the time ----

function showTime(i) {
  const table = view.time[i], chart = document.getElementById("time-chart");
  const peak = view.peak;
  document.getElementById("time-info").textContent = `${(table.step_seconds * 1e3).toFixed(3)} ms` +
    (peak ? `; this machine's measured peak on ${peak.threads} thread(s): ${peak.gflops.toFixed(0)} GFLOP/s, ` +
            `${peak.gbs.toFixed(1)} GB/s` : "; no peak measured for this device") +
    ". A kernel's ALU ops are GlobalCounters' estimate (ops a step times steps): where a pass skips terms " +
    "(causal ranges, lookups) it counts them anyway, so its GFLOP/s can read above the peak.";
  chart.replaceChildren();
  const head = el("div", {class: "time-row head"});
  head.append(el("span", {}, "kernel"), el("span", {}, "share of the step"), el("span", {}, "ms"),
              el("span", {}, "share"), el("span", {}, "GFLOP/s (of peak)"), el("span", {}, "GB/s (of peak)"));
  chart.appendChild(head);
  const top = table.rows.length ? table.rows[0].share : 1;
  for (const row of table.rows) {
    const line = el("div", {class: "time-row", "data-key": row.program});
    const bar = el("div");
    bar.appendChild(el("div", {class: "bar-fill", style: `width: ${(100 * row.share / top).toFixed(1)}%`}));
    const ofPeak = (x) => (x === undefined ? "" : ` (${(100 * x).toFixed(0)}%)`);
    line.append(el("span", {}, row.name), bar, el("span", {}, (row.seconds * 1e3).toFixed(3)),
                el("span", {}, (100 * row.share).toFixed(1) + "%"),
                el("span", {}, row.gflops.toFixed(1) + ofPeak(row.gflops_of_peak)),
                el("span", {}, row.gbs.toFixed(2) + ofPeak(row.gbs_of_peak)));
    line.addEventListener("click", () => openKernel(row.program));
    chart.appendChild(line);
  }
}

// ---- the stages ----

function showStages() {
  const panel = document.getElementById("stages");
  const s = view.stages;
  if (!s) {
    panel.appendChild(el("p", {}, "stage2 was not recorded for this program: `sitp viz --stage2 ...` reruns a " +
                                  "program that takes --stage 3 with --stage 2 and counts its kernel calls."));
    return;
  }
  panel.appendChild(el("p", {id: "stages-summary"},
    `the same program: stage2 made ${s.stage2.total} kernel calls, stage3 ran ${s.stage3.total} kernel launches`));
  const columns = el("div", {class: "columns"});
  for (const [title, calls, timed] of [["stage2's C kernel calls", s.stage2.calls, true],
                                       ["stage3's kernels (launches)", s.stage3.calls, false]]) {
    const table = el("table");
    table.appendChild(el("tr")).append(el("th", {}, title), el("th", {class: "num"}, "calls"),
                                       ...(timed ? [el("th", {class: "num"}, "ms")] : []));
    for (const c of calls) {
      table.appendChild(el("tr")).append(el("td", {}, c.name), el("td", {class: "num"}, String(c.count)),
                                         ...(timed ? [el("td", {class: "num"}, (c.seconds * 1e3).toFixed(2))] : []));
    }
    columns.appendChild(table);
  }
  panel.appendChild(columns);
}

// ---- start ----

async function start() {
  view = await (await fetch("view.json")).json();
  document.getElementById("title").textContent = view.title;
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => showTab(tab.dataset.tab));
  const choice = document.getElementById("realize");
  view.realizes.forEach((r, i) => choice.appendChild(el("option", {value: i}, `${i}: ${r.kernels} kernels, ${r.nodes} nodes`)));
  choice.onchange = () => showRealize(Number(choice.value));
  const tables = document.getElementById("time-table");
  view.time.forEach((t, i) => tables.appendChild(el("option", {value: i}, t.title)));
  tables.onchange = () => showTime(Number(tables.value));
  listKernels();
  showStages();
  showTab("graph");
  if (view.realizes.length) {  // the realize with the most kernels first: a step's forward and backward
    const most = view.realizes.reduce((best, r, i) => (r.kernels > view.realizes[best].kernels ? i : best), 0);
    choice.value = most;
    await showRealize(most);
  }
  if (view.time.length) showTime(0);
  document.body.dataset.ready = "1";
}

start();
