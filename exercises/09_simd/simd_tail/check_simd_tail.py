"""Checker for 09_simd/simd_tail: the AVX2 filter returns the scalar loop's indices
for every start and stop of a 100-row column with prices around 2^31 (under
AddressSanitizer and UBSan, so a tail that reads past the end fails), and is at least
1.5x faster than the scalar loop on a million rows, by the paired protocol (each run
times its own loop; 11 interleaved pairs; the median of the per-pair ratios)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from exercise_support import (
    PLAIN_CXXFLAGS,
    compile_cpp,
    impl_dir,
    paired_ratio,
    run_program,
)

HERE = Path(__file__).resolve().parent
MIN_SPEEDUP = 1.5
ROWS = 1_000_000
MAX_PRICE = 2**32 - 1


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("simd_tail") / "harness"
    exe = compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], out)
    if run_program(exe, "cpu\n").strip() != "1":
        pytest.skip("this CPU has no AVX2")
    return exe


def sweep(harness: Path, n: int, key: str, above: int, seed: int) -> None:
    rng = random.Random(seed)
    rows = [(rng.choice("AFEU"), rng.choice([0, 1, 2**31 - 1, 2**31, 2**31 + 1, MAX_PRICE,
                                              rng.randrange(2**32)]),
             rng.choice(["AAPL", "MSFT"])) for _ in range(n)]
    text = f"sweep {n} {key} {above}\n" + "".join(f"{t} {p} {s}\n" for t, p, s in rows)
    hits = [i for i, (t, p, s) in enumerate(rows) if t in "AF" and s == key and p > above]
    lines = run_program(harness, text).splitlines()
    assert len(lines) == (n + 1) * (n + 2) // 2
    for line in lines:
        where, _, got = line.partition(":")
        start, stop = map(int, where.split())
        want = [i for i in hits if start <= i < stop]
        assert [int(x) for x in got.split()] == want, (
            f"rows [{start}, {stop}) of {n}, price above {above}: got {got.split()}, "
            f"expected {want}")


@pytest.mark.parametrize("above", [100, 2**31 - 1])
def test_every_tail_and_start(harness: Path, above: int) -> None:
    sweep(harness, 100, "AAPL", above, seed=above % 97)


def test_prices_at_and_above_two_to_the_31(harness: Path) -> None:
    sweep(harness, 24, "AAPL", 2**31, seed=5)
    sweep(harness, 24, "AAPL", 0, seed=6)
    sweep(harness, 24, "AAPL", MAX_PRICE - 1, seed=7)


def test_faster_than_the_scalar_loop(harness: Path, tmp_path: Path) -> None:
    exe = compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], tmp_path / "plain",
                      PLAIN_CXXFLAGS)
    answers = set()

    def own_time(which: str) -> float:  # the harness times its own loop (no process start)
        k, checksum, ns = run_program(exe, f"bench {which} {ROWS} 3\n").split()
        answers.add((k, checksum))
        return int(ns) * 1e-9

    result = paired_ratio(lambda: own_time("avx2"), lambda: own_time("scalar"))
    assert len(answers) == 1, "filter_avx2 found other rows than filter_scalar"
    assert result.median >= MIN_SPEEDUP, (
        f"a million rows: filter_avx2 is {result} faster than filter_scalar; the target "
        f"is {MIN_SPEEDUP}x")
