"""TODO: chapter 15's latency budget from stage stamps, and its slowest stage."""

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
    # TODO
    return {}


def slowest(rows: np.ndarray, stamp_cost_ns: int) -> str:
    """The span with the largest median."""
    # TODO
    return ""
