"""A latency histogram in C++ (``native/histogram.hpp``): the same log-linear layout,
percentile rule and input rule as ``naive/histogram.py`` (the layout's constants are
checked against ``contract/histogram.py`` by tests/test_histogram.py)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from contract.histogram import BUCKETS, check_latency, percentile_ppm
from optimized import _native

__all__ = ["BUCKETS", "Histogram", "bucket_highest", "bucket_lowest", "bucket_of"]


def bucket_of(ns: int) -> int:
    return int(_native.Histogram.bucket_of(check_latency(ns)))


def bucket_lowest(i: int) -> int:
    return int(_native.Histogram.bucket_lowest(i))


def bucket_highest(i: int) -> int:
    return int(_native.Histogram.bucket_highest(i))


class Histogram:
    """Counts of latencies (ns) in log-linear buckets, plus the exact min, max and sum."""

    def __init__(self) -> None:
        self._h = _native.Histogram()

    def record(self, ns: int) -> None:
        self._h.record(check_latency(ns))  # the same refusal as the naive twin's

    def record_delta(self, start_ns: int, end_ns: int) -> None:
        """Record end - start; an end before its start is recorded as 0 and counted."""
        self._h.record_delta(check_latency(start_ns), check_latency(end_ns))

    def record_many(self, values: Iterable[int] | np.ndarray) -> None:
        """Record every value (in C++, one pass); if one is refused (ValueError naming it),
        none is recorded."""
        arr = np.asarray(values)
        if arr.dtype.kind == "u" and arr.ndim == 1:
            pass  # every unsigned integer is a latency
        elif arr.dtype.kind == "i" and arr.ndim == 1:
            if arr.size and arr.min() < 0:
                check_latency(int(arr[np.argmax(arr < 0)]))  # raises, naming the first
        else:  # floats, objects, big Python ints: the rule applied one value at a time
            checked = [check_latency(v) for v in arr.ravel().tolist()]
            arr = np.array(checked, dtype=np.uint64)
        self._h.record_many(np.ascontiguousarray(arr, dtype=np.uint64))

    def percentile(self, p: float) -> int:
        return int(self._h.percentile_ppm(percentile_ppm(p)))

    def at_ppm(self, ppm: int) -> int:
        if not 0 <= ppm <= 1_000_000:
            raise ValueError(f"percentile must be 0..1,000,000 ppm, got {ppm}")
        return int(self._h.percentile_ppm(ppm))

    @property
    def count(self) -> int:
        return int(self._h.count)

    @property
    def negative(self) -> int:
        return int(self._h.negative)

    @property
    def max(self) -> int:
        return int(self._h.max)

    @property
    def min(self) -> int:
        return int(self._h.min)

    @property
    def sum(self) -> int:
        high, low = self._h.sum_parts
        return (int(high) << 64) | int(low)

    def counts(self) -> list[int]:
        return [int(n) for n in self._h.counts()]

    def summary(self) -> dict[str, float | int | str]:
        out: dict[str, float | int | str] = self._h.summary()
        return out
