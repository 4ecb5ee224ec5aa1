"""A latency histogram, the readable twin of ``native/histogram.hpp``.

Fixed-width buckets (``width_ns`` each) and one explicit overflow bucket for everything at
or past ``width_ns * buckets``; the exact maximum is kept too. Recording is a division and
an increment, so every message can be recorded; percentiles come from the counts alone.
"""

from __future__ import annotations

import bisect
import itertools
import math
from typing import Final

PERCENTILES: Final = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9))


# --8<-- [start:histogram]
class Histogram:
    """Bucket i counts values in [i * width_ns, (i + 1) * width_ns); the rest overflow."""

    def __init__(self, width_ns: int, buckets: int) -> None:
        if width_ns < 1 or not 1 <= buckets <= 1 << 26:
            raise ValueError("histogram: width >= 1 ns, 1..2^26 buckets")
        self.width_ns = width_ns
        self.buckets = buckets
        self._counts = [0] * buckets
        self.overflow = 0
        self.count = 0
        self.max = 0
        self.min = 0
        self.sum = 0

    def record(self, ns: int) -> None:
        i = ns // self.width_ns
        if i < self.buckets:
            self._counts[i] += 1
        else:
            self.overflow += 1
        self.min = ns if self.count == 0 else min(self.min, ns)
        self.count += 1
        self.max = max(self.max, ns)
        self.sum += ns

    def percentile(self, p: float) -> int:
        """The upper edge of the bucket holding the ceil(p/100 * count)-th smallest value,
        capped at the exact maximum; in the overflow bucket, the maximum."""
        if self.count == 0:
            return 0
        p = min(max(p, 0.0), 100.0)
        rank = min(max(math.ceil(p / 100.0 * self.count), 1), self.count)
        # cumulative[i] = values in buckets 0..i; the first bucket where it reaches rank.
        cumulative = list(itertools.accumulate(self._counts))
        i = bisect.bisect_left(cumulative, rank)
        if i == self.buckets:  # in the overflow bucket
            return self.max
        return min(self.max, (i + 1) * self.width_ns)
    # --8<-- [end:histogram]

    def counts(self) -> list[int]:
        return list(self._counts)

    def summary(self) -> dict[str, float | int]:
        """count, layout, overflow, min, max, mean and p50 p90 p99 p99.9 (all ns)."""
        out: dict[str, float | int] = {
            "count": self.count, "width_ns": self.width_ns, "buckets": self.buckets,
            "overflow": self.overflow, "min": self.min, "max": self.max,
            "mean": self.sum / self.count if self.count else 0.0,
        }
        for name, p in PERCENTILES:
            out[name] = self.percentile(p)
        return out
