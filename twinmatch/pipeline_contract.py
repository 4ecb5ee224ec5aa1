"""What both pipeline twins and both histogram twins share (contract, no twin imports).

* The latency histogram's layout: log-linear buckets, ``SUB_BUCKETS`` per power of two
  (native/histogram.hpp holds the same constant; tests/test_histogram.py checks that
  every bucket boundary of the two twins is the same).
* The one rule for what a histogram accepts (:func:`check_latency`) and for a percentile
  (:func:`percentile_ppm`): both twins call these before they touch their state.
* The one rule for ring and queue capacities (:func:`check_capacity`), checked before
  anything is allocated.
* (How a message type byte is spelled in a report: :func:`twinmatch.feed_text.type_key`.)
* How a run ends on Ctrl-C (:func:`run_threads`, :class:`PipelineInterrupted`).
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

__all__ = ["BUCKETS", "MAX_LATENCY", "PERCENTILES", "RING_CAPACITY_MAX", "SUB_BUCKETS",
           "SUB_BUCKET_BITS", "PipelineInterrupted", "check_capacity", "check_latency",
           "run_threads", "percentile_ppm", "check_buffer"]

# --8<-- [start:layout]
# Values below 2 * SUB_BUCKETS (64 ns) get one bucket each (exact). Above, each power of
# two [2^e, 2^(e+1)) is cut into SUB_BUCKETS equal buckets, so a bucket is never wider
# than 1/SUB_BUCKETS of its lowest value: any value is known to within 1/32 = 3.125%.
# 1,920 buckets cover every uint64 (0 .. 2^64-1 ns, centuries): there is no overflow.
SUB_BUCKET_BITS: Final = 5
SUB_BUCKETS: Final = 1 << SUB_BUCKET_BITS
BUCKETS: Final = (64 - SUB_BUCKET_BITS) * SUB_BUCKETS + SUB_BUCKETS   # 1,920
MAX_LATENCY: Final = 2**64 - 1
# --8<-- [end:layout]

# The report's percentiles, in parts per million of the samples: integers, so that the
# rank is exact (99.9% of 1,000 samples is the 999th, not 999.0000000000001 -> 1,000th).
PERCENTILES: Final = (("p50", 500_000), ("p90", 900_000), ("p99", 990_000),
                      ("p99.9", 999_000))

RING_CAPACITY_MAX: Final = 1 << 24   # 16,777,216 slots (1 GiB of 64-byte events)
JOIN_WAIT_S: Final = 0.1   # how often a joining main thread looks for Ctrl-C


def check_latency(ns: object) -> int:
    """``ns`` as an int if it is an integer 0 .. 2^64-1, else ValueError naming it.

    Floats (NaN, 1.5, even 3.0), negatives and values past 2^64-1 are all refused the
    same way in both twins: a latency histogram counts whole nanoseconds.
    """
    try:
        value = operator.index(ns)  # type: ignore[arg-type]
    except TypeError:
        shown = ns.item() if hasattr(ns, "item") else ns  # a numpy scalar as a plain one
        raise ValueError(f"histogram: {shown!r} is not a latency (an integer 0..2**64-1 ns)"
                         ) from None
    if not 0 <= value <= MAX_LATENCY:
        raise ValueError(f"histogram: {value!r} is not a latency (an integer 0..2**64-1 ns)")
    return value


def percentile_ppm(p: float) -> int:
    """Percentile ``p`` (0..100, e.g. 99.9) in parts per million, rounded to an integer."""
    try:
        x = float(p)
    except (TypeError, ValueError):
        raise ValueError(f"percentile must be a number in 0..100, got {p!r}") from None
    if math.isnan(x) or not 0.0 <= x <= 100.0:
        raise ValueError(f"percentile must be a number in 0..100, got {p!r}")
    return round(x * 10_000)


def check_capacity(name: str, value: object) -> int:
    """A ring or queue capacity: an integer power of two in 2..RING_CAPACITY_MAX.

    Checked before anything is allocated (TypeError for a non-integer, ValueError for the
    rest), identically in both twins.
    """
    try:
        n = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}") from None
    if not 2 <= n <= RING_CAPACITY_MAX or n & (n - 1):
        raise ValueError(f"{name} must be a power of two in 2..{RING_CAPACITY_MAX:,}, got {n}")
    return n




class PipelineInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) during ``Pipeline.run``: the parser was stopped, everything it had
    parsed was matched and logged, and ``report`` says what was done."""

    def __init__(self, report: dict[str, Any]) -> None:
        super().__init__("pipeline interrupted: stopped, drained, reported")
        self.report = report


# --8<-- [start:join]
def run_threads(targets: Sequence[tuple[str, Callable[[], None]]], stop: Callable[[], None],
                abort: Callable[[], None] | None = None) -> bool:
    """One thread per (name, function); returns when all have finished. A Ctrl-C
    (KeyboardInterrupt) meanwhile calls ``stop()`` and keeps waiting, so the stages drain;
    returns True if that happened. If a thread cannot be started, ``abort()`` (else
    ``stop()``) ends the ones already running, and the error is raised once they have.

    Python runs signal handlers in the main thread only, between bytecodes: a main thread
    blocked in one long wait (or in C++ that holds no GIL) sees Ctrl-C only at the end.
    Short timed waits on an Event (JOIN_WAIT_S) see it at once. (Not Thread.join: in
    Python < 3.13 a join interrupted by Ctrl-C can mark a running thread as finished.)
    """
    lock = threading.Lock()
    left = [len(targets)]
    done = threading.Event()

    def finishing(f: Callable[[], None]) -> Callable[[], None]:
        def body() -> None:
            try:
                f()
            finally:
                with lock:
                    left[0] -= 1
                    if left[0] == 0:
                        done.set()
        return body

    threads = [threading.Thread(target=finishing(f), name=name) for name, f in targets]
    interrupted = False
    try:
        for t in threads:
            t.start()
    except BaseException:
        (abort or stop)()
        with lock:
            left[0] -= sum(1 for t in threads if t.ident is None)  # never started
            if left[0] == 0:
                done.set()
        done.wait()
        raise
    while True:
        try:
            if done.wait(JOIN_WAIT_S):
                break
        except KeyboardInterrupt:
            interrupted = True
            stop()
    for t in threads:
        t.join()  # every body has returned: this waits only for the thread's last steps
    return interrupted
# --8<-- [end:join]


def check_buffer(data: object) -> memoryview:
    """The bytes a pipeline parses, as one contiguous run of bytes (a memoryview), or a
    one-line TypeError naming what was given: the same words in both twins."""
    try:
        mv = memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"data must be a bytes-like object, not {type(data).__name__}") from None
    if not mv.c_contiguous:
        raise TypeError("data must be a contiguous bytes-like object")
    return mv.cast("B")
