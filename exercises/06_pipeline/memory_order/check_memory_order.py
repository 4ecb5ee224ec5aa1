"""Checker for 06_pipeline/memory_order: the ring under ThreadSanitizer must pass every
event intact and in order with no data race reported (the starter's relaxed orders make
TSan report one on the slots); and it is still a ring (fill and empty, under ASan)."""

from __future__ import annotations

from pathlib import Path

import pytest
from exercise_support import TSAN_CXXFLAGS, compile_cpp, impl_dir, run_program, run_tsan

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def tsan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("memory_order") / "harness_tsan"
    return compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], out, TSAN_CXXFLAGS)


@pytest.fixture(scope="module")
def asan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("memory_order") / "harness"
    return compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], out)


@pytest.mark.parametrize("cap", [2, 64])
def test_fill_and_empty(asan: Path, cap: int) -> None:
    assert run_program(asan, f"rounds {cap} 20\n").split() == ["ok"]


@pytest.mark.parametrize("cap", [4, 64])
def test_threadsanitizer_finds_no_race(tsan: Path, cap: int) -> None:
    items = 50_000
    code, out, err = run_tsan(tsan, f"threads {cap} {items}\n")
    report = "\n".join(err.splitlines()[:40])
    assert "ThreadSanitizer" not in err, (
        f"ThreadSanitizer reports a race (the start of its report):\n{report}\n"
        "Read it from the top: which two accesses, by which threads, to which object? "
        "What ordering between them did you expect, and which atomic operation was meant "
        "to give it?")
    assert code == 0, f"the harness exited with {code}:\n{report}"
    received, in_order, intact = out.split()
    assert (received, in_order, intact) == (str(items), "1", "1"), (
        f"received {received} of {items}, in order: {in_order}, intact: {intact}")
