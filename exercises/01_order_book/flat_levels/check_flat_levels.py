"""Checker for 01_order_book/flat_levels: the same answers as a dict on random operations
(under AddressSanitizer and UBSan), and at least 2x faster than the shipped std::map
starter on a million operations near a drifting touch, by the paired protocol (each run
times its own loop; 11 interleaved pairs; the median of the per-pair ratios)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from exercise_support import (
    PLAIN_CXXFLAGS,
    baseline_dir,
    compile_cpp,
    impl_dir,
    paired_ratio,
    run_program,
)

HERE = Path(__file__).resolve().parent
MIN_SPEEDUP = 2.0
BENCH = "bench 1000000 4096 1000000 7\n"


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("flat_levels") / "harness"
    return compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], out)


def stream(lo: int, span: int, k: int, seed: int) -> tuple[str, list[int]]:
    """Random adds, removes (of what rests), best and at queries; the dict's answers."""
    rng = random.Random(seed)
    levels: dict[int, int] = {}
    lines, answers = [], []
    for _ in range(k):
        r = rng.random()
        if r < 0.45 or not levels:
            price, qty = lo + rng.randrange(span), rng.randint(1, 2**40)
            levels[price] = levels.get(price, 0) + qty
            lines.append(f"a {price} {qty}")
        elif r < 0.8:
            price = rng.choice(sorted(levels))
            qty = levels[price] if rng.random() < 0.6 else rng.randint(1, levels[price])
            levels[price] -= qty
            if not levels[price]:
                del levels[price]
            lines.append(f"r {price} {qty}")
        elif r < 0.9:
            lines.append("b")
            answers.append(max(levels) if levels else 0)
        else:
            price = lo + rng.randrange(span)
            lines.append(f"g {price}")
            answers.append(levels.get(price, 0))
    return f"ops {lo} {span} {k}\n" + "\n".join(lines) + "\n", answers


@pytest.mark.parametrize("lo, span, seed", [(1, 64, 1), (1_000_000, 100, 2),
                                            (2**32 - 4096, 4096, 3), (500, 1, 4)])
def test_same_answers_as_a_dict(harness: Path, lo: int, span: int, seed: int) -> None:
    text, answers = stream(lo, span, 3000, seed)
    got = [int(x) for x in run_program(harness, text).split()]
    assert got == answers


def test_emptied_side_has_no_best(harness: Path) -> None:
    text = "ops 100 128 6\na 150 5\na 200 7\nr 200 7\nb\nr 150 5\nb\n"
    assert run_program(harness, text).split() == ["150", "0"]


def test_faster_than_the_map(tmp_path: Path) -> None:
    yours = compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], tmp_path / "yours",
                        PLAIN_CXXFLAGS)
    starter = compile_cpp([HERE / "harness.cpp"], [baseline_dir(__file__)],
                          tmp_path / "starter", PLAIN_CXXFLAGS)
    sums = set()

    def own_time(exe: Path) -> float:  # the harness times its own loop (no process start)
        checksum, ns = run_program(exe, BENCH).split()
        sums.add(checksum)
        return int(ns) * 1e-9

    measured = paired_ratio(lambda: own_time(yours), lambda: own_time(starter))
    assert len(sums) == 1, "your levels gave another best() checksum than the starter's"
    median = measured.median
    assert median >= MIN_SPEEDUP, (
        f"a million operations: {measured} faster than the std::map starter; the target "
        f"is {MIN_SPEEDUP:.0f}x")
