"""Checker for 04_wire/mold_gaps: track() against naive.pcap on generated MoldUDP64 captures."""

from __future__ import annotations

import random
from types import ModuleType

import pytest
from exercise_support import load_module

import naive.pcap as pcap

SESSION = "EXERCISE01"
KEYS = ("messages", "gaps", "gap_messages", "first_gap_seq", "duplicate_packets",
        "duplicate_messages", "unsequenced", "next_seq")


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "mold_gaps.py")


def capture(packets: list[tuple[int, int]]) -> bytes:
    """A pcap of one MoldUDP64 session: each (seq, count) a packet of `count` deletes."""
    frames = []
    for seq, count in packets:
        if count in (0, pcap.END_OF_SESSION):
            payload = pcap.moldudp64_heartbeat(SESSION, seq, end=count != 0)
        else:
            msgs = [b"D" + bytes(10) + (seq + i).to_bytes(8, "big") for i in range(count)]
            payload = pcap.moldudp64_packet(SESSION, seq, msgs)
        frames.append(pcap.frame_udp(payload))
    return pcap.pcap_bytes(frames)


def naive_stats(packets: list[tuple[int, int]]) -> dict[str, int]:
    _, stats = pcap.scan(capture(packets))
    return {k: int(stats[k]) for k in KEYS}


def random_stream(rng: random.Random) -> list[tuple[int, int]]:
    """Mostly in order, with gaps, retransmissions, overlaps, heartbeats and seq 0."""
    seq = rng.randint(1, 1000)
    out: list[tuple[int, int]] = []
    for _ in range(rng.randint(1, 30)):
        roll = rng.random()
        count = rng.randint(1, 6)
        if roll < 0.1:
            seq += rng.randint(1, 20)  # lost packets: a gap
        elif roll < 0.2 and out:
            back = rng.choice(out)  # a retransmission of an earlier packet
            out.append(back)
            continue
        elif roll < 0.27:
            out.append((max(1, seq - rng.randint(1, 4)), count + 3))  # overlaps the last
            seq = max(seq, out[-1][0] + out[-1][1])
            continue
        elif roll < 0.35:
            out.append((seq + rng.choice([0, 0, 3]), 0))  # heartbeat (maybe after a gap)
            continue
        elif roll < 0.4:
            out.append((0, count))  # sanitized: sequence zeroed
            continue
        elif roll < 0.43:
            out.append((seq, pcap.END_OF_SESSION))
            continue
        out.append((seq, count))
        seq += count
    return out


CASES = {
    "in order": [(1, 3), (4, 2), (6, 1)],
    "one gap": [(1, 3), (10, 2)],
    "two gaps": [(5, 1), (8, 1), (20, 4)],
    "duplicate packet": [(1, 3), (1, 3), (4, 1)],
    "partial overlap": [(1, 3), (2, 4)],
    "late old packet after a gap": [(1, 2), (10, 2), (3, 2)],
    "heartbeat shows a gap": [(1, 2), (7, 0), (7, 1)],
    "heartbeat first": [(5, 0), (5, 2)],
    "end of session": [(1, 2), (3, pcap.END_OF_SESSION)],
    "end of session after loss": [(1, 2), (9, pcap.END_OF_SESSION)],
    "sequence zero": [(0, 1), (0, 3), (0, 0)],
    "zero between sequenced": [(1, 2), (0, 5), (3, 1)],
    "starts high": [(14764496, 1), (19009117, 38)],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_named_case(mod: ModuleType, name: str) -> None:
    packets = CASES[name]
    want = naive_stats(packets)
    got = {k: mod.track(packets).get(k) for k in KEYS}
    assert got == want, f"{name}: packets (seq, count) {packets}\n yours {got}\n naive {want}"


def test_random_streams(mod: ModuleType) -> None:
    rng = random.Random(11)
    for _ in range(150):
        packets = random_stream(rng)
        want = naive_stats(packets)
        got = {k: mod.track(packets).get(k) for k in KEYS}
        assert got == want, f"packets (seq, count) {packets}\n yours {got}\n naive {want}"
