"""What both market twins (naive/market.py, optimized/market.py) check the same way.

The modes, and the arguments of the market's queries: one function per rule, so the two
twins give the same exception with the same words for the same bad argument.
"""

from __future__ import annotations

from typing import Final

__all__ = ["BOOK_STATES", "MODES", "check_locate", "check_mode", "check_order_ref"]

MODES: Final = ("book", "match")
BOOK_STATES: Final = ("locked", "crossed")
MAX_REF: Final = 2**64 - 1


def check_mode(mode: object) -> str:
    """``book`` (feed handler) or ``match`` (matching engine); else a ValueError."""
    if mode not in MODES:
        raise ValueError(f"mode must be 'book' or 'match', got {mode!r}")
    return str(mode)


def check_locate(locate: object) -> int:
    """A stock locate: an int in 0..65535 (ITCH's 2-byte field)."""
    if not isinstance(locate, int) or isinstance(locate, bool):
        raise TypeError(f"locate must be an int, got {type(locate).__name__}")
    if not 0 <= locate <= 0xFFFF:
        raise ValueError(f"locate must be 0..65535, got {locate}")
    return locate


def check_order_ref(order_ref: object) -> int:
    """An order reference number: an int in 0..2^64-1 (ITCH's 8-byte field)."""
    if not isinstance(order_ref, int) or isinstance(order_ref, bool):
        raise TypeError(f"order_ref must be an int, got {type(order_ref).__name__}")
    if not 0 <= order_ref <= MAX_REF:
        raise ValueError(f"order_ref must be 0..{MAX_REF}, got {order_ref}")
    return order_ref
