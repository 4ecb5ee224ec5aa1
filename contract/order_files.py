"""Reading an order file (CSV orders, LOBSTER) in pieces of whole lines; shared by both twins.

A source is a path, ``"-"`` for standard input, an open binary stream (a pipe, a FIFO) or
the bytes themselves. It is read in chunks and handed to the parser as pieces that end on a
line boundary, so a bad line is reported as soon as it has been read (garbage from a pipe or
``/dev/urandom`` fails at its first line instead of being read for ever), and a line that runs
on for more than ``MAX_LINE`` bytes (``/dev/zero``) stops the read with an error naming it.
Both twins parse the same pieces, carrying the line number and the header state across them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from os import PathLike
from typing import Final, cast

import numpy as np

from contract.dtypes import LOBSTER_DTYPE
from contract.itch_errors import byte_view
from contract.itch_files import Source, opened, read_full

MAX_LINE: Final = 1 << 20  # bytes in one line, newline not counted: far above any real row
READ_SIZE: Final = MAX_LINE  # a chunk never holds a whole line longer than MAX_LINE

OrderSource = Source | bytes | bytearray | memoryview


class LineTooLong(Exception):
    """Raised by pieces(); each twin turns it into its own OrdersError."""

    def __init__(self, line: int) -> None:
        super().__init__(f"line {line}: longer than {MAX_LINE} bytes")
        self.line = line


def pieces(source: OrderSource) -> Iterator[tuple[bytes, int]]:
    """(bytes of whole lines, the 1-based number of their first line), in file order.

    The last piece may end without a newline. Raises LineTooLong at a line longer than
    MAX_LINE, after every piece before it.
    """
    if not isinstance(source, str | PathLike) and not callable(getattr(source, "read", None)):
        try:
            memoryview(source)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError("source must be a path, '-' (standard input), an open binary"
                            f" stream or bytes, got {type(source).__name__}") from None
        data = bytes(byte_view(source))  # bytes-like, but of single bytes and 1-D
        yield from _cut(data[i:i + READ_SIZE] for i in range(0, len(data), READ_SIZE))
        return
    with opened(cast(Source, source)) as f:  # a path, "-" or a stream: checked above
        yield from _cut(iter(lambda: read_full(f, READ_SIZE), b""))


def _cut(chunks: Iterable[bytes]) -> Iterator[tuple[bytes, int]]:
    carry = b""  # the start of a line the last chunk cut
    line = 1  # number of the first line in carry
    for chunk in chunks:
        last = chunk.rfind(b"\n")
        if last < 0:
            carry += chunk
            if len(carry) > MAX_LINE:
                raise LineTooLong(line)
            continue
        piece = carry + chunk[:last + 1]
        if piece.find(b"\n") > MAX_LINE:
            raise LineTooLong(line)
        yield piece, line
        line += piece.count(b"\n")
        carry = chunk[last + 1:]
    if len(carry) > MAX_LINE:
        raise LineTooLong(line)
    if carry:
        yield carry, line


def zeroed_copy(records: np.ndarray) -> np.ndarray:
    """A copy of a structured array byte for byte, padding included.

    ``ndarray.copy()`` copies a structured dtype field by field and leaves the padding
    between fields as whatever the new memory held; the twins' arrays are compared as bytes.
    """
    out = np.zeros(len(records), dtype=records.dtype)
    out.view(np.uint8)[:] = np.ascontiguousarray(records).view(np.uint8)
    return out


def check_lobster(messages: object) -> np.ndarray:
    """lobster_to_ops' input check, shared so both twins refuse the same things alike."""
    if not isinstance(messages, np.ndarray) or messages.dtype != LOBSTER_DTYPE:
        got = messages.dtype if isinstance(messages, np.ndarray) else type(messages).__name__
        raise TypeError(f"lobster_to_ops: expected a LOBSTER_DTYPE array, got {got}")
    if messages.ndim != 1:
        raise TypeError("lobster_to_ops: expected a one-dimensional array, got"
                        f" {messages.ndim} dimensions")
    return messages
