"""A SoupBinTCP framer: cut a TCP byte stream into whole logical packets.

Each packet on the wire is ``[u16 big-endian Packet Length][type byte][payload]``, and
the Packet Length counts the type byte and the payload but not its own two bytes. TCP
delivers the stream in pieces of any size: one piece may end in the middle of a length
field, another may carry three packets and half of a fourth.
"""

from __future__ import annotations


class FrameError(ValueError):
    """A Packet Length no packet may have (0, or over the limit): the stream is lost.
    ``packets``: the whole packets cut before it in the same feed, which the caller
    must still handle (an order among them was sent before the bad bytes)."""

    def __init__(self, message: str, packets: list[bytes]) -> None:
        super().__init__(message)
        self.packets = packets


class Framer:
    def __init__(self, max_packet: int = 1024) -> None:
        self.max_packet = max_packet
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """Add bytes; return every packet now complete: its type byte and payload,
        without the 2-byte length. Raise FrameError for a length of 0 or over
        max_packet (as soon as the 2 length bytes have arrived), carrying the packets
        already cut in this call."""
        self._buf += data
        out = []
        while len(self._buf) >= 2:
            length = int.from_bytes(self._buf[:2], "big")
            if length == 0 or length > self.max_packet:
                raise FrameError(f"bad Packet Length {length}", out)
            if len(self._buf) < 2 + length:
                break
            out.append(bytes(self._buf[2:2 + length]))
            del self._buf[:2 + length]
        return out

    @property
    def pending(self) -> int:
        """Bytes received that are not yet part of a whole packet."""
        return len(self._buf)
