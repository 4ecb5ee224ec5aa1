"""Checker for 03_itch/frame_scan: the same totals as Python on whole, cut and hostile
buffers (under AddressSanitizer and UBSan), and at least 20x fewer instructions than the
shipped starter on 4,000 messages, counted by valgrind (a count does not flake on a busy
machine; without valgrind, a paired timing at 5x)."""

from __future__ import annotations

import random
import shutil
import struct
from pathlib import Path

import pytest
from exercise_support import (
    PLAIN_CXXFLAGS,
    baseline_dir,
    compile_cpp,
    impl_dir,
    instructions,
    paired_ratio,
    run_program,
)

HERE = Path(__file__).resolve().parent
MIN_FEWER_INSTRUCTIONS = 20.0
MIN_SPEEDUP = 5.0  # the fallback without valgrind: a paired wall-time ratio
MESSAGES = 4_000


def feed(messages: int, seed: int) -> bytes:
    """A buffer of framed messages: adds (A, F) of every size, deletes, other types."""
    rng = random.Random(seed)
    out = bytearray()
    for _ in range(messages):
        kind = rng.choice("AAAFDEXU")
        size = {"A": 36, "F": 40, "D": 19, "E": 31, "X": 23, "U": 35}[kind]
        if rng.random() < 0.03:
            size = rng.randint(1, 60)  # short, or longer than the spec says
        body = bytearray(rng.randbytes(size))
        body[0] = ord(kind)
        out += struct.pack(">H", size) + body
    return bytes(out)


def expected(buf: bytes) -> tuple[int, int, int, int, int]:
    messages = adds = shares = short = 0
    off = 0
    while off != len(buf):
        if len(buf) - off < 2:
            return messages, adds, shares, short, off
        (size,) = struct.unpack_from(">H", buf, off)
        if size == 0 or len(buf) - off - 2 < size:
            return messages, adds, shares, short, off
        m = buf[off + 2: off + 2 + size]
        messages += 1
        if m[0] in b"AF":
            adds += 1
            if size < (36 if m[0] == ord("A") else 40):
                short += 1
            else:
                shares += struct.unpack_from(">I", m, 20)[0]
        off += 2 + size
    return messages, adds, shares, short, off


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("frame_scan") / "harness"
    return compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], out)


def cases() -> list[bytes]:
    whole = feed(300, 1)
    return [b"", b"\x00", b"\x00\x00", b"\x00\x05AB", feed(1, 2), whole, whole[:-1],
            whole[:len(whole) // 2], whole + b"\x00", whole + b"\x00\x00" + whole,
            feed(50, 3) + b"\xff\xff" + bytes(100)]


def test_same_totals_as_python(harness: Path, tmp_path: Path) -> None:
    for i, buf in enumerate(cases()):
        path = tmp_path / f"case{i}.itch"
        path.write_bytes(buf)
        got = tuple(map(int, run_program(harness, f"scan {path}\n").split()))
        assert got == expected(buf), f"case {i} ({len(buf)} bytes): (messages, adds, " \
            f"shares_added, short_adds, end) {got}, expected {expected(buf)}"


def test_far_fewer_instructions_than_the_starter(tmp_path: Path) -> None:
    path = tmp_path / "day.itch"
    path.write_bytes(feed(MESSAGES, 9))
    yours = compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], tmp_path / "yours",
                        PLAIN_CXXFLAGS)
    starter = compile_cpp([HERE / "harness.cpp"], [baseline_dir(__file__)],
                          tmp_path / "starter", PLAIN_CXXFLAGS)
    if shutil.which("valgrind"):
        mine = instructions(yours, f"bench {path} 1\n", function="run_scan")
        theirs = instructions(starter, f"bench {path} 1\n", function="run_scan")
        ratio = theirs / max(mine, 1)
        assert ratio >= MIN_FEWER_INSTRUCTIONS, (
            f"your scan of {MESSAGES} messages executes {mine:,} instructions, the "
            f"starter's {theirs:,}: {ratio:.1f}x fewer; the target is "
            f"{MIN_FEWER_INSTRUCTIONS:.0f}x (callgrind_annotate shows where they go)")
        return

    def timed(exe: Path) -> float:  # the harness's own time for its fastest scan
        return int(run_program(exe, f"bench {path} 5\n").split()[-1]) * 1e-9

    result = paired_ratio(lambda: timed(yours), lambda: timed(starter))
    median = result.median
    assert median >= MIN_SPEEDUP, (
        f"valgrind is not installed, so timed instead: your scan is {result} faster than "
        f"the starter's; the target is {MIN_SPEEDUP:.0f}x")
