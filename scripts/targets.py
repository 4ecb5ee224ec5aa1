"""Assert the speed targets over one pytest-benchmark JSON run.

Usage: python scripts/targets.py out/bench.json [more.json ...] [--markdown FILE] [--no-fail]
       [--only KEY,KEY]

Every ratio target is measured **paired** (tests/bench/paired.py): the two sides' rounds
interleaved in one process (A B A B ..., at least 11 pairs, after a warm-up), the target
judged on the median of the per-pair ratios, and the table printing that median with its
interquartile range. A drift of the machine moves both halves of a pair together. A few
targets are bounds on one measured value (peak memory), recorded by the benchmark as
``extra_info["measure"]``. A ratio from one run is a claim about this machine, not a law;
the table says which run and machine it came from. Targets whose records are absent from
the JSON are reported as "not measured", not as passes. Never re-run looking for a pass.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402 - scripts/ is not a package


@dataclass(frozen=True)
class Target:
    """A paired ratio (slow / fast per op, median over pairs) >= bound (<= with at_most).

    ``kind="value"`` targets bound one measured value instead (``unit`` says what it is).
    ``key`` names the benchmark record (extra_info["paired"]["key"] or
    extra_info["measure"]["key"]); the book includes the result as numbers.md:target-<key>.
    """

    issue: str
    key: str
    claim: str
    group: str
    bound: float
    at_most: bool = False
    report_only: bool = False  # a measured ratio the book reports, with no target to meet
    kind: str = "ratio"  # or "value"
    unit: str = ""
    # A bound on the ratio of CPU times too (the paired record's cpu_median): for a side
    # that runs several threads, whose wall-clock lead may be only the second core.
    cpu_bound: float | None = None


# Chapter 14 (group "tables", tests/bench/test_bench_tables.py): research files vs itch-book.
TABLES_TARGETS: tuple[Target, ...] = (
    Target("chapter 14", "tables-day-vs-itchbook",
           "ITCH day to bbo + trades Parquet: optimized >= 1.5x itch-book's itch2parquet "
           "by the wall clock and using no more CPU time (>= 1.0x in CPU seconds; 1M "
           "messages, 500 symbols, same file, each tool's command line)", "tables", 1.5,
           cpu_bound=1.0),
    Target("chapter 14", "tables-day20m-vs-itchbook",
           "the same on the 20M-message, 4,000-symbol day (opt-in: make bench-tables-day)",
           "tables", 1.5, cpu_bound=1.0),
    Target("chapter 14", "tables-builder-lookahead",
           "the table builder alone, 20M-message day: look-ahead off / on (opt-in: make "
           "bench-tables-day)", "tables", 0.0, report_only=True),
    Target("chapter 14", "tables-lobster-vs-itchbook",
           "LOBSTER export, 3 busiest symbols at 10 levels: itch-book's time / ours", "tables",
           0.0, report_only=True),
    Target("chapter 14", "tables-day-rss",
           "bbo + trades conversion of the 1M-message day: peak RSS of twinmatch tables",
           "tables", 0.0, report_only=True, kind="value", unit="MB"),
    Target("chapter 14", "tables-day-rss-itchbook",
           "the same conversion: peak RSS of itch2parquet convert", "tables", 0.0,
           report_only=True, kind="value", unit="MB"),
)

TARGETS: tuple[Target, ...] = (
    Target("chapter 1", "book-batch-vs-naive",
           "optimized batch >= 100x naive, the faster of its two modes (realistic 1M-op stream)",
           "book", 100.0),
    Target("chapter 1", "book-call-vs-naive",
           "optimized per call >= 5x naive per call (realistic stream)", "book", 5.0),
    Target("chapter 1", "book-vs-map",
           "optimized >= 3x std::map baseline (both batch, realistic stream)", "book", 3.0),
    Target("chapter 1", "book-depth-flat",
           "C++ add+cancel flat: 100,000 levels within 1.5x of 100 levels (timed in C++)",
           "book-depth", 1.5, at_most=True),
    Target("chapter 3", "itch-vs-naive",
           "ITCH decode: optimized >= 50x naive (1M-message day, in memory)", "itch", 50.0),
    Target("chapter 3", "itch-vs-itchcpp",
           "ITCH decode: optimized >= 20x itchfeed's C++ backend (1M-message day)", "itch", 20.0),
    Target("chapter 3", "itch-vs-read",
           "ITCH decode: optimized bytes/s >= 30% of a plain sequential read", "itch", 0.3),
    Target("chapter 5", "replay-book-vs-naive",
           "replay book mode: optimized >= 50x naive (1M-message day, end to end)", "replay",
           50.0),
    Target("chapter 5", "replay-match-vs-naive",
           "replay match mode: optimized >= 50x naive (1M-message flow, end to end)", "replay",
           50.0),
    Target("chapter 5", "engine-day5m-vs-itchbook",
           "book mode: optimized >= 2.0x itch-book (5M messages, 500 symbols, same file)",
           "engine", 2.0),
    Target("chapter 5", "engine-day20m-vs-itchbook",
           "book mode: optimized >= 3.0x itch-book (20M messages, 4,000 symbols, same file)",
           "engine", 3.0),
    Target("chapter 5", "engine-growth",
           "book mode: ns/message at 4,000 symbols within 1.25x of 500 symbols", "engine",
           1.25, at_most=True),
    Target("chapter 5", "engine-match-vs-capped",
           "match mode: optimized within 1.5x of the capped flat-array reference "
           "(uniform 1M-add file)", "engine", 1.5, at_most=True),
    Target("chapter 5", "engine-pipeline-vs-replay",
           "match mode, whole run with the fills CSV written: replay --pipeline >= 1.3x "
           "the single-threaded replay (uniform 1M-add file)", "engine", 1.3),
    Target("chapter 5", "engine-65536-books-rss",
           "65,536 one-order books: peak RSS of the process within 200 MB", "engine", 200.0,
           at_most=True, kind="value", unit="MB"),
    Target("chapter 5", "engine-65536-books-4-rss",
           "65,536 books of 4 orders each: peak RSS of the process", "engine", 0.0,
           report_only=True, kind="value", unit="MB"),
    Target("chapter 5", "engine-full-day-rss",
           "full-size day (270M messages) in book mode: peak RSS under 2 GB (make bench-day)",
           "engine-day", 2048.0, at_most=True, kind="value", unit="MB"),
    Target("chapter 6", "pipeline-vs-naive",
           "pipeline: optimized >= 50x the naive pipeline (order flow, fills CSV written)",
           "pipeline", 50.0),
    Target("chapter 6", "pipeline-vs-single",
           "what pipelining gains on this machine: single-threaded time / pipeline time",
           "pipeline", 0.0, report_only=True),
    *(  # chapter 9 (tests/bench/test_bench_columns.py)
        Target("chapter 9", "simd-numpy-vs-naive",
               "filter: numpy columns >= 20x the naive record loop (generated day)",
               "simd", 20.0),
        Target("chapter 9", "simd-vs-aos",
               "filter: C++ SIMD over columns >= 2x C++ scalar over the records (same day)",
               "simd", 2.0),
        Target("chapter 9", "simd-vs-read",
               "filter: SIMD rows/s as a share of a sequential read of the same column bytes",
               "simd", 0.0, report_only=True),
    ),
    *TABLES_TARGETS,
    Target("chapter 13", "live-feed-backlog-vs-naive",
           "live feed: optimized receiver (recvmmsg 64) >= 5x the naive one in messages/s, "
           "each draining the same socket backlog the native sender left", "live_feed", 5.0),
    Target("chapter 13", "live-feed-batch64-vs-1",
           "live feed: recvmmsg batch 64 >= 2x batch 1 in messages/s (optimized receiver, "
           "same backlog)", "live_feed", 2.0),
    Target("chapter 15", "tick-to-trade-p50",
           "tick to trade: optimized p50 <= 10 us on loopback (kernel receive of the "
           "datagram -> send of the order returned; the open of an intraday day at speed 1)",
           "tick_to_trade", 10.0, at_most=True, kind="value", unit="us"),
    Target("chapter 15", "tick-to-trade-user-p50",
           "tick to trade: the optimized user-space part (read returned -> order encoded) "
           "p50 <= 1 us (one stamp's cost subtracted per span)", "tick_to_trade", 1.0,
           at_most=True, kind="value", unit="us"),
    Target("chapter 15", "tick-to-trade-vs-naive",
           "tick to trade: optimized >= 20x the naive loop in p50 (naive p50 / optimized "
           "p50, the open at real time, interleaved runs)", "tick_to_trade", 20.0),
    Target("chapter 15", "tick-to-trade-naive-user-p50",
           "tick to trade: the naive twin's user-space part (read returned -> order "
           "encoded) p50, beside the optimized one's", "tick_to_trade", 0.0,
           report_only=True, kind="value", unit="us"),
    Target("chapter 15", "socket-to-book-p50-recvmmsg",
           "socket to book: p50 <= 2 us for the optimized trader reading by recvmmsg "
           "(batch 64; every datagram of the open at real time, kernel receive -> its "
           "messages in the book)", "tick_to_trade", 2.0, at_most=True, kind="value",
           unit="us"),
    Target("chapter 15", "socket-to-book-p50-io-uring",
           "socket to book: the same p50 reading by io_uring (64 queued receives), reported",
           "tick_to_trade", 0.0, report_only=True, kind="value", unit="us"),
    Target("chapter 15", "trade-recvmmsg64-vs-recvmsg",
           "receive paths: recvmmsg (batch 64) >= 2x recvmsg (one per call) in messages/s, "
           "draining the same backlog (the trader, strategy idle)", "tick_to_trade", 2.0),
    Target("chapter 15", "trade-io-uring-vs-recvmsg",
           "receive paths: io_uring (64 queued receives) vs recvmsg in messages/s, the same "
           "backlog (reported: whatever it shows)", "tick_to_trade", 0.0, report_only=True),
    Target("chapter 12", "order-entry-vs-naive",
           "order entry: optimized server >= 5x the naive one in acks/s at saturation "
           "(closed loop, 4 sessions x 32 outstanding, the same native load client)",
           "order_entry", 5.0),
    Target("chapter 12", "order-entry-witness-p99-under-flood",
           "order entry: a witness session's ack p99 <= 2 ms while another session floods "
           "the optimized server (open loop, 1,000/s, native client)", "order_entry",
           2000.0, at_most=True, kind="value", unit="us"),
)


def _layout_targets() -> tuple[Target, ...]:
    """Chapter 8's paired ratios (tests/bench/test_bench_layouts.py): reported, with no
    bound to meet: the chapter's claim is that the ranking depends on the workload."""
    rows = (("layouts-window-vs-map-uniform", "window + bitset vs std::map, uniform prices"),
            ("layouts-window-vs-map-realistic", "window + bitset vs std::map, realistic flow"),
            ("layouts-capped-vs-window-uniform",
             "capped arrays vs window + bitset (any price, any id), uniform prices"),
            ("layouts-capped-vs-window-realistic",
             "capped arrays vs window + bitset (any price, any id), realistic flow"))
    return tuple(Target("chapter 8", key, f"layouts: {claim} (slow / fast per op)", "layouts",
                        0.0, report_only=True) for key, claim in rows)


TARGETS = TARGETS + _layout_targets()


def records(bench: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(paired records by key, measured values by key) of one run."""
    paired: dict[str, dict[str, Any]] = {}
    values: dict[str, dict[str, Any]] = {}
    for b in bench.get("benchmarks", []):
        info = b.get("extra_info") or {}
        if isinstance(info.get("paired"), dict):
            paired[str(info["paired"]["key"])] = info["paired"]
        for name, m in info.items():  # "measure", and "measure_<more>" for a second value
            if name.startswith("measure") and isinstance(m, dict) and "key" in m:
                values[str(m["key"])] = m
    return paired, values


def evaluate(bench: dict[str, Any]) -> list[dict[str, Any]]:
    paired, values = records(bench)
    results: list[dict[str, Any]] = []
    for t in TARGETS:
        base = {"issue": t.issue, "key": t.key, "claim": t.claim, "kind": t.kind,
                "bound": t.bound, "at_most": t.at_most, "unit": t.unit}
        if t.kind == "value":
            m = values.get(t.key)
            if m is None:
                results.append({**base, "status": "not measured"})
                continue
            value = float(m["value"])
            ok = value <= t.bound if t.at_most else value >= t.bound
            status = "reported" if t.report_only else ("pass" if ok else "FAIL")
            results.append({**base, "value": value, "detail": str(m.get("detail", "")),
                            "status": status})
            continue
        p = paired.get(t.key)
        if p is None:
            results.append({**base, "status": "not measured"})
            continue
        ratio = float(p["median"])
        ok = ratio <= t.bound if t.at_most else ratio >= t.bound
        cpu: dict[str, Any] = {}
        if "cpu_median" in p:
            cpu = {"cpu_ratio": float(p["cpu_median"]), "cpu_q1": float(p["cpu_q1"]),
                   "cpu_q3": float(p["cpu_q3"])}
        if t.cpu_bound is not None:
            cpu["cpu_bound"] = t.cpu_bound
            # No CPU figure in the record (a run from before they were kept): not a pass.
            ok = ok and "cpu_ratio" in cpu and cpu["cpu_ratio"] >= t.cpu_bound
        status = "reported" if t.report_only else ("pass" if ok else "FAIL")
        results.append({**base, **cpu, "fast": p["fast"], "slow": p["slow"],
                        "valgrind": p.get("valgrind"),
                        "fast_s_per_op": float(p["fast_s_per_op"]),
                        "slow_s_per_op": float(p["slow_s_per_op"]),
                        "ratio": ratio, "q1": float(p["q1"]), "q3": float(p["q3"]),
                        "pairs": int(p["pairs"]), "status": status})
    return results


def merge(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several JSON runs as one (make bench-day writes its own): benchmarks concatenated,
    machine and date of the first run."""
    out = dict(runs[0])
    out["benchmarks"] = [b for r in runs for b in r.get("benchmarks", [])]
    return out


def fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def describe(r: dict[str, Any]) -> tuple[str, str]:
    """(measured, detail) cells of one result: the median ratio with its IQR, or a value."""
    bound = ("<= " if r["at_most"] else ">= ") + f"{r['bound']:g}"
    if r["kind"] == "value":
        need = "no target" if r["status"] == "reported" else f"need {bound} {r['unit']}"
        return (f"{r['value']:.0f} {r['unit']} ({need})", r.get("detail", ""))
    need = "no target" if r["status"] == "reported" else f"need {bound}x"
    detail = (f"{r['pairs']} pairs; per op {fmt_time(r['fast_s_per_op'])} / "
              f"{fmt_time(r['slow_s_per_op'])} ({r['fast']} / {r['slow']})")
    if r.get("valgrind"):
        detail += "; " + counts_text(r["valgrind"])
    measured = f"{r['ratio']:.2f}x (IQR {r['q1']:.2f}-{r['q3']:.2f}; {need})"
    cpu = cpu_text(r)
    return (measured + (f"; {cpu}" if cpu else ""), detail)


def cpu_text(r: dict[str, Any]) -> str:
    """The CPU-time ratio beside the wall-clock one, where the record has it."""
    need = f"; need >= {r['cpu_bound']:g}x" if r.get("cpu_bound") is not None else ""
    if "cpu_ratio" not in r:
        return f"CPU time not measured in this run{need}" if need else ""
    return f"CPU time {r['cpu_ratio']:.2f}x (IQR {r['cpu_q1']:.2f}-{r['cpu_q3']:.2f}{need})"


def counts_text(v: dict[str, dict[str, float]]) -> str:
    """Cachegrind's per-op counts of both sides (deterministic; simulated caches)."""
    f, s = v["fast"], v["slow"]
    return (f"cachegrind per op (fast / slow): {f['Ir']:.0f} / {s['Ir']:.0f} instructions, "
            f"{f['D1']:.2f} / {s['D1']:.2f} D1 misses, {f['LL']:.2f} / {s['LL']:.2f} LL misses")


def markdown(results: list[dict[str, Any]], bench: dict[str, Any]) -> str:
    m = bench.get("machine_info", {})
    tm = m.get("twinmatch")
    where = (
        machine.label(tm)
        if tm
        else f"{m.get('cpu', {}).get('brand_raw', '?')}, Python {m.get('python_version', '?')}"
    )
    lines = [
        f"Ratios measured in one run ({bench.get('datetime', '?')[:19]}) on {where}, each "
        "the median of per-pair ratios (the two sides interleaved in one process), with its "
        "interquartile range. A ratio from one run is a claim about this machine, not a law.",
        "",
        "| target | measured (median, IQR) | pairs, median per op (fast / slow) | status |",
        "|---|---|---|---|",
    ]
    for r in results:
        if r["status"] == "not measured":
            lines.append(f"| {r['claim']} | not measured | | |")
            continue
        measured, detail = describe(r)
        lines.append(f"| {r['claim']} | {measured} | {detail} | {r['status']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("bench", type=Path, nargs="+", help="pytest-benchmark JSON file(s)")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--no-fail", action="store_true", help="report only, exit 0")
    parser.add_argument("--only", help="comma-separated target keys: judge only these")
    args = parser.parse_args(argv)
    bench = merge([json.loads(p.read_text()) for p in args.bench])
    results = evaluate(bench)
    if args.only:
        keep = set(args.only.split(","))
        unknown = keep - {t.key for t in TARGETS}
        if unknown:
            parser.error(f"unknown target key(s): {', '.join(sorted(unknown))}")
        results = [r for r in results if r["key"] in keep]
    table = markdown(results, bench)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    failed = [r for r in results if r["status"] == "FAIL"]
    return 1 if failed and not args.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
