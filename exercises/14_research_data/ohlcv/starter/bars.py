"""One-second OHLCV bars from a `trades` table (chapter 14), written twice.

``trades`` is the dict of numpy columns ``TableBuilder.take()["trades"]`` returns (see
contract/tables.py). A bar covers one locate and one whole second of ITCH time
(``timestamp // 1_000_000_000``) in which it traded. Only E, C and P rows are prints: a
cross (Q) and a break (B) make no bar here. Each function returns the bars as a dict of
numpy columns, sorted by (locate, second):

    locate (u2), second (u8), open, high, low, close (u4: ITCH price units),
    volume (u8: shares), trades (u8: prints in the bar)

open is the first print of the bar in feed order (by ``seq``), close the last.
"""

from __future__ import annotations

import numpy as np

PRINTS = (ord("E"), ord("C"), ord("P"))
NS = 1_000_000_000


def bars_loop(trades: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The readable twin: one pass over the rows, a dict of bars keyed by (locate, second)."""
    # TODO: walk the rows in order (zip the columns' .tolist()), skip what is not a print,
    # keep [open, high, low, close, volume, trades] per (locate, second), then return the
    # columns sorted by key with the dtypes the module docstring gives.
    raise NotImplementedError


def bars_numpy(trades: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The columnar twin: no Python loop over rows (sort once, cut into groups, reduce)."""
    # TODO: keep the prints (np.isin), sort by (locate, second, seq) with np.lexsort, find
    # where a new (locate, second) starts, and reduce each group: np.maximum.reduceat,
    # np.minimum.reduceat, np.add.reduceat; open/close are the first/last of each group.
    raise NotImplementedError
