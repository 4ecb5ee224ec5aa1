"""Count a batch of latencies into the book's log-linear histogram (starter: correct, slow).

The layout of chapter 7: values below 64 get one bucket each; above, every power of two
[2^e, 2^(e+1)) is cut into 32 equal buckets; 1,920 buckets cover every uint64.
"""

from __future__ import annotations

import numpy as np

SUB_BUCKET_BITS = 5
BUCKETS = 1_920


def bucket_of(ns: int) -> int:
    """The bucket of one value (as naive/histogram.py computes it)."""
    shift = max(0, ns.bit_length() - 1 - SUB_BUCKET_BITS)  # how many low bits to drop
    return (shift << SUB_BUCKET_BITS) + (ns >> shift)


def counts_of(values: np.ndarray) -> np.ndarray:
    """How many of ``values`` (a uint64 array) fall in each of the BUCKETS buckets: an
    int64 array of BUCKETS counts."""
    # TODO: this is one Python call and one boxed int per value. Compute every value's
    # bucket with whole-array operations instead (numpy has no bit_length, but a few
    # shifts and comparisons make one), then count them all in one call.
    counts = np.zeros(BUCKETS, dtype=np.int64)
    for v in values.tolist():
        counts[bucket_of(v)] += 1
    return counts
