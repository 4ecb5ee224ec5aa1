"""Off the wire, the readable twin: classic PCAP -> Ethernet [802.1Q] -> IPv4 -> UDP -> MoldUDP64.

The layers peel one header each and end with MoldUDP64's message blocks, which are framed
exactly like an ITCH file (``[u16 big-endian length][message]``), so the chapter 3 decoder
reads them unchanged. ``scan(buffer)`` returns the blocks of a whole in-memory capture and
the statistics; ``read_file(path)`` streams a capture in chunks and yields
``itch.decode(blocks)`` per chunk, keeping the statistics in ``reader.stats``.

Decisions, shared with the optimized twin (same statistics, same errors):

* Only link type 1 (Ethernet) is read; any other link type, a bad magic (a raw ``.itch``
  file, pcapng) or a file shorter than the 24-byte global header raises ``PcapError``.
* A record header or body cut short at the end of the file raises ``PcapError`` naming the
  byte offset of that record, after every whole record before it has been delivered.
* A packet cut by the snap length (``incl_len < orig_len``) is counted in ``truncated`` and
  skipped whole: part of a MoldUDP64 packet cannot be trusted to end on a block, and the
  next packet's sequence number reports the messages it carried as a gap.
* Non-IPv4 frames (IPv6, ARP, ...), non-UDP IPv4 packets and IPv4 fragments are counted and
  skipped. Frames too short for their own headers, or whose IPv4/UDP lengths do not fit,
  are counted in ``malformed``. A UDP payload shorter than the 20-byte MoldUDP64 header is
  ``not_moldudp64``; one whose message blocks overrun it is ``bad_moldudp64`` (skipped whole,
  the expected sequence number unchanged).
* MoldUDP64 sequence numbers start at 1, so sequence 0 never occurs on a live feed;
  publishers that sanitize captures zero it. Packets with sequence 0 are delivered without
  sequence tracking and counted in ``unsequenced``.
* Sequence tracking: the first sequenced packet sets the expected number. A higher number is
  a gap (``gaps`` += 1, ``gap_messages`` += missing, ``first_gap_seq`` = first missing number);
  a packet wholly below the expected number is a duplicate (skipped, counted in
  ``duplicate_packets`` and ``duplicate_messages``); a partial overlap delivers only the new
  messages (the old ones counted in ``duplicate_messages``). Heartbeats (count 0) and
  end-of-session packets (count 0xFFFF) carry the next expected number and can reveal a gap.
  A packet from a different session counts in ``session_changes`` and restarts tracking.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Iterable, Iterator
from os import PathLike
from typing import Any, Final

import numpy as np

from twinmatch.pcap_files import decode_stream

GLOBAL_HEADER_LEN: Final = 24
RECORD_HEADER_LEN: Final = 16
MOLD_HEADER_LEN: Final = 20
END_OF_SESSION: Final = 0xFFFF
LINKTYPE_ETHERNET: Final = 1
ETHERTYPE_IPV4: Final = 0x0800
ETHERTYPE_VLAN: Final = (0x8100, 0x88A8)
IPPROTO_UDP: Final = 17
IPPROTO_TCP: Final = 6
DEFAULT_CHUNK: Final = 1 << 22
U64_MAX: Final = 2**64 - 1

# The statistics, in the order both twins report them. Every value is an int but `session`.
STAT_KEYS: Final[tuple[str, ...]] = (
    "nanosecond", "big_endian", "snaplen", "packets", "truncated", "non_ipv4", "non_udp",
    "ipv4_fragments", "malformed", "not_moldudp64", "bad_moldudp64", "moldudp64",
    "unsequenced", "heartbeats", "end_of_session", "messages", "gaps", "gap_messages",
    "first_gap_seq", "duplicate_packets", "duplicate_messages", "session_changes", "next_seq",
)

Stats = dict[str, Any]


class PcapError(ValueError):
    """A capture that cannot be read; ``offset`` is the byte offset of the problem."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def new_stats() -> Stats:
    stats: Stats = dict.fromkeys(STAT_KEYS, 0)
    stats["session"] = ""
    return stats


# --8<-- [start:pcap_header]
# magic as read little-endian -> (nanosecond timestamps?, file is big-endian?)
MAGICS: Final[dict[int, tuple[bool, bool]]] = {
    0xA1B2C3D4: (False, False),
    0xA1B23C4D: (True, False),
    0xD4C3B2A1: (False, True),
    0x4D3CB2A1: (True, True),
}


def parse_global_header(buf: bytes | memoryview, stats: Stats) -> str:
    """Check the 24-byte global header; return the struct byte-order prefix for records."""
    if len(buf) < GLOBAL_HEADER_LEN:
        raise PcapError(
            f"not a pcap file: {len(buf)} bytes, shorter than the 24-byte global header", 0
        )
    (magic,) = struct.unpack_from("<I", buf, 0)
    if magic not in MAGICS:
        raise PcapError(f"not a classic pcap file: bad magic 0x{magic:08x} at byte offset 0", 0)
    nanosecond, big_endian = MAGICS[magic]
    order = ">" if big_endian else "<"
    snaplen, linktype = struct.unpack_from(order + "II", buf, 16)
    if linktype & 0xFFFF != LINKTYPE_ETHERNET:
        raise PcapError(
            f"unsupported pcap link type {linktype & 0xFFFF} at byte offset 20"
            " (only 1, Ethernet, is read)", 20
        )
    stats["nanosecond"] = int(nanosecond)
    stats["big_endian"] = int(big_endian)
    stats["snaplen"] = snaplen
    return order
# --8<-- [end:pcap_header]


# --8<-- [start:vlan]
def ethernet_payload(frame: memoryview, stats: Stats) -> memoryview | None:
    """The IPv4 packet inside an Ethernet frame, skipping any 802.1Q / 802.1ad tags."""
    if len(frame) < 14:
        stats["malformed"] += 1
        return None
    pos = 12
    (ethertype,) = struct.unpack_from(">H", frame, pos)
    while ethertype in ETHERTYPE_VLAN:  # a tag: 2 bytes TCI, then the next EtherType
        pos += 4
        if len(frame) < pos + 2:
            stats["malformed"] += 1
            return None
        (ethertype,) = struct.unpack_from(">H", frame, pos)
    if ethertype != ETHERTYPE_IPV4:
        stats["non_ipv4"] += 1
        return None
    return frame[pos + 2 :]
# --8<-- [end:vlan]


# --8<-- [start:ipv4]
def udp_payload(ip: memoryview, stats: Stats) -> memoryview | None:
    """The UDP payload of an IPv4 packet, bounded by the IP and UDP lengths (not the frame,
    which Ethernet pads to 60 bytes)."""
    if len(ip) < 20:
        stats["malformed"] += 1
        return None
    version_ihl, _tos, total_len, _ident, flags_frag, _ttl, proto = struct.unpack_from(
        ">BBHHHBB", ip, 0
    )
    header_len = (version_ihl & 0x0F) * 4  # IHL counts 32-bit words: 20..60 bytes
    if version_ihl >> 4 != 4 or header_len < 20 or total_len < header_len or total_len > len(ip):
        stats["malformed"] += 1
        return None
    if flags_frag & 0x3FFF:  # MF flag or a fragment offset: only reassembly could help
        stats["ipv4_fragments"] += 1
        return None
    if proto != IPPROTO_UDP:
        stats["non_udp"] += 1
        return None
    udp = ip[header_len:total_len]
    if len(udp) < 8:
        stats["malformed"] += 1
        return None
    (udp_len,) = struct.unpack_from(">H", udp, 4)
    if udp_len < 8 or udp_len > len(udp):
        stats["malformed"] += 1
        return None
    return udp[8:udp_len]
# --8<-- [end:ipv4]


def block_ends(payload: memoryview, count: int) -> list[int] | None:
    """End offsets of the `count` message blocks after the MoldUDP64 header, or None if a
    block runs past the payload."""
    ends = []
    pos = MOLD_HEADER_LEN
    for _ in range(count):
        if pos + 2 > len(payload):
            return None
        (length,) = struct.unpack_from(">H", payload, pos)
        pos += 2 + length
        if pos > len(payload):
            return None
        ends.append(pos)
    return ends


# --8<-- [start:mold_seq]
class MoldState:
    """Sequence tracking for one MoldUDP64 stream."""

    def __init__(self, stats: Stats) -> None:
        self.stats = stats
        self.session: bytes | None = None
        self.expected: int | None = None  # next sequence number we expect; None = not yet

    def gap_check(self, seq: int) -> None:
        st = self.stats
        if self.expected is not None and seq > self.expected:
            if st["gaps"] == 0:
                st["first_gap_seq"] = self.expected
            st["gaps"] += 1
            # Saturating, like the C++ twin's 64-bit counter.
            st["gap_messages"] = min(st["gap_messages"] + seq - self.expected, U64_MAX)

    def packet(self, payload: memoryview, out: bytearray) -> None:
        """Account for one UDP payload; append the blocks of new messages to `out`."""
        st = self.stats
        if len(payload) < MOLD_HEADER_LEN:
            st["not_moldudp64"] += 1
            return
        session = bytes(payload[0:10])
        seq, count = struct.unpack_from(">QH", payload, 10)
        if count == 0 or count == END_OF_SESSION:
            ends: list[int] = []
        else:
            # A packet whose last sequence number would pass 2**64 - 1 is not valid either.
            found = block_ends(payload, count) if seq + count <= U64_MAX else None
            if found is None:
                st["bad_moldudp64"] += 1
                return
            ends = found
        st["moldudp64"] += 1
        if self.session is None:
            self.session = session
            st["session"] = session.decode("latin-1")
        elif session != self.session:
            st["session_changes"] += 1
            self.session, self.expected = session, None
            st["session"] = session.decode("latin-1")
            st["next_seq"] = 0
        if seq == 0:  # a sanitized capture: deliver, but nothing to track
            st["unsequenced"] += 1
            skip = 0
            if not ends:
                return
        elif not ends:  # heartbeat or end of session: seq is the next expected number
            st["heartbeats" if count == 0 else "end_of_session"] += 1
            self.gap_check(seq)
            if self.expected is None or seq > self.expected:
                self.expected = seq
                st["next_seq"] = seq
            return
        else:
            self.gap_check(seq)
            if self.expected is None or seq > self.expected:
                self.expected = seq
            skip = self.expected - seq  # messages of this packet we have already seen
            if skip >= count:
                st["duplicate_packets"] += 1
                st["duplicate_messages"] += count
                return
            st["duplicate_messages"] += skip
            self.expected = seq + count
            st["next_seq"] = self.expected
        start = ends[skip - 1] if skip else MOLD_HEADER_LEN
        out += payload[start : ends[-1]]
        st["messages"] += len(ends) - skip
# --8<-- [end:mold_seq]


class Scanner:
    """A PCAP reader that consumes whole records from successive chunks of a file."""

    def __init__(self) -> None:
        self.stats = new_stats()
        self.mold = MoldState(self.stats)
        self.order: str | None = None  # struct byte order, once the global header is read
        self.offset = 0  # file offset of the first byte not yet consumed

    def feed(self, buf: bytes | bytearray | memoryview) -> tuple[np.ndarray, int]:
        """Consume every whole record at the start of `buf` (which begins at self.offset);
        return (framed message blocks, bytes consumed)."""
        view = memoryview(buf).cast("B")
        pos = 0
        out = bytearray()
        if self.order is None:
            if len(view) < GLOBAL_HEADER_LEN:
                return np.zeros(0, dtype=np.uint8), 0
            self.order = parse_global_header(view, self.stats)
            pos = GLOBAL_HEADER_LEN
        record = struct.Struct(self.order + "IIII")
        while pos + RECORD_HEADER_LEN <= len(view):
            _sec, _frac, incl_len, orig_len = record.unpack_from(view, pos)
            end = pos + RECORD_HEADER_LEN + incl_len
            if end > len(view):
                break
            self.packet(view[pos + RECORD_HEADER_LEN : end], incl_len < orig_len, out)
            pos = end
        self.offset += pos
        return np.frombuffer(bytes(out), dtype=np.uint8), pos

    def packet(self, frame: memoryview, cut: bool, out: bytearray) -> None:
        self.stats["packets"] += 1
        if cut:
            self.stats["truncated"] += 1
            return
        ip = ethernet_payload(frame, self.stats)
        if ip is None:
            return
        payload = udp_payload(ip, self.stats)
        if payload is not None:
            self.mold.packet(payload, out)

    def finish(self, rest: bytes | bytearray | memoryview) -> None:
        """At end of file: raise if anything is left over (a cut record or header)."""
        view = memoryview(rest).cast("B")
        if self.order is None:
            parse_global_header(view, self.stats)  # raises: too short
        if len(view) == 0:
            return
        if len(view) < RECORD_HEADER_LEN:
            raise PcapError(
                f"truncated pcap record header at byte offset {self.offset}:"
                f" {len(view)} of 16 bytes", self.offset
            )
        assert self.order is not None
        (incl_len,) = struct.unpack_from(self.order + "I", view, 8)
        raise PcapError(
            f"truncated pcap record at byte offset {self.offset}: incl_len {incl_len},"
            f" {len(view) - RECORD_HEADER_LEN} bytes follow the header", self.offset
        )


def scan(buffer: bytes | bytearray | memoryview) -> tuple[np.ndarray, Stats]:
    """A whole capture in memory -> (framed ITCH message blocks, statistics)."""
    scanner = Scanner()
    framed, used = scanner.feed(buffer)
    scanner.finish(memoryview(buffer)[used:])
    return framed, scanner.stats


class PcapReader:
    """Iterates over a capture file as (events, counts) per chunk; `stats` when done."""

    def __init__(self, path: str | PathLike[str], chunk_size: int = DEFAULT_CHUNK) -> None:
        self.path = path
        self.chunk_size = max(chunk_size, 1)
        self.scanner = Scanner()
        self.stats = self.scanner.stats
        self._it = self._blocks()

    def _blocks(self) -> Iterator[tuple[Any, Any]]:
        # Late: the ITCH decoder is a separate component, loaded when first needed.
        itch = importlib.import_module("naive.itch")
        yield from decode_stream(self.path, self.chunk_size, self.scanner, itch.decode)

    def __iter__(self) -> PcapReader:
        return self

    def __next__(self) -> tuple[Any, Any]:
        return next(self._it)


def read_file(path: str | PathLike[str], chunk_size: int = DEFAULT_CHUNK) -> PcapReader:
    """Stream a capture: yields itch.decode(blocks) per chunk; `.stats` after iteration."""
    return PcapReader(path, chunk_size)


# ---------------------------------------------------------------------------------------
# Writing captures: the test suite and the feed generators build packets with these.


def ethernet(payload: bytes, vlans: Iterable[int] = (), ethertype: int = ETHERTYPE_IPV4) -> bytes:
    """An Ethernet II frame; each VLAN id adds an 802.1Q tag."""
    head = bytes.fromhex("01005e364d6f") + bytes.fromhex("020000000001")
    for vid in vlans:
        head += struct.pack(">HH", 0x8100, vid & 0x0FFF)
    return head + struct.pack(">H", ethertype) + payload


def ipv4(
    payload: bytes,
    proto: int = IPPROTO_UDP,
    options: bytes = b"",
    flags_frag: int = 0x4000,
    src: bytes = bytes([10, 0, 0, 1]),
    dst: bytes = bytes([233, 54, 12, 111]),
) -> bytes:
    """An IPv4 header (IHL from the options, padded to 4 bytes) + payload; checksum 0."""
    options += b"\x00" * (-len(options) % 4)
    ihl = 5 + len(options) // 4
    total = ihl * 4 + len(payload)
    head = struct.pack(">BBHHHBBH4s4s", 0x40 | ihl, 0, total, 0, flags_frag, 64, proto, 0,
                       src, dst)
    return head + options + payload


def udp(payload: bytes, sport: int = 26477, dport: int = 26477) -> bytes:
    return struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload


def moldudp64_packet(session: bytes | str, seq: int, messages: Iterable[bytes]) -> bytes:
    """A MoldUDP64 payload: session (10 bytes), seq, count, then framed messages."""
    sess = session.encode("ascii") if isinstance(session, str) else session
    msgs = list(messages)
    body = b"".join(struct.pack(">H", len(m)) + m for m in msgs)
    return sess.ljust(10)[:10] + struct.pack(">QH", seq, len(msgs)) + body


def moldudp64_heartbeat(session: bytes | str, next_seq: int, end: bool = False) -> bytes:
    sess = session.encode("ascii") if isinstance(session, str) else session
    count = END_OF_SESSION if end else 0
    return sess.ljust(10)[:10] + struct.pack(">QH", next_seq, count)


def frame_udp(payload: bytes, vlans: Iterable[int] = ()) -> bytes:
    """A whole Ethernet/IPv4/UDP frame around a UDP payload."""
    return ethernet(ipv4(udp(payload)), vlans)


def pcap_bytes(
    packets: Iterable[bytes | tuple[bytes, int]],
    nanosecond: bool = False,
    big_endian: bool = False,
    snaplen: int = 65535,
    linktype: int = LINKTYPE_ETHERNET,
) -> bytes:
    """A classic pcap file image. A packet given as (frame, orig_len) records a snap-cut."""
    order = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nanosecond else 0xA1B2C3D4
    parts = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for i, packet in enumerate(packets):
        frame, orig_len = packet if isinstance(packet, tuple) else (packet, len(packet))
        parts.append(struct.pack(order + "IIII", 1_700_000_000 + i, i, len(frame), orig_len))
        parts.append(frame)
    return b"".join(parts)


def write_pcap(
    path: str | PathLike[str],
    packets: Iterable[bytes | tuple[bytes, int]],
    nanosecond: bool = False,
    big_endian: bool = False,
) -> None:
    """Write Ethernet frames as a classic pcap file."""
    with open(path, "wb") as f:
        f.write(pcap_bytes(packets, nanosecond, big_endian))

