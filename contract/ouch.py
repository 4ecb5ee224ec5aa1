"""OUCH 5.0 (rev 1.04), the order-entry messages both twins speak (chapter 12).

Layouts from ``/work/shared/spec/order-entry.md`` §2, written as ``struct`` formats of the
fixed part (through Appendage Length); ``tests/test_entry.py`` checks every one against the
spec's machine-readable table. Integers are big-endian and unsigned; prices are u64 with 4
implied decimals; timestamps are nanoseconds since midnight. The same type letter means
different messages inbound and outbound, so the tables are split by direction.

What this server does *not* implement, and says so: option tags are parsed (checked for
well-formed TagValue elements) but not acted on, and outbound messages carry an empty
appendage (``00 00``) or, where it is optional, none; UserRefIdx channels (tag 28);
Disable/Enable (D/E) and Account Query (Q) are known but dropped as ``unknown_message``.
"""

from __future__ import annotations

import struct
from typing import Final

# --8<-- [start:layouts]
# Inbound (client -> server), fixed part through Appendage Length.
ENTER: Final = struct.Struct(">cIcI8sQccccc14sH")     # O: 47
REPLACE: Final = struct.Struct(">cIIIQccc14sH")       # U: 40
CANCEL: Final = struct.Struct(">cIIH")                # X: 11 (9 without Appendage Length)
MODIFY: Final = struct.Struct(">cIcIH")               # M: 12 (10 bare)
MASS_CANCEL: Final = struct.Struct(">cI4s8sH")        # C: 19
# Outbound (server -> client).
SYSTEM_EVENT: Final = struct.Struct(">cQc")           # S: 10
ACCEPTED: Final = struct.Struct(">cQIcI8sQccQcccc14sH")  # A: 64
REPLACED: Final = struct.Struct(">cQIIcI8sQccQcccc14sH")  # U: 68
CANCELED: Final = struct.Struct(">cQIIc")             # C: 18 bare (appendage optional)
EXECUTED: Final = struct.Struct(">cQIIQcQH")          # E: 36
REJECTED: Final = struct.Struct(">cQIH14s")           # J: 29 bare
MODIFIED: Final = struct.Struct(">cQIcI")             # M: 18 bare
MASS_CANCEL_RESPONSE: Final = struct.Struct(">cQI4s8sH")  # X: 27
# --8<-- [end:layouts]

# Inbound type -> (fixed length with Appendage Length, length without it or None if the
# appendage block is required). A message is well formed when its length is the bare
# length, or fixed + Appendage Length (spec §2.6).
INBOUND_SIZES: Final = {
    b"O": (ENTER.size, None),
    b"U": (REPLACE.size, None),
    b"X": (CANCEL.size, CANCEL.size - 2),
    b"M": (MODIFY.size, MODIFY.size - 2),
    b"C": (MASS_CANCEL.size, None),
}
# Known to OUCH 5.0 but not taken by this server (counted as unknown_message).
INBOUND_NOT_TAKEN: Final = (b"D", b"E", b"Q")

# Reject reasons this server gives (Rejected J, u16; spec §2.7).
REJECT_INVALID_DISPLAY: Final = 0x0003
REJECT_ISO_NOT_ALLOWED: Final = 0x0008
REJECT_INVALID_SIDE: Final = 0x0009
REJECT_INVALID_QUANTITY: Final = 0x0013
REJECT_INVALID_CROSS: Final = 0x0014
REJECT_INVALID_SYMBOL: Final = 0x0017
REJECT_INVALID_PRICE: Final = 0x001D
REJECT_OTHER: Final = 0x000F

# Cancel reasons this server gives (Order Canceled C).
CANCEL_USER: Final = b"U"          # user requested (X, M to 0, mass cancel, a bad replace)
CANCEL_IOC: Final = b"I"           # immediate or cancel: the remainder of an IOC or market

PRICE_MAX: Final = 1_999_999_900            # $199,999.9900 (spec §2.1)
PRICE_MARKET_CROSS: Final = 0x7FFFFFFF      # $214,748.3647: a market order
PRICE_MARKET: Final = 2_000_000_000         # $200,000.00: "also treated as market"
MAX_QUANTITY_EXCLUSIVE: Final = 1_000_000   # Enter/Replace: 0 < Quantity < 1,000,000
SIDES: Final = b"BSTE"
TIME_IN_FORCE: Final = b"0356E"             # Day, IOC, GTX, GTT, After hours
TIF_IOC: Final = ord("3")
DISPLAYS: Final = b"YNA"
CAPACITIES: Final = b"APRO"                 # agency, principal, riskless, other
TIF_GTT: Final = ord("6")                   # good till time: needs an ExpireTime option
TAG_EXPIRE_TIME: Final = 15                 # ExpireTime: u32 seconds to live, 1..86399
EXPIRE_TIME_MAX_EXCLUSIVE: Final = 86_400
OPEN_TIME_NS: Final = 34_200_000_000_000    # 09:30:00, the fixed clock's start

__all__ = [name for name in dir() if name.isupper()] + [
    "appendage_ok", "clordid_ok", "expire_time_ok", "message_length_ok"]


def appendage_ok(tail: bytes) -> bool:
    """Optional Appendage bytes are whole TagValue elements ([Length][Tag][value...],
    Length = 1 + value size >= 1), walked by their own lengths (pitfall 5)."""
    i = 0
    while i < len(tail):
        n = tail[i]
        if n < 1 or i + 1 + n > len(tail):
            return False
        i += 1 + n
    return True


def message_length_ok(msg: bytes) -> bool:
    """Is an inbound message (of a type in INBOUND_SIZES) as long as its type says?"""
    fixed, bare = INBOUND_SIZES[msg[:1]]
    if bare is not None and len(msg) == bare:
        return True
    if len(msg) < fixed:
        return False
    app_len = int.from_bytes(msg[fixed - 2:fixed], "big")
    return fixed + app_len == len(msg) and appendage_ok(msg[fixed:])


def expire_time_ok(tail: bytes) -> bool:
    """Does a (well-formed) Optional Appendage carry an ExpireTime the spec allows: tag
    15 with a 4-byte value in 1..86399 (0 means "none", spec §2.5)? Time-in-Force 6
    (GTT) requires one; an order without it is rejected."""
    i = 0
    while i < len(tail):
        n = tail[i]
        if n == 5 and tail[i + 1] == TAG_EXPIRE_TIME:
            if 0 < int.from_bytes(tail[i + 2:i + 6], "big") < EXPIRE_TIME_MAX_EXCLUSIVE:
                return True
        i += 1 + n
    return False


def clordid_ok(clordid: bytes) -> bool:
    """ClOrdID is "alphanumeric plus spaces, non-binary" (spec §2.1): this server takes
    printable ASCII (0x20..0x7E) and refuses the rest, so no control byte is echoed back
    (taking punctuation too is a project choice)."""
    return all(0x20 <= b <= 0x7E for b in clordid)
