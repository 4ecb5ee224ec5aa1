"""The pipeline in C++ (``native/pipeline.hpp``): the same API as ``naive/pipeline.py``.

parser -> engine -> fill logger as C++ threads joined by lock-free single-producer
single-consumer rings (``native/ring.hpp``), one event (64 bytes, one cache line) per
hand-off. Where the threads run is chosen when ``run`` starts, from the CPUs this process
may use (``os.sched_getaffinity``) and which of them share a physical core (sysfs): with
three or more distinct cores, three threads, each pinning itself to its own core (CPU 0's
core last), that spin while they wait; with fewer, parser and engine fused into one
thread and the logger on its own (``placement="auto"``). ``placement`` and ``wait`` force
a choice (``pinned``/``shared``/``fused``; ``spin``/``yield``), and the report says what
ran (``placement``, ``planned``, ``pinned``).

``run`` releases the GIL for the whole run (the C++ runs in a helper thread, so that the
calling thread still sees Ctrl-C: it stops the parser, the stages drain, and
:class:`~contract.pipeline.PipelineInterrupted` carries the report);
``stop()`` may be called from any thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any, Final

from contract.dtypes import ANOMALIES, REASONS
from contract.itch_errors import ITCH_REASONS, ItchError
from contract.market import check_mode
from contract.pipeline import (
    POLICIES,
    PipelineInterrupted,
    check_buffer,
    check_capacity,
    check_policy,
    run_threads,
)
from optimized import _native
from optimized.itch import record_error, tail_error

__all__ = ["PLACEMENTS", "POLICIES", "WAITS", "Pipeline"]

PLACEMENTS: Final = ("auto", "pinned", "shared", "fused")
WAITS: Final = ("auto", "spin", "yield")
NO_LIMIT: Final = 2**64 - 1


class Pipeline:
    """parser -> engine -> fill logger, three C++ threads (or two, fused)."""

    def __init__(self, mode: str = "match", *, ring_capacity: int = 1024,
                 fill_capacity: int = 4096, policy: str = "lossless", logger_delay_ns: int = 0,
                 stop_after: int | None = None, placement: str = "auto", wait: str = "auto",
                 stage_lines: bool = True, fail_spawn: int = 0) -> None:
        """``stage_lines=False``: the benchmark's variant with the stages' counters packed
        together (false sharing). ``fail_spawn`` (tests): starting thread 1 (logger),
        2 (engine) or 3 (parser) fails as if the system had no threads left."""
        ring_capacity = check_capacity("ring_capacity", ring_capacity)  # before allocating
        fill_capacity = check_capacity("fill_capacity", fill_capacity)
        policy = check_policy(policy)
        self.policy = policy
        mode = check_mode(mode)
        cls = _native.Pipeline if stage_lines else _native.PackedPipeline
        self._p = cls(
            mode, ring_capacity, fill_capacity, policy == "drop", logger_delay_ns,
            NO_LIMIT if stop_after is None else stop_after, placement, wait, fail_spawn)

    def stop(self) -> None:
        """Any thread: the parser stops at its next record; everything parsed drains."""
        self._p.stop()

    def run(self, data: Any, fills: IO[str] | None = None) -> dict[str, Any]:
        """Run a bytes-like ITCH buffer through the stages; returns the report.

        Fills CSV rows (no header) are appended to ``fills``, a real file (the C++ logger
        writes to its descriptor). Bad input raises ItchError *after* everything before
        the bad record has been matched and logged; the error carries ``.report``.
        Ctrl-C stops the parser, the rest drains, and PipelineInterrupted carries the
        report.
        """
        check_buffer(data)  # the same TypeError as the naive twin, before any thread starts
        fd = -1
        if fills is not None:
            fills.flush()  # what Python buffered goes first
            fd = fills.fileno()
        failure: list[BaseException] = []

        def work() -> None:
            try:
                self._p.run(data, fd)
            except BaseException as e:  # noqa: BLE001 - re-raised below
                failure.append(e)

        interrupted = run_threads([("pipeline-run", work)], self.stop)
        if failure:
            raise failure[0]
        report = self.report()
        report["interrupted"] = interrupted
        if report.pop("write_errno"):
            raise OSError("fill logger: write failed")
        code = report.pop("error")
        error_type, length = report.pop("error_type"), report.pop("error_length")
        consumed = report["consumed"]
        if interrupted:
            raise PipelineInterrupted(report)
        if code:
            error = self._error(data, code, error_type, length, consumed)
            error.report = report  # type: ignore[attr-defined]
            raise error
        return report

    @staticmethod
    def _error(data: Any, code: int, error_type: int, length: int, consumed: int) -> ItchError:
        """The same ItchError optimized.itch raises for this record."""
        if ITCH_REASONS[code] in ("bad_length", "zero_length"):
            return record_error(code, error_type, length, consumed)
        mv = memoryview(data).cast("B")
        return tail_error(mv[consumed:].tobytes(), 0, consumed)

    def report(self) -> dict[str, Any]:
        s: dict[str, Any] = self._p.stats()
        s["anomalies"] = dict(zip(ANOMALIES, (int(n) for n in s["anomalies"]), strict=True))
        s["rejects"] = {REASONS[r]: int(s["rejects"][r]) for r in range(1, len(REASONS))}
        s["by_type"] = dict(sorted(s["by_type"].items()))
        s["policy"] = self.policy
        return s

    def hist_counts(self, which: str) -> list[int]:
        """Bucket counts of the 'parse' or 'e2e' histogram."""
        return list(self._p.hist_counts(which))


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
