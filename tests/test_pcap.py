"""PCAP -> MoldUDP64 framing and statistics, both twins (the ITCH decoder is not needed here
except in the read_file tests, which use a stand-in decoder)."""

from __future__ import annotations

import os
import struct
import sys
import types
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naive
import naive.pcap as npcap
import optimized
import optimized.pcap as opcap
from contract.pcap import MAX_STREAMS
from naive.pcap import (
    IPPROTO_TCP,
    ethernet,
    frame_udp,
    ipv4,
    moldudp64_heartbeat,
    moldudp64_packet,
    pcap_bytes,
    udp,
    write_pcap,
)
from tests.conftest import REAL_DATA  # noqa: E402

REAL = REAL_DATA
IMPLS = {"naive": npcap, "optimized": opcap}


@pytest.fixture(params=sorted(IMPLS))
def impl(request: pytest.FixtureRequest) -> ModuleType:
    return IMPLS[request.param]


def real(name: str) -> Path:
    path = REAL / name
    if not path.exists():
        pytest.skip(f"real capture {name} not found in {REAL}")
    return path


def msg(i: int, size: int = 11) -> bytes:
    """A dummy ITCH-shaped message (type byte + filler); the scanner never decodes it."""
    return bytes([0x41 + i % 26]) + (i % 251).to_bytes(1, "big") * (size - 1)


def framed(msgs: list[bytes]) -> bytes:
    return b"".join(struct.pack(">H", len(m)) + m for m in msgs)


def mold_frame(seq: int, msgs: list[bytes], session: str = "SESSION001") -> bytes:
    return frame_udp(moldudp64_packet(session, seq, msgs))


# --- real captures ------------------------------------------------------------------------


def test_real_multiple_packets(impl: ModuleType) -> None:
    blocks, stats = impl.scan(real("moldudp64-multiple-packets.pcap").read_bytes())
    assert stats["packets"] == 2 and stats["moldudp64"] == 2
    assert stats["session"] == "000010059B"
    assert stats["nanosecond"] == 1 and stats["big_endian"] == 0
    assert stats["messages"] == 39
    # 14764496 (1 message) then 19009117: everything in between is missing.
    assert stats["gaps"] == 1
    assert stats["first_gap_seq"] == 14764497
    assert stats["gap_messages"] == 19009117 - 14764497
    assert stats["next_seq"] == 19009117 + 38
    types_ = message_types(bytes(blocks))
    assert types_[0] == "D" and len(types_) == 39
    assert set(types_[1:]) <= {"A", "F"}


def message_types(blocks: bytes) -> list[str]:
    out, pos = [], 0
    while pos < len(blocks):
        (n,) = struct.unpack_from(">H", blocks, pos)
        out.append(chr(blocks[pos + 2]))
        pos += 2 + n
    assert pos == len(blocks)
    return out


@pytest.mark.parametrize(
    ("name", "packets", "kind"),
    [
        ("moldudp64-add-order.pcap", 1, "A"),
        ("moldudp64-20230822-add-order-sanitized.pcap", 5, "A"),
        ("moldudp64-20230822-order-executed-sanitized.pcap", 5, "E"),
    ],
)
def test_real_small(impl: ModuleType, name: str, packets: int, kind: str) -> None:
    blocks, stats = impl.scan(real(name).read_bytes())
    assert stats["packets"] == packets and stats["messages"] == packets
    assert message_types(bytes(blocks)) == [kind] * packets
    if "sanitized" in name:  # session and sequence zeroed by the publisher
        assert stats["unsequenced"] == packets and stats["duplicate_packets"] == 0


@pytest.mark.parametrize("name", ["moldudp64-multiple-packets.pcap", "moldudp64-add-order.pcap"])
def test_real_same_udp_payloads_as_dpkt(impl: ModuleType, name: str) -> None:
    """dpkt, an independent reader, finds the same UDP payloads; we deliver their blocks."""
    dpkt = pytest.importorskip("dpkt")
    path = real(name)
    expected = b""
    with open(path, "rb") as f:
        for _ts, buf in dpkt.pcap.Reader(f):
            payload = bytes(dpkt.ethernet.Ethernet(buf).data.data.data)
            expected += payload[20:]
    blocks, _ = impl.scan(path.read_bytes())
    assert bytes(blocks) == expected


def test_real_itch_file_is_bad_magic(impl: ModuleType) -> None:
    with pytest.raises(impl.PcapError, match="bad magic") as e:
        impl.scan(real("stock-directory-sample.itch").read_bytes())
    assert e.value.offset == 0


# --- generated captures ---------------------------------------------------------------------


@pytest.mark.parametrize("nanosecond", [False, True])
@pytest.mark.parametrize("big_endian", [False, True])
def test_magics_and_byte_orders(impl: ModuleType, nanosecond: bool, big_endian: bool) -> None:
    msgs = [msg(i) for i in range(5)]
    data = pcap_bytes([mold_frame(1, msgs[:2]), mold_frame(3, msgs[2:])], nanosecond, big_endian)
    blocks, stats = impl.scan(data)
    assert bytes(blocks) == framed(msgs)
    assert stats["nanosecond"] == int(nanosecond) and stats["big_endian"] == int(big_endian)
    assert stats["messages"] == 5 and stats["gaps"] == 0 and stats["next_seq"] == 6


def test_write_pcap_round_trip(impl: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "x.pcap"
    write_pcap(path, [mold_frame(7, [msg(1)])], nanosecond=True, big_endian=True)
    blocks, stats = impl.scan(path.read_bytes())
    assert bytes(blocks) == framed([msg(1)]) and stats["session"] == "SESSION001"


def test_vlan_tags_and_ip_options(impl: ModuleType) -> None:
    m = [msg(i) for i in range(3)]
    frames = [
        frame_udp(moldudp64_packet("S", 1, m[:1]), vlans=[100]),
        frame_udp(moldudp64_packet("S", 2, m[1:2]), vlans=[100, 200]),  # QinQ-style stack
        ethernet(ipv4(udp(moldudp64_packet("S", 3, m[2:])), options=b"\x01" * 12)),  # IHL 8
    ]
    blocks, stats = impl.scan(pcap_bytes(frames))
    assert bytes(blocks) == framed(m)
    assert stats["moldudp64"] == 3 and stats["malformed"] == 0


def test_skipped_frames_are_counted(impl: ModuleType) -> None:
    good = mold_frame(1, [msg(0)])
    frames = [
        ethernet(b"\x60" + b"\x00" * 60, ethertype=0x86DD),  # IPv6
        ethernet(b"\x00" * 28, ethertype=0x0806),  # ARP
        ethernet(ipv4(b"\x00" * 20, proto=IPPROTO_TCP)),  # TCP
        ethernet(ipv4(udp(b"x" * 30), flags_frag=0x2000)),  # first fragment (MF)
        ethernet(ipv4(b"y" * 30, flags_frag=0x0003)),  # later fragment (offset 3)
        b"\x00" * 10,  # runt frame
        ethernet(b"\x45" + b"\x00" * 5),  # IPv4 header cut short
        ethernet(ipv4(udp(b"short"))),  # UDP payload < 20 bytes: not MoldUDP64
        good,
    ]
    blocks, stats = impl.scan(pcap_bytes(frames))
    assert bytes(blocks) == framed([msg(0)])
    assert stats["packets"] == 9
    assert stats["non_ipv4"] == 2 and stats["non_udp"] == 1 and stats["ipv4_fragments"] == 2
    assert stats["malformed"] == 2 and stats["not_moldudp64"] == 1 and stats["moldudp64"] == 1


def test_ethernet_padding_is_ignored(impl: ModuleType) -> None:
    """Bytes after the IP packet (Ethernet padding, a frame check sequence) are not payload:
    the payload is bounded by the IP and UDP lengths, not by the captured length."""
    frame = mold_frame(1, [msg(0)]) + b"\x00" * 6
    blocks, stats = impl.scan(pcap_bytes([frame]))
    assert bytes(blocks) == framed([msg(0)])
    assert stats["malformed"] == 0 and stats["bad_moldudp64"] == 0


def test_bad_lengths_are_malformed(impl: ModuleType) -> None:
    ip = bytearray(ipv4(udp(moldudp64_packet("S", 1, [msg(0)]))))
    frames = []
    for patch in (
        lambda b: b.__setitem__(0, 0x44),  # IHL 4 < 5
        lambda b: b.__setitem__(0, 0x65),  # version 6 under EtherType IPv4
        lambda b: struct.pack_into(">H", b, 2, 10),  # total length < header
        lambda b: struct.pack_into(">H", b, 2, 2000),  # total length > frame
        lambda b: struct.pack_into(">H", b, 24, 7),  # UDP length < 8
        lambda b: struct.pack_into(">H", b, 24, 500),  # UDP length > IP payload
    ):
        bad = bytearray(ip)
        patch(bad)
        frames.append(ethernet(bytes(bad)))
    _, stats = impl.scan(pcap_bytes(frames))
    assert stats["malformed"] == 6 and stats["moldudp64"] == 0


def test_heartbeats_end_of_session_and_gaps(impl: ModuleType) -> None:
    m = [msg(i) for i in range(10)]
    frames = [
        frame_udp(moldudp64_heartbeat("S", 1)),  # before any data: sets expected = 1
        mold_frame(1, m[0:3], "S"),
        frame_udp(moldudp64_heartbeat("S", 4)),
        mold_frame(6, m[5:7], "S"),  # gap: 4, 5 missing
        frame_udp(moldudp64_heartbeat("S", 10)),  # gap revealed by a heartbeat: 8, 9
        frame_udp(moldudp64_heartbeat("S", 10, end=True)),
    ]
    blocks, stats = impl.scan(pcap_bytes(frames))
    assert bytes(blocks) == framed(m[0:3] + m[5:7])
    assert stats["heartbeats"] == 3 and stats["end_of_session"] == 1
    assert stats["gaps"] == 2 and stats["gap_messages"] == 4 and stats["first_gap_seq"] == 4
    assert stats["next_seq"] == 10 and stats["messages"] == 5


def test_duplicates_and_overlap(impl: ModuleType) -> None:
    m = [msg(i) for i in range(8)]
    frames = [
        mold_frame(1, m[0:4]),
        mold_frame(1, m[0:4]),  # A/B arbitration: the whole packet again
        mold_frame(3, m[2:6]),  # overlap: 3, 4 seen, 5, 6 new
        mold_frame(2, m[1:2]),  # old
        mold_frame(7, m[6:8]),
    ]
    blocks, stats = impl.scan(pcap_bytes(frames))
    assert bytes(blocks) == framed(m)
    assert stats["duplicate_packets"] == 2 and stats["duplicate_messages"] == 4 + 2 + 1
    assert stats["gaps"] == 0 and stats["messages"] == 8 and stats["next_seq"] == 9


def test_a_new_session_is_its_own_stream(impl: ModuleType) -> None:
    frames = [mold_frame(100, [msg(0)], "A"), mold_frame(1, [msg(1)], "B")]
    blocks, stats = impl.scan(pcap_bytes(frames))
    assert bytes(blocks) == framed([msg(0), msg(1)])
    assert stats["streams"] == 2 and stats["session"] == "B         "
    assert stats["gaps"] == 0 and stats["duplicate_packets"] == 0


def udp_frame(payload: bytes, dport: int = 26477, dst: bytes = bytes([233, 54, 12, 111]),
              ) -> bytes:
    return ethernet(ipv4(udp(payload, dport=dport), dst=dst))


def test_stray_udp_packet_does_not_reset_gap_tracking(impl: ModuleType) -> None:
    """Another protocol's 20+ byte datagram (here NTP-sized, to port 123) between two packets
    of the feed: before per-stream tracking it 'changed the session' and hid the gap."""
    stray = udp_frame(b"\x23" + b"\x00" * 17 + b"\x00\x00" + b"\x01" * 28, dport=123)
    frames = [mold_frame(1, [msg(0), msg(1)]), stray, mold_frame(5, [msg(4)])]
    blocks, stats = impl.scan(pcap_bytes(frames))
    assert bytes(blocks) == framed([msg(0), msg(1), msg(4)])
    assert stats["gaps"] == 1 and stats["gap_messages"] == 2 and stats["first_gap_seq"] == 3
    assert stats["streams"] == 2 and stats["next_seq"] == 6 and stats["duplicate_packets"] == 0
    scanner = impl.Scanner()
    scanner.feed(pcap_bytes(frames))
    feed, other = scanner.streams()
    assert feed == {"group": "233.54.12.111", "port": 26477, "session": "SESSION001",
                    "packets": 2, "messages": 3, "gaps": 1, "gap_messages": 2, "next_seq": 6}
    assert other["port"] == 123 and other["gaps"] == 0


def test_two_sessions_interleaved(impl: ModuleType) -> None:
    """Two sessions on one group and port, interleaved packet by packet: each keeps its own
    sequence numbers, no gap and no duplicate (one tracker would see both)."""
    a = [msg(i) for i in range(6)]
    b = [msg(20 + i) for i in range(6)]
    frames = []
    for k in range(3):
        frames.append(mold_frame(1 + 2 * k, a[2 * k:2 * k + 2], "AAAA"))
        frames.append(mold_frame(1000 + 2 * k, b[2 * k:2 * k + 2], "BBBB"))
    frames.append(mold_frame(1000 + 8, [msg(40)], "BBBB"))  # a gap in B only: 1006, 1007
    blocks, stats = impl.scan(pcap_bytes(frames))
    expect = []
    for k in range(3):
        expect += a[2 * k:2 * k + 2] + b[2 * k:2 * k + 2]
    assert bytes(blocks) == framed(expect + [msg(40)])
    assert stats["streams"] == 2 and stats["duplicate_packets"] == 0
    assert stats["gaps"] == 1 and stats["gap_messages"] == 2 and stats["first_gap_seq"] == 1006
    scanner = impl.Scanner()
    scanner.feed(pcap_bytes(frames))
    sa, sb = scanner.streams()
    assert (sa["session"], sa["messages"], sa["gaps"], sa["next_seq"]) == ("AAAA      ", 6, 0, 7)
    assert (sb["session"], sb["messages"], sb["gaps"], sb["next_seq"]) == (
        "BBBB      ", 7, 1, 1009)


def test_filters(impl: ModuleType) -> None:
    other_group = bytes([233, 54, 12, 112])
    frames = [
        mold_frame(1, [msg(0)], "AAAA"),
        ethernet(ipv4(udp(moldudp64_packet("AAAA", 50, [msg(1)])), dst=other_group)),
        udp_frame(moldudp64_packet("AAAA", 60, [msg(2)]), dport=9999),
        mold_frame(1, [msg(3)], "BBBB"),
        mold_frame(2, [msg(4)], "AAAA"),
    ]
    data = pcap_bytes(frames)
    blocks, stats = impl.scan(data, group="233.54.12.111", port=26477, session="AAAA")
    assert bytes(blocks) == framed([msg(0), msg(4)])
    assert stats["filtered"] == 3 and stats["streams"] == 1 and stats["moldudp64"] == 2
    blocks, stats = impl.scan(data, port=26477)
    assert stats["filtered"] == 1 and stats["streams"] == 3
    blocks, stats = impl.scan(data)
    assert stats["filtered"] == 0 and stats["streams"] == 4 and stats["messages"] == 5
    with pytest.raises(ValueError, match="dotted IPv4"):
        impl.scan(data, group="233.54.12")
    with pytest.raises(ValueError, match="10 bytes"):
        impl.scan(data, session="ELEVENBYTES")
    with pytest.raises(ValueError, match="port must be"):
        impl.scan(data, port=70000)


def test_stream_table_is_bounded(impl: ModuleType) -> None:
    frames = [udp_frame(moldudp64_packet("S", 1, [msg(i)]), dport=1000 + i)
              for i in range(MAX_STREAMS + 3)]
    blocks, stats = impl.scan(pcap_bytes(frames))
    assert stats["streams"] == MAX_STREAMS and stats["untracked"] == 3
    assert stats["messages"] == MAX_STREAMS


@pytest.mark.usefixtures("fake_itch")
def test_read_file_filters_and_streams(impl: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "two.pcap"
    write_pcap(path, [mold_frame(1, [msg(0)], "AAAA"), mold_frame(1, [msg(1)], "BBBB")])
    reader = impl.read_file(path, session="BBBB")
    list(reader)
    assert reader.stats["filtered"] == 1 and reader.stats["messages"] == 1
    assert [s["session"] for s in reader.streams()] == ["BBBB      "]


@pytest.mark.usefixtures("fake_itch")
@pytest.mark.parametrize("snaplen", [65535, 0, 2**32 - 1])
def test_record_longer_than_snaplen_is_refused_at_the_record(
    impl: ModuleType, tmp_path: Path, snaplen: int
) -> None:
    """A bogus incl_len (here 1 GB) is refused as soon as its header is read, naming the
    record; everything before it is delivered; nothing waits for the rest of the file."""
    good = [mold_frame(1, [msg(0)]), mold_frame(2, [msg(1)])]
    data = bytearray(pcap_bytes(good + [mold_frame(3, [msg(2)])]))
    struct.pack_into("<I", data, 16, snaplen)
    bad_at = 24 + sum(16 + len(f) for f in good)
    struct.pack_into("<I", data, bad_at + 8, 1 << 30)
    limit = snaplen if 0 < snaplen <= 262144 else 262144
    words = f"pcap record at byte offset {bad_at}: incl_len {1 << 30} is larger than the snap" \
            f" length {limit}"
    with pytest.raises(impl.PcapError, match=words) as e:
        impl.scan(bytes(data))
    assert e.value.offset == bad_at and bytes(e.value.blocks) == framed([msg(0), msg(1)])
    path = tmp_path / "bogus.pcap"
    path.write_bytes(bytes(data) + b"\x00" * 100_000)
    calls: list[int] = []
    reader = impl.read_file(path, chunk_size=64)
    scanner_feed = reader.scanner.feed

    def feed(buf: Any) -> Any:
        calls.append(len(buf))
        return scanner_feed(buf)

    reader.scanner.feed = feed
    got: list[str] = []
    with pytest.raises(impl.PcapError, match=words):
        for kinds, _counts in reader:
            got += kinds
    assert got == message_types(framed([msg(0), msg(1)])) and reader.stats["messages"] == 2
    assert max(calls) < 64 + 16 + 200  # the bad record's body was never waited for
    assert len(calls) < 10


def test_bad_moldudp64_blocks(impl: ModuleType) -> None:
    good = moldudp64_packet("S", 1, [msg(0), msg(1)])
    overrun = good[:18] + struct.pack(">H", 3) + good[20:]  # claims 3 blocks, has 2
    wrap = moldudp64_packet("S", 2**64 - 1, [msg(0), msg(1)])  # last seq past 2**64 - 1
    blocks, stats = impl.scan(pcap_bytes([frame_udp(overrun), frame_udp(wrap)]))
    assert len(blocks) == 0 and stats["bad_moldudp64"] == 2 and stats["moldudp64"] == 0


def test_snaplen_cut_packet_is_counted_and_skipped(impl: ModuleType) -> None:
    whole = mold_frame(1, [msg(0), msg(1)])
    cut = mold_frame(3, [msg(2), msg(3)])
    after = mold_frame(5, [msg(4)])
    blocks, stats = impl.scan(pcap_bytes([whole, (cut[:40], len(cut)), after]))
    assert bytes(blocks) == framed([msg(0), msg(1), msg(4)])
    assert stats["truncated"] == 1 and stats["gaps"] == 1 and stats["gap_messages"] == 2


def test_truncated_file(impl: ModuleType) -> None:
    data = pcap_bytes([mold_frame(1, [msg(0)]), mold_frame(2, [msg(1)])])
    second = 24 + 16 + len(mold_frame(1, [msg(0)]))
    with pytest.raises(impl.PcapError, match=f"record at byte offset {second}") as e:
        impl.scan(data[:-1])
    assert e.value.offset == second
    with pytest.raises(impl.PcapError, match=f"record header at byte offset {second}"):
        impl.scan(data[: second + 5])
    with pytest.raises(impl.PcapError, match="shorter than the 24-byte"):
        impl.scan(data[:10])
    with pytest.raises(impl.PcapError, match="link type 101"):
        impl.scan(pcap_bytes([], linktype=101))
    blocks, stats = impl.scan(data[:second])  # ends on a record boundary: fine
    assert stats["messages"] == 1


@pytest.fixture
def fake_itch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in ITCH decoder (the real one is another component): counts message types."""
    for package in (naive, optimized):
        fake = types.ModuleType(f"{package.__name__}.itch")

        def decode(buffer: Any) -> tuple[list[str], dict[str, int]]:
            kinds = message_types(bytes(buffer))
            return kinds, {k: kinds.count(k) for k in set(kinds)}

        fake.decode = decode  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, fake.__name__, fake)
        monkeypatch.setattr(package, "itch", fake, raising=False)


@pytest.mark.usefixtures("fake_itch")
@pytest.mark.parametrize("chunk_size", [1, 7, 100, 1 << 20])
def test_read_file_streams_then_raises(impl: ModuleType, tmp_path: Path, chunk_size: int) -> None:
    msgs = [msg(i) for i in range(40)]
    frames = [mold_frame(1 + 4 * i, msgs[4 * i : 4 * i + 4]) for i in range(10)]
    path = tmp_path / "f.pcap"
    path.write_bytes(pcap_bytes(frames))
    reader = impl.read_file(path, chunk_size=chunk_size)
    seen = [k for kinds, _counts in reader for k in kinds]
    assert seen == [chr(m[0]) for m in msgs]
    assert reader.stats["messages"] == 40 and reader.stats["packets"] == 10
    path.write_bytes(pcap_bytes(frames)[:-3])
    reader = impl.read_file(path, chunk_size=chunk_size)
    delivered: list[str] = []
    with pytest.raises(impl.PcapError, match="truncated pcap record"):
        for kinds, _counts in reader:
            delivered += kinds
    assert delivered == [chr(m[0]) for m in msgs[:36]]  # everything before the cut record


def test_read_file_with_real_decoder(impl: ModuleType) -> None:
    """The full path, once the ITCH decoder component is merged."""
    twin = "naive" if impl is npcap else "optimized"
    try:
        __import__(f"{twin}.itch")
    except ImportError:
        pytest.skip(f"{twin}.itch (the ITCH decoder component) is not in this branch")
    path = real("moldudp64-multiple-packets.pcap")
    chunks = list(impl.read_file(path))
    total: dict[str, int] = {}
    for _events, counts in chunks:
        for k, v in counts.items():
            total[k] = total.get(k, 0) + v
    assert sum(total.values()) == 39 and total.get("D") == 1


# --- the twins agree ------------------------------------------------------------------------


def _agree(data: bytes) -> None:
    results: list[Any] = []
    for mod in (npcap, opcap):
        try:
            blocks, stats = mod.scan(data)
            results.append((bytes(np.asarray(blocks, dtype=np.uint8)), stats))
        except mod.PcapError as e:
            results.append(("error", str(e), e.offset))
    assert results[0] == results[1]


def test_twins_agree_on_every_cut() -> None:
    m = [msg(i) for i in range(6)]
    base = pcap_bytes([mold_frame(1, m[:3]), mold_frame(5, m[4:]), mold_frame(2, m[1:2])])
    for cut in range(len(base) + 1):
        _agree(base[:cut])
    for data in (b"", b"\x00" * 24, b"\x0a\x0d\x0d\x0a" + b"\x00" * 40):
        _agree(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_differential_random_bytes(data: bytes) -> None:
    _agree(data)
    _agree(pcap_bytes([]) + data)


@st.composite
def pcapish(draw: st.DrawFn) -> bytes:
    """Well-formed captures with random MoldUDP64 headers, then random byte damage."""
    frames = []
    for _ in range(draw(st.integers(0, 6))):
        seq = draw(st.sampled_from([0, 1, 2, 3, 5, 8, 2**64 - 2, 2**64 - 1]))
        n = draw(st.integers(0, 4))
        session = draw(st.sampled_from(["A", "B"]))
        if n == 0:
            payload = moldudp64_heartbeat(session, seq, end=draw(st.booleans()))
        else:
            payload = moldudp64_packet(session, seq, [msg(i, draw(st.integers(0, 9))) for i in
                                                      range(n)])
        frames.append(frame_udp(payload, vlans=draw(st.sampled_from([(), (5,)]))))
    data = bytearray(pcap_bytes(frames, draw(st.booleans()), draw(st.booleans())))
    for _ in range(draw(st.integers(0, 3))):
        if len(data) > 24:
            pos = draw(st.integers(24, len(data) - 1))
            data[pos] = draw(st.integers(0, 255))
    return bytes(data[: draw(st.integers(0, len(data)))] if draw(st.booleans()) else data)


@settings(max_examples=300, deadline=None)
@given(pcapish())
def test_differential_pcapish(data: bytes) -> None:
    _agree(data)


# --- sources and inputs ----------------------------------------------------------------------

@pytest.mark.usefixtures("fake_itch")
def test_read_file_from_a_fifo_stdin_and_a_stream(impl: ModuleType, tmp_path: Path) -> None:
    import io
    import os
    import threading

    data = pcap_bytes([mold_frame(1, [msg(0), msg(1)]), mold_frame(3, [msg(2)])])
    fifo = tmp_path / "feed.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    reader = impl.read_file(fifo, chunk_size=50)
    kinds = [k for batch, _ in reader for k in batch]
    writer.join(timeout=60)
    assert kinds == message_types(framed([msg(0), msg(1), msg(2)]))
    assert reader.stats["messages"] == 3
    reader = impl.read_file(io.BytesIO(data))
    assert sum(len(b) for b, _ in reader) == 3
    with pytest.raises(impl.PcapError, match="bad magic 0x00000000 at byte offset 0"):
        list(impl.read_file("/dev/zero"))
    with pytest.raises(TypeError, match="open binary stream, got int"):
        list(impl.read_file(5))


def test_read_file_from_stdin(impl: ModuleType) -> None:
    import subprocess

    from tests.conftest import ROOT

    data = REAL / "moldudp64-multiple-packets.pcap"
    if not data.exists():
        pytest.skip(f"real capture {data.name} not found in {REAL}")
    code = ("import sys, importlib; m = importlib.import_module(sys.argv[1]);"
            " r = m.read_file('-'); n = sum(len(e) for e, _ in r); print(n, r.stats['gaps'])")
    child = subprocess.run([sys.executable, "-c", code, impl.__name__],
                           input=data.read_bytes(), capture_output=True, timeout=120, cwd=ROOT)
    assert child.returncode == 0, child.stderr.decode()
    assert child.stdout.split() == [b"39", b"1"]


@pytest.mark.parametrize("bad", [None, "pcap", 5, [1, 2], np.zeros((2, 24), np.uint8),
                                 np.zeros(48, np.uint8)[::2], np.zeros(6, np.uint32)])
def test_scanners_refuse_what_is_not_bytes_alike(bad: object) -> None:
    words = set()
    for mod in IMPLS.values():
        with pytest.raises(TypeError) as err:
            mod.scan(bad)
        words.add(str(err.value))
        with pytest.raises(TypeError) as err:
            mod.Scanner().feed(bad)
        words.add(str(err.value))
    assert len(words) == 1, words
    assert words.pop().startswith("buffer must be one-dimensional contiguous bytes")


@pytest.mark.usefixtures("fake_itch")
def test_file_shrinking_while_read_is_a_truncation_error(impl: ModuleType, tmp_path: Path,
                                                         ) -> None:
    """Read the first chunk, cut the file inside a later record, read on: everything
    before that record is delivered, then PcapError names it."""
    frames = [mold_frame(1 + i, [msg(i)]) for i in range(200)]
    data = pcap_bytes(frames)
    record = 24 + 150 * (16 + len(frames[0]))  # the 151st record's offset
    path = tmp_path / "shrinking.pcap"
    path.write_bytes(data)
    reader = impl.read_file(path, chunk_size=1000)
    kinds = list(next(reader)[0])
    os.truncate(path, record + 20)
    with pytest.raises(impl.PcapError, match=f"truncated pcap record at byte offset {record}"):
        for batch, _ in reader:
            kinds += batch
    assert kinds == message_types(framed([msg(i) for i in range(150)]))
