"""Assert the speed targets as ratios over one pytest-benchmark JSON run.

Usage: python scripts/targets.py out/bench.json [--markdown FILE] [--no-fail]

Each target compares two benchmarks measured in the same run (so machine noise and
clock speed cancel as far as they can). A ratio from one run is a claim about this
machine, not a law; the table says which run and machine it came from. Targets whose
benchmarks are absent from the JSON are reported as "not measured", not as passes.
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
    """``slow`` / ``fast`` >= minimum (or, with ``at_most``, <= maximum)."""

    issue: str
    key: str  # short name: the book includes the ratio as numbers.md:target-<key>
    claim: str
    group: str
    fast: tuple[str, ...]  # (workload, impl) selectors; the first present is used
    slow: tuple[str, ...]
    bound: float
    at_most: bool = False
    report_only: bool = False  # a measured ratio the book reports, with no target to meet
    metric: str = "median_per_op"  # or "cpp_ns_per_op" (timed inside C++)


TARGETS: tuple[Target, ...] = (
    Target(
        "chapter 1",
        "book-batch-vs-naive",
        "optimized batch >= 100x naive (realistic 1M-op stream)",
        "book",
        ("realistic/optimized-batch",),
        ("realistic/naive-call|realistic/naive-batch",),
        100.0,
    ),
    Target(
        "chapter 1",
        "book-call-vs-naive",
        "optimized per call >= 5x naive per call (realistic stream)",
        "book",
        ("realistic/optimized-call",),
        ("realistic/naive-call",),
        5.0,
    ),
    Target(
        "chapter 1",
        "book-vs-map",
        "optimized >= 3x std::map baseline (both batch, realistic stream)",
        "book",
        ("realistic/optimized-batch",),
        ("realistic/baseline-batch",),
        3.0,
    ),
    Target(
        "chapter 1",
        "book-depth-flat",
        "C++ add+cancel flat: 100,000 levels within 1.5x of 100 levels",
        "book-depth",
        ("depth100/optimized-cpp",),
        ("depth100000/optimized-cpp",),
        1.5,
        at_most=True,
        metric="cpp_ns_per_op",
    ),
    Target(
        "chapter 3",
        "itch-vs-naive",
        "ITCH decode: optimized >= 50x naive (generated day, in memory)",
        "itch",
        ("day/optimized",),
        ("day/naive",),
        50.0,
    ),
    Target(
        "chapter 3",
        "itch-vs-itchcpp",
        "ITCH decode: optimized >= 20x itchfeed's C++ backend",
        "itch",
        ("day/optimized",),
        ("day/itchcpp",),
        20.0,
    ),
    Target(
        "chapter 3",
        "itch-vs-read",
        "ITCH decode: optimized bytes/s >= 30% of a plain sequential read",
        "itch",
        ("day/optimized",),
        ("day/sum_bytes",),
        0.3,
    ),
    Target(
        "chapter 5",
        "replay-book-vs-naive",
        "replay book mode: optimized >= 50x naive (5M-message day, end to end)",
        "replay",
        ("book/optimized",),
        ("book/naive",),
        50.0,
    ),
    Target(
        "chapter 5",
        "replay-match-vs-naive",
        "replay match mode: optimized >= 50x naive (5M-message flow, end to end)",
        "replay",
        ("match/optimized",),
        ("match/naive",),
        50.0,
    ),
    Target(
        "chapter 6",
        "pipeline-vs-naive",
        "pipeline: optimized >= 50x the naive pipeline (order flow, fills CSV written)",
        "pipeline",
        ("match/optimized-pipeline",),
        ("match/naive-pipeline",),
        50.0,
    ),
    Target(
        "chapter 6",
        "pipeline-vs-single",
        "what pipelining gains on this machine: single-threaded time / pipeline time",
        "pipeline",
        ("match/optimized-pipeline",),
        ("match/optimized-single",),
        0.0,
        report_only=True,
    ),
)


def index(bench: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """'workload/impl' -> benchmark record."""
    out: dict[str, dict[str, Any]] = {}
    for b in bench["benchmarks"]:
        info = b.get("extra_info", {})
        if "workload" in info and "impl" in info:
            out[f"{info['workload']}/{info['impl']}"] = b
    return out


def per_op(b: dict[str, Any], metric: str) -> float:
    """Seconds per operation of one benchmark."""
    info = b.get("extra_info", {})
    if metric == "cpp_ns_per_op":
        return float(info["cpp_ns_per_op"]) * 1e-9
    return float(b["stats"]["median"]) / max(1, int(info.get("ops", 1)))


def pick(rows: dict[str, dict[str, Any]], selector: str, metric: str) -> tuple[str, float] | None:
    """The fastest present benchmark among 'a|b|c' alternatives."""
    found = [(key, per_op(rows[key], metric)) for key in selector.split("|") if key in rows]
    return min(found, key=lambda kv: kv[1]) if found else None


def evaluate(bench: dict[str, Any]) -> list[dict[str, Any]]:
    rows = index(bench)
    results: list[dict[str, Any]] = []
    for t in TARGETS:
        fast = pick(rows, t.fast[0], t.metric)
        slow = pick(rows, t.slow[0], t.metric)
        if fast is None or slow is None:
            results.append({"key": t.key, "claim": t.claim, "status": "not measured"})
            continue
        ratio = slow[1] / fast[1]
        ok = ratio <= t.bound if t.at_most else ratio >= t.bound
        status = "reported" if t.report_only else ("pass" if ok else "FAIL")
        results.append(
            {
                "issue": t.issue,
                "key": t.key,
                "claim": t.claim,
                "fast": fast[0],
                "slow": slow[0],
                "fast_s_per_op": fast[1],
                "slow_s_per_op": slow[1],
                "ratio": ratio,
                "bound": t.bound,
                "at_most": t.at_most,
                "status": status,
            }
        )
    return results


def fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def markdown(results: list[dict[str, Any]], bench: dict[str, Any]) -> str:
    m = bench.get("machine_info", {})
    m = bench.get("machine_info", {})
    tm = m.get("twinmatch")
    where = (
        machine.label(tm)
        if tm
        else f"{m.get('cpu', {}).get('brand_raw', '?')}, Python {m.get('python_version', '?')}"
    )
    lines = [
        f"Ratios measured in one run ({bench.get('datetime', '?')[:19]}) on {where}. "
        "A ratio from one run is a claim about this machine, not a law.",
        "",
        "| target | measured | per op (fast / slow) | status |",
        "|---|---|---|---|",
    ]
    for r in results:
        if r["status"] == "not measured":
            lines.append(f"| {r['claim']} | not measured | | |")
            continue
        bound = ("<= " if r["at_most"] else ">= ") + f"{r['bound']:g}x"
        need = "no target" if r["status"] == "reported" else f"need {bound}"
        lines.append(
            f"| {r['claim']} | {r['ratio']:.2f}x ({need}) | "
            f"{fmt_time(r['fast_s_per_op'])} / {fmt_time(r['slow_s_per_op'])} | {r['status']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("bench", type=Path)
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--no-fail", action="store_true", help="report only, exit 0")
    args = parser.parse_args(argv)
    bench = json.loads(args.bench.read_text())
    results = evaluate(bench)
    table = markdown(results, bench)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    failed = [r for r in results if r["status"] == "FAIL"]
    return 1 if failed and not args.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
