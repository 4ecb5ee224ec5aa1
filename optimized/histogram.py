"""A latency histogram in C++ (``native/histogram.hpp``): the same layout and percentile
rule as ``naive/histogram.py``, recorded in C++ (one division and one increment)."""

from __future__ import annotations

import numpy as np

from optimized import _native

__all__ = ["Histogram"]


class Histogram:
    """Bucket i counts values in [i * width_ns, (i + 1) * width_ns); the rest overflow."""

    def __init__(self, width_ns: int, buckets: int) -> None:
        try:
            self._h = _native.Histogram(width_ns, buckets)
        except TypeError as e:  # a negative size does not convert to uint64
            raise ValueError("histogram: width >= 1 ns, 1..2^26 buckets") from e
        self.width_ns = width_ns
        self.buckets = buckets

    def record(self, ns: int) -> None:
        self._h.record(ns)

    def record_many(self, values: np.ndarray) -> None:
        """Record every value of an integer array (in C++, one pass)."""
        self._h.record_many(np.ascontiguousarray(values, dtype=np.uint64))

    def percentile(self, p: float) -> int:
        return int(self._h.percentile(p))

    @property
    def count(self) -> int:
        return int(self._h.count)

    @property
    def overflow(self) -> int:
        return int(self._h.overflow)

    @property
    def max(self) -> int:
        return int(self._h.max)

    def counts(self) -> list[int]:
        return list(self._h.counts())

    def summary(self) -> dict[str, float | int]:
        out: dict[str, float | int] = self._h.summary()
        return out
