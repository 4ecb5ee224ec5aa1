"""Off the wire, the optimized twin: the same API as naive/pcap.py, scanned in C++.

``native/pcap.hpp`` walks the capture in place (zero copy over the read-only buffer, every
length checked, the GIL released) and writes the MoldUDP64 message blocks of new messages
into one preallocated uint8 array. This module only moves chunks and formats the errors,
word for word as the naive twin does. The decisions (what is counted, skipped or raised)
are listed in naive/pcap.py's docstring.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Iterator
from typing import Any, Final

import numpy as np

from contract.itch_errors import byte_view
from contract.itch_files import Source, check_chunk_size
from contract.pcap import DEFAULT_CHUNK
from contract.pcap_files import decode_stream
from optimized._native import PcapScanner

GLOBAL_HEADER_LEN: Final = 24
RECORD_HEADER_LEN: Final = 16
# native/pcap.hpp's Error codes, by value (tests/test_contract.py checks this against the
# extension's own list).
SCAN_ERRORS: Final = ("none", "bad_magic", "bad_linktype", "record_too_long")
_BAD_MAGIC: Final = SCAN_ERRORS.index("bad_magic")
_BAD_LINKTYPE: Final = SCAN_ERRORS.index("bad_linktype")
_RECORD_TOO_LONG: Final = SCAN_ERRORS.index("record_too_long")

Stats = dict[str, Any]


class PcapError(ValueError):
    """A capture that cannot be read; ``offset`` is the byte offset of the problem.

    From ``scan``, ``blocks`` holds the message blocks of every record before it.
    """

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset
        self.blocks = np.zeros(0, dtype=np.uint8)


def _group_u32(group: str | None) -> int:
    """A dotted IPv4 address as the big-endian u32 the C++ filter compares; -1 = any."""
    if group is None:
        return -1
    parts = group.split(".")
    if len(parts) != 4 or not all(p.isdigit() and int(p) < 256 for p in parts):
        raise ValueError(f"group must be a dotted IPv4 address, got {group!r}")
    return int.from_bytes(bytes(int(p) for p in parts), "big")


def _session(session: str | bytes | None) -> bytes:
    if session is None:
        return b""
    raw = session.encode("latin-1") if isinstance(session, str) else bytes(session)
    if len(raw) > 10:
        raise ValueError(f"a MoldUDP64 session has 10 bytes, got {len(raw)}")
    return raw.ljust(10)


class Scanner:
    """A PCAP reader that consumes whole records from successive chunks of a file.

    ``group`` (dotted IPv4), ``port`` and ``session``: read only that destination / session.
    """

    def __init__(self, group: str | None = None, port: int | None = None,
                 session: str | bytes | None = None) -> None:
        self._native = PcapScanner()
        if port is not None and not 0 <= port <= 0xFFFF:
            raise ValueError(f"port must be 0..65535, got {port}")
        self._native.set_filter(_group_u32(group), -1 if port is None else port,
                                _session(session))
        self.error: PcapError | None = None

    def streams(self) -> list[Stats]:
        """Each MoldUDP64 stream's own counts, in the order they first appeared."""
        streams: list[Stats] = self._native.streams()
        return streams

    @property
    def stats(self) -> Stats:
        stats: Stats = self._native.stats()
        return stats

    @property
    def offset(self) -> int:
        offset: int = self._native.offset
        return offset

    def feed(self, buf: bytes | bytearray | memoryview) -> tuple[np.ndarray, int]:
        """Consume every whole record at the start of `buf`; return (blocks, bytes used)."""
        framed, used = self._native.feed(np.frombuffer(byte_view(buf), dtype=np.uint8))
        error = self._native.error
        if error == _BAD_MAGIC:
            raise PcapError(
                f"not a classic pcap file: bad magic 0x{self._native.error_value:08x}"
                " at byte offset 0", 0
            )
        if error == _BAD_LINKTYPE:
            raise PcapError(
                f"unsupported pcap link type {self._native.error_value} at byte offset 20"
                " (only 1, Ethernet, is read)", 20
            )
        if error == _RECORD_TOO_LONG and self.error is None:
            offset, limit = self.offset, self._native.max_record
            self.error = PcapError(
                f"pcap record at byte offset {offset}: incl_len {self._native.error_value}"
                f" is larger than the snap length {limit}", offset
            )
        return framed, used

    def check(self) -> None:
        """Raise the error of a bad record that feed() stopped at, if any."""
        if self.error is not None:
            raise self.error

    def finish(self, rest: bytes | bytearray | memoryview) -> None:
        """At end of file: raise if anything is left over (a cut record or header)."""
        self.check()
        view = byte_view(rest)
        if not self._native.header_done:
            raise PcapError(
                f"not a pcap file: {len(view)} bytes, shorter than the 24-byte global header", 0
            )
        if len(view) == 0:
            return
        offset = self.offset
        if len(view) < RECORD_HEADER_LEN:
            raise PcapError(
                f"truncated pcap record header at byte offset {offset}:"
                f" {len(view)} of 16 bytes", offset
            )
        order = ">" if self._native.big_endian else "<"
        (incl_len,) = struct.unpack_from(order + "I", view, 8)
        raise PcapError(
            f"truncated pcap record at byte offset {offset}: incl_len {incl_len},"
            f" {len(view) - RECORD_HEADER_LEN} bytes follow the header", offset
        )


def scan(buffer: bytes | bytearray | memoryview, group: str | None = None,
         port: int | None = None, session: str | bytes | None = None,
         ) -> tuple[np.ndarray, Stats]:
    """A whole capture in memory -> (framed ITCH message blocks, statistics)."""
    scanner = Scanner(group, port, session)
    framed, used = scanner.feed(buffer)
    try:
        scanner.finish(byte_view(buffer)[used:])
    except PcapError as error:
        error.blocks = framed  # nothing already accepted is lost
        raise
    return framed, scanner.stats


class PcapReader:
    """Iterates over a capture as (events, counts) per chunk; `stats` and `streams()` when done.

    ``path``: a file, a pipe or FIFO, ``"-"`` for standard input, or an open binary stream.
    """

    def __init__(self, path: Source, chunk_size: int = DEFAULT_CHUNK,
                 group: str | None = None, port: int | None = None,
                 session: str | bytes | None = None) -> None:
        self.path = path
        self.chunk_size = check_chunk_size(chunk_size)
        self.scanner = Scanner(group, port, session)
        self._it = self._blocks()

    def streams(self) -> list[Stats]:
        return self.scanner.streams()

    @property
    def stats(self) -> Stats:
        return self.scanner.stats

    def _blocks(self) -> Iterator[tuple[Any, Any]]:
        # Late: the ITCH decoder is a separate component, loaded when first needed.
        itch = importlib.import_module("optimized.itch")
        yield from decode_stream(self.path, self.chunk_size, self.scanner, itch.decode)

    def __iter__(self) -> PcapReader:
        return self

    def __next__(self) -> tuple[Any, Any]:
        return next(self._it)


def read_file(path: Source, chunk_size: int = DEFAULT_CHUNK, group: str | None = None,
              port: int | None = None, session: str | bytes | None = None) -> PcapReader:
    """Stream a capture: yields itch.decode(blocks) per chunk; `.stats` after iteration.

    ``group``, ``port``, ``session``: read only packets to that IPv4 destination group, UDP
    destination port and MoldUDP64 session (the others are counted in ``filtered``).
    """
    return PcapReader(path, chunk_size, group, port, session)
