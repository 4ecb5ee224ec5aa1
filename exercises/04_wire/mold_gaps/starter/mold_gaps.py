"""Exercise 04_wire/mold_gaps: MoldUDP64 gaps and duplicates (see README.md)."""

from __future__ import annotations

from collections.abc import Iterable

END_OF_SESSION = 0xFFFF

KEYS = ("messages", "gaps", "gap_messages", "first_gap_seq", "duplicate_packets",
        "duplicate_messages", "unsequenced", "next_seq")


def track(packets: Iterable[tuple[int, int]]) -> dict[str, int]:
    """Account for the (sequence number, message count) of each packet of one session."""
    st = dict.fromkeys(KEYS, 0)
    for seq, count in packets:
        # TODO: this trusts every packet. Keep the next sequence number you expect, and
        # for each packet decide: unsequenced (seq 0)? heartbeat or end of session (count
        # 0 or 0xFFFF: seq is the next number, no messages)? a gap before it? all of it
        # seen already (a duplicate packet)? part of it seen (deliver only the rest)?
        if seq != 0 and count not in (0, END_OF_SESSION):
            st["messages"] += count
            st["next_seq"] = seq + count
    return st
