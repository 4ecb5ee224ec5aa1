"""Checker for 01_order_book/node_align: 32-byte nodes, pools on a cache-line boundary,
and not one node in two cache lines (counted over pools of 1..200 nodes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from exercise_support import compile_cpp, impl_dir, run_program

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("node_align") / "harness"
    return compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], out)


def test_node_is_32_bytes(harness: Path) -> None:
    size, align, _, _ = map(int, run_program(harness, "layout\n").split())
    assert size == 32, (
        f"sizeof(Node) is {size}: the members hold 30 bytes; the compiler pads each member "
        f"to its own alignment (here {align}), so their order decides the holes")


def test_pools_start_on_a_cache_line(harness: Path) -> None:
    pools, misaligned, _, _ = map(int, run_program(harness, "pools 200\n").split())
    assert misaligned == 0, (
        f"{misaligned} of {pools} pools do not start on a 64-byte boundary")


def test_no_node_straddles_two_lines(harness: Path) -> None:
    _, _, nodes, straddling = map(int, run_program(harness, "pools 200\n").split())
    assert straddling == 0, (
        f"{straddling} of {nodes} nodes straddle two cache lines: each of those costs two "
        f"line fetches instead of one (see the README for watching it in cachegrind)")


def test_nodes_still_work(harness: Path) -> None:
    out = run_program(harness, "walk 1000 3\n").split()
    # qty = i, next = 0, order_id = 0, +1 each round: 3 * sum(i) + (0 + 1 + 2) * 1000.
    assert int(out[0]) == 3 * sum(range(1000)) + 3 * 1000
