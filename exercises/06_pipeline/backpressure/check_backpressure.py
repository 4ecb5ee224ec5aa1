"""Checker for 06_pipeline/backpressure: a full ring refuses (holds exactly CAP fills and
gives back each once, in order); with push_waiting nothing is lost; with push_or_drop
every refused fill is counted (received + dropped == produced). Lost and overwritten
fills are counted, under AddressSanitizer and UBSan."""

from __future__ import annotations

from pathlib import Path

import pytest
from exercise_support import compile_cpp, impl_dir, run_program

HERE = Path(__file__).resolve().parent
FILLS = 100_000


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("backpressure") / "harness"
    return compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], out)


@pytest.mark.parametrize("cap, pushes", [(2, 2), (8, 20), (64, 1000)])
def test_a_full_ring_refuses(harness: Path, cap: int, pushes: int) -> None:
    accepted, received, in_order, duplicates = map(
        int, run_program(harness, f"fill {cap} {pushes}\n").split())
    assert accepted == min(cap, pushes), (
        f"{pushes} pushes into an empty ring of {cap} slots, no pops: {accepted} accepted; "
        f"a ring of {cap} slots has room for {cap}")
    assert (received, in_order, duplicates) == (accepted, 1, 0), (
        f"popped {received} fills for {accepted} accepted ({duplicates} read twice, in "
        f"order: {bool(in_order)}): {max(0, pushes - cap)} were written over unread ones")


@pytest.mark.parametrize("cap", [2, 64])
def test_backpressure_loses_nothing(harness: Path, cap: int) -> None:
    produced, received, lost, out_of_order = map(
        int, run_program(harness, f"wait {cap} {FILLS}\n").split())
    assert (lost, out_of_order) == (0, 0) and received == produced, (
        f"{produced} fills produced, {received} popped: {lost} never arrived, {out_of_order} out "
        "of order (overwritten before the logger read them)")


@pytest.mark.parametrize("cap", [2, 64])
def test_drop_policy_counts_every_drop(harness: Path, cap: int) -> None:
    produced, received, dropped, out_of_order = map(
        int, run_program(harness, f"drop {cap} {FILLS}\n").split())
    assert received + dropped == produced and out_of_order == 0, (
        f"{produced} fills produced = {received} logged + {dropped} counted as dropped? "
        f"{produced - received - dropped} are unaccounted for; {out_of_order} arrived out "
        "of order")
