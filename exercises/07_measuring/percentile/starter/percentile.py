"""07_measuring/percentile: a percentile from a histogram's bucket counts."""

from __future__ import annotations


def percentile(counts: list[int], width_ns: int, overflow: int, maximum: int, p: float) -> int:
    """The p-th percentile (0 < p <= 100) of the values a histogram counted.

    Bucket i of ``counts`` holds the values in [i * width_ns, (i + 1) * width_ns);
    ``overflow`` values were past the last bucket; ``maximum`` is the largest value.
    Answer: the largest value the bucket holding the ceil(p/100 * n)-th smallest value
    can hold ((i + 1) * width_ns - 1: the twins' rule, chapter 7), but never more than
    ``maximum``; in the overflow bucket, ``maximum``. 0 when empty.
    """
    # TODO: the mean is not a percentile. Find the rank, then walk the buckets until
    # that many values have been seen.
    n = sum(counts) + overflow
    if n == 0:
        return 0
    total = sum((i + 0.5) * width_ns * c for i, c in enumerate(counts)) + maximum * overflow
    return int(total / n)
