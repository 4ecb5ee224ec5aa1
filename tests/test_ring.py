"""The SPSC ring (native/ring.hpp): two threads, tens of millions of items, order and count
preserved through many wrap-arounds; slots aligned to a cache line; capacities checked
before anything is allocated, by one rule in both pipeline twins; and the same stress
under ThreadSanitizer."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from contract.pipeline import RING_CAPACITY_MAX
from optimized import _native

ROOT = Path(__file__).resolve().parent.parent
STRESS = ROOT / "tests" / "native" / "ring_stress.cpp"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("capacity", [2, 64, 4096])
def test_ring_passes_tens_of_millions_in_order(capacity: int) -> None:
    items = 20_000_000 if capacity >= 64 else 2_000_000
    received, in_order, _seconds = _native.ring_stress(items, capacity, "yield")
    assert received == items
    assert in_order  # and wrapped around the capacity items / capacity times


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("own_lines", [False, True])
@pytest.mark.parametrize("capacity", [2, 64])
def test_every_ring_variant_passes_items_in_order(capacity: int, cached: bool,
                                                  own_lines: bool) -> None:
    """Chapter 6's ablation switches the ring's cached indices and separate lines off: each
    variant must still pass every item, in order, through many wrap-arounds."""
    received, in_order, _ = _native.ring_stress_variant(500_000, capacity, "yield", cached,
                                                        own_lines)
    assert received == 500_000 and in_order


@pytest.mark.timeout(120)
@pytest.mark.parametrize("wait", ["spin", "yield", "sleep", "auto"])
def test_every_wait_passes_items_in_order(wait: str) -> None:
    """Chapter 6's wait rows (spin, yield, sleep) time the same transfer: each must pass
    every item in order; an unknown wait is a ValueError naming the choices."""
    received, in_order, _ = _native.ring_stress(200_000, 64, wait)
    assert received == 200_000 and in_order


def test_an_unknown_wait_is_refused() -> None:
    with pytest.raises(ValueError, match="wait must be spin, yield, sleep or auto"):
        _native.ring_stress(10, 64, "nap")


@pytest.mark.parametrize("capacity", [2, 64, 1024, 4096, 1 << 16])
def test_ring_slots_start_on_a_cache_line(capacity: int) -> None:
    # 64-byte items: one item, one line, only if the first slot starts on a line. (malloc
    # aligns to 16: a large array from make_unique<T[]> starts 16 bytes into a line.)
    assert _native.ring_slots_offset(capacity) == 0


def test_the_pipelines_event_ring_is_line_aligned() -> None:
    from optimized.pipeline import Pipeline

    for cap in (64, 1024, 1 << 16):
        report = Pipeline("match", ring_capacity=cap).run(b"")
        assert report["event_slots_offset"] == 0
        assert report["stage_counters_offset"] == 0


BAD_CAPACITIES: list[tuple[Any, type[Exception]]] = [
    (0, ValueError), (1, ValueError), (3, ValueError), (100, ValueError), (-1, ValueError),
    (-64, ValueError), (2**33 + 1, ValueError), (2**40, ValueError), (2**64, ValueError),
    (RING_CAPACITY_MAX * 2, ValueError), (np.int64(3), ValueError), (np.int32(-8), ValueError),
    (True, ValueError), (1.5, TypeError), (64.0, TypeError), ("64", TypeError),
    (None, TypeError),
]


@pytest.mark.parametrize("which", ["ring_capacity", "fill_capacity"])
@pytest.mark.parametrize("bad,error", BAD_CAPACITIES, ids=repr)
def test_capacities_are_checked_first_and_identically(which: str, bad: Any,
                                                      error: type[Exception]) -> None:
    messages = []
    for impl in ("naive", "optimized"):
        pipeline = importlib.import_module(f"{impl}.pipeline")
        start = time.perf_counter()
        with pytest.raises(error) as err:
            pipeline.Pipeline("match", **{which: bad})
        assert time.perf_counter() - start < 5  # no huge allocation first
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert which in messages[0]


@pytest.mark.parametrize("good", [2, 64, np.int64(1024), np.uint16(4096), RING_CAPACITY_MAX])
def test_good_capacities(good: Any) -> None:
    for impl in ("naive", "optimized"):
        pipeline = importlib.import_module(f"{impl}.pipeline")
        pipeline.Pipeline("match", ring_capacity=good, fill_capacity=good)


def test_the_native_ring_checks_before_it_allocates() -> None:
    # Straight to C++ (no Python check in front): a ValueError, not a 64 TiB allocation.
    for cap in (0, 3, 2**33 + 1, 2**40):
        with pytest.raises(ValueError, match="power of two in 2..16,777,216"):
            _native.ring_stress(10, cap, "yield")
        with pytest.raises(ValueError, match="ring_capacity must be a power of two"):
            _native.Pipeline("match", cap, 64, False, 0, 1, "auto", "auto")
    with pytest.raises(ValueError, match="fill_capacity must be a power of two"):
        _native.Pipeline("match", 64, 2**40, False, 0, 1, "auto", "auto")


def _tsan_build(tmp_path: Path) -> Path:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found: cannot build the ThreadSanitizer ring stress")
    exe = tmp_path / "ring_stress_tsan"
    cmd = [gxx, "-std=c++20", "-O1", "-g", "-fsanitize=thread", "-I", str(ROOT / "native"),
           str(STRESS), "-o", str(exe)]
    built = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if built.returncode != 0:
        pytest.skip(f"g++ cannot build with -fsanitize=thread here: {built.stderr[-300:]}")
    return exe


@pytest.mark.timeout(300)
def test_ring_under_thread_sanitizer(tmp_path: Path) -> None:
    exe = _tsan_build(tmp_path)
    run = subprocess.run([str(exe), "2000000", "64"], capture_output=True, text=True,
                         timeout=240, env={"TSAN_OPTIONS": "halt_on_error=1 exitcode=66"})
    if run.returncode != 0 and "FATAL: ThreadSanitizer" in run.stderr:
        pytest.skip(f"ThreadSanitizer cannot run here: {run.stderr[-300:]}")
    assert "WARNING: ThreadSanitizer" not in run.stderr, run.stderr[-2000:]
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    assert "received=2000000 out_of_order=0" in run.stdout
