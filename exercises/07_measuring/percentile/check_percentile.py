"""Checker for 07_measuring/percentile: within one bucket of the sample at the exact rank,
the rank in integers, the overflow bucket, the maximum, empty histograms."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from exercise_support import load_module

WIDTH, BUCKETS = 10, 2_000


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "percentile.py")


def histogram(samples: np.ndarray) -> tuple[list[int], int, int]:
    idx = samples // WIDTH
    counts = np.bincount(idx[idx < BUCKETS], minlength=BUCKETS)
    return [int(c) for c in counts], int((idx >= BUCKETS).sum()), int(samples.max())


@pytest.mark.parametrize("p", [50, 90, 99, 99.9, 100])
def test_within_one_bucket_of_the_exact_rank(mod: ModuleType, p: float) -> None:
    rng = np.random.default_rng(1)
    samples = rng.lognormal(7.0, 0.6, 20_000).astype(np.int64).clip(0, WIDTH * BUCKETS - 1)
    counts, overflow, top = histogram(samples)
    got = mod.percentile(counts, WIDTH, overflow, top, p)
    # numpy.percentile(method="inverted_cdf") is the same rule, but it computes the rank
    # in floating point (p99.9 of 20,000 samples: rank 19,981, not 19,980); so the exact
    # rank is taken here in integers, as the exercise asks.
    rank = max(1, (round(p * 10_000) * len(samples) + 999_999) // 1_000_000)
    want = int(np.sort(samples)[rank - 1])
    assert want <= got < want + WIDTH, f"p{p}: yours {got}, exact {want} (bucket {WIDTH} ns)"


def test_a_tail_the_mean_hides(mod: ModuleType) -> None:
    samples = np.array([100] * 990 + [15_000] * 10)
    counts, overflow, top = histogram(samples)
    assert mod.percentile(counts, WIDTH, overflow, top, 50) == 109
    assert mod.percentile(counts, WIDTH, overflow, top, 99.9) == 15_000


def test_the_rank_is_exact(mod: ModuleType) -> None:
    # p99.9 of 1,000 values is the 999th smallest: a rank computed in floating point
    # (99.9 / 100 * 1000 = 999.0000000000001, ceiling 1,000) answers the maximum instead.
    samples = np.array([10] * 999 + [5_000])
    counts, overflow, top = histogram(samples)
    assert mod.percentile(counts, WIDTH, overflow, top, 99.9) == 19  # the largest value of [10, 20)
    assert mod.percentile(counts, WIDTH, overflow, top, 100) == 5_000


def test_overflow_answers_the_maximum(mod: ModuleType) -> None:
    samples = np.array([5, 5, 5, 10**9])
    counts, overflow, top = histogram(samples)
    assert overflow == 1
    assert mod.percentile(counts, WIDTH, overflow, top, 100) == 10**9
    assert mod.percentile(counts, WIDTH, overflow, top, 50) == 9  # the largest value of [0, 10)


def test_never_above_the_maximum(mod: ModuleType) -> None:
    samples = np.array([3, 4, 4])
    counts, overflow, top = histogram(samples)
    assert mod.percentile(counts, WIDTH, overflow, top, 99) == 4


def test_empty(mod: ModuleType) -> None:
    assert mod.percentile([0] * 10, WIDTH, 0, 0, 99) == 0
