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
from os import PathLike
from typing import Any, Final

import numpy as np

from optimized._native import PcapScanner
from twinmatch.pcap_files import decode_stream

GLOBAL_HEADER_LEN: Final = 24
RECORD_HEADER_LEN: Final = 16
DEFAULT_CHUNK: Final = 1 << 22
_BAD_MAGIC: Final = 1
_BAD_LINKTYPE: Final = 2

Stats = dict[str, Any]


class PcapError(ValueError):
    """A capture that cannot be read; ``offset`` is the byte offset of the problem."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class Scanner:
    """A PCAP reader that consumes whole records from successive chunks of a file."""

    def __init__(self) -> None:
        self._native = PcapScanner()

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
        framed, used = self._native.feed(np.frombuffer(buf, dtype=np.uint8))
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
        return framed, used

    def finish(self, rest: bytes | bytearray | memoryview) -> None:
        """At end of file: raise if anything is left over (a cut record or header)."""
        view = memoryview(rest).cast("B")
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


def scan(buffer: bytes | bytearray | memoryview) -> tuple[np.ndarray, Stats]:
    """A whole capture in memory -> (framed ITCH message blocks, statistics)."""
    scanner = Scanner()
    framed, used = scanner.feed(buffer)
    scanner.finish(memoryview(buffer)[used:])
    return framed, scanner.stats


class PcapReader:
    """Iterates over a capture file as (events, counts) per chunk; `stats` when done."""

    def __init__(self, path: str | PathLike[str], chunk_size: int = DEFAULT_CHUNK) -> None:
        self.path = path
        self.chunk_size = max(chunk_size, 1)
        self.scanner = Scanner()
        self._it = self._blocks()

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


def read_file(path: str | PathLike[str], chunk_size: int = DEFAULT_CHUNK) -> PcapReader:
    """Stream a capture: yields itch.decode(blocks) per chunk; `.stats` after iteration."""
    return PcapReader(path, chunk_size)
