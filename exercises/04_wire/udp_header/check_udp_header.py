"""Checker for 04_wire/udp_header: parse_udp() against Python and naive.pcap, under ASan."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from exercise_support import compile_cpp, impl_dir, run_program

import naive.pcap as pcap

HERE = Path(__file__).resolve().parent
Answer = tuple[int, int, int, int] | None


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("udp_header") / "harness"
    return compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], out)


def reference(frame: bytes) -> Answer:
    """(src port, dst port, payload offset, payload length), or None: the rules, in Python."""
    if len(frame) < 14:
        return None
    pos = 12
    (ethertype,) = struct.unpack_from(">H", frame, pos)
    while ethertype in (0x8100, 0x88A8):
        pos += 4
        if len(frame) < pos + 2:
            return None
        (ethertype,) = struct.unpack_from(">H", frame, pos)
    ip = pos + 2
    if ethertype != 0x0800 or len(frame) - ip < 20:
        return None
    header_len = (frame[ip] & 0x0F) * 4
    (total_len,) = struct.unpack_from(">H", frame, ip + 2)
    if (frame[ip] >> 4 != 4 or header_len < 20 or total_len < header_len
            or total_len > len(frame) - ip):
        return None
    (flags_frag,) = struct.unpack_from(">H", frame, ip + 6)
    if flags_frag & 0x3FFF or frame[ip + 9] != 17 or total_len - header_len < 8:
        return None
    udp = ip + header_len
    sport, dport, udp_len = struct.unpack_from(">HHH", frame, udp)
    if udp_len < 8 or udp_len > total_len - header_len:
        return None
    return sport, dport, udp + 8, udp_len - 8


def agrees_with_naive_pcap(frame: bytes, answer: Answer) -> bool:
    """naive.pcap's layers find the same payload bytes (or refuse the same frame)."""
    stats = pcap.new_stats()
    ip = pcap.ethernet_payload(memoryview(frame), stats)
    payload = pcap.udp_payload(ip, stats) if ip is not None else None
    if answer is None:
        return payload is None
    return payload is not None and bytes(payload) == frame[answer[2]:answer[2] + answer[3]]


def ask(harness: Path, frames: list[bytes]) -> list[Answer]:
    out: list[Answer] = []
    for line in run_program(harness, "".join(f.hex() + "\n" for f in frames)).splitlines():
        words = line.split()
        out.append(None if words == ["no"] else (
            int(words[1]), int(words[2]), int(words[3]), int(words[4])))
    return out


def good_frame(rng: random.Random) -> bytes:
    payload = rng.randbytes(rng.randint(0, 60))
    options = rng.randbytes(4 * rng.randint(0, 10))
    udp = pcap.udp(payload, rng.getrandbits(16), rng.getrandbits(16))
    frame = pcap.ethernet(pcap.ipv4(udp, options=options),
                          vlans=[rng.getrandbits(12) for _ in range(rng.choice([0, 0, 1, 2]))])
    return frame + bytes(max(0, 60 - len(frame)))  # Ethernet pads short frames to 60


def set16(frame: bytes, at: int, value: int) -> bytes:
    return frame[:at] + struct.pack(">H", value) + frame[at + 2:]


def bad_frames(rng: random.Random) -> list[bytes]:
    base = pcap.ethernet(pcap.ipv4(pcap.udp(b"hello moldudp64")))
    ip = 14
    frames = [
        base[:ip] + bytes([0x44]) + base[ip + 1:],          # IHL 4: header below 20 bytes
        base[:ip] + bytes([0x4F]) + base[ip + 1:],          # IHL 15: 60 bytes, more than is there
        base[:ip] + bytes([0x65]) + base[ip + 1:],          # version 6 behind EtherType 0x0800
        set16(base, ip + 2, 19),                            # total length below the header
        set16(base, ip + 2, len(base) - ip + 1),            # total length past the frame
        set16(base, ip + 2, 27),                            # room for only 7 UDP bytes
        set16(base, ip + 6, 0x2000),                        # MF: the first fragment
        set16(base, ip + 6, 0x0010),                        # a later fragment
        pcap.ethernet(pcap.ipv4(pcap.udp(b"x"), proto=pcap.IPPROTO_TCP)),
        pcap.ethernet(pcap.ipv4(pcap.udp(b"x")), ethertype=0x86DD),   # IPv6
        set16(base, ip + 20 + 4, 7),                        # UDP length below 8
        set16(base, ip + 20 + 4, len(base) - ip - 20 + 1),  # UDP length past the IP packet
        pcap.ethernet(b"", vlans=[5])[:16],                 # a tag and nothing after it
        pcap.ethernet(b"", vlans=[5, 6])[:18],
        bytes(12) + b"\x81\x00",                            # 14 bytes: a tag, no EtherType
    ]
    for _ in range(20):  # random bytes behind a valid Ethernet + IPv4 start
        frames.append(base[:ip + 1] + rng.randbytes(rng.randint(0, 40)))
    return frames


def test_good_frames(harness: Path) -> None:
    rng = random.Random(1)
    frames = [good_frame(rng) for _ in range(200)]
    for frame, got in zip(frames, ask(harness, frames), strict=True):
        want = reference(frame)
        assert want is not None and agrees_with_naive_pcap(frame, want)
        assert got == want, (
            f"frame {frame.hex()}:\n yours {got}\n want  {want} "
            "(src port, dst port, payload offset, payload length)")


def test_bad_frames_are_refused(harness: Path) -> None:
    frames = bad_frames(random.Random(2))
    for frame, got in zip(frames, ask(harness, frames), strict=True):
        want = reference(frame)
        assert agrees_with_naive_pcap(frame, want)
        assert got == want, f"frame {frame.hex()}:\n yours {got}\n want  {want}"


def test_every_truncation(harness: Path) -> None:
    """Every prefix of a few frames, down to 0 bytes, in a buffer of exactly that size."""
    rng = random.Random(3)
    frames = []
    for _ in range(6):
        whole = good_frame(rng)
        frames += [whole[:cut] for cut in range(len(whole) + 1)]
    for frame, got in zip(frames, ask(harness, frames), strict=True):
        want = reference(frame)
        assert agrees_with_naive_pcap(frame, want)
        assert got == want, f"{len(frame)}-byte frame {frame.hex()}:\n yours {got}\n want {want}"
