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
GZIP_READ: Final = 1 << 20  # compressed bytes fed to zlib at a time


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


def gunzip_chunks(path: str | Path, chunk_size: int) -> Iterator[bytes]:
    """The decompressed bytes of a gzip file, at most ``chunk_size`` at a time.

    zlib hands over everything it could decompress before a corrupt or cut-off stream, so
    every byte before the damage reaches the decoder; then ItchError("bad_gzip") names the
    decompressed offset where the damage starts. Concatenated gzip members are read in turn.
    """
    produced = 0
    with open(path, "rb") as f:
        d = zlib.decompressobj(wbits=31)  # 31: expect a gzip header and trailer
        pending = f.read(GZIP_READ)
        while True:
            if d.eof:  # a member ended; another may follow
                pending = d.unused_data or f.read(GZIP_READ)
                if not pending:
                    return
                d = zlib.decompressobj(wbits=31)
            if not pending:
                pending = f.read(GZIP_READ)
                if not pending:
                    raise ItchError(produced, "bad_gzip", detail="the gzip stream ends early")
            try:
                piece = d.decompress(pending, chunk_size)  # at most chunk_size bytes out
            except zlib.error as exc:
                raise ItchError(produced, "bad_gzip", detail=str(exc)) from exc
            pending = d.unconsumed_tail
            if piece:
                produced += len(piece)
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
