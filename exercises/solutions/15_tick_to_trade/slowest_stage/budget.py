"""Chapter 15's latency budget from stage stamps, and its slowest stage: a solution."""

from __future__ import annotations

import numpy as np

# contract/trade.py's STAGES: one column each
STAGES = ("kernel", "user", "decoded", "applied", "decided", "encoded", "sent",
          "server", "acked")
LAST = STAGES.index("sent")


def spans(rows: np.ndarray, stamp_cost_ns: int) -> dict[str, float]:
    """"a -> b" for each consecutive pair of STAGES[0 .. LAST]: the median ns between
    them over rows with both stamps (> 0); user-space spans (all but the first) minus
    the stamp cost, never below 0."""
    out: dict[str, float] = {}
    for i in range(LAST):
        a, b = rows[:, i], rows[:, i + 1]
        ok = (a > 0) & (b > 0)
        d = (b[ok] - a[ok]).astype(np.int64)
        if i > 0:
            d = np.maximum(d - stamp_cost_ns, 0)
        out[f"{STAGES[i]} -> {STAGES[i + 1]}"] = float(np.median(d)) if d.size else 0.0
    return out


def slowest(rows: np.ndarray, stamp_cost_ns: int) -> str:
    """The span with the largest median."""
    table = spans(rows, stamp_cost_ns)
    return max(table, key=lambda k: table[k])
