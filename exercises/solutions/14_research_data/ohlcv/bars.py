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
    """The readable twin: one pass, a dict of bars keyed by (locate, second)."""
    bars: dict[tuple[int, int], list[int]] = {}
    rows = zip(trades["kind"].tolist(), trades["locate"].tolist(),
               trades["timestamp"].tolist(), trades["price"].tolist(),
               trades["shares"].tolist(), strict=True)
    for kind, locate, ts, price, shares in rows:  # rows come in feed order
        if kind not in PRINTS:
            continue
        key = (locate, ts // NS)
        bar = bars.get(key)
        if bar is None:
            bars[key] = [price, price, price, price, shares, 1]
        else:
            bar[1] = max(bar[1], price)
            bar[2] = min(bar[2], price)
            bar[3] = price
            bar[4] += shares
            bar[5] += 1
    keys = sorted(bars)
    out = {"locate": np.array([k[0] for k in keys], dtype=np.uint16),
           "second": np.array([k[1] for k in keys], dtype=np.uint64)}
    for i, name in enumerate(("open", "high", "low", "close")):
        out[name] = np.array([bars[k][i] for k in keys], dtype=np.uint32)
    out["volume"] = np.array([bars[k][4] for k in keys], dtype=np.uint64)
    out["trades"] = np.array([bars[k][5] for k in keys], dtype=np.uint64)
    return out


def bars_numpy(trades: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The columnar twin: sort once, cut into groups, reduce each group with numpy."""
    keep = np.isin(trades["kind"], PRINTS)
    locate = trades["locate"][keep]
    second = (trades["timestamp"][keep] // NS).astype(np.uint64)
    price = trades["price"][keep]
    shares = trades["shares"][keep].astype(np.uint64)
    order = np.lexsort((trades["seq"][keep], second, locate))  # locate, second, then seq
    locate, second, price, shares = locate[order], second[order], price[order], shares[order]
    if len(order) == 0:
        return {"locate": locate, "second": second, "open": price, "high": price,
                "low": price, "close": price, "volume": shares, "trades": shares.copy()}
    new = np.ones(len(order), dtype=bool)  # True where a new (locate, second) begins
    new[1:] = (locate[1:] != locate[:-1]) | (second[1:] != second[:-1])
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(order)) - 1
    return {
        "locate": locate[starts], "second": second[starts],
        "open": price[starts], "high": np.maximum.reduceat(price, starts),
        "low": np.minimum.reduceat(price, starts), "close": price[ends],
        "volume": np.add.reduceat(shares, starts),
        "trades": (ends - starts + 1).astype(np.uint64),
    }
