// The /ui page: one self-contained HTML document (no build step, nothing fetched but this admin port's
// /rules, /top and /explain). It polls /top and the RLQS buckets in use (/rules?only=rlqs) every second and
// keeps the last few minutes of /top in the page.
// Its policy (UI_HEADERS) lets only its own style and script run (by their hashes), fetch only its own
// origin, and be framed by no one.
import { createHash } from "node:crypto";

// Hashed as the page holds them (UI_HEADERS): the text between the tags, exactly.
const STYLE = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; } td, th { padding: 2px 10px; text-align: left; border-bottom: 1px solid #ddd; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.chosen { background: #fff3c4; } tr[data-rule] { cursor: pointer; }
svg polyline { fill: none; stroke-width: 1.5; } .refused { stroke: #c0392b; } .clients { stroke: #2874a6; }
.muted { color: #888; } .refused-key { color: #c0392b; } .clients-key { color: #2874a6; } pre { background: #f6f6f6; padding: 8px; white-space: pre-wrap; }
`;

const SCRIPT = `
"use strict";
const HISTORY = 300;
const history = new Map();
let chosen;
const $ = (id) => document.getElementById(id);
function cell(tr, text, cls) { const td = tr.insertCell(); td.textContent = text; if (cls) td.className = cls; return td; }
function key(r) { return r.domain + "\\u0000" + r.rule + "\\u0000" + r.limit; }
function spark(points) {
  const w = 160, h = 28, max = Math.max(1, ...points.flatMap((p) => [p[0], p[1]]));
  const line = (i) => points.map((p, x) => (x * w / Math.max(1, HISTORY - 1)).toFixed(1) + "," + (h - p[i] * h / max).toFixed(1)).join(" ");
  const ns = "http://www.w3.org/2000/svg", svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", w); svg.setAttribute("height", h);
  for (const [i, cls] of [[0, "refused"], [1, "clients"]]) {
    const pl = document.createElementNS(ns, "polyline"); pl.setAttribute("points", line(i)); pl.setAttribute("class", cls); svg.appendChild(pl);
  }
  return svg;
}
async function getJson(path) {
  const r = await fetch(path);
  if (!r.ok) { const said = await r.json().catch(() => ({})); throw new Error(said.error ?? path + ": " + r.status); }
  return r.json();
}
async function refresh() {
  const window = $("window").value;
  try {
    const top = await getJson("/top?n=0&window=" + window);
    const body = $("refusals").tBodies[0];
    body.replaceChildren();
    for (const r of top.rules) {
      const k = key(r);
      const h = history.get(k) ?? [];
      h.push([r.refused, r.refused_clients]);
      if (h.length > HISTORY) h.shift();
      history.set(k, h);
      const tr = body.insertRow();
      tr.dataset.rule = r.rule; tr.dataset.domain = r.domain;
      if (chosen && chosen.rule === r.rule && chosen.domain === r.domain) tr.className = "chosen";
      cell(tr, r.domain); cell(tr, r.rule); cell(tr, r.limit);
      cell(tr, r.refused, "num refused-count"); cell(tr, r.refused_clients, "num clients-count");
      tr.insertCell().appendChild(spark(h));
      tr.onclick = () => { chosen = { domain: r.domain, rule: r.rule }; refresh(); };
    }
    $("none").hidden = top.rules.length > 0;
    if (!chosen && top.rules.length > 0) chosen = { domain: top.rules[0].domain, rule: top.rules[0].rule };
    const tbody = $("top").tBodies[0];
    if (chosen) {
      const one = await getJson("/top?n=10&window=" + window + "&domain=" + encodeURIComponent(chosen.domain) + "&rule=" + encodeURIComponent(chosen.rule));
      $("chosen").textContent = chosen.rule;
      tbody.replaceChildren();
      for (const r of one.rules) for (const c of r.top) { const tr = tbody.insertRow(); cell(tr, c.client); cell(tr, c.refused, "num"); }
    }
    $("status").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (err) {
    $("status").textContent = "cannot read /top: " + err.message;
  }
}
function addRules(body, domain, list) {
  for (const d of list) {
    const tr = body.insertRow(); tr.dataset.path = d.path;
    cell(tr, domain); cell(tr, d.path);
    cell(tr, d.limits.map((l) => l.unlimited ? "unlimited" : l.requests_per_unit + "/" + l.unit + (l.algorithm ? " " + l.algorithm : "")).join("; "));
    cell(tr, d.source.file.split("/").pop() + ":" + d.source.line);
    addRules(body, domain, d.descriptors ?? []);
  }
}
async function loadRules() {
  const rules = await getJson("/rules");
  const body = $("rules").tBodies[0];
  body.replaceChildren();
  for (const [domain, d] of Object.entries(rules.domains)) addRules(body, domain, d.descriptors);
}
$("explain").onsubmit = async (e) => {
  e.preventDefault();
  const f = new FormData(e.target), q = new URLSearchParams({ domain: f.get("domain") });
  for (const line of String(f.get("descriptors")).split("\\n")) if (line.trim()) q.append("descriptor", line.trim());
  const r = await fetch("/explain?" + q);
  $("explained").textContent = await r.text();
};
function bucketText(b) { return Object.entries(b.bucket).map(([k, v]) => k + "=" + v).join(","); }
async function refreshRlqs() {
  try {
    const rlqs = (await getJson("/rules?only=rlqs")).rlqs ?? { buckets_total: 0, buckets: [] };
    const body = $("rlqs").tBodies[0];
    body.replaceChildren();
    for (const b of rlqs.buckets) {
      const tr = body.insertRow();
      tr.dataset.domain = b.domain; tr.dataset.bucket = bucketText(b);
      cell(tr, b.domain); cell(tr, bucketText(b)); cell(tr, String(b.demand), "num demand");
      cell(tr, b.assignment, "assignment");
      const none = b.assignment === "none";
      cell(tr, none ? "-" : b.ttl_seconds + " s", "num ttl"); cell(tr, none ? "-" : (b.remaining_ms / 1000).toFixed(1) + " s", "num remaining");
    }
    $("rlqs-none").hidden = rlqs.buckets_total > 0;
    $("rlqs-total").textContent = rlqs.buckets_total > rlqs.buckets.length ? rlqs.buckets.length + " of " + rlqs.buckets_total + " shown" : "";
  } catch (err) {
    $("rlqs-total").textContent = "cannot read /rules?only=rlqs: " + err.message;
  }
}
$("window").onchange = () => { history.clear(); refresh(); };
loadRules().catch((err) => { $("status").textContent = "cannot read /rules: " + err.message; });
refresh();
refreshRlqs();
setInterval(refresh, 1000);
setInterval(refreshRlqs, 1000);
setInterval(() => loadRules().catch(() => {}), 30000);
`;

export const UI_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>sluice: who is being limited</title>
<style>${STYLE}</style>
</head>
<body>
<h1>sluice: who is being limited</h1>
<p class="muted">Window <select id="window"><option>1m</option><option>1h</option></select>
 refreshed every second; <span id="status">loading</span>.
 Lines: <span class="refused-key">refusals</span>, <span class="clients-key">distinct refused clients</span>.</p>
<h2>Refusals by rule</h2>
<table id="refusals"><thead><tr><th>domain</th><th>rule</th><th>limit</th><th class="num">refused</th><th class="num">refused clients</th><th>over time</th></tr></thead><tbody></tbody></table>
<p id="none" class="muted">No refusals in this window.</p>
<h2>Top refused clients of <span id="chosen">(choose a rule above)</span></h2>
<table id="top"><thead><tr><th>client</th><th class="num">refused</th></tr></thead><tbody></tbody></table>
<h2>RLQS buckets in use</h2>
<p class="muted">Envoy's rate_limit_quota filter: each bucket's demand (requests a second, allowed and denied, in its last report),
 the assignment in force (a lease of a rate or of a number of units, DENY_ALL, ALLOW_ALL), the time to live it was sent with
 and what is left of it. <span id="rlqs-total"></span></p>
<table id="rlqs"><thead><tr><th>domain</th><th>bucket</th><th class="num">demand /s</th><th>assignment</th><th class="num">TTL</th><th class="num">left</th></tr></thead><tbody></tbody></table>
<p id="rlqs-none" class="muted">No RLQS buckets in use.</p>
<h2>Explain</h2>
<form id="explain">domain <input name="domain" value="edge" size="12">
 descriptors, one per line (k=v,k=v) <textarea name="descriptors" rows="2" cols="40">remote_address=203.0.113.7</textarea>
 <button>explain</button></form>
<pre id="explained"></pre>
<h2>Rules in force</h2>
<table id="rules"><thead><tr><th>domain</th><th>rule</th><th>limits</th><th>source</th></tr></thead><tbody></tbody></table>
<script>${SCRIPT}</script>
</body>
</html>
`;

const sha256 = (text: string) => `'sha256-${createHash("sha256").update(text).digest("base64")}'`;

export const UI_HEADERS = {
  "content-security-policy": [
    "default-src 'none'",
    `script-src ${sha256(SCRIPT)}`,
    `style-src ${sha256(STYLE)}`,
    "connect-src 'self'",
    "img-src 'self'",
    "form-action 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join("; "),
};
