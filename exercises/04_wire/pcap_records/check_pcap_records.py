"""Checker for 04_wire/pcap_records: all four magics, timestamps in ns, cut packets
counted and skipped, and every kind of damage refused with the offset of the bad record
after every record before it was delivered."""

from __future__ import annotations

import random
import struct
from types import ModuleType

import pytest
from exercise_support import load_module

MAGIC = {("<", False): 0xA1B2C3D4, ("<", True): 0xA1B23C4D,
         (">", False): 0xA1B2C3D4, (">", True): 0xA1B23C4D}


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "pcap_records.py")


Packet = tuple[int, int, bytes, int]  # (seconds, fraction, captured bytes, original length)


def pcap(order: str, nanos: bool, packets: list[Packet], snaplen: int = 65_535,
         linktype: int = 1) -> bytes:
    out = struct.pack(order + "IHHiIII", MAGIC[order, nanos], 2, 4, 0, 0, snaplen, linktype)
    for sec, frac, body, orig in packets:
        out += struct.pack(order + "IIII", sec, frac, len(body), orig) + body
    return out


def packets(n: int, seed: int, nanos: bool) -> list[Packet]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        body = rng.randbytes(rng.randint(0, 200))
        cut = rng.random() < 0.1
        out.append((rng.randint(0, 2**32 - 1), rng.randint(0, 999_999_999 if nanos else 999_999),
                    body, len(body) + (rng.randint(1, 100) if cut else 0)))
    return out


def expected(ps: list[Packet], nanos: bool) -> tuple[list[tuple[int, bytes]], int]:
    tick = 1 if nanos else 1_000
    whole = [(s * 1_000_000_000 + f * tick, b) for s, f, b, orig in ps if len(b) == orig]
    return whole, sum(len(b) < orig for _, _, b, orig in ps)


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nanos", [False, True])
def test_every_magic(mod: ModuleType, order: str, nanos: bool) -> None:
    ps = packets(50, 1 + nanos + 2 * (order == ">"), nanos)
    out: list[tuple[int, bytes]] = []
    resolution, truncated = mod.read_pcap(pcap(order, nanos, ps), out)
    want, cut = expected(ps, nanos)
    assert resolution == ("ns" if nanos else "us")
    assert out == want, "timestamps in ns, whole packets only, in file order"
    assert truncated == cut


def test_empty_capture(mod: ModuleType) -> None:
    out: list[tuple[int, bytes]] = []
    assert mod.read_pcap(pcap("<", False, []), out) == ("us", 0) and out == []


@pytest.mark.parametrize("data, why", [
    (b"", "empty file"),
    (pcap("<", False, [])[:23], "global header cut"),
    (b"\x0a\x0d\x0d\x0a" + bytes(20), "pcapng"),
    (pcap("<", False, [], linktype=101), "not Ethernet"),
])
def test_refused_at_offset_zero(mod: ModuleType, data: bytes, why: str) -> None:
    with pytest.raises(mod.PcapError) as err:
        mod.read_pcap(data, [])
    assert err.value.offset == 0, why
    assert isinstance(err.value, ValueError)


def damaged(order: str) -> list[tuple[bytes, int, int]]:
    """(file, offset of the bad record, whole records before it)."""
    good = [(1, 2, b"abc", 3), (4, 5, b"defgh", 5)]
    base = pcap(order, False, good, snaplen=100)
    second = 24 + 16 + 3
    end = len(base)
    big = struct.pack(order + "IIII", 7, 8, 101, 101) + bytes(101)
    huge = struct.pack(order + "IIII", 7, 8, 300_000, 300_000) + bytes(10)
    return [
        (base[:-1], second, 1),                        # the last body is cut
        (base + b"\x00" * 15, end, 2),                  # a record header is cut
        (base + big, end, 2),                           # over the snap length (100)
        (pcap(order, False, good, snaplen=0)[:end] + huge, end, 2),  # over libpcap's bound
    ]


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("case", range(4))
def test_damage_refused_after_whole_records(mod: ModuleType, order: str, case: int) -> None:
    data, offset, before = damaged(order)[case]
    out: list[tuple[int, bytes]] = []
    with pytest.raises(mod.PcapError) as err:
        mod.read_pcap(data, out)
    assert err.value.offset == offset, f"the bad record starts at byte {offset}"
    assert len(out) == before, "every whole record before the bad one is delivered first"
