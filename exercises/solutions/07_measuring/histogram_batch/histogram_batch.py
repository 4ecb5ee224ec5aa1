"""Count a batch of latencies into the book's log-linear histogram (reference solution).

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


def bit_length(values: np.ndarray) -> np.ndarray:
    """int.bit_length() of every uint64, exactly. A float64's exponent (np.frexp) is the
    bit length of the integer it holds, but a uint64 with more than 53 significant bits
    may round up to the next power of two, one too long: where shifting the value by
    length - 1 leaves nothing, the length was one too many."""
    _, exponent = np.frexp(values.astype(np.float64))
    length = np.minimum(exponent, 64).astype(np.uint64)  # 2**64 - 1 rounds to 2**64
    too_long = (values >> np.maximum(length, np.uint64(1)) - np.uint64(1)) == 0
    return length - (too_long & (values != 0))


def counts_of(values: np.ndarray) -> np.ndarray:
    """How many of ``values`` (a uint64 array) fall in each of the BUCKETS buckets: an
    int64 array of BUCKETS counts."""
    values = np.asarray(values, dtype=np.uint64)
    bits = bit_length(values).astype(np.int64)
    shift = np.maximum(0, bits - 1 - SUB_BUCKET_BITS).astype(np.uint64)
    buckets = (shift << np.uint64(SUB_BUCKET_BITS)) + (values >> shift)
    return np.bincount(buckets.astype(np.int64), minlength=BUCKETS).astype(np.int64)
