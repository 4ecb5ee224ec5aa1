"""Gap detection and re-request for a MoldUDP64 receiver (chapter 13), without a socket.

A packet carries messages ``seq, seq+1, ..., seq+len(messages)-1``. The tracker hands
each message on exactly once, in sequence order; a packet that arrives ahead of a gap is
held back until the gap is filled; a heartbeat says which sequence number comes next.
``request()`` says what to ask the re-request server for.
"""

from __future__ import annotations


class GapTracker:
    def __init__(self, start: int = 1, max_jump: int = 1 << 20) -> None:
        self.expected = start  # the next sequence number to hand on
        self.known = start     # one past the highest sequence number known to exist
        self.held: dict[int, list[bytes]] = {}  # seq -> messages, packets ahead of a gap
        self.max_jump = max_jump  # how far past `known` a heartbeat may claim
        self.suspect = 0  # heartbeats that claimed more: counted, not believed

    def on_packet(self, seq: int, messages: list[bytes]) -> list[bytes]:
        """The messages that can be handed on now, in sequence order."""
        end = seq + len(messages)
        self.known = max(self.known, end)
        if end <= self.expected or seq in self.held:
            return []  # a duplicate
        if seq > self.expected:
            self.held[seq] = messages
            return []
        out = messages[self.expected - seq :]  # skip what was handed on already
        self.expected = end
        while self.held and min(self.held) <= self.expected:
            first = min(self.held)
            msgs = self.held.pop(first)
            if first + len(msgs) > self.expected:
                out += msgs[self.expected - first :]
                self.expected = first + len(msgs)
        return out

    def on_heartbeat(self, next_seq: int) -> None:
        if next_seq - self.known > self.max_jump:  # a lie, or a jump nothing confirms
            self.suspect += 1
            return
        self.known = max(self.known, next_seq)

    def request(self) -> tuple[int, int] | None:
        """(first sequence number, count) of the first run of missing messages: from the
        next one expected up to the first held packet (or all that is known)."""
        if self.expected >= self.known:
            return None
        end = min(self.held) if self.held else self.known
        return self.expected, end - self.expected
