"""Checker for 07_measuring/coordinated_omission: latencies from a fixed-rate schedule
(a stall delays every request due during it), and HdrHistogram's back-filling of
closed-loop samples, against small simulations written here."""

from __future__ import annotations

import random
from types import ModuleType

import pytest
from exercise_support import load_module


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "omission.py")


def simulate(service_ns: list[int], interval_ns: int) -> list[int]:
    """Start times first, then latencies: request i starts when it is due, or when
    request i - 1 finished."""
    starts: list[int] = []
    for i in range(len(service_ns)):
        due = i * interval_ns
        starts.append(due if i == 0 else max(due, starts[-1] + service_ns[i - 1]))
    return [start + service - i * interval_ns
            for i, (start, service) in enumerate(zip(starts, service_ns, strict=True))]


def backfilled(samples: list[int], interval: int) -> list[int]:
    out: list[int] = []
    for v in samples:
        out += [v] + [v - k * interval for k in range(1, v // interval)]
    return out


def p99(values: list[int]) -> int:
    s = sorted(values)
    return s[-(-99 * len(s) // 100) - 1]


def test_no_stall_no_difference(mod: ModuleType) -> None:
    assert mod.from_schedule([3, 9, 1, 5], 10) == [3, 9, 1, 5]
    assert mod.from_schedule([], 10) == []


def test_one_stall_delays_everything_due_during_it(mod: ModuleType) -> None:
    # Due at 0, 10, 20, 30, 40; the third takes 1,000 ns, the two after it wait.
    assert mod.from_schedule([1, 1, 1000, 1, 1], 10) == [1, 1, 1000, 991, 982]


def test_a_burst_queues_up(mod: ModuleType) -> None:
    assert mod.from_schedule([5, 5, 5, 5], 0) == [5, 10, 15, 20]


@pytest.mark.parametrize("seed", range(5))
def test_random_stalls(mod: ModuleType, seed: int) -> None:
    rng = random.Random(seed)
    interval = rng.choice([100, 1000, 5000])
    service = [rng.randint(10, interval) if rng.random() > 0.01 else
               rng.randint(interval, 200 * interval) for _ in range(3000)]
    got = mod.from_schedule(service, interval)
    assert got == simulate(service, interval)
    assert p99(got) >= p99(mod.closed_loop(service))


def test_backfill_small(mod: ModuleType) -> None:
    assert mod.backfill([5, 35], 10) == [5, 35, 25, 15]
    assert mod.backfill([20], 10) == [20, 10]
    assert mod.backfill([10, 19, 9], 10) == [10, 19, 9]
    assert mod.backfill([], 10) == []


@pytest.mark.parametrize("seed", range(3))
def test_backfill_random(mod: ModuleType, seed: int) -> None:
    rng = random.Random(seed)
    interval = rng.choice([7, 100, 1000])
    samples = [rng.randint(1, 50 * interval) for _ in range(500)]
    assert mod.backfill(samples, interval) == backfilled(samples, interval)
