"""Latency histogram twins (naive/histogram.py, native/histogram.hpp): same layout, same
percentiles, and within one bucket of numpy's on the same samples."""

from __future__ import annotations

import importlib
from typing import Any, Literal

import numpy as np
import pytest

PS = (50.0, 90.0, 99.0, 99.9, 100.0)


@pytest.fixture(params=["naive", "optimized"])
def hist_impl(request: pytest.FixtureRequest) -> Any:
    return importlib.import_module(f"{request.param}.histogram")


def record(h: Any, values: np.ndarray) -> None:
    for v in values.tolist():
        h.record(v)


@pytest.mark.parametrize("dist", ["lognormal", "uniform", "bimodal"])
def test_percentiles_within_one_bucket_of_numpy(hist_impl: Any, dist: str) -> None:
    rng = np.random.default_rng(7)
    n = 50_000
    if dist == "lognormal":
        values = rng.lognormal(6.0, 0.8, n)
    elif dist == "uniform":
        values = rng.uniform(0, 50_000, n)
    else:
        values = np.concatenate([rng.normal(300, 20, n - 500), rng.normal(40_000, 500, 500)])
    samples = np.maximum(values, 0).astype(np.uint64)
    h = hist_impl.Histogram(10, 10_000)  # 10 ns buckets up to 100 us
    record(h, samples)
    # inverted_cdf is the histogram's own definition (the ceil(p n)-th smallest sample);
    # numpy's default, linear, interpolates between neighbours, which in a sparse tail or
    # at the edge between two modes can lie far from both: compared where data is dense.
    methods: tuple[Literal["inverted_cdf", "linear"], ...] = (
        ("inverted_cdf", "linear") if dist == "uniform" else ("inverted_cdf",))
    for p in PS:
        for method in methods:
            want = float(np.percentile(samples, p, method=method))
            assert abs(h.percentile(p) - want) <= h.width_ns, (p, method)
    assert h.count == n and h.max == int(samples.max())


def test_overflow_bucket_is_explicit(hist_impl: Any) -> None:
    h = hist_impl.Histogram(10, 100)  # up to 1 us
    record(h, np.array([5, 15, 2_000, 5_000_000], dtype=np.uint64))
    assert h.overflow == 2
    assert h.percentile(50) == 20        # upper edge of bucket [10, 20)
    assert h.percentile(99) == 5_000_000  # in overflow: the exact maximum
    assert h.summary()["overflow"] == 2


def test_twins_agree_bucket_for_bucket() -> None:
    from naive.histogram import Histogram as Naive
    from optimized.histogram import Histogram as Fast

    rng = np.random.default_rng(3)
    samples = rng.integers(0, 30_000, 20_000).astype(np.uint64)
    a, b = Naive(20, 1_000), Fast(20, 1_000)
    record(a, samples)
    b.record_many(samples)
    assert a.counts() == b.counts()
    assert a.summary() == b.summary()


def test_empty_and_bad_layouts(hist_impl: Any) -> None:
    h = hist_impl.Histogram(10, 10)
    assert h.percentile(99) == 0
    with pytest.raises(ValueError):
        hist_impl.Histogram(0, 10)
