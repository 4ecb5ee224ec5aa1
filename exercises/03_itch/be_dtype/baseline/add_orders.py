"""Decode a run of framed Add Order (A) messages into one numpy record array (starter:
correct, one struct call per message)."""

from __future__ import annotations

import struct

import numpy as np

FRAME = 38  # a 2-byte big-endian length (36), then the 36-byte message
ADD_SIZE = 36
# What the caller gets: native little-endian fields, one record per message.
OUT_DTYPE = np.dtype([("locate", "<u2"), ("timestamp", "<u8"), ("order_ref", "<u8"),
                      ("side", "S1"), ("shares", "<u4"), ("price", "<u4"), ("stock", "S8")])
# length, type, locate, tracking, timestamp (6 bytes: 2 + 4), ref, side, shares, stock, price
_FRAME = struct.Struct(">HcHHHIQcI8sI")


def decode_adds(buf: bytes) -> np.ndarray:
    """Every frame of ``buf`` as an OUT_DTYPE record. A buffer that does not end on a
    frame boundary, a frame whose length is not 36, or a message that is not an 'A' is a
    ValueError naming the byte offset of that frame."""
    # TODO: one struct call per message. Describe the frame once as a numpy structured
    # dtype of big-endian fields (">u2", ">u4", ...), view the whole buffer as an array of
    # it, check the lengths and types with whole-array comparisons, and copy each field
    # into the output in one assignment.
    whole = len(buf) - len(buf) % FRAME
    rows = []
    for off in range(0, whole, FRAME):
        (length, kind, locate, _tracking, ts_high, ts_low, ref, side, shares, stock,
         price) = _FRAME.unpack_from(buf, off)
        if length != ADD_SIZE or kind != b"A":
            raise ValueError(f"not a 36-byte Add Order at byte offset {off}")
        rows.append((locate, ts_high << 32 | ts_low, ref, side, shares, price, stock))
    if whole != len(buf):
        raise ValueError(f"a cut frame at byte offset {whole}")
    return np.array(rows, dtype=OUT_DTYPE)
