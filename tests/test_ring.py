"""The SPSC ring (native/ring.hpp): two threads, tens of millions of items, order and count
preserved through many wrap-arounds; and the same stress under ThreadSanitizer."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

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


def test_ring_capacity_must_be_power_of_two() -> None:
    with pytest.raises(ValueError, match="power of two"):
        _native.ring_stress(10, 100, "yield")


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
