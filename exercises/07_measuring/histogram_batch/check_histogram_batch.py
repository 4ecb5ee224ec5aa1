"""Checker for 07_measuring/histogram_batch: the same counts as the naive twin's
bucket_of for every value (0, powers of two and their neighbours, 2^64 - 1), and at least
5x faster than the shipped starter, paired in the same run."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from exercise_support import load_baseline, load_module, paired_ratio

from naive.histogram import BUCKETS, bucket_of

MIN_SPEEDUP = 5.0
N = 200_000


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "histogram_batch.py")


@pytest.fixture(scope="module")
def base() -> ModuleType:
    return load_baseline(__file__, "histogram_batch.py")


def expected(values: np.ndarray) -> np.ndarray:
    counts = np.zeros(BUCKETS, dtype=np.int64)
    for v in values.tolist():
        counts[bucket_of(v)] += 1
    return counts


def latencies(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.lognormal(8.0, 1.5, n).astype(np.uint64)


EDGES = np.array(sorted({0, 1, 31, 32, 63, 64, 65, 127, 128, 2**53 + 1, 2**63, 2**64 - 1}
                        | {2**e + d for e in range(6, 64) for d in (-1, 0, 1)}),
                 dtype=np.uint64)


@pytest.mark.parametrize("name", ["edges", "empty", "one", "latencies"])
def test_same_counts_as_the_naive_twin(mod: ModuleType, name: str) -> None:
    values = {"edges": EDGES, "empty": np.zeros(0, dtype=np.uint64),
              "one": np.array([1000], dtype=np.uint64), "latencies": latencies(5000, 1)}[name]
    got = mod.counts_of(values)
    assert len(got) == BUCKETS and got.dtype == np.int64
    want = expected(values)
    wrong = np.flatnonzero(got != want)
    assert not len(wrong), (
        f"{len(wrong)} buckets differ, the first {int(wrong[0])}: {int(got[wrong[0]])} "
        f"counted, {int(want[wrong[0]])} expected")


def test_faster_than_the_starter(mod: ModuleType, base: ModuleType) -> None:
    values = latencies(N, 2)
    assert (mod.counts_of(values) == base.counts_of(values)).all()
    measured = paired_ratio(lambda: mod.counts_of(values), lambda: base.counts_of(values))
    median = measured.median
    assert median >= MIN_SPEEDUP, (
        f"counts_of over {N:,} values: {measured} faster than the starter; the target "
        f"is {MIN_SPEEDUP:.0f}x")
