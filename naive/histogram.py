"""A latency histogram, the readable twin of ``native/histogram.hpp``.

Log-linear buckets, the layout HdrHistogram made known: one bucket per nanosecond below
64 ns, then every power of two cut into 32 equal buckets (the layout and its constants
are in ``contract/histogram.py``). A value is known to within 1/32 of itself,
1,920 counters cover every value 0 .. 2^64-1 ns, and finding a value's bucket takes a
bit length and a shift -- no division, no overflow bucket. Percentiles come from the
counts alone, with an integer rank.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from contract.histogram import (
    BUCKETS,
    PERCENTILES,
    SUB_BUCKET_BITS,
    SUB_BUCKETS,
    check_latency,
    percentile_ppm,
)

__all__ = ["BUCKETS", "Histogram", "bucket_highest", "bucket_lowest", "bucket_of"]

LAYOUT: Final = f"log-linear, {SUB_BUCKETS} sub-buckets per power of two"


# --8<-- [start:buckets]
def bucket_of(ns: int) -> int:
    """The bucket of a value: below 64 the value itself; above, 32 per power of two."""
    shift = max(0, ns.bit_length() - 1 - SUB_BUCKET_BITS)  # how many low bits to drop
    return (shift << SUB_BUCKET_BITS) + (ns >> shift)


def bucket_lowest(i: int) -> int:
    """The smallest value bucket ``i`` holds."""
    if i < 2 * SUB_BUCKETS:
        return i
    shift = (i >> SUB_BUCKET_BITS) - 1
    return (i - (shift << SUB_BUCKET_BITS)) << shift


def bucket_highest(i: int) -> int:
    """The largest value bucket ``i`` holds."""
    width = 1 if i < 2 * SUB_BUCKETS else 1 << ((i >> SUB_BUCKET_BITS) - 1)
    return bucket_lowest(i) + width - 1
# --8<-- [end:buckets]


# --8<-- [start:histogram]
class Histogram:
    """Counts of latencies (ns) in log-linear buckets, plus the exact min, max and sum."""

    def __init__(self) -> None:
        self._counts = [0] * BUCKETS
        self.count = 0
        self.min = 0
        self.max = 0
        self.sum = 0
        self.negative = 0  # record_delta() calls whose end came before their start

    def record(self, ns: int) -> None:
        ns = check_latency(ns)  # an integer 0..2^64-1, else ValueError naming it
        self._counts[bucket_of(ns)] += 1
        self.min = ns if self.count == 0 else min(self.min, ns)
        self.count += 1
        self.max = max(self.max, ns)
        self.sum += ns

    def record_delta(self, start_ns: int, end_ns: int) -> None:
        """Record end - start. Two clocks (two cores' TSCs) may disagree by a little, so
        an end before its start is recorded as 0 *and counted* in ``negative``."""
        if end_ns < start_ns:
            self.negative += 1
            self.record(0)
        else:
            self.record(end_ns - start_ns)

    def percentile(self, p: float) -> int:
        """The value at or below which ``p`` percent of the samples lie, to within one
        bucket: the largest value of the bucket that holds the rank-th smallest sample,
        rank = ceil(p/100 * count) in integers, capped at the exact maximum."""
        return self.at_ppm(percentile_ppm(p))

    def at_ppm(self, ppm: int) -> int:
        """The percentile ``ppm`` parts per million (999_000 is p99.9): ``percentile``'s
        rule, from an integer, as the C++ twin's ``percentile_ppm``."""
        if not 0 <= ppm <= 1_000_000:
            raise ValueError(f"percentile must be 0..1,000,000 ppm, got {ppm}")
        if self.count == 0:
            return 0
        rank = max(1, (ppm * self.count + 999_999) // 1_000_000)
        seen = 0
        for i, n in enumerate(self._counts):
            seen += n
            if seen >= rank:
                return min(self.max, bucket_highest(i))
        raise AssertionError("unreachable: the counts add up to count")
    # --8<-- [end:histogram]

    def record_many(self, values: Iterable[int]) -> None:
        """Record every value; if one is refused (ValueError naming it), none is recorded."""
        checked = [check_latency(v) for v in values]
        for v in checked:
            self.record(v)

    def counts(self) -> list[int]:
        return list(self._counts)

    def summary(self) -> dict[str, float | int | str]:
        """count, min, max, mean, negative deltas and p50 p90 p99 p99.9 (all ns)."""
        out: dict[str, float | int | str] = {
            "count": self.count, "layout": LAYOUT, "sub_buckets": SUB_BUCKETS,
            "min": self.min, "max": self.max,
            # The sum rounded to a float, then divided: what the C++ twin computes too.
            "mean": float(self.sum) / self.count if self.count else 0.0,
            "negative": self.negative,
        }
        for name, ppm in PERCENTILES:
            out[name] = self.at_ppm(ppm)
        return out
