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
  byte offset of that record, after every whole record before it has been delivered. So
  does a record whose ``incl_len`` is larger than the snap length (the file header's, or
  262,144 bytes, libpcap's own bound, when that is 0 or larger): it is refused as soon as
  its header is read, not after buffering the rest of the file in search of its end.
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
* Sequence tracking is per **stream**: one destination (IPv4 group, UDP port) and one
  session. Each stream keeps its own expected number, so a stray UDP packet to another port,
  or a second session interleaved with the first, never disturbs another stream's gap
  tracking. In a stream, the first sequenced packet sets the expected number. A higher number
  is a gap (``gaps`` += 1, ``gap_messages`` += missing, ``first_gap_seq`` = first missing
  number of the first gap in any stream); a packet wholly below the expected number is a
  duplicate (skipped, counted in ``duplicate_packets`` and ``duplicate_messages``); a partial
  overlap delivers only the new messages (the old ones counted in ``duplicate_messages``).
  Heartbeats (count 0) and end-of-session packets (count 0xFFFF) carry the next expected
  number and can reveal a gap. ``streams`` counts the streams seen, ``session`` and
  ``next_seq`` are those of the last MoldUDP64 packet's stream, and ``Scanner.streams()``
  lists each stream's own counts. At most ``MAX_STREAMS`` (64) streams are tracked; packets
  of any further stream are skipped and counted in ``untracked``.
* Filters (``group``, ``port``, ``session`` arguments): a UDP packet to another destination
  group or port, or a MoldUDP64 packet of another session, is skipped and counted in
  ``filtered`` before anything else is counted about it.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Iterable, Iterator
from os import PathLike
from typing import Any, Final

import numpy as np

from contract.itch_errors import byte_view
from contract.itch_files import Source, check_chunk_size
from contract.pcap import DEFAULT_CHUNK, MAX_STREAMS, STAT_KEYS
from contract.pcap_files import decode_stream

GLOBAL_HEADER_LEN: Final = 24
RECORD_HEADER_LEN: Final = 16
MOLD_HEADER_LEN: Final = 20
END_OF_SESSION: Final = 0xFFFF
LINKTYPE_ETHERNET: Final = 1
ETHERTYPE_IPV4: Final = 0x0800
ETHERTYPE_VLAN: Final = (0x8100, 0x88A8)
IPPROTO_UDP: Final = 17
IPPROTO_TCP: Final = 6
U64_MAX: Final = 2**64 - 1
MAX_SNAPLEN: Final = 262_144  # libpcap's bound on any record; used when the header says 0

Stats = dict[str, Any]


class PcapError(ValueError):
    """A capture that cannot be read; ``offset`` is the byte offset of the problem.

    From ``scan``, ``blocks`` holds the message blocks of every record before it.
    """

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset
        self.blocks = np.zeros(0, dtype=np.uint8)


def snap_limit(snaplen: int) -> int:
    """The largest incl_len a record may have: the snap length, if it is a sane one."""
    return snaplen if 0 < snaplen <= MAX_SNAPLEN else MAX_SNAPLEN


def record_too_long(offset: int, incl_len: int, limit: int) -> PcapError:
    return PcapError(
        f"pcap record at byte offset {offset}: incl_len {incl_len} is larger than the snap"
        f" length {limit}", offset
    )


def ipv4_text(addr: bytes) -> str:
    return ".".join(str(b) for b in addr)


def parse_group(group: str | None) -> bytes | None:
    """A dotted IPv4 address as its 4 bytes (None stays None)."""
    if group is None:
        return None
    parts = group.split(".")
    if len(parts) != 4 or not all(p.isdigit() and int(p) < 256 for p in parts):
        raise ValueError(f"group must be a dotted IPv4 address, got {group!r}")
    return bytes(int(p) for p in parts)


def session_bytes(session: str | bytes | None) -> bytes | None:
    """A session name as the 10 bytes on the wire (space padded), None stays None."""
    if session is None:
        return None
    raw = session.encode("latin-1") if isinstance(session, str) else bytes(session)
    if len(raw) > 10:
        raise ValueError(f"a MoldUDP64 session has 10 bytes, got {len(raw)}")
    return raw.ljust(10)


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
    """Check the 24-byte global header; return records' struct byte-order prefix."""
    if len(buf) < GLOBAL_HEADER_LEN:
        raise PcapError(
            f"not a pcap file: {len(buf)} bytes, shorter than the 24-byte global"
            " header", 0
        )
    (magic,) = struct.unpack_from("<I", buf, 0)
    if magic not in MAGICS:
        raise PcapError(
            f"not a classic pcap file: bad magic 0x{magic:08x} at byte offset 0", 0
        )
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
    """The UDP payload of an IPv4 packet, bounded by the IP and UDP lengths (not the
    frame, which Ethernet pads to 60 bytes)."""
    if len(ip) < 20:
        stats["malformed"] += 1
        return None
    version_ihl, _tos, total_len, _ident, flags_frag, _ttl, proto = struct.unpack_from(
        ">BBHHHBB", ip, 0
    )
    header_len = (version_ihl & 0x0F) * 4  # IHL counts 32-bit words: 20..60 bytes
    if (version_ihl >> 4 != 4 or header_len < 20
            or total_len < header_len or total_len > len(ip)):
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


def destination(ip: memoryview) -> tuple[bytes, int]:
    """(destination address, destination UDP port) of a packet udp_payload accepted."""
    header_len = (ip[0] & 0x0F) * 4
    (port,) = struct.unpack_from(">H", ip, header_len + 2)
    return bytes(ip[16:20]), port
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
class Stream:
    """Sequence tracking for one MoldUDP64 stream: one destination, one session."""

    def __init__(self, group: bytes, port: int, session: bytes) -> None:
        self.group, self.port, self.session = group, port, session
        self.expected: int | None = None  # next sequence number we expect; None = not yet
        self.packets = self.messages = self.gaps = self.gap_messages = 0

    def counts(self) -> Stats:
        return {"group": ipv4_text(self.group), "port": self.port,
                "session": self.session.decode("latin-1"), "packets": self.packets,
                "messages": self.messages, "gaps": self.gaps,
                "gap_messages": self.gap_messages, "next_seq": self.expected or 0}


class MoldState:
    """Sequence tracking for every MoldUDP64 stream of a capture, plus the filters."""

    def __init__(self, stats: Stats, group: bytes | None = None, port: int | None = None,
                 session: bytes | None = None) -> None:
        self.stats = stats
        self.want_group, self.want_port, self.want_session = group, port, session
        self.streams: dict[tuple[bytes, int, bytes], Stream] = {}

    def stream(self, group: bytes, port: int, session: bytes) -> Stream | None:
        """This packet's stream (a new one on first sight), or None if the table is full."""
        key = (group, port, session)
        found = self.streams.get(key)
        if found is None and len(self.streams) < MAX_STREAMS:
            found = self.streams[key] = Stream(group, port, session)
            self.stats["streams"] += 1
        return found

    def gap_check(self, s: Stream, seq: int) -> None:
        st = self.stats
        if s.expected is not None and seq > s.expected:
            if st["gaps"] == 0:
                st["first_gap_seq"] = s.expected
            st["gaps"] += 1
            s.gaps += 1
            # Saturating, like the C++ twin's 64-bit counters.
            st["gap_messages"] = min(st["gap_messages"] + seq - s.expected, U64_MAX)
            s.gap_messages = min(s.gap_messages + seq - s.expected, U64_MAX)

    def packet(self, group: bytes, port: int, payload: memoryview, out: bytearray) -> None:
        """Account for one UDP payload; append the blocks of new messages to `out`."""
        st = self.stats
        if (self.want_group is not None and group != self.want_group) or (
                self.want_port is not None and port != self.want_port):
            st["filtered"] += 1
            return
        if len(payload) < MOLD_HEADER_LEN:
            st["not_moldudp64"] += 1
            return
        session = bytes(payload[0:10])
        if self.want_session is not None and session != self.want_session:
            st["filtered"] += 1
            return
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
        s = self.stream(group, port, session)
        if s is None:
            st["untracked"] += 1
            return
        st["moldudp64"] += 1
        s.packets += 1
        st["session"] = session.decode("latin-1")
        skip = 0
        if seq == 0:  # a sanitized capture: deliver, but nothing to track
            st["unsequenced"] += 1
        elif not ends:  # heartbeat or end of session: seq is the next expected number
            st["heartbeats" if count == 0 else "end_of_session"] += 1
            self.gap_check(s, seq)
            if s.expected is None or seq > s.expected:
                s.expected = seq
        else:
            self.gap_check(s, seq)
            if s.expected is None or seq > s.expected:
                s.expected = seq
            skip = s.expected - seq  # messages of this packet we have already seen
            if skip >= count:
                st["duplicate_packets"] += 1
                st["duplicate_messages"] += count
                ends = []
            else:
                st["duplicate_messages"] += skip
                s.expected = seq + count
        st["next_seq"] = s.expected or 0
        if not ends:
            return
        start = ends[skip - 1] if skip else MOLD_HEADER_LEN
        out += payload[start : ends[-1]]
        st["messages"] += len(ends) - skip
        s.messages += len(ends) - skip
# --8<-- [end:mold_seq]


class Scanner:
    """A PCAP reader that consumes whole records from successive chunks of a file.

    ``group`` (dotted IPv4), ``port`` and ``session``: read only that destination / session.
    """

    def __init__(self, group: str | None = None, port: int | None = None,
                 session: str | bytes | None = None) -> None:
        if port is not None and not 0 <= port <= 0xFFFF:
            raise ValueError(f"port must be 0..65535, got {port}")
        self.stats = new_stats()
        self.mold = MoldState(self.stats, parse_group(group), port, session_bytes(session))
        self.order: str | None = None  # struct byte order, once the global header is read
        self.offset = 0  # file offset of the first byte not yet consumed
        self.max_record = MAX_SNAPLEN
        self.error: PcapError | None = None  # a bad record, raised once what came before is out

    def streams(self) -> list[Stats]:
        """Each MoldUDP64 stream's own counts, in the order they first appeared."""
        return [s.counts() for s in self.mold.streams.values()]

    def feed(self, buf: bytes | bytearray | memoryview) -> tuple[np.ndarray, int]:
        """Consume every whole record at the start of `buf` (which begins at self.offset);
        return (framed message blocks, bytes consumed)."""
        view = byte_view(buf)
        pos = 0
        out = bytearray()
        if self.error is not None:
            return np.zeros(0, dtype=np.uint8), 0
        if self.order is None:
            if len(view) < GLOBAL_HEADER_LEN:
                return np.zeros(0, dtype=np.uint8), 0
            self.order = parse_global_header(view, self.stats)
            self.max_record = snap_limit(self.stats["snaplen"])
            pos = GLOBAL_HEADER_LEN
        record = struct.Struct(self.order + "IIII")
        while pos + RECORD_HEADER_LEN <= len(view):
            _sec, _frac, incl_len, orig_len = record.unpack_from(view, pos)
            if incl_len > self.max_record:  # refuse now: never wait for a bogus length
                self.error = record_too_long(self.offset + pos, incl_len, self.max_record)
                break
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
            group, port = destination(ip)
            self.mold.packet(group, port, payload, out)

    def check(self) -> None:
        """Raise the error of a bad record that feed() stopped at, if any."""
        if self.error is not None:
            raise self.error

    def finish(self, rest: bytes | bytearray | memoryview) -> None:
        """At end of file: raise if anything is left over (a cut record or header)."""
        self.check()
        view = byte_view(rest)
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


def scan(buffer: bytes | bytearray | memoryview, group: str | None = None,
         port: int | None = None, session: str | bytes | None = None,
         ) -> tuple[np.ndarray, Stats]:
    """A whole capture in memory -> (framed ITCH message blocks, statistics)."""
    scanner = Scanner(group, port, session)
    framed, used = scanner.feed(buffer)
    try:
        scanner.finish(byte_view(buffer)[used:])
    except PcapError as error:
        error.blocks = framed  # nothing already accepted is lost
        raise
    return framed, scanner.stats


class PcapReader:
    """Iterates over a capture as (events, counts) per chunk; `stats` and `streams()` when done.

    ``path``: a file, a pipe or FIFO, ``"-"`` for standard input, or an open binary stream.
    """

    def __init__(self, path: Source, chunk_size: int = DEFAULT_CHUNK,
                 group: str | None = None, port: int | None = None,
                 session: str | bytes | None = None) -> None:
        self.path = path
        self.chunk_size = check_chunk_size(chunk_size)
        self.scanner = Scanner(group, port, session)
        self.stats = self.scanner.stats
        self._it = self._blocks()

    def streams(self) -> list[Stats]:
        return self.scanner.streams()

    def _blocks(self) -> Iterator[tuple[Any, Any]]:
        # Late: the ITCH decoder is a separate component, loaded when first needed.
        itch = importlib.import_module("naive.itch")
        yield from decode_stream(self.path, self.chunk_size, self.scanner, itch.decode)

    def __iter__(self) -> PcapReader:
        return self

    def __next__(self) -> tuple[Any, Any]:
        return next(self._it)


def read_file(path: Source, chunk_size: int = DEFAULT_CHUNK, group: str | None = None,
              port: int | None = None, session: str | bytes | None = None) -> PcapReader:
    """Stream a capture: yields itch.decode(blocks) per chunk; `.stats` after iteration.

    ``group``, ``port``, ``session``: read only packets to that IPv4 destination group, UDP
    destination port and MoldUDP64 session (the others are counted in ``filtered``).
    """
    return PcapReader(path, chunk_size, group, port, session)


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

