"""Exercise 03_itch/struct_parse: two ITCH 5.0 messages with struct (see README.md)."""

from __future__ import annotations

import struct
from typing import Final

# TODO: the big-endian struct formats of the two messages, field by field from the spec
# (the common header first: type, locate, tracking, timestamp). Which format character
# reads 6 raw bytes? Check: .size must be 36 for C and 35 for U.
EXECUTED_WITH_PRICE: Final = struct.Struct(">c")  # C
REPLACE: Final = struct.Struct(">c")               # U


def check(message: bytes, layout: struct.Struct, code: bytes) -> None:
    """Refuse a message of the wrong type or length before unpacking anything."""
    # TODO: raise ValueError when the type byte is not `code` or the length is not
    # layout.size.


def parse_executed_with_price(
    message: bytes,
) -> tuple[int, int, int, int, int, int, bytes, int]:
    """(locate, tracking, timestamp, order_ref, shares, match_number, printable, price)."""
    check(message, EXECUTED_WITH_PRICE, b"C")
    # TODO: unpack the message and return the fields in the order above; the timestamp
    # is a 6-byte big-endian integer.
    return 0, 0, 0, 0, 0, 0, b"", 0


def parse_replace(message: bytes) -> tuple[int, int, int, int, int, int, int]:
    """(locate, tracking, timestamp, order_ref, new_order_ref, shares, price)."""
    check(message, REPLACE, b"U")
    # TODO: as above, for the Order Replace message.
    return 0, 0, 0, 0, 0, 0, 0
