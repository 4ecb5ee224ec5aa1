"""ITCH 5.0 with numpy big-endian dtypes: the vectorized middle ground between the twins.

numpy can describe a wire layout directly (``">u4"`` is a big-endian u32), so once the
messages of one type are gathered into rows, a single ``view`` decodes all of them. What
numpy cannot do is find the messages: each record's position depends on the previous
record's length, so the framing walk stays a Python loop. Same output as naive.itch.decode.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from contract.dtypes import EVENT_DTYPE
from contract.itch_errors import ItchError, byte_view
from naive.itch import LENGTHS, tail_error

__all__ = ["decode"]

# --8<-- [start:be_dtypes]
# The common header; numpy has no 6-byte integer, so the timestamp is split into a
# big-endian u16 (high bits) and u32 (low bits).
HEADER: Final = [("type", "u1"), ("locate", ">u2"), ("tracking", ">u2"),
                 ("ts_hi", ">u2"), ("ts_lo", ">u4")]


def be(*fields: tuple[str, str]) -> np.dtype:
    """A packed big-endian record: the header, then ``fields`` (EVENT_DTYPE's names)."""
    return np.dtype(HEADER + list(fields))


# Fields are named after the EVENT_DTYPE field they fill; "_x" fields are not copied.
WIRE: Final[dict[str, np.dtype]] = {
    "S": be(("side", "u1")),  # event code
    "R": be(("stock", "S8"), ("_x", "V20")),
    "H": be(("stock", "S8"), ("side", "u1"), ("_x", "V5")),  # side = trading state
    "A": be(("order_ref", ">u8"), ("side", "u1"), ("shares", ">u4"), ("stock", "S8"),
            ("price", ">u4")),
    "F": be(("order_ref", ">u8"), ("side", "u1"), ("shares", ">u4"), ("stock", "S8"),
            ("price", ">u4"), ("_x", "V4")),
    "E": be(("order_ref", ">u8"), ("shares", ">u4"), ("match_number", ">u8")),
    "C": be(("order_ref", ">u8"), ("shares", ">u4"), ("match_number", ">u8"),
            ("printable", "u1"), ("price", ">u4")),
    "X": be(("order_ref", ">u8"), ("shares", ">u4")),
    "D": be(("order_ref", ">u8")),
    "U": be(("order_ref", ">u8"), ("new_order_ref", ">u8"), ("shares", ">u4"),
            ("price", ">u4")),
    "P": be(("order_ref", ">u8"), ("side", "u1"), ("shares", ">u4"), ("stock", "S8"),
            ("price", ">u4"), ("match_number", ">u8")),
    # Q: the u64 cross shares go to order_ref, the cross type to printable.
    "Q": be(("order_ref", ">u8"), ("stock", "S8"), ("price", ">u4"),
            ("match_number", ">u8"), ("printable", "u1")),
    "B": be(("match_number", ">u8")),
}
# --8<-- [end:be_dtypes]
assert all(WIRE[t].itemsize == LENGTHS[ord(t)] for t in WIRE)


# --8<-- [start:decode_numpy]
def frame_walk(mv: memoryview) -> tuple[list[int], ItchError | None, int]:
    """Offsets of every whole record's type byte; the error and where the walk stopped."""
    starts: list[int] = []
    off, end = 0, len(mv)
    while off + 2 <= end:
        length = (mv[off] << 8) | mv[off + 1]
        if length == 0:
            return starts, ItchError(off, "zero_length", -1, 0), off
        if off + 2 + length > end:
            break
        code = mv[off + 2]
        want = LENGTHS.get(code, length)
        if want != length:
            return starts, ItchError(off, "bad_length", code, length,
                                     f"type needs {want}"), off
        starts.append(off + 2)
        off += 2 + length
    return starts, None, off


def decode(buffer: bytes | memoryview) -> tuple[np.ndarray, dict[str, int]]:
    """Same contract and output as naive.itch.decode, decoded a message type at a time."""
    mv = byte_view(buffer).cast("B")
    starts, error, stop = frame_walk(mv)
    raw = np.frombuffer(mv, dtype=np.uint8)
    at = np.array(starts, dtype=np.int64)
    types = raw[at]
    per_byte = np.bincount(types, minlength=256)
    counts = {chr(b): int(per_byte[b]) for b in np.flatnonzero(per_byte)}
    makes_event = np.zeros(256, dtype=bool)
    makes_event[[ord(t) for t in WIRE]] = True
    keep = makes_event[types]
    events = np.zeros(int(keep.sum()), dtype=EVENT_DTYPE)
    slot = np.cumsum(keep) - 1  # where each message's event goes
    for t, wire in WIRE.items():
        mine = types == ord(t)
        if not mine.any():
            continue
        rows = raw[at[mine][:, None] + np.arange(wire.itemsize)]  # gather: (k, length) bytes
        msgs = rows.view(wire)[:, 0]  # decode every message of type t at once
        dst = slot[mine]
        events["type"][dst] = msgs["type"]
        events["locate"][dst] = msgs["locate"]
        events["timestamp"][dst] = (msgs["ts_hi"].astype(np.uint64) << np.uint64(32)) | msgs[
            "ts_lo"]
        for name in wire.names or ():
            if name in ("order_ref", "new_order_ref", "match_number", "shares", "price",
                        "side", "printable", "stock"):
                events[name][dst] = msgs[name]
    if error is None and stop != len(mv):
        error = tail_error(mv, stop, 0)
    if error is not None:
        error.events, error.counts = events, counts
        raise error
    return events, counts
# --8<-- [end:decode_numpy]
