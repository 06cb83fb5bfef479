#include "agent/health/job_page_html.hpp"

namespace ddprun::agent {
namespace {

constexpr std::string_view kPage = R"page(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ddprun job</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d1d1f; background: #fafafa; }
h1 { font-size: 1.3em; margin: 0 0 .2em; }
h2 { font-size: 1.05em; margin: 1.4em 0 .4em; }
.facts { color: #444; }
.facts span { margin-right: 1.4em; white-space: nowrap; }
table { border-collapse: collapse; background: #fff; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: middle; }
th { background: #f0f0f3; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.state-running { color: #137333; } .state-failed, .state-abandoned { color: #b3261e; }
.state-stopping, .state-stopped { color: #8a6d00; }
.straggler { background: #fde7e7; }
#status { color: #666; margin-left: .6em; font-size: .9em; }
#events { font-family: ui-monospace, monospace; font-size: 12px; max-height: 22em; overflow: auto;
          background: #fff; border: 1px solid #ddd; padding: .4em .6em; }
svg.spark { width: 160px; height: 28px; vertical-align: middle; }
.charts { display: flex; gap: 1.5em; flex-wrap: wrap; }
figure { margin: 0; background: #fff; border: 1px solid #ddd; padding: .3em .5em; }
figcaption { font-size: .85em; color: #555; }
svg.chart { width: 420px; height: 150px; }
svg.chart polyline { fill: none; stroke: #1a73e8; stroke-width: 1.5; }
svg.chart circle { fill: #d93025; }
svg.chart text { font-size: 10px; fill: #555; }
#stacks-status { font-weight: normal; color: #666; font-size: .85em; margin-left: .5em; }
.stack-group { margin: .6em 0; }
.stack-group h3 { font-size: .95em; margin: .2em 0; }
.stack-group pre { background: #fff; border: 1px solid #ddd; padding: .4em .6em; margin: 0;
                   font-size: 12px; max-height: 24em; overflow: auto; }
.stack-files { color: #555; font-size: .85em; }
svg.spark polyline { fill: none; stroke: #1a73e8; stroke-width: 1.5; }
</style>
</head>
<body>
<h1>ddprun job <span id="run_id"></span><span id="status"></span></h1>
<div class="facts" id="facts"></div>
<h2>Nodes</h2>
<table id="nodes"><thead><tr><th>group rank</th><th>host</th><th>agent</th>
<th>last progress</th><th>node check</th><th>ranks</th></tr></thead><tbody></tbody></table>
<h2>Ranks</h2>
<table id="ranks"><thead><tr><th>rank</th><th>node</th><th>local rank</th><th>pid</th>
<th>state</th><th>restarts</th><th>steps</th><th>step interval</th><th>last minute</th></tr></thead>
<tbody></tbody></table>
<div id="training" hidden>
<h2>Training</h2>
<div class="charts"><figure><figcaption>train loss (eval: dots)</figcaption><div id="loss-chart"></div></figure>
<figure><figcaption>tokens/s</figcaption><div id="rate-chart"></div></figure></div>
<div id="snapshot" class="facts"></div>
</div>
<h2>Stacks <button id="stacks-button" type="button">capture stacks</button>
<span id="stacks-status"></span></h2>
<div id="stacks"></div>
<h2>Events</h2>
<div id="events"></div>
<script>
"use strict";
const token = new URLSearchParams(location.search).get("token");
const api = (path) => path + (token ? "?token=" + encodeURIComponent(token) : "");
const POLL_MS = 2000;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function seconds(s) {
  if (s === null || s === undefined) return "";
  return s < 1 ? (s * 1000).toFixed(1) + " ms" : s.toFixed(3) + " s";
}
function ago(unix) {
  if (!unix) return "";
  const d = Math.max(0, Date.now() / 1000 - unix);
  return d < 90 ? d.toFixed(0) + " s ago" : (d / 60).toFixed(1) + " min ago";
}
function sparkline(points) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", "0 0 160 28");
  if (points.length > 1) {
    const max = Math.max(...points) || 1;
    const step = 160 / (points.length - 1);
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", points.map((v, i) =>
      (i * step).toFixed(1) + "," + (26 - 24 * v / max).toFixed(1)).join(" "));
    svg.appendChild(line);
  }
  return svg;
}
// A line chart of ys over xs (extra: [x, y] points drawn as dots), with its range written in.
function chart(xs, ys, extra) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "chart");
  svg.setAttribute("viewBox", "0 0 420 150");
  const allX = xs.concat(extra.map((p) => p[0])), allY = ys.concat(extra.map((p) => p[1]));
  if (allX.length === 0) return svg;
  const x0 = Math.min(...allX), x1 = Math.max(...allX) || 1;
  const y0 = Math.min(...allY), y1 = Math.max(...allY);
  const px = (x) => 40 + 370 * (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5);
  const py = (y) => 135 - 120 * (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", xs.map((x, i) => px(x).toFixed(1) + "," + py(ys[i]).toFixed(1)).join(" "));
  svg.appendChild(line);
  for (const [x, y] of extra) {
    const dot = document.createElementNS(ns, "circle");
    dot.setAttribute("cx", px(x).toFixed(1)); dot.setAttribute("cy", py(y).toFixed(1));
    dot.setAttribute("r", "3");
    svg.appendChild(dot);
  }
  const label = (x, y, text) => {
    const t = document.createElementNS(ns, "text");
    t.setAttribute("x", x); t.setAttribute("y", y); t.textContent = text;
    svg.appendChild(t);
  };
  const fmt = (v) => Math.abs(v) >= 1000 ? v.toFixed(0) : v.toPrecision(3);
  label(2, 18, fmt(y1)); label(2, 138, fmt(y0));
  label(40, 149, "step " + x0); label(360, 149, "step " + x1);
  return svg;
}
function renderTraining(trainer) {
  const section = document.getElementById("training");
  section.hidden = !trainer;
  if (!trainer) return;
  document.getElementById("loss-chart").replaceChildren(
    chart(trainer.steps, trainer.train_loss, trainer.eval));
  document.getElementById("rate-chart").replaceChildren(
    chart(trainer.steps, trainer.tokens_per_second, []));
  const s = trainer.snapshot;
  document.getElementById("snapshot").replaceChildren(s ?
    el("span", "last snapshot: " + s.path + ", after epoch " + s.finished_epoch +
       (s.steps_into_epoch ? " + " + s.steps_into_epoch + " steps" : "") + ", " + ago(s.unix_time) +
       (s.stall_seconds !== null ? "; the step paid " + seconds(s.stall_seconds) : "")) :
    el("span", "no snapshot written by this run yet"));
}
function row(cells) {
  const tr = el("tr");
  for (const c of cells) {
    if (c instanceof Node) { const td = el("td"); td.appendChild(c); tr.appendChild(td); }
    else tr.appendChild(el("td", c.text, c.cls));
  }
  return tr;
}
function render(state) {
  const job = state.job;
  document.getElementById("run_id").textContent = job.run_id;
  const facts = document.getElementById("facts");
  facts.replaceChildren(
    el("span", "backend " + job.backend),
    el("span", "round " + (job.round === null ? "not formed" : job.round)),
    el("span", "world size " + job.world_size),
    el("span", "nodes " + job.nodes.now + " (--nnodes " + job.nodes.min +
               (job.nodes.max !== job.nodes.min ? ":" + job.nodes.max : "") + ")"),
    el("span", "restarts " + job.restarts + " of " + job.max_restarts));
  const nodes = document.querySelector("#nodes tbody");
  const ranks = document.querySelector("#ranks tbody");
  const nodeRows = [], rankRows = [];
  for (const node of state.nodes) {
    if (!node.ranks) {
      nodeRows.push(row([{text: node.group_rank}, {text: ""}, {text: node.problem, cls: "state-stopping"},
                         {text: ""}, {text: ""}, {text: ""}]));
      continue;
    }
    nodeRows.push(row([{text: node.group_rank}, {text: node.host},
                       {text: node.alive ? "alive" : "stalled", cls: node.alive ? "state-running" : "state-failed"},
                       {text: ago(node.last_progress_unix)},
                       {text: node.node_check || "none (no --health-check)",
                        cls: node.node_check.startsWith("failed") ? "state-failed" : ""},
                       {text: node.ranks.length, cls: "num"}]));
    for (const r of node.ranks) {
      const points = (r.step_series || []).filter((v) => v !== null);
      const tr = row([{text: r.rank, cls: "num"}, {text: node.host}, {text: r.local_rank, cls: "num"},
                      {text: r.pid, cls: "num"}, {text: r.state, cls: "state-" + r.state},
                      {text: node.restarts, cls: "num"}, {text: r.steps, cls: "num steps"},
                      {text: seconds(r.step_interval_s), cls: "num"},
                      sparkline(points)]);
      if (r.straggler) tr.classList.add("straggler");
      tr.dataset.rank = r.rank;
      rankRows.push(tr);
    }
  }
  renderTraining(state.trainer);
  nodes.replaceChildren(...nodeRows);
  ranks.replaceChildren(...rankRows);
  const events = document.getElementById("events");
  events.replaceChildren(...state.events.slice().reverse().map((e) => {
    const when = new Date(e.time * 1000).toLocaleTimeString();
    const rest = Object.entries(e).filter(([k]) => !["time", "event", "node"].includes(k))
      .map(([k, v]) => k + "=" + (typeof v === "string" ? v : JSON.stringify(v))).join(" ");
    return el("div", when + " " + e.node + " " + e.event + (rest ? " " + rest : ""));
  }));
}
// Stacks: identical ones collapse into one group of ranks. What differs between two processes
// stopped at the same place is left out of the comparison: the capture's headers (tool command,
// process and thread ids) and addresses (each process has its own layout).
function normalized(text) {
  return text.split("\n").filter((line) => !/^\s*(####|Process |Python v|Thread |PID |TID )/.test(line))
    .map((line) => line.replace(/0x[0-9a-f]+/gi, "0x…")).join("\n").trim();
}
function rankList(ranks) {
  ranks.sort((a, b) => a - b);
  const parts = [];
  for (let i = 0; i < ranks.length;) {
    let j = i;
    while (j + 1 < ranks.length && ranks[j + 1] === ranks[j] + 1) j++;
    parts.push(j > i ? ranks[i] + "-" + ranks[j] : String(ranks[i]));
    i = j + 1;
  }
  return parts.join(",");
}
function renderStacks(state) {
  const status = document.getElementById("stacks-status");
  const button = document.getElementById("stacks-button");
  button.disabled = !state.enabled || state.phase === "capturing";
  if (!state.enabled) {
    status.textContent = "off: with a job secret, or DDPRUN_JOB_PAGE_STACKS=1, it captures every rank's stack";
    return;
  }
  status.textContent = state.phase === "capturing" ? "capturing (request " + state.request + ") ..." :
    state.phase === "failed" ? "failed: " + state.problem :
    state.phase === "done" ? "request " + state.request + ", " + new Date().toLocaleTimeString() : "";
  if (state.phase !== "done") return;
  const groups = new Map();
  const files = [];
  for (const node of state.nodes) {
    if (node.problem) { files.push("node " + node.group_rank + ": " + node.problem); continue; }
    files.push("node " + node.group_rank + " (" + node.host + "): " + (node.stacks_dir || "nothing captured"));
    for (const [rank, text] of Object.entries(node.stacks)) {
      const key = normalized(text);
      if (!groups.has(key)) groups.set(key, {text: text, ranks: []});
      groups.get(key).ranks.push(Number(rank));
    }
  }
  const out = [];
  for (const group of [...groups.values()].sort((a, b) => b.ranks.length - a.ranks.length)) {
    const div = el("div", undefined, "stack-group");
    div.appendChild(el("h3", "rank" + (group.ranks.length > 1 ? "s " : " ") + rankList(group.ranks) +
                             " (" + group.ranks.length + ")"));
    div.appendChild(el("pre", group.text));
    out.push(div);
  }
  const where = el("div", undefined, "stack-files");
  for (const line of files) where.appendChild(el("div", "written to " + line));
  out.push(where);
  document.getElementById("stacks").replaceChildren(...out);
}
async function stacks(method) {
  try {
    const reply = await fetch(api("api/stacks"), {method: method, cache: "no-store"});
    if (!reply.ok) throw new Error("HTTP " + reply.status);
    const state = await reply.json();
    renderStacks(state);
    if (state.phase === "capturing") setTimeout(() => stacks("GET"), 1000);
  } catch (error) {
    document.getElementById("stacks-status").textContent = "no answer from the agent (" + error.message + ")";
  }
}
document.getElementById("stacks-button").addEventListener("click", () => stacks("POST"));

async function poll() {
  const status = document.getElementById("status");
  try {
    const reply = await fetch(api("api/state"), {cache: "no-store"});
    if (!reply.ok) throw new Error("HTTP " + reply.status);
    render(await reply.json());
    status.textContent = "updated " + new Date().toLocaleTimeString();
  } catch (error) {
    status.textContent = "no answer from the agent (" + error.message + ")";
  }
  schedule();
}
let timer = null;
function schedule() {
  clearTimeout(timer);
  timer = document.visibilityState === "visible" ? setTimeout(poll, POLL_MS) : null;
}
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible" && timer === null) poll();
});
poll();
if (new URLSearchParams(location.search).get("press") === "stacks")
  document.getElementById("stacks-button").click();  // what a test presses
else
  stacks("GET");
</script>
</body>
</html>
)page";

}  // namespace

std::string_view job_page_html() {
  return kPage;
}

}  // namespace ddprun::agent
