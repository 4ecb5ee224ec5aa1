"""TODO: gap detection and re-request for a MoldUDP64 receiver (chapter 13), without a socket.

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
        # TODO: a duplicate hands on nothing; a packet ahead of a gap is held back; a
        # packet that reaches `expected` hands on its new messages, then every held
        # packet that is now in sequence. Keep `known` up to date.
        raise NotImplementedError

    def on_heartbeat(self, next_seq: int) -> None:
        """A heartbeat: `next_seq` is the next sequence number of the feed."""
        # TODO: believe it only if it claims at most `max_jump` messages past `known`;
        # otherwise count it in `suspect` and change nothing.
        raise NotImplementedError

    def request(self) -> tuple[int, int] | None:
        """(first sequence number, count) of the first run of missing messages: from the
        next one expected up to the first held packet (or all that is known)."""
        # TODO
        raise NotImplementedError
