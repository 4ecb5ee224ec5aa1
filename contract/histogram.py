"""What both latency-histogram twins share (naive/histogram.py, native/histogram.hpp).

* The layout: log-linear buckets, ``SUB_BUCKETS`` per power of two (native/histogram.hpp
  holds the same constants; tests/test_histogram.py checks that the extension exports the
  same numbers and that every bucket boundary of the two twins is the same).
* The one rule for what a histogram accepts (:func:`check_latency`) and for a percentile
  (:func:`percentile_ppm`): both twins call these before they touch their state.
"""

from __future__ import annotations

import math
import operator
from typing import Final

__all__ = ["BUCKETS", "MAX_LATENCY", "PERCENTILES", "SUB_BUCKETS", "SUB_BUCKET_BITS",
           "check_latency", "percentile_ppm"]

# --8<-- [start:layout]
# Values below 2 * SUB_BUCKETS (64 ns) get one bucket each (exact). Above, each power of
# two [2^e, 2^(e+1)) is cut into SUB_BUCKETS equal buckets, so a bucket is never wider
# than 1/SUB_BUCKETS of its lowest value: any value is known to within 1/32 = 3.125%.
# 1,920 buckets cover every uint64 (0 .. 2^64-1 ns, centuries): there is no overflow.
SUB_BUCKET_BITS: Final = 5
SUB_BUCKETS: Final = 1 << SUB_BUCKET_BITS
BUCKETS: Final = (64 - SUB_BUCKET_BITS) * SUB_BUCKETS + SUB_BUCKETS   # 1,920
MAX_LATENCY: Final = 2**64 - 1
# --8<-- [end:layout]

# The report's percentiles, in parts per million of the samples: integers, so that the
# rank is exact (99.9% of 1,000 samples is the 999th, not 999.0000000000001 -> 1,000th).
PERCENTILES: Final = (("p50", 500_000), ("p90", 900_000), ("p99", 990_000),
                      ("p99.9", 999_000))


def check_latency(ns: object) -> int:
    """``ns`` as an int if it is an integer 0 .. 2^64-1, else ValueError naming it.

    Floats (NaN, 1.5, even 3.0), negatives and values past 2^64-1 are all refused the
    same way in both twins: a latency histogram counts whole nanoseconds.
    """
    try:
        value = operator.index(ns)  # type: ignore[arg-type]
    except TypeError:
        shown = ns.item() if hasattr(ns, "item") else ns  # a numpy scalar as a plain one
        raise ValueError(f"histogram: {shown!r} is not a latency (an integer 0..2**64-1 ns)"
                         ) from None
    if not 0 <= value <= MAX_LATENCY:
        raise ValueError(f"histogram: {value!r} is not a latency (an integer 0..2**64-1 ns)")
    return value


def percentile_ppm(p: float) -> int:
    """Percentile ``p`` (0..100, e.g. 99.9) in parts per million, rounded to an integer."""
    try:
        x = float(p)
    except (TypeError, ValueError):
        raise ValueError(f"percentile must be a number in 0..100, got {p!r}") from None
    if math.isnan(x) or not 0.0 <= x <= 100.0:
        raise ValueError(f"percentile must be a number in 0..100, got {p!r}")
    return round(x * 10_000)
