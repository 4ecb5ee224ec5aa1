"""Streaming a capture file in chunks, shared by both PCAP twins (like itch_files.py).

Each twin supplies its own scanner (pcap records -> framed ITCH message blocks) and its
own ITCH decoder; this loop only reads the file in chunks and carries over the bytes of a
record that a chunk boundary cut, so both twins cut and deliver at the same points.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from contract.itch_files import Source, opened, read_full


class ChunkScanner(Protocol):
    def feed(self, buf: bytes) -> tuple[Any, int]: ...
    def finish(self, pending: bytes) -> None: ...
    def check(self) -> None: ...


# --8<-- [start:stream]
def decode_stream(
    path: Source,
    chunk_size: int,
    scanner: ChunkScanner,
    decode: Callable[[Any], tuple[Any, Any]],
) -> Iterator[tuple[Any, Any]]:
    """Yield decode(blocks) per chunk; check() raises a bad record's error once everything
    before it is out, and finish() checks the tail. ``path``: a file, a pipe, "-" or a stream.

    The carried bytes stay small: a record longer than the snap length is refused as soon
    as its header is seen, so a bogus length never makes this wait for the rest of the file.
    """
    with opened(path) as f:
        pending = b""
        while chunk := read_full(f, chunk_size):
            buf = pending + chunk
            framed, used = scanner.feed(buf)
            pending = buf[used:]  # a record cut by the chunk boundary waits for the rest
            if len(framed):
                yield decode(framed)
            scanner.check()
        scanner.finish(pending)
# --8<-- [end:stream]
