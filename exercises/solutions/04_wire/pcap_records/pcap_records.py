"""Read the records of a classic pcap file: both byte orders, micro- and nanoseconds,
cut packets counted, damage refused by offset (reference solution)."""

from __future__ import annotations

import struct

# The first four bytes on disk -> (struct byte order, nanosecond timestamps?)
MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", False),
    b"\x4d\x3c\xb2\xa1": ("<", True),
    b"\xa1\xb2\xc3\xd4": (">", False),
    b"\xa1\xb2\x3c\x4d": (">", True),
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
    bound = snaplen if 0 < snaplen <= LIBPCAP_MAX_SNAPLEN else LIBPCAP_MAX_SNAPLEN
    record = struct.Struct(order + "IIII")
    per_tick = 1 if nanos else 1_000
    truncated = 0
    off = GLOBAL_HEADER
    while off < len(data):
        if len(data) - off < RECORD_HEADER:
            raise PcapError(off, "record header cut off")
        sec, frac, incl_len, orig_len = record.unpack_from(data, off)
        if incl_len > bound:
            raise PcapError(off, f"captured length {incl_len} over the snap length {bound}")
        body = off + RECORD_HEADER
        if len(data) - body < incl_len:
            raise PcapError(off, "record body cut off")
        if incl_len < orig_len:
            truncated += 1  # cut by the snap length: cannot be trusted, skip it whole
        else:
            out.append((sec * 1_000_000_000 + frac * per_tick, data[body: body + incl_len]))
        off = body + incl_len
    return ("ns" if nanos else "us"), truncated
