"""``twinmatch replay --pipeline``: a raw or gzip ITCH file through one twin's pipeline,
reported like a feed handler's latency report (harness, not a twin).

What each number includes:

* ``seconds`` / ``messages_per_s``: wall time of ``Pipeline.run`` from the first thread
  starting to the last fill written -- parse + match + log, all stages overlapping. It
  excludes reading the file into memory, or for the optimized twin mapping a raw file
  (timed separately as ``load_seconds``).
* ``parse``: per event, from the moment the parser was free to start its record (the
  previous record's parsed stamp; in the fused placement, the previous event's matched
  stamp) to the moment it was decoded: framing checks + decode + one clock read.
* ``e2e``: per event, from decoded to applied by the engine: the wait in the event
  queue/ring plus matching. A replay pushes messages as fast as the parser goes, so when
  the engine is the slower stage the queue is full and e2e is mostly queueing.
"""

from __future__ import annotations

import importlib
import io
import time
from pathlib import Path
from typing import Any, Final

from contract.itch_files import file_chunks, opened, peek
from contract.pipeline import PipelineInterrupted
from twinmatch.replay import FILLS_HEADER, SNIFF_BYTES, ReplayError, peak_rss_mb, sniff_head

IMPLS: Final = ("naive", "optimized")


def load(path: str | Path) -> bytes:
    """The whole decompressed ITCH stream of a raw or gzip feed, read into memory.

    ``path`` may be a file, a FIFO, or ``-`` for standard input. The feed is read, not
    mapped: a mapped file that shrinks while the parser reads it kills the process with
    SIGBUS, and no input may do that. The cost is one copy and memory for the whole feed
    (the pipeline's parser walks one buffer); ``replay`` without ``--pipeline`` streams.
    Reading stops after the chunk where the framing first breaks (a zero length, a wrong
    length for its type): the parser reports that record's offset, and an endless stream
    that is not ITCH (``/dev/zero``) cannot fill the memory. The framing is checked with
    the C++ scanner whichever twin then runs the pipeline (this is harness, not a twin).
    """
    from optimized.itch import scan

    parts: list[bytes] = []
    carry, base = b"", 0
    with opened(path) as f:
        head, f = peek(f, SNIFF_BYTES)
        if sniff_head(head, path) != "itch":
            raise ReplayError(f"{path}: --pipeline reads ITCH files (raw or gzip) only")
        for chunk in file_chunks(f):
            parts.append(chunk)
            buf = carry + chunk
            _, _, consumed, error = scan(buf, base)
            if error is not None:
                break
            carry, base = buf[consumed:], base + consumed
    return b"".join(parts)


# --8<-- [start:replay_pipeline]
def replay_pipeline(path: str | Path, impl: str = "optimized", mode: str = "book",
                    fills_path: str | Path | None = None, **options: Any) -> dict[str, Any]:
    """Run a file through ``impl``'s pipeline; returns its report (plus file, impl, mode).

    Ctrl-C stops the parser; what was parsed drains; PipelineInterrupted carries the
    completed report (``interrupted`` true).
    """
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
    start = time.perf_counter()
    data = load(path)
    load_seconds = time.perf_counter() - start
    pipe = importlib.import_module(f"{impl}.pipeline").Pipeline(mode, **options)
    interrupted: PipelineInterrupted | None = None
    try:
        if fills_path is None:
            report: dict[str, Any] = pipe.run(data)
        else:
            with open(fills_path, "w") as out:
                out.write(FILLS_HEADER)
                report = pipe.run(data, out)
    except PipelineInterrupted as e:
        interrupted, report = e, e.report
    report.update(file=str(path), impl=impl, mode=mode, load_seconds=load_seconds,
                  bytes=len(data), peak_rss_mb=peak_rss_mb())
    report["messages"] = report["records"]
    report["messages_per_s"] = report["records"] / report["seconds"] if report["seconds"] else 0
    if interrupted is not None:
        raise interrupted
    return report
# --8<-- [end:replay_pipeline]


def _us(ns: float) -> str:
    return f"{ns / 1000:,.2f}"


def format_report(r: dict[str, Any]) -> str:
    """The report as a feed handler's latency report."""
    out = io.StringIO()
    w = out.write
    w(f"twinmatch replay --pipeline {r['file']} impl={r['impl']} mode={r['mode']}\n")
    w(f"placement: {r['placement']}; wait: {r['wait']}; usable cpus: "
      f"{r['cpus'] or '(not used)'}; pinned to: {r['pinned'] or 'none'}"
      " (parser, engine, logger)\n")
    early = " (interrupted: stopped early, drained)" if r.get("interrupted") else (
        " (stopped early)" if r["stopped"] else "")
    w(f"events: {r['records']:,} messages, {r['events']:,} events to the engine, "
      f"{r['matched']:,} matched{early}\n")
    w(f"throughput: {r['messages_per_s']:,.0f} messages/s ({r['seconds']:.3f} s: parse + "
      f"match + log overlapped; excludes loading the file, {r['load_seconds']:.3f} s)\n")
    w(f"latency (us, clock {r['clock']}; {r['e2e']['layout']}: each percentile at most "
      f"1/{r['e2e']['sub_buckets']} above the true value):\n")
    w(f"  {'':<24}{'p50':>11}{'p90':>11}{'p99':>11}{'p99.9':>11}{'max':>12}{'negative':>10}\n")
    for key, label in (("parse", "parse (decode)"), ("e2e", "end to end (->matched)")):
        h = r[key]
        w(f"  {label:<24}" + "".join(f"{_us(h[p]):>11}" for p in ("p50", "p90", "p99", "p99.9"))
          + f"{_us(h['max']):>12}{h['negative']:>10,}\n")
    w("  (negative: end stamp before start stamp, two cores' clocks apart; recorded as 0)\n")
    w(f"ring stalls: parser waited {r['parser_stalls']:,} times "
      f"({r['parser_stall_ns'] / 1e6:,.1f} ms, event ring full); engine waited "
      f"{r['engine_stalls']:,} times ({r['engine_stall_ns'] / 1e6:,.1f} ms, fill ring full)\n")
    w(f"fills: {r['fills_produced']:,} produced, {r['fills_logged']:,} logged, "
      f"{r['fills_dropped']:,} dropped (policy {r['policy']})\n")
    nonzero = {k: v for k, v in r["anomalies"].items() if v}
    w("anomalies: " + (" ".join(f"{k}={v:,}" for k, v in nonzero.items()) or "none") + "\n")
    rejects = {k: v for k, v in r["rejects"].items() if v}
    w("rejects: " + (" ".join(f"{k}={v:,}" for k, v in rejects.items()) or "none") + "\n")
    return out.getvalue()
