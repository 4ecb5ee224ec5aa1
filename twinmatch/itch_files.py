"""Getting an ITCH file's bytes off disk in chunks, plain or gzip; shared by both twins.

This is not a twin: both decoders read the same way (plain files in fixed-size chunks, gzip
through Python's zlib), so their batches line up and a comparison measures the decoders.
The optimized twin maps plain files instead of reading them (``mmap``), cutting the map at
the same chunk boundaries.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from twinmatch.itch_errors import ItchError

# --8<-- [start:files]
CHUNK_SIZE: Final = 8 << 20  # 8 MiB: large enough to amortize a call, small enough for cache
GZIP_MAGIC: Final = b"\x1f\x8b"
# pcap (both byte orders, micro- and nanosecond) and pcapng: captures, not framed ITCH.
CAPTURE_MAGICS: Final = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1",
                         b"\xa1\xb2\x3c\x4d", b"\x0a\x0d\x0d\x0a")
GZIP_READ: Final = 1 << 16  # compressed bytes fed to zlib at a time


def is_gzip(path: str | Path) -> bool:
    """Gzip is recognised by its magic bytes (1f 8b), whatever the file is called."""
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def check_not_capture(head: bytes) -> None:
    """Refuse a pcap/pcapng file: read as ITCH it would decode to garbage, not fail.

    (A pcap header read as a length prefix says ~54 KB of an unknown type.)
    """
    if head[:4] in CAPTURE_MAGICS:
        raise ItchError(0, "not_itch", detail="a pcap/pcapng capture; use pcap.read_file")


def _salvage(before: zlib._Decompress, data: bytes) -> bytes:
    """Everything zlib can decompress from ``data`` before it detects the damage.

    zlib raises without returning the output of the failing call, so bisect for the longest
    prefix of ``data`` that still decompresses (starting from a copy of the state before).
    """
    lo, hi = 0, len(data)  # data[:lo] decompresses, data[:hi] raises
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            before.copy().decompress(data[:mid])
            lo = mid
        except zlib.error:
            hi = mid
    return before.copy().decompress(data[:lo])


def gunzip_chunks(path: str | Path, chunk_size: int) -> Iterator[bytes]:
    """The decompressed bytes of a gzip file in ``chunk_size`` pieces (the last may be shorter).

    Every byte zlib can recover before a corrupt or cut-off stream reaches the decoder, then
    ItchError("bad_gzip") names the decompressed offset where the damage starts, whatever the
    chunk size. Concatenated gzip members are read in turn.
    """
    produced = 0  # decompressed bytes so far
    out = bytearray()
    with open(path, "rb") as f:
        d = zlib.decompressobj(wbits=31)  # 31: expect a gzip header and trailer
        pending = f.read(GZIP_READ)
        while pending:
            before = d.copy()
            try:
                piece = d.decompress(pending)
            except zlib.error as exc:
                piece = _salvage(before, pending)
                out += piece
                produced += len(piece)
                yield from _pieces(out, chunk_size, final=True)
                raise ItchError(produced, "bad_gzip", detail=str(exc)) from exc
            out += piece
            produced += len(piece)
            yield from _pieces(out, chunk_size, final=False)
            if d.eof:  # a member ended; another may follow
                pending = d.unused_data or f.read(GZIP_READ)
                if pending:
                    d = zlib.decompressobj(wbits=31)
            else:
                pending = f.read(GZIP_READ)
    yield from _pieces(out, chunk_size, final=True)
    if not d.eof:
        raise ItchError(produced, "bad_gzip", detail="the gzip stream ends early")


def _pieces(out: bytearray, chunk_size: int, final: bool) -> Iterator[bytes]:
    """Take whole chunk_size pieces off the front of ``out`` (and the rest if final)."""
    while len(out) >= chunk_size or (final and out):
        piece = bytes(out[:chunk_size])
        del out[:chunk_size]
        yield piece


def plain_chunks(path: str | Path, chunk_size: int) -> Iterator[bytes]:
    """A plain file in ``chunk_size`` pieces (the last may be shorter)."""
    with open(path, "rb") as f:
        while chunk := f.read(chunk_size):
            yield chunk


def file_chunks(path: str | Path, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
    """The (decompressed) bytes of an ITCH file in chunks; refuses pcap/pcapng captures."""
    if chunk_size < 1:
        raise ValueError("chunk_size must be positive")
    chunks = gunzip_chunks(path, chunk_size) if is_gzip(path) else plain_chunks(path, chunk_size)
    head = b""
    for chunk in chunks:
        if len(head) < 4:
            head += chunk[:4]
            check_not_capture(head)
        yield chunk
# --8<-- [end:files]
