// twinmatch view: draws the frames /api/stream sends (server-sent events). Plain
// JavaScript, no library, no build step: the page works offline.
"use strict";

const $ = (id) => document.getElementById(id);
const dollars = (p) => (p / 10000).toFixed(4);
const count = (n) => n.toLocaleString("en-US");
let symbol = new URLSearchParams(location.search).get("symbol") || "";
let source = null;
// Book change -> browser, ms (wall clock of the oldest change a frame carries, to the
// frame's arrival): kept for tests/test_view_browser.py, which reads it.
window.viewLatencies = [];
window.viewFrames = 0;

function cells(row, values) {
  row.replaceChildren(...values.map((v) => {
    const td = document.createElement("td");
    td.textContent = v;
    return td;
  }));
  return row;
}

function drawLadder(book) {
  const body = $("ladder").tBodies[0];
  const rows = [];
  const asks = book ? book.asks.slice().reverse() : [];
  asks.forEach((l, i) => {
    const tr = cells(document.createElement("tr"), ["", "", dollars(l[0]), count(l[1]),
                                                   count(l[2])]);
    tr.className = "ask" + (i === asks.length - 1 ? " touch" : "");
    rows.push(tr);
  });
  (book ? book.bids : []).forEach((l, i) => {
    const tr = cells(document.createElement("tr"), [count(l[2]), count(l[1]), dollars(l[0]),
                                                   "", ""]);
    tr.className = "bid" + (i === 0 ? " touch" : "");
    rows.push(tr);
  });
  body.replaceChildren(...rows);
  $("ladder-symbol").textContent = book ? book.symbol : "";
}

function clock(ns) {
  const s = Math.floor(ns / 1e9);
  const pad = (n, w) => String(n).padStart(w, "0");
  return `${pad(Math.floor(s / 3600), 2)}:${pad(Math.floor(s / 60) % 60, 2)}:` +
         `${pad(s % 60, 2)}.${pad(Math.floor(ns / 1e6) % 1000, 3)}`;
}

function drawTape(trades) {
  $("tape").tBodies[0].replaceChildren(...trades.map((t) => {
    const tr = cells(document.createElement("tr"), [clock(t.clock_ns), t.symbol, t.side,
                                                    count(t.qty), dollars(t.price)]);
    tr.className = t.side;
    return tr;
  }));
}

function drawActive(active, shown) {
  $("active").tBodies[0].replaceChildren(...active.map((a) => {
    const tr = cells(document.createElement("tr"), [a.symbol, count(a.messages)]);
    if (a.symbol === shown) tr.className = "chosen";
    tr.onclick = () => choose(a.symbol);
    return tr;
  }));
}

function drawHistogram(h) {
  const svg = $("histogram");
  if (!h.count) { svg.replaceChildren(); return; }
  $("hist-summary").textContent =
    `p50 ${count(h.p50)} ns, p99 ${count(h.p99)} ns, max ${count(h.max)} ns ` +
    `(${count(h.count)} slices)`;
  const top = Math.max(...h.buckets.map((b) => b[2]));
  const width = 300 / h.buckets.length;
  svg.replaceChildren(...h.buckets.map((b, i) => {
    const r = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    const height = 115 * b[2] / top;
    r.setAttribute("x", i * width);
    r.setAttribute("width", Math.max(width - 1, 1));
    r.setAttribute("y", 120 - height);
    r.setAttribute("height", height);
    const title = document.createElementNS("http://www.w3.org/2000/svg", "title");
    title.textContent = `${count(b[0])}..${count(b[1])} ns: ${count(b[2])}`;
    r.appendChild(title);
    return r;
  }));
}

function draw(frame) {
  const s = frame.stats;
  window.viewFrames += 1;
  if (frame.changed_ms > 0) window.viewLatencies.push(Date.now() - frame.changed_ms);
  $("file").textContent = `${s.file} (${s.impl}, ${s.mode}, speed ${s.speed || "max"})`;
  $("clock").textContent = s.clock;
  $("messages").textContent = count(s.messages);
  $("rate").textContent = count(Math.round(s.messages_per_s));
  $("fills").textContent = count(s.fills);
  $("progress").value = s.fraction === null ? (s.done ? 1 : 0) : s.fraction;
  $("state").textContent = s.error ? `error: ${s.error}` : s.done ? "replay done" :
                           "replaying";
  $("state").className = s.error ? "error" : s.done ? "done" : "";
  drawLadder(frame.book);
  drawTape(frame.trades);
  drawActive(s.active, frame.book ? frame.book.symbol : symbol);
  drawHistogram(s.histogram);
}

function connect() {
  if (source) source.close();
  const query = new URLSearchParams({ depth: "10" });
  if (symbol) query.set("symbol", symbol);
  source = new EventSource(`/api/stream?${query}`);
  source.onmessage = (e) => draw(JSON.parse(e.data));
  source.onerror = () => { $("state").textContent = "reconnecting"; };
}

function choose(name) {
  symbol = name;
  $("symbol").value = name;
  history.replaceState(null, "", `?symbol=${encodeURIComponent(name)}`);
  connect();
}

async function loadSymbols() {
  const r = await fetch("/api/symbols");
  const data = await r.json();
  $("symbols").replaceChildren(...data.symbols.map((s) => {
    const o = document.createElement("option");
    o.value = s.symbol;
    return o;
  }));
}

$("symbol").value = symbol;
$("symbol").addEventListener("change", (e) => choose(e.target.value.trim().toUpperCase()));
$("symbol").addEventListener("focus", loadSymbols);
connect();
