"""Getting a feed's bytes in chunks, plain or gzip, from a file or a stream; shared by both twins.

This is not a twin: both decoders read the same way (fixed-size chunks, gzip through Python's
zlib), so their batches line up and a comparison measures the decoders. A source is a path,
``"-"`` for standard input, or a binary file object that is already open; pipes, FIFOs and
character devices are read like files, in chunks, with bounded memory. Nothing is
memory-mapped: a mapped file that shrinks while it is read kills the process (SIGBUS), a
read just ends early and the decoder reports the cut record.
"""

from __future__ import annotations

import io
import os
import stat
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Final

from contract.itch_errors import ItchError

# --8<-- [start:files_open]
# 8 MiB: large enough to amortize a call, small enough for the cache
CHUNK_SIZE: Final = 8 << 20
GZIP_MAGIC: Final = b"\x1f\x8b"
# pcap (both byte orders, micro- and nanosecond) and pcapng: captures, not framed ITCH.
CAPTURE_MAGICS: Final = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1",
                         b"\xa1\xb2\x3c\x4d", b"\x0a\x0d\x0d\x0a")
GZIP_READ: Final = 1 << 16  # compressed bytes fed to zlib at a time
STDIN: Final = "-"  # the source name for standard input

Source = str | os.PathLike[str] | IO[bytes]


@contextmanager
def opened(source: Source) -> Iterator[IO[bytes]]:
    """A source as an open binary stream: a path (opened, closed after), "-" (stdin), or
    a stream the caller opened (used as it is, left open)."""
    if isinstance(source, str | os.PathLike):
        if os.fspath(source) == STDIN:
            yield sys.stdin.buffer
        else:
            with open(source, "rb") as f:
                yield f
    elif callable(getattr(source, "read", None)):
        yield source
    else:  # open(5) would read file descriptor 5: a number is refused, like the rest
        raise TypeError("source must be a path, '-' (standard input) or an open binary"
                        f" stream, got {type(source).__name__}")

# --8<-- [end:files_open]


# --8<-- [start:files_peek]
def read_full(f: IO[bytes], n: int) -> bytes:
    """Up to ``n`` bytes, fewer only at the end: a pipe or a raw file may return
    short reads."""
    data = f.read(n)
    if len(data) == n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n and (more := f.read(n - got)):
        parts.append(more)
        got += len(more)
    return b"".join(parts)
# --8<-- [end:files_peek]


# --8<-- [start:files_rewound]
class _Rewound(io.RawIOBase):
    """A stream that cannot seek, with bytes already read from it put back in front."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        out = memoryview(b).cast("B")
        if self._head:
            n = min(len(out), len(self._head))
            out[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        read1 = getattr(self._rest, "read1", self._rest.read)
        data = read1(len(out))
        out[:len(data)] = data
        return len(data)


def peek(f: IO[bytes], n: int) -> tuple[bytes, IO[bytes]]:
    """The first ``n`` bytes of a stream and a stream that still starts with them.

    A regular file seeks back; a pipe cannot, so the bytes are put back in front of it.
    (Looking at a pipe's first bytes and then opening it again would lose them.)
    """
    head = read_full(f, n)
    try:
        seekable = f.seekable()
    except (AttributeError, ValueError):
        seekable = False
    if seekable:
        f.seek(-len(head), os.SEEK_CUR)
        return head, f
    return head, io.BufferedReader(_Rewound(head, f), buffer_size=GZIP_READ)

# --8<-- [end:files_rewound]


# --8<-- [start:files_kind]
def regular_size(f: IO[bytes]) -> int | None:
    """The size of the regular file behind ``f``; None for a pipe, FIFO, device or
    memory."""
    try:
        st = os.fstat(f.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def check_not_capture(head: bytes) -> None:
    """Refuse a pcap/pcapng file: read as ITCH it would decode to garbage, not fail.

    (A pcap header read as a length prefix says ~54 KB of an unknown type.)
    """
    if head[:4] in CAPTURE_MAGICS:
        raise ItchError(0, "not_itch",
                        detail="a pcap/pcapng capture; use pcap.read_file")

# --8<-- [end:files_kind]


# --8<-- [start:files_salvage]
def _salvage(before: zlib._Decompress, data: bytes) -> bytes:
    """Everything zlib can decompress from ``data`` before it detects the damage.

    zlib raises without returning the output of the failing call, so bisect for the
    longest prefix of ``data`` that still decompresses (starting from a copy of the
    state before).
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

# --8<-- [end:files_salvage]


# --8<-- [start:files_gzip]
def gunzip_chunks(f: IO[bytes], chunk_size: int) -> Iterator[bytes]:
    """The decompressed bytes of a gzip file in ``chunk_size`` pieces (the last may be
    shorter).

    Every byte zlib can recover before a corrupt or cut-off stream reaches the decoder,
    then ItchError("bad_gzip") names the decompressed offset where the damage starts,
    whatever the chunk size. Concatenated gzip members are read in turn.
    """
    produced = 0  # decompressed bytes so far
    out = bytearray()
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

# --8<-- [end:files_gzip]


# --8<-- [start:files_pieces]
def _pieces(out: bytearray, chunk_size: int, final: bool) -> Iterator[bytes]:
    """Take whole chunk_size pieces off the front of ``out`` (and the rest if final)."""
    while len(out) >= chunk_size or (final and out):
        piece = bytes(out[:chunk_size])
        del out[:chunk_size]
        yield piece


def plain_chunks(f: IO[bytes], chunk_size: int) -> Iterator[bytes]:
    """A plain stream in ``chunk_size`` pieces (the last may be shorter)."""
    while chunk := read_full(f, chunk_size):
        yield chunk


@contextmanager
def open_feed(source: Source) -> Iterator[tuple[bool, IO[bytes]]]:
    """(is it gzip?, the stream at its first byte). Gzip is recognised by its magic
    bytes (1f 8b), whatever the file is called; the stream is opened once, so a pipe
    loses nothing."""
    with opened(source) as raw:
        head, f = peek(raw, 2)
        yield head == GZIP_MAGIC, f
# --8<-- [end:files_pieces]


# --8<-- [start:files_chunks]
MAX_CHUNK: Final = 1 << 30  # a reader's buffer is one chunk: bounded, like its memory


def check_chunk_size(chunk_size: object) -> int:
    """A reader's chunk size: an int in 1..2^30 (bytes), the same words in every reader
    of both twins. (0 would read nothing for ever; 2^40 would ask for a terabyte
    buffer.)"""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise TypeError(f"chunk_size must be an int, got {type(chunk_size).__name__}")
    if not 1 <= chunk_size <= MAX_CHUNK:
        raise ValueError(f"chunk_size must be 1..{MAX_CHUNK:,} bytes, got {chunk_size}")
    return chunk_size


def file_chunks(source: Source, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
    """The (decompressed) bytes of an ITCH feed in chunks; refuses pcap/pcapng
    captures."""
    chunk_size = check_chunk_size(chunk_size)
    with open_feed(source) as (gz, f):
        chunks = gunzip_chunks(f, chunk_size) if gz else plain_chunks(f, chunk_size)
        head = b""
        for chunk in chunks:
            if len(head) < 4:
                head += chunk[:4]
                check_not_capture(head)
            yield chunk
# --8<-- [end:files_chunks]
