"""The one error both ITCH decoders raise, so the two twins fail identically.

Both ``naive.itch`` and ``optimized.itch`` re-export :class:`ItchError`; its message is built
here from the same few facts (offset, reason, type byte, length), so the text matches too.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from contract.dtypes import EVENT_DTYPE

# --8<-- [start:reasons]
# Reason codes: the number is what the C++ decoder returns, the name what
# ItchError.reason says.
ITCH_REASONS: Final[tuple[str, ...]] = (
    "ok",
    "truncated_prefix",  # fewer than 2 bytes left where a length prefix should start
    "truncated_body",    # the prefix promises more bytes than are left
    "zero_length",       # a length prefix of 0 (a record holds at least its type byte)
    "bad_length",        # a known type whose length prefix is not its fixed size
    "not_itch",          # the file starts like a pcap/pcapng capture, not framed ITCH
    "bad_gzip",          # the gzip stream is corrupt or ends early
    "unknown_type",      # parse_message only: decode skips and counts unknown types
)
# --8<-- [end:reasons]


class ItchError(ValueError):
    """Bad ITCH input, at byte ``offset`` of the buffer or (decompressed) file.

    ``offset`` is where the bad record's 2-byte length prefix starts. ``events`` and
    ``counts`` hold everything decoded before it (from ``decode``; ``read_file`` has already
    yielded those batches), so nothing already accepted is lost.
    """

    def __init__(
        self,
        offset: int,
        reason: str,
        msg_type: int = -1,
        length: int = -1,
        detail: str = "",
        events: np.ndarray | None = None,
        counts: dict[str, int] | None = None,
    ) -> None:
        self.offset = offset
        self.reason = reason
        self.msg_type = msg_type
        self.length = length
        self.events: np.ndarray = (
            events if events is not None else np.zeros(0, dtype=EVENT_DTYPE)
        )
        self.counts: dict[str, int] = counts if counts is not None else {}
        text = f"ITCH {reason} at byte {offset}"
        if msg_type >= 0:
            text += f": type {chr(msg_type)!r}"
        if length >= 0:
            text += f", length prefix {length}"
        if detail:
            text += f" ({detail})"
        super().__init__(text)

    def __reduce__(self) -> tuple[object, ...]:
        # Keep the attributes when the error crosses a process boundary (pickle).
        return (
            type(self),
            (self.offset, self.reason, self.msg_type, self.length, "", self.events, self.counts),
        )


def counts_dict(per_byte: np.ndarray) -> dict[str, int]:
    """A 256-entry count array (index = type byte) as {type char: count}, nonzero only.

    The key is ``chr(type byte)``: known types under their letter, unknown ones under their
    own character (e.g. ``"z"`` or ``"\\x00"``), in byte order.
    """
    return {chr(int(b)): int(per_byte[b]) for b in np.flatnonzero(per_byte)}


# --8<-- [start:byte_view]
# single bytes: bytes, bytearray, uint8, int8, char
BYTE_FORMATS: Final = ("B", "b", "c")


def byte_view(buffer: object) -> memoryview:
    """``buffer`` as a one-dimensional, contiguous memoryview of single bytes.

    Anything else raises TypeError.

    Every decoder entry point of both twins (itch.decode/scan, pcap.scan/feed, the
    order readers' bytes input) checks its input here first, so both refuse the same
    things with the same words: None, str, numbers, lists, arrays of wider items or of
    two dimensions, non-contiguous views. (Each twin would otherwise fail in its own
    way: a memoryview cast error in Python, nanobind's signature dump in C++.)
    """
    try:
        view = memoryview(buffer)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{BYTES_WANTED}, got {type(buffer).__name__}") from None
    fmt = view.format.lstrip("@=<>!")
    if view.ndim != 1 or fmt not in BYTE_FORMATS or not view.c_contiguous:
        shape = "x".join(str(n) for n in view.shape or ()) or "scalar"
        got = (f"{type(buffer).__name__} of format {view.format!r}, shape {shape}"
               f"{'' if view.c_contiguous else ', not contiguous'}")
        view.release()
        raise TypeError(f"{BYTES_WANTED}, got {got}")
    return view


BYTES_WANTED: Final = (
    "buffer must be one-dimensional contiguous bytes (bytes, bytearray,"
    " mmap, or a memoryview or numpy array of uint8)"
)
# --8<-- [end:byte_view]
