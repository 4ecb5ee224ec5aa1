"""07_measuring/percentile: a percentile from a histogram's bucket counts."""

from __future__ import annotations

import math


def percentile(counts: list[int], width_ns: int, overflow: int, maximum: int, p: float) -> int:
    """The p-th percentile (0 < p <= 100) of the values a histogram counted.

    Bucket i of ``counts`` holds the values in [i * width_ns, (i + 1) * width_ns);
    ``overflow`` values were past the last bucket; ``maximum`` is the largest value.
    Answer: the upper edge of the bucket holding the ceil(p/100 * n)-th smallest value,
    but never more than ``maximum``; in the overflow bucket, ``maximum``. 0 when empty.
    """
    n = sum(counts) + overflow
    if n == 0:
        return 0
    rank = min(max(math.ceil(p / 100 * n), 1), n)
    seen = 0
    for i, c in enumerate(counts):
        seen += c
        if seen >= rank:
            return min(maximum, (i + 1) * width_ns)
    return maximum
