"""The numpy dtypes of every batch API, defined once for both twins.

The optimized twin reads and writes these arrays in C++ as plain structs, so each
dtype fixes every field's offset and the record size; ``native/dtypes.hpp`` holds the
matching C++ structs and ``static_assert``s the same offsets. Change both or neither:
tests/test_contract.py compares every layout and code here with the extension's own
(``_native.contract_tables()``), and names the one that differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

# --8<-- [start:ops]
# Operation codes for Book.apply (field "op").
OP_LIMIT: Final = 0     # add_limit(order_id, side, price, qty)
OP_MARKET: Final = 1    # add_market(order_id, side, qty)
OP_CANCEL: Final = 2    # cancel(order_id)
OP_REDUCE: Final = 3    # reduce(order_id, qty)
OP_EXECUTE: Final = 4   # execute(order_id, qty)
OP_REPLACE: Final = 5   # replace(order_id, new_order_id, price, qty)

# One operation: 32 bytes, 8-byte fields first so nothing needs padding inside.
OPS_DTYPE: Final = np.dtype(
    {
        "names": ["order_id", "new_order_id", "price", "qty", "op", "side"],
        "formats": ["<u8", "<u8", "<u4", "<u4", "u1", "u1"],
        "offsets": [0, 8, 16, 20, 24, 25],
        "itemsize": 32,
    }
)

# One fill, in the order produced; op_index says which operation caused it.
FILL_DTYPE: Final = np.dtype(
    {
        "names": ["resting_id", "aggressor_id", "price", "qty", "op_index", "aggressor_side"],
        "formats": ["<u8", "<u8", "<u4", "<u4", "<u4", "u1"],
        "offsets": [0, 8, 16, 20, 24, 28],
        "itemsize": 32,
    }
)

# One rejected operation: its index in the ops array and the reason code.
REJECT_DTYPE: Final = np.dtype(
    {
        "names": ["index", "reason"],
        "formats": ["<u8", "u1"],
        "offsets": [0, 8],
        "itemsize": 16,
    }
)
# --8<-- [end:ops]

# --8<-- [start:lobster]
# LOBSTER message types (field "type").
LOBSTER_SUBMIT: Final = 1          # new limit order -> OP_LIMIT
LOBSTER_CANCEL: Final = 2          # partial cancel -> OP_REDUCE
LOBSTER_DELETE: Final = 3          # total deletion -> OP_CANCEL
LOBSTER_EXECUTE: Final = 4         # execution of a visible order -> OP_EXECUTE
LOBSTER_HIDDEN: Final = 5          # execution of a hidden order: no book change
LOBSTER_CROSS: Final = 6           # auction cross trade: no book change
LOBSTER_HALT: Final = 7            # trading halt (price -1 halt, 0 quoting, 1 trading)

# One LOBSTER message-file row. time is int64 nanoseconds after midnight, parsed exactly
# from the decimal seconds of the file (no float rounding); price is signed because halt
# rows carry -1; direction is 1 buy, -1 sell, as in the file.
LOBSTER_DTYPE: Final = np.dtype(
    {
        "names": ["time", "order_id", "price", "size", "type", "direction"],
        "formats": ["<i8", "<u8", "<i8", "<u4", "u1", "i1"],
        "offsets": [0, 8, 16, 24, 28, 29],
        "itemsize": 32,
    }
)
# --8<-- [end:lobster]

# --8<-- [start:reasons]
# Reject reason codes: the number in a REJECT_DTYPE record and the name the
# single-op API puts in OrderRejected.reason. Code 0 is never used.
REASONS: Final[tuple[str, ...]] = (
    "ok",
    "duplicate_id",   # the id is already resting (a replace may reuse its own id)
    "unknown_id",     # no resting order has this id
    "bad_price",      # price 0 or above 2**32 - 1
    "bad_qty",        # qty 0 or above 2**32 - 1
    "over_reduce",    # reduce/execute by more than rests
    "bad_side",       # side is neither 0 (BUY) nor 1 (SELL)   (batch API only)
    "bad_op",         # op code not one of OP_*                 (batch API only)
)
REASON_CODE: Final[dict[str, int]] = {name: code for code, name in enumerate(REASONS)}
# --8<-- [end:reasons]

MAX_PRICE: Final = 2**32 - 1
MAX_QTY: Final = 2**32 - 1
MAX_ID: Final = 2**64 - 1


# --8<-- [start:as_records]
def as_records(arr: object, dtype: np.dtype, name: str) -> np.ndarray:
    """``arr`` as a one-dimensional, C-contiguous array of ``dtype``, for a batch API.

    Every twin's batch entry point goes through here, so they accept and refuse the
    same arrays. An array of ``dtype`` is used as it is (a strided slice is copied once).
    One with the same fields, in the same order and of the same types, but another
    layout is converted with one copy: ``np.concatenate`` and field selections give such
    arrays (numpy packs the fields, dropping the padding that fixes the record size).
    Any other dtype is a TypeError; an array that is not one-dimensional a ValueError.
    """
    given = np.asarray(arr)
    if given.dtype != dtype and (_fields(given.dtype) is None
                                 or _fields(given.dtype) != _fields(dtype)):
        raise TypeError(f"{name} must have dtype {_DTYPE_NAMES.get(dtype, dtype)}, "
                        f"got {given.dtype}")
    if given.ndim != 1:
        raise ValueError(f"{name} must be a one-dimensional array")
    return np.ascontiguousarray(given.astype(dtype, copy=False))


def _fields(dtype: np.dtype) -> list[tuple[str, np.dtype]] | None:
    """A structured dtype's fields as (name, type) in order, offsets left out; else None."""
    if dtype.fields is None:
        return None
    return [(name, dtype.fields[name][0]) for name in dtype.names or ()]
# --8<-- [end:as_records]


def concat_records(arrays: Sequence[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """The records of ``arrays`` (each of ``dtype``) in one array of ``dtype``, padding zero.

    ``np.concatenate`` would pack the fields into another dtype, and with ``dtype=`` it
    leaves the padding bytes uninitialised; the twins' outputs are compared as bytes.
    """
    out = np.zeros(sum(len(a) for a in arrays), dtype=dtype)
    at = 0
    for a in arrays:
        out[at:at + len(a)] = a
        at += len(a)
    return out


def make_ops(n: int) -> np.ndarray:
    """A zeroed operations array of length n."""
    return np.zeros(n, dtype=OPS_DTYPE)


# --8<-- [start:event_dtype]
# One decoded ITCH 5.0 message that matters downstream (chapter 3), 56 bytes.
# The 8-byte fields come first and the record size is a multiple of 8, so every field
# sits at its natural alignment and the C++ struct ItchEvent (native/dtypes.hpp) has the
# same layout with no packing tricks.
EVENT_DTYPE: Final = np.dtype(
    {
        "names": [
            "timestamp", "order_ref", "new_order_ref", "match_number", "shares", "price",
            "locate", "type", "side", "printable", "stock",
        ],
        "formats": ["<u8", "<u8", "<u8", "<u8", "<u4", "<u4", "<u2", "u1", "u1", "u1", "S8"],
        "offsets": [0, 8, 16, 24, 32, 36, 40, 42, 43, 44, 48],
        "itemsize": 56,
    }
)
"""Book events decoded from ITCH 5.0 (``itch.decode`` / ``itch.read_file`` in both twins).

Every event has ``type`` (the message type's ASCII code, e.g. ``ord("A")``), ``locate``
and ``timestamp`` (ns since midnight). Fields a message lacks are 0 (``stock`` is
``b""``). Char fields (``side``, ``printable``) hold the ASCII code, e.g. ``ord("B")``.
``stock`` is the 8 raw wire bytes, space-padded (``b"AAPL    "``): strip before comparing.

Which messages produce events, and what each fills:

====  =====================  ==============================================

type  message                fields
====  =====================  ==============================================

S     system event           side = event code (O S Q M E C)
R     stock directory        stock (so replay can map locate -> symbol)
H     stock trading action   stock, side = trading state (H P Q T)
A     add order              order_ref, side, shares, price, stock
F     add order with MPID    as A (the MPID is dropped)
E     order executed         order_ref, shares (executed), match_number
C     executed with price    order_ref, shares, match_number, printable, price
                             (the execution price, not the resting price)
X     order cancel           order_ref, shares (cancelled)
D     order delete           order_ref
U     order replace          order_ref (original), new_order_ref, shares, price
P     trade (non-cross)      order_ref, side, shares, price, match_number, stock
Q     cross trade            order_ref = cross shares (u64 on the wire, too wide for
                             ``shares``), price, match_number, stock,
                             printable = cross type (O C H I ...)
B     broken trade           match_number
====  =====================  ==============================================


The other known types (Y L V W K J h I N O) and unknown types are only counted.
"""

# The message types that produce an event (above); all others are only counted.
EVENT_TYPES: Final = "SRHAFECXDUPQB"
# --8<-- [end:event_dtype]


def records(rows: Sequence[tuple[int, ...]], dtype: np.dtype) -> np.ndarray:
    """A structured array of ``rows`` with every padding byte zero.

    ``np.array(rows, dtype=...)`` leaves the gaps between fields uninitialised, so two
    equal arrays could differ byte for byte; the C++ twins zero their padding, and the
    tests compare whole arrays as bytes.
    """
    out = np.zeros(len(rows), dtype=dtype)
    if rows:
        out[:] = rows
    return out


# --8<-- [start:anomalies]
# Anomaly kinds a book-mode replay counts (naive/market.py, native/market.hpp's Anomaly):
# things NASDAQ's feed should never say to a handler that saw the whole day. (A locked or
# crossed book is not one: NASDAQ's book does lock and cross, e.g. in a halt's quotation
# period; the market reports how often and how long instead.)
ANOMALIES: Final[tuple[str, ...]] = (
    "unknown_ref",      # E C X D U name no live order
    "duplicate_ref",    # A F U add a reference that is already live
    "over_execution",   # E C execute more shares than rest
    "over_cancel",      # X cancels more shares than rest
    "bad_price",        # A F U with price 0
    "bad_shares",       # A F E C X U with 0 shares
    "bad_side",         # A F with a side other than B / S
    "locate_mismatch",  # the reference lives in another locate's book (handled there)
)
# --8<-- [end:anomalies]


# What as_records() calls each dtype in its error messages.
_DTYPE_NAMES: Final[dict[np.dtype, str]] = {
    OPS_DTYPE: "OPS_DTYPE", FILL_DTYPE: "FILL_DTYPE", REJECT_DTYPE: "REJECT_DTYPE",
    LOBSTER_DTYPE: "LOBSTER_DTYPE", EVENT_DTYPE: "EVENT_DTYPE",
}
