"""Checker for 06_pipeline/cached_ring: still a correct ring, and reads the other side's
index only when its cached copy says full (producer) or empty (consumer)."""

from __future__ import annotations

from pathlib import Path

import pytest
from exercise_support import compile_cpp, impl_dir, run_program

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cached_ring") / "harness"
    return compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], out)


@pytest.mark.parametrize("cap", [2, 64])
def test_two_threads_in_order(harness: Path, cap: int) -> None:
    received, in_order, _loads = run_program(harness, f"threads {cap} 200000\n").split()
    assert received == "200000" and in_order == "1"


@pytest.mark.parametrize("cap", [2, 8, 64])
def test_fill_and_empty_wraps_around(harness: Path, cap: int) -> None:
    status, _ = run_program(harness, f"rounds {cap} 50\n").split()
    assert status == "ok", "a full ring must hold exactly `capacity` items, in order"


def test_other_index_read_only_when_needed(harness: Path) -> None:
    rounds, cap = 100, 64
    _, loads = run_program(harness, f"rounds {cap} {rounds}\n").split()
    # Each round: the producer looks once when its copy says full and once at the failed
    # push; the consumer the same when its copy says empty. Without a cache: every call.
    limit = 4 * rounds + 4
    assert int(loads) <= limit, (
        f"{loads} reads of the other thread's index for {2 * rounds * cap} items moved; "
        f"with cached copies it takes at most {limit}")
