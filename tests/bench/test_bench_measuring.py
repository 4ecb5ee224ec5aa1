"""Chapter 7's benchmarks, group "clock-ablation": what one clock reading costs.

The chapter's claim is that the optimized pipeline stamps messages with the TSC because a
reading is cheaper than ``steady_clock`` (itself cheaper than a Python call to
``time.perf_counter_ns``). Each step reads one clock READS times in a row:

* ``perf_counter_ns``: a Python loop calling ``time.perf_counter_ns()`` (CLOCK_MONOTONIC
  through the vDSO, plus the interpreter's call);
* ``steady_clock``: the same number of ``std::chrono::steady_clock::now()`` in a C++ loop
  (``_native.clock_reads``; one call, the GIL released);
* ``tsc``: ``rdtsc`` and the fixed-point multiply that turns ticks into nanoseconds
  (StampClock in native/pipeline.hpp), where the TSC is invariant (the record names the
  clock that actually ran).

Each step is paired with the one before (records ``clock-step-<name>``). Not counted under
cachegrind: valgrind emulates ``rdtsc`` and does not run the vDSO as the machine does, so
its counts would describe valgrind, not these clocks.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from optimized import _native
from tests.bench.conftest import SMALL
from tests.bench.paired import Side, paired

READS = 20_000 if SMALL else 1_000_000
CLOCK_STEPS = (
    ("perf_counter_ns", "a Python loop calling time.perf_counter_ns()"),
    ("steady_clock", "std::chrono::steady_clock::now() in a C++ loop (vDSO clock_gettime)"),
    ("tsc", "rdtsc + one fixed-point multiply to nanoseconds (where the TSC is invariant)"),
)
INCLUDES = ("one clock reading per op, READS in a row; the C++ steps: one Python call for "
            "all of them")


# --8<-- [start:python_clock_loop]
def python_reads(reads: int) -> int:
    total = 0
    for _ in range(reads):
        total += time.perf_counter_ns()
    return total
# --8<-- [end:python_clock_loop]


def clock_run(step: int) -> Any:
    name = CLOCK_STEPS[step][0]
    if name == "perf_counter_ns":
        return lambda _: (python_reads(READS), None)[1]
    return lambda _: (_native.clock_reads(name, READS), None)[1]


@pytest.mark.benchmark(group="clock-ablation")
@pytest.mark.parametrize("step", range(len(CLOCK_STEPS)))
def test_clock_ablation(benchmark: Any, step: int) -> None:
    name, adds = CLOCK_STEPS[step]
    clock = name
    if name != "perf_counter_ns":  # which clock really ran (tsc falls back where it must)
        _, clock = _native.clock_reads(name, 10)
        # stamps are monotonic: two readings in a row never go backwards
        a, _ = _native.clock_reads(name, 1)
        b, _ = _native.clock_reads(name, 1)
        assert b >= a
    benchmark.extra_info.update(ops=READS, impl=f"step{step}", workload="clock reads",
                                step=step, step_name=name, adds=adds, clock=clock,
                                includes=INCLUDES)
    benchmark.pedantic(clock_run(step), args=(None,), rounds=21, iterations=1)


@pytest.mark.benchmark(group="paired")
@pytest.mark.parametrize("step", range(1, len(CLOCK_STEPS)))
def test_paired_clock_step(benchmark: Any, step: int) -> None:
    """Step ``step`` against the one before it, interleaved."""
    fast = Side(f"step{step}-{CLOCK_STEPS[step][0]}", clock_run(step), ops=READS)
    slow = Side(f"step{step - 1}-{CLOCK_STEPS[step - 1][0]}", clock_run(step - 1), ops=READS)
    paired(benchmark, f"clock-step-{CLOCK_STEPS[step][0]}", fast, slow, pairs=11, warmup=1,
           workload="clock reads", includes=INCLUDES, step=step)
