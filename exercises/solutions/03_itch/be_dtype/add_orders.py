"""Decode a run of framed Add Order (A) messages into one numpy record array (reference
solution: one numpy operation per field)."""

from __future__ import annotations

import numpy as np

FRAME = 38  # a 2-byte big-endian length (36), then the 36-byte message
ADD_SIZE = 36
# What the caller gets: native little-endian fields, one record per message.
OUT_DTYPE = np.dtype([("locate", "<u2"), ("timestamp", "<u8"), ("order_ref", "<u8"),
                      ("side", "S1"), ("shares", "<u4"), ("price", "<u4"), ("stock", "S8")])
# The frame on the wire: big-endian fields, packed (a list of fields has no padding).
# numpy has no 6-byte integer, so the timestamp is a ">u2" and a ">u4".
WIRE_DTYPE = np.dtype([("length", ">u2"), ("type", "S1"), ("locate", ">u2"),
                       ("tracking", ">u2"), ("ts_high", ">u2"), ("ts_low", ">u4"),
                       ("order_ref", ">u8"), ("side", "S1"), ("shares", ">u4"),
                       ("stock", "S8"), ("price", ">u4")])
assert WIRE_DTYPE.itemsize == FRAME


def decode_adds(buf: bytes) -> np.ndarray:
    """Every frame of ``buf`` as an OUT_DTYPE record. A buffer that does not end on a
    frame boundary, a frame whose length is not 36, or a message that is not an 'A' is a
    ValueError naming the byte offset of that frame."""
    whole = len(buf) - len(buf) % FRAME
    wire = np.frombuffer(buf, dtype=WIRE_DTYPE, count=whole // FRAME)  # a view: no copy
    bad = np.flatnonzero((wire["length"] != ADD_SIZE) | (wire["type"] != b"A"))
    if len(bad):  # the first bad frame, even when the buffer is also cut further on
        raise ValueError(f"not a 36-byte Add Order at byte offset {int(bad[0]) * FRAME}")
    if whole != len(buf):
        raise ValueError(f"a cut frame at byte offset {whole}")
    out = np.empty(len(wire), dtype=OUT_DTYPE)
    for name in ("locate", "order_ref", "side", "shares", "price", "stock"):
        out[name] = wire[name]  # numpy swaps the bytes as it copies
    out["timestamp"] = (wire["ts_high"].astype(np.uint64) << np.uint64(32)) | wire["ts_low"]
    return out
