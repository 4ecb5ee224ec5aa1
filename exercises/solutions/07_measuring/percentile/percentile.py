"""07_measuring/percentile: a percentile from a histogram's bucket counts."""

from __future__ import annotations


def percentile(counts: list[int], width_ns: int, overflow: int, maximum: int, p: float) -> int:
    """The p-th percentile (0 < p <= 100) of the values a histogram counted.

    Bucket i of ``counts`` holds the values in [i * width_ns, (i + 1) * width_ns);
    ``overflow`` values were past the last bucket; ``maximum`` is the largest value.
    Answer: the largest value the bucket holding the ceil(p/100 * n)-th smallest value
    can hold ((i + 1) * width_ns - 1: the twins' rule, chapter 7), but never more than
    ``maximum``; in the overflow bucket, ``maximum``. 0 when empty.
    The rank is computed in integers (p as parts per million): in floating point,
    99.9 / 100 * 1000 is 999.0000000000001, whose ceiling is the 1,000th value.
    """
    n = sum(counts) + overflow
    if n == 0:
        return 0
    ppm = round(p * 10_000)  # 99.9 -> 999_000
    rank = min(max((ppm * n + 999_999) // 1_000_000, 1), n)  # ceil, in integers
    seen = 0
    for i, c in enumerate(counts):
        seen += c
        if seen >= rank:
            return min(maximum, (i + 1) * width_ns - 1)
    return maximum
