"""Streaming a capture file in chunks, shared by both PCAP twins (like itch_files.py).

Each twin supplies its own scanner (pcap records -> framed ITCH message blocks) and its
own ITCH decoder; this loop only reads the file in chunks and carries over the bytes of a
record that a chunk boundary cut, so both twins cut and deliver at the same points.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from os import PathLike
from typing import Any, Protocol


class ChunkScanner(Protocol):
    def feed(self, buf: bytes) -> tuple[Any, int]: ...
    def finish(self, pending: bytes) -> None: ...


# --8<-- [start:stream]
def decode_stream(
    path: str | PathLike[str],
    chunk_size: int,
    scanner: ChunkScanner,
    decode: Callable[[Any], tuple[Any, Any]],
) -> Iterator[tuple[Any, Any]]:
    """Yield decode(blocks) per chunk; the scanner's finish() checks the tail."""
    with open(path, "rb") as f:
        pending = b""
        while chunk := f.read(chunk_size):
            buf = pending + chunk
            framed, used = scanner.feed(buf)
            pending = buf[used:]  # a record cut by the chunk boundary waits for the rest
            if len(framed):
                yield decode(framed)
        scanner.finish(pending)
# --8<-- [end:stream]
