"""Chapter 15's generated tables (group "tick_to_trade"), for scripts/figures.py.

* ``tick-to-trade-budget-table.md``: one table per run of ``test_budget`` (twin, busy-poll
  or not, speed): the spans of twinmatch/trade_cli.py's budget, p50/p99/p99.9 in µs.
* ``tick-to-trade-paths-table.md``: one row per ``test_paths`` run (receive path, batch,
  speed): messages, drops, recovered, lost, socket-to-book p50/p99/p99.9, messages/s,
  CPU per message.
* numbers ``t2t-<twin>-<speed>-<span>-p50`` and friends, for prose.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

GROUP = "tick_to_trade"
SPAN_KEYS = {"kernel -> user": "wake", "user -> decoded": "decode",
             "decoded -> book": "book", "applied -> decided": "decide",
             "encoded -> send": "send", "send -> server": "server",
             "server stamped": "ack", "user space": "user", "tick to trade": "t2t",
             "order round trip": "roundtrip"}


def _key(span: str) -> str:
    return next(v for k, v in SPAN_KEYS.items() if span.startswith(k))


# A percentile is shown only where at least this many samples lie beyond it (chapter 8's
# rule, scripts/figures.py TAIL_SAMPLES): over 431 orders a p99.9 is the largest one.
TAIL_SAMPLES = 10


def _tail(row: dict[str, Any], key: str) -> object:
    """row[key], or None when the row's count ``n`` is too small for that percentile."""
    n = row.get("n")
    q = {"p50": 0.5, "p99": 0.99, "p99.9": 0.999}[key]
    if isinstance(n, int) and n * (1 - q) < TAIL_SAMPLES:
        return None
    return row.get(key)


def _us(ns: object) -> str:
    if not isinstance(ns, int | float):
        return "—"
    us = float(ns) / 1e3
    return f"{us:,.2f}" if abs(us) < 10 else f"{us:,.1f}"


def _runs(data: dict[str, Any], field: str) -> list[dict[str, Any]]:
    out = []
    for raw in data.get("benchmarks", []):
        info = raw.get("extra_info") or {}
        if raw.get("group") == GROUP and isinstance(info.get(field), dict):
            out.append({"name": str(raw.get("name", "")), "params": raw.get("params") or {},
                        **info})
    return out


def _run_name(r: dict[str, Any]) -> str:
    p = r["params"]
    who = p.get("impl", p.get("path", "?"))
    if r.get("spin"):
        who = f"{who} (busy-poll)"
    if "batch" in p and p.get("path") == "recvmmsg":
        who = f"{who} batch {p['batch']}"
    speed = float(r.get("speed", 0))
    return f"{who}, {'flat out' if speed == 0 else f'speed {speed:g}'}"


def budget_html(runs: list[dict[str, Any]], label: str) -> str:
    e = html.escape
    lines = ['<div class="tm-bench" data-group="tick_to_trade-budget">']
    for r in runs:
        t = r["trade"]
        lines += ["<table>",
                  f"<caption>{e(_run_name(r))}: {t['orders']:,} orders from "
                  f"{t['messages']:,} messages; one stamp's cost ({t['stamp_cost_ns']} ns) "
                  "subtracted from each user-space span (µs)</caption>",
                  "<thead><tr><th>span</th><th>p50</th><th>p99</th><th>p99.9</th></tr>"
                  "</thead>", "<tbody>"]
        for row in t["budget"]:
            lines.append(f'<tr><th scope="row">{e(row["span"])}</th>'
                         + "".join(f"<td>{_us(_tail(row, k))}</td>"
                                   for k in ("p50", "p99", "p99.9")) + "</tr>")
        lines.append("</tbody></table>")
    notes = [e(text) for text in dict.fromkeys(str(r.get("includes", "")) for r in runs)]
    notes.append(f"A percentile with fewer than {TAIL_SAMPLES} orders beyond it is not "
                 "shown (—): it would be one of the few largest samples, not a tail.")
    notes.append(f"Measured on: {e(label)}")
    lines += ['<p class="tm-bench-note">' + "<br>".join(notes) + "</p>", "</div>", ""]
    return "\n".join(lines)


def paths_html(runs: list[dict[str, Any]], label: str) -> str:
    e = html.escape
    lines = ['<div class="tm-bench" data-group="tick_to_trade-paths">', "<table>",
             "<caption>The optimized trader by receive path: messages, the receiver's "
             "drops (gap messages), recovered by re-request, lost, socket-to-book per "
             "datagram (µs), messages/s over the run, CPU per message (ns, the trader's "
             "thread)</caption>",
             "<thead><tr><th>run</th><th>messages</th><th>drops</th><th>recovered</th>"
             "<th>lost</th><th>socket→book p50 / p99 / p99.9</th><th>messages/s</th>"
             "<th>CPU ns/message</th></tr></thead>", "<tbody>"]
    for r in runs:
        f = r["paths"]
        s2b = f.get("socket_to_book_ns", {})
        lines.append(
            f'<tr><th scope="row">{e(_run_name(r))}</th><td>{f["messages"]:,}</td>'
            f"<td>{f['gap_messages']:,}</td><td>{f['recovered']:,}</td><td>{f['lost']:,}</td>"
            f"<td>{' / '.join(_us(s2b.get(k)) for k in ('p50', 'p99', 'p99.9'))}</td>"
            f"<td>{f['messages_per_s']:,.0f}</td><td>{f['cpu_ns_per_message']:,.0f}</td></tr>")
    lines.append("</tbody></table>")
    notes = [e(text) for text in dict.fromkeys(str(r.get("includes", "")) for r in runs)]
    notes.append(f"Measured on: {e(label)}")
    lines += ['<p class="tm-bench-note">' + "<br>".join(notes) + "</p>", "</div>", ""]
    return "\n".join(lines)


def trade_numbers(runs: list[dict[str, Any]]) -> dict[str, str]:
    """t2t-<twin>[-spin]-s<speed>-<span>-<p50|p99|p999> in µs (speed 1: s1, 10: s10,
    flat out: s0); t2t-...-orders."""
    out: dict[str, str] = {}
    for r in runs:
        p = r["params"]
        who = str(p.get("impl", "x")) + ("-spin" if r.get("spin") else "")
        stem = f"t2t-{who}-s{re.sub(r'[^0-9]', '', format(float(r.get('speed', 0)), 'g'))}"
        out[f"{stem}-orders"] = f"{r['trade']['orders']:,}"
        for row in r["trade"]["budget"]:
            for k, name in (("p50", "p50"), ("p99", "p99"), ("p99.9", "p999")):
                out[f"{stem}-{_key(row['span'])}-{name}"] = _us(_tail(row, k))
    return out


def trade_figures(data: dict[str, Any], label: str, write: Callable[[str, str], None],
                  numbers: dict[str, str]) -> None:
    budgets = _runs(data, "trade")
    if budgets:
        write("tick-to-trade-budget-table.md", budget_html(budgets, label))
        numbers.update(trade_numbers(budgets))
    paths = _runs(data, "paths")
    if paths:
        write("tick-to-trade-paths-table.md", paths_html(paths, label))
