"""Exercise 03_itch/struct_parse, reference solution: two ITCH 5.0 messages with struct."""

from __future__ import annotations

import struct
from typing import Final

# ">" : big-endian, no padding. c = 1 byte, H = u16, 6s = 6 raw bytes (struct has no
# 6-byte integer), Q = u64, I = u32. calcsize gives the message's fixed length.
EXECUTED_WITH_PRICE: Final = struct.Struct(">cHH6sQIQcI")  # C: 36 bytes
REPLACE: Final = struct.Struct(">cHH6sQQII")               # U: 35 bytes


def check(message: bytes, layout: struct.Struct, code: bytes) -> None:
    """Refuse a message of the wrong type or length before unpacking anything."""
    if message[:1] != code:
        raise ValueError(f"not a {code.decode()!r} message: type byte {message[:1]!r}")
    if len(message) != layout.size:
        raise ValueError(f"a {code.decode()!r} message is {layout.size} bytes, got {len(message)}")


def parse_executed_with_price(
    message: bytes,
) -> tuple[int, int, int, int, int, int, bytes, int]:
    """(locate, tracking, timestamp, order_ref, shares, match_number, printable, price)."""
    check(message, EXECUTED_WITH_PRICE, b"C")
    _, locate, tracking, ts, order_ref, shares, match, printable, price = (
        EXECUTED_WITH_PRICE.unpack(message))
    return locate, tracking, int.from_bytes(ts, "big"), order_ref, shares, match, printable, price


def parse_replace(message: bytes) -> tuple[int, int, int, int, int, int, int]:
    """(locate, tracking, timestamp, order_ref, new_order_ref, shares, price)."""
    check(message, REPLACE, b"U")
    _, locate, tracking, ts, order_ref, new_ref, shares, price = REPLACE.unpack(message)
    return locate, tracking, int.from_bytes(ts, "big"), order_ref, new_ref, shares, price
