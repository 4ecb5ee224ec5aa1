"""Exercise 04_wire/mold_gaps, reference solution: MoldUDP64 gaps and duplicates."""

from __future__ import annotations

from collections.abc import Iterable

END_OF_SESSION = 0xFFFF

KEYS = ("messages", "gaps", "gap_messages", "first_gap_seq", "duplicate_packets",
        "duplicate_messages", "unsequenced", "next_seq")


def track(packets: Iterable[tuple[int, int]]) -> dict[str, int]:
    """Account for the (sequence number, message count) of each packet of one session."""
    st = dict.fromkeys(KEYS, 0)
    expected: int | None = None  # the next sequence number we expect; None: not yet known

    def gap_check(seq: int) -> None:
        if expected is not None and seq > expected:
            if st["gaps"] == 0:
                st["first_gap_seq"] = expected  # the first number we never saw
            st["gaps"] += 1
            st["gap_messages"] += seq - expected

    for seq, count in packets:
        if seq == 0:  # a sanitized capture: nothing to track, deliver what it carries
            st["unsequenced"] += 1
            if count != END_OF_SESSION:
                st["messages"] += count
            continue
        if count in (0, END_OF_SESSION):  # heartbeat / end of session: seq = next expected
            gap_check(seq)
            if expected is None or seq > expected:
                expected = seq
                st["next_seq"] = seq
            continue
        gap_check(seq)
        if expected is None or seq > expected:
            expected = seq
        seen = expected - seq  # how many of this packet's messages came before
        if seen >= count:
            st["duplicate_packets"] += 1
            st["duplicate_messages"] += count
            continue
        st["duplicate_messages"] += seen
        st["messages"] += count - seen
        expected = seq + count
        st["next_seq"] = expected
    return st
