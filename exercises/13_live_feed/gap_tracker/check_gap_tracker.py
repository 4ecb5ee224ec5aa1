"""Checker for 13_live_feed/gap_tracker: every message once, in order; the right requests."""

from __future__ import annotations

import random
from types import ModuleType

import pytest
from exercise_support import load_module


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "gap_tracker.py")


def msgs(seq: int, n: int) -> list[bytes]:
    return [f"m{s}".encode() for s in range(seq, seq + n)]


def test_in_order_packets_pass_straight_through(mod: ModuleType) -> None:
    t = mod.GapTracker()
    assert t.on_packet(1, msgs(1, 3)) == msgs(1, 3)
    assert t.on_packet(4, msgs(4, 2)) == msgs(4, 2)
    assert t.request() is None


def test_a_gap_is_held_back_requested_and_filled(mod: ModuleType) -> None:
    t = mod.GapTracker()
    t.on_packet(1, msgs(1, 2))
    assert t.on_packet(6, msgs(6, 2)) == []          # 3, 4, 5 are missing
    assert t.request() == (3, 3)
    assert t.on_packet(3, msgs(3, 1)) == msgs(3, 1)  # part of the gap (a short reply)
    assert t.request() == (4, 2)
    assert t.on_packet(4, msgs(4, 2)) == msgs(4, 4)  # 4, 5 and the held 6, 7
    assert t.request() is None


def test_duplicates_and_overlaps(mod: ModuleType) -> None:
    t = mod.GapTracker()
    t.on_packet(1, msgs(1, 3))
    assert t.on_packet(1, msgs(1, 3)) == []
    assert t.on_packet(2, msgs(2, 4)) == msgs(4, 2)  # only 4 and 5 are new
    t.on_packet(9, msgs(9, 1))
    assert t.on_packet(9, msgs(9, 1)) == []          # already held


def test_a_heartbeat_reveals_a_gap_at_the_end(mod: ModuleType) -> None:
    t = mod.GapTracker()
    t.on_packet(1, msgs(1, 2))
    t.on_heartbeat(6)
    assert t.request() == (3, 3)


def test_a_late_start_requests_from_one(mod: ModuleType) -> None:
    t = mod.GapTracker(start=1)
    assert t.on_packet(100, msgs(100, 1)) == []
    assert t.request() == (1, 99)


def test_random_arrivals_hand_on_everything_once_in_order(mod: ModuleType) -> None:
    for seed in range(200):
        rng = random.Random(seed)
        packets, seq = [], 1
        while seq <= 60:
            n = rng.randint(1, 4)
            packets.append((seq, n))
            seq += n
        arrivals = packets + rng.sample(packets, len(packets) // 3)  # copies
        rng.shuffle(arrivals)
        t = mod.GapTracker()
        out: list[bytes] = []
        for s, n in arrivals:
            out += t.on_packet(s, msgs(s, n))
            req = t.request()
            if req is not None:  # what is missing really starts where the request says
                assert req[0] == len(out) + 1 and req[1] >= 1
        assert out == msgs(1, seq - 1), f"seed {seed}"
        assert t.request() is None


def test_a_lying_heartbeat_is_suspect_not_believed(mod: ModuleType) -> None:
    t = mod.GapTracker(max_jump=1000)
    t.on_packet(1, msgs(1, 2))
    t.on_heartbeat(2**63)  # would write off ~9.2e18 messages if believed
    assert t.request() is None and t.suspect == 1
    t.on_heartbeat(500)  # a gap it may believe: 3 .. 499
    assert t.request() == (3, 497) and t.suspect == 1
