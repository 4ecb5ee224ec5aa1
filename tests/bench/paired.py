"""Paired measurement: the two sides of a ratio target timed in one process, interleaved.

Every ratio target of the book (scripts/targets.py) is measured this way:

1. a warm-up: each side runs once (more with ``warmup``), untimed;
2. ``pairs`` pairs (at least 11): side A once, then side B once, each timed on its own,
   each on fresh state from its ``setup``;
3. the ratio of each pair (B's time per op over A's: how many times faster A is), and the
   target is judged on the **median of those per-pair ratios**, printed with its
   interquartile range.

A drift of the machine (another process, a clock change) then moves both halves of a pair
together, and one hiccup spoils one pair, not the median. The per-pair times, ratios,
median and quartiles go into ``benchmark.extra_info["paired"]``, where targets.py and
figures.py read them. pytest-benchmark's own statistics for such a test are those of a
whole pair (A + B), which is why figures.py leaves paired records out of the group tables.

A side's ``run`` may return a time it measured itself (seconds, e.g. a loop timed inside
C++); otherwise the wall time of the call is used.

Beside each wall time the record keeps the CPU time the side used (this process's, all
its threads, plus any child processes it waited for), and the CPU ratios with their
median and quartiles. A side that runs two threads on two cores can be twice as fast by
the wall clock and no faster in CPU time: that is a lead a reader with one free core will
not see, so a multi-threaded row shows both.

At ``TWINMATCH_BENCH_SCALE=small`` (the smoke run of ``make test``: a check that every
benchmark still runs and agrees with the naive twin, not a measurement) a paired test runs
SMOKE_PAIRS pairs; the 11-pair minimum holds for every real run.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MIN_PAIRS = 11
SMOKE_PAIRS = 3
SMALL = os.environ.get("TWINMATCH_BENCH_SCALE", "full") == "small"


@dataclass(frozen=True)
class Side:
    """One side of a paired measurement.

    ``setup()`` makes fresh state before each timed run (not timed); ``run(state)`` does
    the work and returns None (wall time is used) or its own time in seconds.
    """

    name: str
    run: Callable[[Any], float | None]
    ops: int = 1
    setup: Callable[[], Any] = lambda: None


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(q1, median, q3) by linear interpolation (numpy's default method)."""
    s = sorted(values)
    if not s:
        raise ValueError("no values")

    def at(q: float) -> float:
        pos = q * (len(s) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    return at(0.25), at(0.5), at(0.75)


def cpu_seconds() -> float:
    """CPU time so far: this process (every thread) and the children it has waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _timed(side: Side, state: Any) -> tuple[float, float]:
    """(seconds the side took: its own figure or the wall time; CPU seconds it used)."""
    cpu = cpu_seconds()
    start = time.perf_counter()
    own = side.run(state)
    wall = time.perf_counter() - start
    return (wall if own is None else float(own)), cpu_seconds() - cpu


def summarize(key: str, fast: Side, slow: Side, fast_s: list[float], slow_s: list[float],
              warmup: int, fast_cpu: list[float] | None = None,
              slow_cpu: list[float] | None = None) -> dict[str, Any]:
    """The record paired() stores: times, per-pair ratios, median and quartiles (and the
    same of the CPU times, where every pair used measurable CPU on both sides)."""
    ratios = [(s / slow.ops) / (f / fast.ops) for f, s in zip(fast_s, slow_s, strict=True)]
    q1, median, q3 = quartiles(ratios)
    cpu: dict[str, Any] = {}
    if fast_cpu and slow_cpu and all(f > 0 and s > 0 for f, s in zip(fast_cpu, slow_cpu,
                                                                        strict=True)):
        cpu_ratios = [(s / slow.ops) / (f / fast.ops)
                      for f, s in zip(fast_cpu, slow_cpu, strict=True)]
        c1, cm, c3 = quartiles(cpu_ratios)
        cpu = {"fast_cpu_s": fast_cpu, "slow_cpu_s": slow_cpu, "cpu_ratios": cpu_ratios,
               "cpu_median": cm, "cpu_q1": c1, "cpu_q3": c3}
    return {
        "key": key,
        "fast": fast.name,
        "slow": slow.name,
        "fast_ops": fast.ops,
        "slow_ops": slow.ops,
        "fast_s": fast_s,
        "slow_s": slow_s,
        "ratios": ratios,
        "median": median,
        "q1": q1,
        "q3": q3,
        "fast_s_per_op": statistics.median(fast_s) / fast.ops,
        "slow_s_per_op": statistics.median(slow_s) / slow.ops,
        "pairs": len(ratios),
        "warmup": warmup,
        **cpu,
    }


def paired(benchmark: Any, key: str, fast: Side, slow: Side, pairs: int = MIN_PAIRS,
           warmup: int = 1, **info: Any) -> dict[str, Any]:
    """Measure ``fast`` and ``slow`` interleaved; record and return the paired summary.

    ``key`` names the target (scripts/targets.py looks the record up by it). ``info`` is
    copied into extra_info (``includes`` should say what both timings include).
    """
    if pairs < MIN_PAIRS:
        raise ValueError(f"a paired target needs at least {MIN_PAIRS} pairs, got {pairs}")
    if SMALL:
        pairs = SMOKE_PAIRS
    for _ in range(warmup):
        fast.run(fast.setup())
        slow.run(slow.setup())
    fast_s: list[float] = []
    slow_s: list[float] = []
    fast_cpu: list[float] = []
    slow_cpu: list[float] = []

    def setup() -> tuple[tuple[Any, Any], dict[str, Any]]:
        return (fast.setup(), slow.setup()), {}

    def one_pair(fast_state: Any, slow_state: Any) -> None:
        for side, state, times, cpus in ((fast, fast_state, fast_s, fast_cpu),
                                         (slow, slow_state, slow_s, slow_cpu)):
            took, cpu = _timed(side, state)
            times.append(took)
            cpus.append(cpu)

    benchmark.pedantic(one_pair, setup=setup, rounds=pairs, iterations=1)
    record = summarize(key, fast, slow, fast_s, slow_s, warmup, fast_cpu, slow_cpu)
    benchmark.extra_info.update(info)
    benchmark.extra_info["paired"] = record
    return record
