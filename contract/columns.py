"""Chapter 9's shared rules: the filter's arguments and the aggregate's output dtype.

Both twins of ``columns`` (``naive/columns.py``, ``optimized/columns.py``) check their
arguments here, so they accept and refuse the same ones, and return ``VWAP_DTYPE`` rows.

The two workloads, on a decoded day (``EVENT_DTYPE`` records, chapter 3):

* **filter** ``adds_above(events, stock, price)``: the indices, ascending, of every add
  order (type ``A`` or ``F``) whose ``stock`` field is ``stock`` (space-padded to 8
  bytes, as on the wire) and whose ``price`` is strictly above ``price``.
* **aggregate** ``vwap(events)``: per locate, the volume-weighted price of the day's
  executions at the resting price. Only ``E`` (order executed) messages count: an ``E``
  trades a resting order at that order's own price, which the ``E`` does not carry, so
  each is priced by a join on ``order_ref``: the price of the latest ``A``/``F`` with
  that ``order_ref``, or of the latest ``U`` whose ``new_order_ref`` it is, *before* the
  ``E`` in the stream. Deletes and cancels do not forget a price (this is a join, not a
  book: chapter 5 rebuilds the books and counts an execution of a deleted order as an
  anomaly). An ``E`` with no such earlier message is counted in ``unpriced`` and left out
  of the sums. Not counted: ``C`` (executed *with price*: it prints at a price other than
  the resting one), ``P`` (trades of hidden orders) and ``Q`` (crosses). The row's
  locate is the ``E``'s own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

import numpy as np

from contract.dtypes import MAX_PRICE

# --8<-- [start:vwap_dtype]
# One row of vwap(): a locate with at least one E. notional = sum of shares * price,
# exact: it can pass 2**64, so it is split into two 64-bit halves (notional()).
VWAP_DTYPE: Final = np.dtype(
    {
        "names": [
            "locate", "executions", "unpriced", "shares", "notional_lo", "notional_hi"
        ],
        "formats": ["<u2", "<u8", "<u8", "<u8", "<u8", "<u8"],
        "offsets": [0, 8, 16, 24, 32, 40],
        "itemsize": 48,
    }
)
# --8<-- [end:vwap_dtype]

ADD_TYPES: Final = (ord("A"), ord("F"))
EXECUTE_TYPE: Final = ord("E")
REPLACE_TYPE: Final = ord("U")

# The columns of the struct-of-arrays form: EVENT_DTYPE's fields, in its order.
COLUMN_NAMES: Final = (
    "timestamp", "order_ref", "new_order_ref", "match_number", "shares", "price",
    "locate", "type", "side", "printable", "stock",
)


class ColumnsLike(Protocol):
    """The struct-of-arrays form in both twins (``to_columns(events)`` returns one).

    tests/test_columns.py assigns each twin's ``Columns`` to this, so mypy --strict
    catches a renamed method or a changed signature in either. The optimized twin's
    ``adds_above`` takes more, optional, arguments (which SIMD kernel; a row range).
    """

    def __len__(self) -> int: ...
    def column(self, name: str) -> np.ndarray: ...
    def adds_above(self, stock: bytes | str, price: int) -> np.ndarray: ...
    def vwap(self) -> np.ndarray: ...


def stock_field(stock: bytes | str) -> bytes:
    """``stock`` as the 8 bytes of the wire field: ASCII, space-padded on the right.

    A ``str`` must be ASCII; more than 8 bytes is a ValueError (no event can hold it).
    """
    raw = stock.encode("ascii") if isinstance(stock, str) else bytes(stock)
    if len(raw) > 8:
        raise ValueError(f"stock {raw!r} is longer than 8 bytes")
    return raw.ljust(8, b" ")


def stock_key(stock: bytes | str) -> int:
    """The 8 stock bytes read as one little-endian 64-bit integer (how C++ compares them)."""
    return int.from_bytes(stock_field(stock), "little")


def check_price(price: int) -> int:
    """The filter's threshold: an integer 0..MAX_PRICE (a bool or anything else refused)."""
    if isinstance(price, bool) or not isinstance(price, (int, np.integer)):
        raise TypeError(f"price must be an integer, got {type(price).__name__}")
    if not 0 <= int(price) <= MAX_PRICE:
        raise ValueError(f"price {price} is outside 0..{MAX_PRICE}")
    return int(price)


def notional(row: np.void) -> int:
    """The exact sum of shares * price of one VWAP_DTYPE row."""
    return (int(row["notional_hi"]) << 64) | int(row["notional_lo"])


def vwap_price(row: np.void) -> int | None:
    """The row's volume-weighted price, rounded down (None when no shares traded)."""
    shares = int(row["shares"])
    return notional(row) // shares if shares else None


def vwap_rows(rows: Sequence[Sequence[int]]) -> np.ndarray:
    """VWAP_DTYPE records from (locate, executions, unpriced, shares, notional) tuples."""
    out = np.zeros(len(rows), dtype=VWAP_DTYPE)
    for i, (locate, executions, unpriced, shares, total) in enumerate(rows):
        out[i] = (locate, executions, unpriced, shares, total & (2**64 - 1), total >> 64)
    return out
