"""A small blocking SoupBinTCP client for the order-entry tests and the golden transcripts.

Every wait is bounded (a socket timeout); sockets talk to 127.0.0.1 only.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from contract import ouch
from contract import soupbin as sb


def clordid(text: str) -> bytes:
    return text.encode().ljust(14)


def enter(urn: int, side: bytes, qty: int, price: int, symbol: bytes = b"AAPL",
          tif: bytes = b"0", display: bytes = b"Y", ise: bytes = b"N", cross: bytes = b"N",
          cl: str = "") -> bytes:
    """A framed Enter Order (no options)."""
    msg = ouch.ENTER.pack(b"O", urn, side, qty, symbol.ljust(8), price, tif, display, b"A",
                          ise, cross, clordid(cl or f"C{urn}"), 0)
    return sb.frame(sb.UNSEQUENCED, msg)


def replace(orig: int, urn: int, qty: int, price: int, tif: bytes = b"0",
            display: bytes = b"Y") -> bytes:
    msg = ouch.REPLACE.pack(b"U", orig, urn, qty, price, tif, display, b"N",
                            clordid(f"R{urn}"), 0)
    return sb.frame(sb.UNSEQUENCED, msg)


def cancel(urn: int, qty: int = 0) -> bytes:
    return sb.frame(sb.UNSEQUENCED, ouch.CANCEL.pack(b"X", urn, qty, 0))


def modify(urn: int, side: bytes, qty: int) -> bytes:
    return sb.frame(sb.UNSEQUENCED, ouch.MODIFY.pack(b"M", urn, side, qty, 0))


def mass_cancel(urn: int, symbol: bytes = b"") -> bytes:
    return sb.frame(sb.UNSEQUENCED, ouch.MASS_CANCEL.pack(b"C", urn, b"FIRM", symbol.ljust(8), 0))


class Client:
    """One connection: send bytes, receive whole packets (type byte + payload)."""

    def __init__(self, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.framer = sb.Framer(max_packet=70_000)
        self.queue: list[bytes] = []
        self.raw = bytearray()                # every byte received, for transcripts

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        try:
            data = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return False
        if not data:
            return False
        self.raw += data
        self.queue += self.framer.feed(data)
        return True

    def packets(self, n: int, skip_heartbeats: bool = True) -> list[bytes]:
        """The next n packets (H skipped unless asked); fewer if the server closes."""
        out: list[bytes] = []
        while len(out) < n:
            while not self.queue:
                if not self._fill():
                    return out
            p = self.queue.pop(0)
            if skip_heartbeats and p == b"H":
                continue
            out.append(p)
        return out

    def packet(self) -> bytes:
        got = self.packets(1)
        assert got, "the server closed the connection"
        return got[0]

    def closed(self, timeout: float = 5.0) -> bool:
        """Does the server close the connection (within timeout), whatever it sends first?"""
        self.sock.settimeout(timeout)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if not self._fill():
                    return True
            except TimeoutError:
                return False
        return False

    def login(self, user: str = "USER01", password: str = "PASSWD", seq: int = 1,
              session: bytes = b" " * 10, **kw: Any) -> bytes:
        self.send(sb.login_request(user, password, session, seq, **kw))
        return self.packet()

    def close(self) -> None:
        self.sock.close()


def wait_stat(server: Any, key: str, at_least: int, timeout: float = 10.0) -> int:
    """Poll the server's stats until ``key`` reaches ``at_least`` (bounded)."""
    end = time.monotonic() + timeout
    while True:
        value: int = server.stats()[key]
        if value >= at_least or time.monotonic() > end:
            return value
        time.sleep(0.001)
