"""Chapter 9, the readable twin: one filter and one aggregate over a decoded day.

Two forms of the same answers (the rules are in ``contract/columns.py``):

* ``adds_above`` and ``vwap`` loop over the events one record at a time: the
  specification, an array of structs read the way Python reads anything.
* ``Columns`` is the struct-of-arrays form: one numpy array per field. In Python that is
  all a "struct of arrays" is, and it is what lets numpy run each step of the filter as
  one loop in C over one column.
"""

from __future__ import annotations

import numpy as np

from contract.columns import (
    ADD_TYPES,
    COLUMN_NAMES,
    EXECUTE_TYPE,
    REPLACE_TYPE,
    check_price,
    stock_field,
    vwap_rows,
)
from contract.dtypes import EVENT_DTYPE, as_records

__all__ = ["Columns", "adds_above", "to_columns", "vwap"]


# --8<-- [start:filter_loop]
def adds_above(events: np.ndarray, stock: bytes | str, price: int) -> np.ndarray:
    """Indices of every add (A or F) of ``stock`` priced strictly above ``price``."""
    events = as_records(events, EVENT_DTYPE, "events")
    want, above = stock_field(stock), check_price(price)
    found = []
    # one tuple per record, fields in dtype order
    for i, ev in enumerate(events.tolist()):
        _, _, _, _, _, ev_price, _, ev_type, _, _, ev_stock = ev
        # numpy strips an S8 field's trailing NULs, never spaces: pad back to 8 bytes.
        if (ev_type in ADD_TYPES and ev_stock.ljust(8, b"\0") == want
                and ev_price > above):
            found.append(i)
    return np.array(found, dtype=np.int64)
# --8<-- [end:filter_loop]


# --8<-- [start:vwap_loop]
def vwap(events: np.ndarray) -> np.ndarray:
    """Per locate: E executions, the unpriced ones, shares and notional (VWAP_DTYPE)."""
    events = as_records(events, EVENT_DTYPE, "events")
    price_of: dict[int, int] = {}             # order_ref -> its latest known price
    # locate -> [executions, unpriced, shares, notional]
    sums: dict[int, list[int]] = {}
    for ev in events.tolist():
        _, ref, new_ref, _, shares, price, locate, kind, _, _, _ = ev
        if kind in ADD_TYPES:
            price_of[ref] = price
        elif kind == REPLACE_TYPE:
            price_of[new_ref] = price          # the new order rests at the new price
        elif kind == EXECUTE_TYPE:
            row = sums.setdefault(locate, [0, 0, 0, 0])
            row[0] += 1
            if ref in price_of:
                row[2] += shares
                row[3] += shares * price_of[ref]
            else:
                row[1] += 1
    return vwap_rows([(locate, *sums[locate]) for locate in sorted(sums)])
# --8<-- [end:vwap_loop]


class Columns:
    """The events as a struct of arrays: ``column(name)`` is one contiguous numpy array."""

    def __init__(self, events: np.ndarray) -> None:
        events = as_records(events, EVENT_DTYPE, "events")
        # --8<-- [start:to_columns]
        # Each field copied into an array of its own: 56-byte records become 11 columns.
        self._cols = {name: np.ascontiguousarray(events[name]) for name in COLUMN_NAMES}
        # The stock bytes as one 64-bit integer each: one compare per row, not eight.
        self._cols["stock"] = self._cols["stock"].astype("S8").view("<u8")
        # --8<-- [end:to_columns]

    def __len__(self) -> int:
        return len(self._cols["type"])

    def column(self, name: str) -> np.ndarray:
        """One field's column (``stock`` as little-endian uint64, its 8 bytes)."""
        return self._cols[name]

    # --8<-- [start:filter_numpy]
    def adds_above(self, stock: bytes | str, price: int) -> np.ndarray:
        """The twin of ``adds_above`` above: each condition one pass over one column."""
        key = np.frombuffer(stock_field(stock), dtype="<u8")[0]
        above = check_price(price)
        kind = self._cols["type"]
        hit = (kind == ADD_TYPES[0]) | (kind == ADD_TYPES[1])
        hit &= self._cols["stock"] == key
        hit &= self._cols["price"] > above
        return np.flatnonzero(hit).astype(np.int64)
    # --8<-- [end:filter_numpy]

    # --8<-- [start:vwap_numpy]
    def vwap(self) -> np.ndarray:
        """The twin of ``vwap`` above, the join done by sorting instead of a dict."""
        kind, c = self._cols["type"], self._cols
        intro = np.isin(kind, ADD_TYPES) | (kind == REPLACE_TYPE)
        execs = kind == EXECUTE_TYPE
        rows = np.flatnonzero(intro | execs)                   # stream order
        ref = np.where(kind[rows] == REPLACE_TYPE,
                       c["new_order_ref"][rows], c["order_ref"][rows])
        order = np.lexsort((rows, ref))                  # by ref, then stream order
        rows, ref = rows[order], ref[order]
        is_intro = intro[rows]
        # For each row, the latest introduction at or before it in this order...
        last = np.maximum.accumulate(np.where(is_intro, np.arange(len(rows)), -1))
        e = np.flatnonzero(~is_intro)
        j = last[e]
        # ...which prices the E only if it introduced the same ref (so: earlier in
        # the day).
        priced = (j >= 0) & (ref[np.maximum(j, 0)] == ref[e])
        e_rows = rows[e]
        locate = c["locate"][e_rows].astype(np.int64)
        shares = c["shares"][e_rows].astype(np.uint64)
        price = c["price"][rows[np.maximum(j, 0)]].astype(np.uint64)
        value = np.where(priced, shares * price, 0).astype(np.uint64)  # < 2**64 each
        groups = 65_536                                        # one slot per locate
        executions = np.bincount(locate, minlength=groups)
        unpriced = np.bincount(locate[~priced], minlength=groups)
        traded = np.zeros(groups, np.uint64)
        np.add.at(traded, locate[priced], shares[priced])
        lo, hi = np.zeros(groups, np.uint64), np.zeros(groups, np.uint64)
        # halves, so no sum overflows
        np.add.at(lo, locate, value & np.uint64(0xFFFF_FFFF))
        np.add.at(hi, locate, value >> np.uint64(32))
        out = []
        for loc in np.flatnonzero(executions).tolist():
            total = (int(hi[loc]) << 32) + int(lo[loc])
            out.append((loc, int(executions[loc]), int(unpriced[loc]),
                        int(traded[loc]), total))
        return vwap_rows(out)
    # --8<-- [end:vwap_numpy]


def to_columns(events: np.ndarray) -> Columns:
    """The struct-of-arrays form of ``events`` (``Columns``)."""
    return Columns(events)
