"""What both pipeline twins share (naive/pipeline.py, optimized/pipeline.py).

* The one rule for ring and queue capacities (:func:`check_capacity`), checked before
  anything is allocated, and for the fill logger's policy (:data:`POLICIES`).
* The one rule for the bytes a pipeline parses (:func:`check_buffer`).
* How a run ends on Ctrl-C (:func:`run_threads`, :class:`PipelineInterrupted`).
* (The latency histogram's layout and rules: :mod:`contract.histogram`; how a message
  type byte is spelled in a report: :func:`contract.feed_text.type_key`.)
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

__all__ = ["POLICIES", "RING_CAPACITY_MAX", "PipelineInterrupted", "check_buffer",
           "check_capacity", "check_policy", "run_threads"]

# What the fill logger does when its queue is full: make the engine wait (lose nothing),
# or drop the fill and count it.
POLICIES: Final = ("lossless", "drop")
RING_CAPACITY_MAX: Final = 1 << 24   # 16,777,216 slots (1 GiB of 64-byte events)
JOIN_WAIT_S: Final = 0.1   # how often a joining main thread looks for Ctrl-C


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


def check_policy(policy: object) -> str:
    """One of :data:`POLICIES`, else a ValueError naming it (the same words in both twins)."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    return str(policy)


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
