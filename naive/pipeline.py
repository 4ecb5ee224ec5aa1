"""The pipeline, the readable twin: three ``threading.Thread``s joined by ``queue.Queue``s.

    parser  --events-->  engine  --fills-->  fill logger  -->  fills CSV

* The **parser** walks an ITCH buffer record by record (``naive.itch``'s framing checks,
  ``parse_message`` and ``event_row``), stamps each event with ``time.perf_counter_ns()``
  when it is decoded, and puts batches of up to ``batch`` events on the event queue.
* The **engine** applies each batch to a many-books ``naive.market.Market`` and stamps
  the batch matched; every event's parsed -> matched time goes into a histogram.
* The **fill logger** writes each fill as a CSV row. It is off the hot path: with the
  default ``lossless`` policy the engine waits when the fill queue is full (and the time
  it waited is reported); with ``drop`` it never waits, and counts what it dropped.

Queue items are batches because each hand-off through a ``queue.Queue`` takes a lock, a
condition variable and often a trip through the GIL: a batch pays that once for many
events. The C++ twin hands over one event at a time. Shutdown is a ``None`` passed down
the line: each stage finishes what its queue holds, passes the ``None`` on, and stops, so
nothing is lost. Every wait has a timeout and watches an abort flag, so a failing stage
can never leave another one waiting; Ctrl-C stops the parser, and the rest drains.

The GIL lets one thread run Python at a time: three threads here do not run three times
as fast as one; chapter 6 measures what they cost.
"""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import IO, Any, Final

import numpy as np

from contract.dtypes import EVENT_DTYPE
from contract.feed_text import type_key
from contract.itch_errors import ItchError
from contract.pipeline import (
    POLICIES,
    PipelineInterrupted,
    check_buffer,
    check_capacity,
    check_policy,
    run_threads,
)
from naive.histogram import Histogram
from naive.itch import LENGTHS, event_row, parse_message, tail_error
from naive.market import Market

__all__ = ["POLICIES", "Pipeline"]

WAIT_S: Final = 0.05   # every blocking wait wakes this often to check the abort flag
EventRow = tuple[Any, ...]


class _Batch:
    """Decoded events and the perf_counter_ns() at which each was parsed."""

    def __init__(self) -> None:
        self.rows: list[EventRow] = []
        self.parsed_ns: list[int] = []


class Pipeline:
    """parser -> engine -> fill logger, one ``threading.Thread`` each."""

    def __init__(self, mode: str = "match", *, ring_capacity: int = 16,
                 fill_capacity: int = 64, policy: str = "lossless", logger_delay_ns: int = 0,
                 stop_after: int | None = None, batch: int = 64) -> None:
        # The same rule as the C++ rings' (contract/pipeline.py), checked first.
        ring_capacity = check_capacity("ring_capacity", ring_capacity)
        fill_capacity = check_capacity("fill_capacity", fill_capacity)
        policy = check_policy(policy)
        if batch < 1:
            raise ValueError("batch must be positive")
        self.market = Market(mode)
        self.policy = policy
        self.batch = batch
        self.logger_delay_ns = logger_delay_ns
        self.stop_after = stop_after
        # Items: batches of events / lists of fill rows. maxsize bounds the memory.
        self._events: queue.Queue[_Batch | None] = queue.Queue(maxsize=ring_capacity)
        self._fills: queue.Queue[list[str] | None] = queue.Queue(maxsize=fill_capacity)
        self._stop = threading.Event()
        self._abort = threading.Event()
        self._failure: BaseException | None = None
        self.parse_hist = Histogram()
        self.e2e_hist = Histogram()
        self.stats: dict[str, Any] = dict.fromkeys(
            ("records", "events", "matched", "fills_produced", "fills_logged",
             "fills_dropped", "parser_stalls", "parser_stall_ns", "engine_stalls",
             "engine_stall_ns", "consumed"), 0)
        self.by_type: dict[str, int] = {}
        self.error: ItchError | None = None
        self.stopped = False

    def stop(self) -> None:
        """Any thread: the parser stops at its next record; everything parsed drains."""
        self._stop.set()

    # ------------------------------------------------------------------ waits

    def _put(self, q: queue.Queue[Any], item: Any) -> int:
        """Put, waiting while the queue is full; returns the ns waited (0: no wait)."""
        try:
            q.put_nowait(item)
            return 0
        except queue.Full:
            pass
        start = time.perf_counter_ns()
        while not self._abort.is_set():
            try:
                q.put(item, timeout=WAIT_S)
                break
            except queue.Full:
                continue
        return time.perf_counter_ns() - start

    def _get(self, q: queue.Queue[Any]) -> Any:
        """Get, waiting while the queue is empty; None also when another stage failed."""
        while not self._abort.is_set():
            try:
                return q.get(timeout=WAIT_S)
            except queue.Empty:
                continue
        return None

    # ----------------------------------------------------------------- parser

    # --8<-- [start:parse_record]
    def _parse_record(self, mv: memoryview, off: int) -> tuple[EventRow | None, int]:
        """Decode the record at ``off``: (event row or None, offset of the next record).

        The same framing checks as ``naive.itch.scan``, one record at a time; a bad or
        truncated record raises the same ItchError, naming its offset.
        """
        if len(mv) - off < 2:
            raise tail_error(mv, off, 0)
        length = int.from_bytes(mv[off:off + 2], "big")
        if length == 0:
            raise ItchError(off, "zero_length", -1, 0)
        if off + 2 + length > len(mv):
            raise tail_error(mv, off, 0)
        code = mv[off + 2]
        if code in LENGTHS and LENGTHS[code] != length:
            raise ItchError(off, "bad_length", code, length, f"type needs {LENGTHS[code]}")
        key = type_key(code)  # 'A', or '\\x80' for a byte that is not printable ASCII
        self.by_type[key] = self.by_type.get(key, 0) + 1
        row = None
        if code in LENGTHS:  # unknown types are counted and skipped
            row = event_row(parse_message(mv[off + 2:off + 2 + length]))
        return row, off + 2 + length
    # --8<-- [end:parse_record]

    # --8<-- [start:parser]
    def _parser(self, data: bytes | memoryview) -> None:
        mv = memoryview(data).cast("B")
        off = 0
        batch = _Batch()
        start = time.perf_counter_ns()  # when the parser was free to start a record
        try:
            while off < len(mv) and not self._abort.is_set():
                if self._stop.is_set() or self.stats["records"] == self.stop_after:
                    self.stopped = True
                    break
                row, off = self._parse_record(mv, off)
                parsed = time.perf_counter_ns()
                self.stats["records"] += 1
                self.stats["consumed"] = off
                if row is not None:
                    self.parse_hist.record_delta(start, parsed)
                    batch.rows.append(row)
                    batch.parsed_ns.append(parsed)
                start = parsed  # one clock read per record: the next one starts now
                if len(batch.rows) == self.batch:
                    self._send(batch)
                    batch = _Batch()
                    start = time.perf_counter_ns()  # handing over is not parsing
        except ItchError as e:
            self.error = e  # everything before the bad record still flows on
        finally:
            if batch.rows:
                self._send(batch)
            self._put(self._events, None)  # shutdown: the engine drains, then stops

    def _send(self, batch: _Batch) -> None:
        self.stats["events"] += len(batch.rows)
        waited = self._put(self._events, batch)
        if waited:
            self.stats["parser_stalls"] += 1
            self.stats["parser_stall_ns"] += waited
    # --8<-- [end:parser]

    # ----------------------------------------------------------------- engine

    # --8<-- [start:engine]
    def _engine(self) -> None:
        try:
            while (batch := self._get(self._events)) is not None:
                events = np.zeros(len(batch.rows), dtype=EVENT_DTYPE)
                events[:] = batch.rows
                fills = self.market.run(events)
                matched = time.perf_counter_ns()
                for parsed in batch.parsed_ns:
                    self.e2e_hist.record_delta(parsed, matched)
                self.stats["matched"] += len(batch.rows)
                if len(fills):
                    self._deliver(fills)
        finally:
            self._put(self._fills, None)  # even under the drop policy: never dropped

    def _deliver(self, fills: np.ndarray) -> None:
        rows = [f"{r},{a},{p},{q},{s}\n" for r, a, p, q, _, s in fills.tolist()]
        self.stats["fills_produced"] += len(rows)
        if self.policy == "drop":
            try:
                self._fills.put_nowait(rows)
            except queue.Full:
                self.stats["fills_dropped"] += len(rows)  # counted, never silent
            return
        waited = self._put(self._fills, rows)  # lossless: matching waits for the logger
        if waited:
            self.stats["engine_stalls"] += 1
            self.stats["engine_stall_ns"] += waited
    # --8<-- [end:engine]

    # ----------------------------------------------------------------- logger

    # --8<-- [start:logger]
    def _logger(self, out: IO[str] | None) -> None:
        while (rows := self._get(self._fills)) is not None:
            if self.logger_delay_ns:  # tests: a deliberately slow disk
                time.sleep(self.logger_delay_ns * len(rows) / 1e9)
            if out is not None:
                out.write("".join(rows))
            self.stats["fills_logged"] += len(rows)
    # --8<-- [end:logger]

    def _guarded(self, stage: Any, *args: Any) -> None:
        try:
            stage(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised by run()
            self._failure = e
            self._abort.set()

    # -------------------------------------------------------------------- run

    # --8<-- [start:run]
    def run(self, data: bytes | memoryview, fills: IO[str] | None = None) -> dict[str, Any]:
        """Run an ITCH buffer through the three stages; returns the report.

        Fills CSV rows (no header) go to ``fills``. Bad input raises ItchError *after*
        everything before the bad record has been matched and logged; the error carries
        the report as ``.report``.
        Ctrl-C stops the parser, the rest drains, and PipelineInterrupted carries the
        report.
        """
        data = check_buffer(data)  # a one-line TypeError before any thread starts
        start = time.perf_counter()
        stages = [
            ("parser", lambda: self._guarded(self._parser, data)),
            ("engine", lambda: self._guarded(self._engine)),
            ("logger", lambda: self._guarded(self._logger, fills)),
        ]
        # One thread each. Ctrl-C meanwhile stops the parser; the stages drain, then we
        # report (contract/pipeline.py).
        interrupted = run_threads(stages, self.stop, abort=self._abort.set)
        seconds = time.perf_counter() - start
        if self._failure is not None:
            raise self._failure
        report = self.report(seconds)
        report["interrupted"] = interrupted
        if interrupted:
            raise PipelineInterrupted(report)
        if self.error is not None:
            self.error.report = report  # type: ignore[attr-defined]
            raise self.error
        return report
    # --8<-- [end:run]

    def report(self, seconds: float) -> dict[str, Any]:
        counts = self.market.counts()
        return {
            **self.stats, "seconds": seconds, "stopped": self.stopped,
            "by_type": dict(sorted(self.by_type.items())), "policy": self.policy,
            "placement": f"threads (GIL), batches of {self.batch}",
            "wait": "blocking queue.Queue", "cpus": [], "planned": [], "pinned": [],
            "clock_backwards": 0,  # one clock (perf_counter_ns), monotonic in every thread
            "clock": "time.perf_counter_ns",
            "parse": self.parse_hist.summary(), "e2e": self.e2e_hist.summary(),
            "anomalies": counts["anomalies"], "rejects": counts["rejects"],
            "volume": self.market.volume, "live_orders": len(self.market),
            "books": self.market.books,
        }


def run_file(path: str | Path, fills_path: str | Path | None = None, **options: Any
             ) -> dict[str, Any]:
    """A whole raw ITCH file through a new Pipeline (fills CSV with its header)."""
    data = Path(path).read_bytes()
    pipe = Pipeline(**options)
    if fills_path is None:
        return pipe.run(data)
    with open(fills_path, "w") as out:
        out.write("resting_id,aggressor_id,price,qty,aggressor_side\n")
        return pipe.run(data, out)

