"""Checker for 01_order_book/free_list: in steady state (after the pool reached its
largest size) a million acquires and releases call operator new 0 times (counted by the
harness); every live node keeps its order, no two share a node, a released node is the
next one handed out; under AddressSanitizer and UBSan."""

from __future__ import annotations

from pathlib import Path

import pytest
from exercise_support import compile_cpp, impl_dir, run_program

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("free_list") / "harness"
    return compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], out)


@pytest.mark.parametrize("peak, ops", [(1, 1000), (100, 100_000), (20_000, 1_000_000)])
def test_nodes_intact_and_distinct(harness: Path, peak: int, ops: int) -> None:
    _, intact, distinct = run_program(harness, f"steady {peak} {ops} 5\n").split()
    assert (intact, distinct) == ("1", "1"), (
        "a live order's node changed under it, or two live orders share a node")


@pytest.mark.parametrize("peak", [100, 20_000])
def test_steady_state_allocates_nothing(harness: Path, peak: int) -> None:
    ops = 1_000_000
    allocations, _, _ = run_program(harness, f"steady {peak} {ops} 9\n").split()
    assert int(allocations) == 0, (
        f"{int(allocations):,} calls of operator new during {ops:,} acquires and releases "
        f"that never took the book past the {peak:,} live orders it had already held")


def test_released_node_is_reused_first(harness: Path) -> None:
    assert run_program(harness, "reuse\n").split() == ["1"], (
        "the node released last should be the next one acquired (still in the cache)")
