"""Read the records of a classic pcap file: both byte orders, micro- and nanoseconds,
cut packets counted, damage refused by offset (starter)."""

from __future__ import annotations

import struct

# The first four bytes on disk -> (struct byte order, nanosecond timestamps?)
# TODO: the other three magics (chapter 4's table): nanoseconds, and big-endian files.
MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", False),
}
GLOBAL_HEADER = 24
RECORD_HEADER = 16
LIBPCAP_MAX_SNAPLEN = 262_144
ETHERNET = 1


class PcapError(ValueError):
    """A pcap file that cannot be read on: ``offset`` is where the bad header starts."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"pcap: {reason} at byte offset {offset}")
        self.offset = offset


def read_pcap(data: bytes, out: list[tuple[int, bytes]]) -> tuple[str, int]:
    """Append (timestamp in ns, packet bytes) for each whole record of ``data`` to
    ``out``; return (resolution "us" or "ns", number of cut packets skipped).

    A record whose header or body runs past the end, or whose captured length is over
    the snap length, raises PcapError naming its offset, after every record before it
    was appended.
    """
    if len(data) < GLOBAL_HEADER:
        raise PcapError(0, "file shorter than the 24-byte global header")
    if data[:4] not in MAGICS:
        raise PcapError(0, f"unknown magic {data[:4].hex()}")
    order, nanos = MAGICS[data[:4]]
    snaplen, linktype = struct.unpack_from(order + "II", data, 16)
    if linktype != ETHERNET:
        raise PcapError(0, f"link type {linktype} is not Ethernet")
    # TODO: refuse a captured length over the snap length (or over libpcap's bound when
    # the header's snap length is 0 or more than that).
    del snaplen
    record = struct.Struct(order + "IIII")
    per_tick = 1_000
    truncated = 0
    off = GLOBAL_HEADER
    while off < len(data):
        if len(data) - off < RECORD_HEADER:
            raise PcapError(off, "record header cut off")
        sec, frac, incl_len, orig_len = record.unpack_from(data, off)
        body = off + RECORD_HEADER
        # TODO: a body that runs past the end of the file (a slice does not complain),
        # and a packet cut by the snap length (incl_len < orig_len: count it, skip it).
        del orig_len
        out.append((sec * 1_000_000_000 + frac * per_tick, data[body: body + incl_len]))
        off = body + incl_len
    return ("ns" if nanos else "us"), truncated
