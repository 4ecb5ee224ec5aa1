"""Reading NASDAQ TotalView-ITCH 5.0 in C++ (native/itch.hpp): same API as naive.itch.

The decode loop runs in C++ over the caller's buffer in place (bytes, mmap, numpy uint8),
with the GIL released; this module only attaches the numpy dtype to the result, turns the
per-byte counts into a dict and raises the same ItchError the naive twin raises. Plain feeds
are read chunk by chunk into one reused buffer and decoded in place; gzip feeds are
decompressed by Python's zlib in chunks and each chunk decoded in C++.
"""

from __future__ import annotations

import mmap
import threading
from collections.abc import Callable, Iterator
from typing import IO, Final

import numpy as np

from contract.dtypes import EVENT_DTYPE
from contract.itch_errors import ITCH_REASONS, ItchError, byte_view, counts_dict
from contract.itch_files import (
    CHUNK_SIZE,
    Source,
    check_chunk_size,
    check_not_capture,
    file_chunks,
    open_feed,
)
from optimized import _native

__all__ = ["CHUNK_SIZE", "EVENT_DTYPE", "ItchError", "LENGTHS", "decode", "read_file", "scan"]

# Message length by type byte, from the C++ table (kLength): S -> 12, A -> 36, ...
LENGTHS: Final[dict[int, int]] = {
    code: n for code, n in enumerate(_native.ITCH_LENGTHS) if n
}
assert _native.ITCH_EVENT_SIZE == EVENT_DTYPE.itemsize, "native/dtypes.hpp != dtypes.py"

Batch = tuple[np.ndarray, dict[str, int]]


# --8<-- [start:scan]
def scan(buffer: bytes | memoryview | mmap.mmap | np.ndarray, base: int = 0) -> tuple[
    np.ndarray, dict[str, int], int, ItchError | None
]:
    """Decode the whole records at the start of ``buffer``; stop at a partial one.

    Returns (events, counts, consumed bytes, error or None), like naive.itch.scan.
    """
    with byte_view(buffer) as view:  # refuse what the naive twin refuses, in its words
        raw, per_byte, consumed, code, msg_type, length = _native.itch_scan(view)
    events = raw.view(EVENT_DTYPE)  # no copy: the C++ structs already have this layout
    counts = counts_dict(per_byte)
    if code == 0:
        return events, counts, consumed, None
    error = record_error(code, msg_type, length, base + consumed)
    error.events, error.counts = events, counts
    return events, counts, consumed, error
# --8<-- [end:scan]


def record_error(code: int, msg_type: int, length: int, offset: int) -> ItchError:
    """The ItchError for a record the C++ scanner stopped at (``code`` != 0) at ``offset``:
    one place for the decoder, the one-pass market replay and the pipeline."""
    reason = ITCH_REASONS[code]
    if reason == "bad_length":
        return ItchError(offset, reason, msg_type, length, f"type needs {LENGTHS[msg_type]}")
    return ItchError(offset, reason, -1, 0)  # zero_length


def tail_error(buffer: bytes | memoryview, off: int, base: int) -> ItchError:
    """The error for a partial record starting at ``off`` (it runs past the end)."""
    mv = memoryview(buffer).cast("B")
    left = len(mv) - off
    if left < 2:
        return ItchError(base + off, "truncated_prefix", -1, -1, f"{left} byte(s) left")
    length = int.from_bytes(mv[off:off + 2], "big")
    return ItchError(base + off, "truncated_body", mv[off + 2] if left > 2 else -1,
                     length, f"{left - 2} byte(s) left")


def decode(buffer: bytes | memoryview | mmap.mmap | np.ndarray) -> Batch:
    """All the framed messages in ``buffer`` -> (EVENT_DTYPE array, {type char: count}).

    The buffer must hold whole records: a partial one at the end raises ItchError, as does
    a zero or wrong length prefix; the error's ``events``/``counts`` hold what came before.
    """
    events, counts, consumed, error = scan(buffer)
    if error is not None:
        raise error
    raw = np.frombuffer(byte_view(buffer), dtype=np.uint8)  # to find the size and the tail
    if consumed != raw.size:
        err = tail_error(raw[consumed:].tobytes(), 0, consumed)
        err.events, err.counts = events, counts
        raise err
    return events, counts


# --8<-- [start:read_file]
MAX_CARRY: Final = 2 + 0xFFFF  # the longest record: a partial one is never longer


# One step of a reader: (result array, counts by type, bytes consumed, error or None) for
# the whole records at the start of a window. Decoding (scan_step) or decoding and applying
# to a market at once (optimized.market.Market.run_itch) read files the same way.
Step = Callable[[memoryview | bytes, int], tuple[np.ndarray, dict[str, int], int, ItchError | None]]


def scan_step(window: memoryview | bytes, base: int) -> tuple[
        np.ndarray, dict[str, int], int, ItchError | None]:
    """``scan``, with an error's events and counts emptied: they were yielded already."""
    events, counts, consumed, error = scan(window, base)
    if error is not None:
        error.events, error.counts = events[:0], {}
    return events, counts, consumed, error


def read_plain(f: IO[bytes], chunk_size: int, step: Step = scan_step) -> Iterator[Batch]:
    """A plain stream, read into reused buffers: [carried partial record][next chunk].

    Each chunk is read straight into a buffer behind room for the few bytes of the record
    the last chunk cut (``readinto``: no new bytes object per chunk), and decoded in place.
    Two buffers take turns: from READ_AHEAD_FROM bytes a chunk, the next chunk is read on a
    thread of its own (a read releases the GIL) while C++ decodes this one, so the copy
    out of the page cache overlaps the decoding on the second core. Chunks end where
    naive.itch's chunks end, so both twins yield the same batches. A file is read, never
    mapped: if it shrinks meanwhile, the read just ends early and the cut record is reported.
    """
    buffers = _take_buffers(MAX_CARRY + chunk_size)
    views = [memoryview(b) for b in buffers]
    reader = _ReadAhead(f, threaded=chunk_size >= READ_AHEAD_FROM)
    carry = b""  # the cut record, put in front of the next chunk
    base = 0  # feed offset of the window's first byte
    turn = 0
    try:
        reader.ask(views[turn][MAX_CARRY:])
        while got := reader.wait():
            view = views[turn]
            start, end = MAX_CARRY - len(carry), MAX_CARRY + got
            view[start:MAX_CARRY] = carry
            if base == 0:  # the feed's first bytes: refuse a capture, as file_chunks does
                check_not_capture(bytes(view[start:min(start + 4, end)]))
            turn ^= 1
            reader.ask(views[turn][MAX_CARRY:])  # the next chunk, while this one is decoded
            with view[start:end] as window:
                events, counts, consumed, error = step(window, base)
            if len(events) or counts:
                yield events, counts
            if error is not None:
                raise error
            carry = bytes(view[start + consumed:end])  # < 64 KiB
            base += consumed
    finally:
        reader.close()  # no read is under way after this: the buffers are free
        _give_back(buffers)
    if carry:
        raise tail_error(carry, 0, base)


# Read buffers a finished read_plain gave back, for the next one in this process: a
# fresh pair of 8 MiB buffers costs zero-filling and four thousand first-touch page
# faults, and a process that replays one file after another (a notebook, the benchmarks)
# would pay that every time. One pair is kept: 16 MiB stay allocated after the first
# read. A lock, as two threads may each read a file.
_SPARE: list[bytearray] = []
_SPARE_LOCK = threading.Lock()


def _take_buffers(size: int) -> list[bytearray]:
    with _SPARE_LOCK:
        if len(_SPARE) == 2 and len(_SPARE[0]) == size:
            pair = _SPARE[:]
            _SPARE.clear()
            return pair
    return [bytearray(size) for _ in range(2)]


def _give_back(pair: list[bytearray]) -> None:
    with _SPARE_LOCK:
        _SPARE[:] = pair


READ_AHEAD_FROM: Final = 1 << 20  # chunk bytes from which read_plain reads ahead


class _ReadAhead:
    """One read_into at a time, on a thread of its own or (``threaded`` False: small
    chunks, where handing a read to a thread costs more than it hides) when waited for."""

    def __init__(self, f: IO[bytes], threaded: bool) -> None:
        self._f = f
        self._out: memoryview | None = None
        self._result: int | BaseException = 0
        self._thread: threading.Thread | None = None
        self._asked = threading.Semaphore(0) if threaded else None
        self._done = threading.Semaphore(0) if threaded else None
        if threaded:
            self._thread = threading.Thread(target=self._run, name="read-ahead", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        assert self._asked is not None and self._done is not None
        while True:
            self._asked.acquire()
            if self._out is None:  # close()
                return
            try:
                self._result = read_into(self._f, self._out)
            except BaseException as exc:  # noqa: BLE001 - raised by wait(), in the caller
                self._result = exc
            self._done.release()

    def ask(self, out: memoryview) -> None:
        """Start reading into ``out`` (the last read must have been waited for)."""
        self._out = out
        if self._asked is not None:
            self._asked.release()

    def wait(self) -> int:
        """The bytes the last ask() read (0: the end), or its error raised."""
        if self._done is not None:
            self._done.acquire()
        elif self._out is not None:
            self._result = read_into(self._f, self._out)
        self._out = None
        if isinstance(self._result, BaseException):
            raise self._result
        return self._result

    def close(self) -> None:
        """Wait for a read still under way (one chunk at most), then stop the thread."""
        if self._thread is None:
            return
        if self._out is not None:
            self._done.acquire()  # type: ignore[union-attr]
        self._out = None
        self._asked.release()  # type: ignore[union-attr]
        self._thread.join()
        self._thread = None


def read_into(f: IO[bytes], out: memoryview) -> int:
    """Fill ``out`` from the stream; fewer bytes only at its end (pipes return short reads)."""
    got = 0
    while got < len(out):
        n = f.readinto(out[got:])  # type: ignore[attr-defined]
        if not n:
            break
        got += n
    return got


def read_gzip(f: IO[bytes], chunk_size: int, step: Step = scan_step) -> Iterator[Batch]:
    """A gzip stream: zlib decompresses chunk by chunk; C++ decodes each chunk."""
    carry = b""
    base = 0  # feed offset of carry[0]
    for chunk in file_chunks(f, chunk_size):
        buf = carry + chunk if carry else chunk
        events, counts, consumed, error = step(buf, base)
        if len(events) or counts:
            yield events, counts
        if error is not None:
            raise error
        carry = buf[consumed:]
        base += consumed
    if carry:
        raise tail_error(carry, 0, base)


def read_file(path: Source, chunk_size: int = CHUNK_SIZE) -> Iterator[Batch]:
    """Stream an ITCH feed (plain or gzip) as (events, counts) batches, one per chunk.

    Same contract as naive.itch.read_file (a file, a pipe, ``"-"`` or an open stream): a
    bad or truncated record raises ItchError naming its offset in the (decompressed) feed,
    after every batch before it has been yielded.
    """
    chunk_size = check_chunk_size(chunk_size)
    with open_feed(path) as (gz, f):
        yield from (read_gzip(f, chunk_size) if gz else read_plain(f, chunk_size))
# --8<-- [end:read_file]


def sum_bytes(buffer: bytes | memoryview | mmap.mmap | np.ndarray) -> int:
    """One plain sequential pass over the buffer in C++ (the benchmarks' bandwidth ceiling)."""
    with byte_view(buffer) as view:
        return int(_native.itch_sum_bytes(view))
