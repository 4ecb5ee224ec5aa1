"""Checker for 12_order_entry/framing: a SoupBinTCP stream split at every byte."""

from __future__ import annotations

from types import ModuleType

import pytest
from exercise_support import load_module


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "framer.py")


def frame(ptype: bytes, payload: bytes = b"") -> bytes:
    return (1 + len(payload)).to_bytes(2, "big") + ptype + payload


STREAM = (frame(b"R") + frame(b"U", b"O" + bytes(46)) + frame(b"+", b"debug text")
          + frame(b"U", b"X" + bytes(10)) + frame(b"O"))
PACKETS = [b"R", b"U" + b"O" + bytes(46), b"+debug text", b"U" + b"X" + bytes(10), b"O"]


def test_whole_stream(mod: ModuleType) -> None:
    assert mod.Framer().feed(STREAM) == PACKETS


def test_split_at_every_byte(mod: ModuleType) -> None:
    for cut in range(len(STREAM) + 1):
        f = mod.Framer()
        got = f.feed(STREAM[:cut]) + f.feed(STREAM[cut:])
        assert got == PACKETS, f"stream cut at byte {cut}"
        assert f.pending == 0


def test_one_byte_at_a_time(mod: ModuleType) -> None:
    f = mod.Framer()
    got = []
    for i in range(len(STREAM)):
        got += f.feed(STREAM[i:i + 1])
    assert got == PACKETS


def test_a_partial_packet_waits(mod: ModuleType) -> None:
    f = mod.Framer()
    assert f.feed(STREAM[:5]) == [b"R"]
    assert f.pending == 2, "the 2 length bytes of the next packet are kept"


@pytest.mark.parametrize("bad", [b"\x00\x00", b"\xff\xff"])
def test_impossible_lengths(mod: ModuleType, bad: bytes) -> None:
    f = mod.Framer(max_packet=1024)
    with pytest.raises(mod.FrameError):
        f.feed(frame(b"R") + bad)


def test_packets_before_a_bad_length_are_not_lost(mod: ModuleType) -> None:
    """An order and a length-0 packet in one recv: the order still counts."""
    f = mod.Framer(max_packet=1024)
    with pytest.raises(mod.FrameError) as info:
        f.feed(frame(b"R") + frame(b"U", b"O" + bytes(46)) + b"\x00\x00")
    assert info.value.packets == [b"R", b"U" + b"O" + bytes(46)]
