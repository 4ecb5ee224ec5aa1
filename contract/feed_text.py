"""Feed text as report text: the one rule both twins use (C++: ``native/feed_text.hpp``).

ITCH text fields (stock names, message type bytes, trading states) are raw bytes that
the exchange defines as printable ASCII, but a damaged or hostile feed can hold any byte.
Reports, JSON and the books CSV show them by one reversible rule, so that the twins'
outputs compare byte for byte and a CSV column can never be split by a stock name.
"""

from __future__ import annotations

__all__ = ["show_bytes", "show_stock", "type_key"]

# Printable ASCII that is safe everywhere a name is written: not the escape character
# itself (backslash), not the CSV separator (comma), not the CSV quote (double quote).
_PLAIN = frozenset(range(0x20, 0x7F)) - {ord("\\"), ord(","), ord('"')}


# --8<-- [start:show_bytes]
def show_bytes(raw: bytes) -> str:
    """Feed bytes as text: printable ASCII as itself, except backslash, comma and double
    quote; any other byte as ``\\xNN`` (two lowercase hex digits). Reversible, ASCII."""
    return "".join(chr(b) if b in _PLAIN else f"\\x{b:02x}" for b in raw)


def show_stock(raw: bytes) -> str:
    """A stock name: its bytes with trailing spaces (only spaces: a NUL is shown, as
    ``\\x00``) cut, then :func:`show_bytes`."""
    return show_bytes(raw.rstrip(b" "))
# --8<-- [end:show_bytes]


def type_key(code: int) -> str:
    """A message type byte as a report key ('A', 'S', ..., '\\x80', '\\x00')."""
    return show_bytes(bytes([code]))
