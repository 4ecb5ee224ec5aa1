"""A SoupBinTCP server's sequenced log, and what a login asking for sequence n gets.

Every Sequenced Data (S) packet the server sends to a user is kept in that user's log; a
packet's sequence number is its place in the log, counting from 1. On a login, the client
names the next sequence number it wants, and the server answers with Login Accepted
(carrying the sequence number of the next packet it will send) and then re-sends every
logged packet from there on: that is all SoupBinTCP's recovery is.
"""

from __future__ import annotations


class SequencedLog:
    def __init__(self) -> None:
        self.messages: list[bytes] = []

    def append(self, message: bytes) -> int:
        """Log one outbound message; return its sequence number (the first is 1)."""
        self.messages.append(message)
        return len(self.messages)

    @property
    def next_seq(self) -> int:
        """The sequence number the next appended message will get."""
        return len(self.messages) + 1

    def login(self, requested: int) -> tuple[int, list[bytes]]:
        """(the Login Accepted's Sequence Number, the messages to re-send, in order).

        ``requested`` 0 means "from the next new message" (nothing re-sent). A number
        past the end is treated the same way (the spec does not say: a project choice).
        Otherwise every message from ``requested`` on is re-sent.
        """
        # TODO: the three cases of the docstring. Mind the off-by-one: sequence n is
        # self.messages[n - 1].
        raise NotImplementedError
