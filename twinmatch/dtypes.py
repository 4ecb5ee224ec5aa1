"""The numpy dtypes of every batch API, defined once for both twins.

The optimized twin reads and writes these arrays in C++ as plain structs, so each
dtype fixes every field's offset and the record size; ``native/dtypes.hpp`` holds the
matching C++ structs and ``static_assert``s the same offsets. Change both or neither.
"""

from __future__ import annotations

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
LOBSTER_HALT: Final = 7            # trading halt (price -1 halt, 0 resume, 1 quoting)

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


def make_ops(n: int) -> np.ndarray:
    """A zeroed operations array of length n."""
    return np.zeros(n, dtype=OPS_DTYPE)
