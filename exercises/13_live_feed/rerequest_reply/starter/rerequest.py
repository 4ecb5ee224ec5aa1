"""TODO: a MoldUDP64 re-request server's answer (chapter 13), without a socket.

A request is 20 bytes: the 10-byte session, the u64 big-endian sequence number of the
first message wanted, the u16 big-endian count wanted. The answer is one downstream
packet: the same header (session, first sequence number, count carried) and then, per
message, a u16 big-endian length and the message. It carries as many of the wanted
messages as fit in ``limit`` bytes (at least one), so it may carry fewer than asked.
"""

from __future__ import annotations

import struct

HEADER = 20


def reply(history: list[bytes], session: bytes, request: bytes,
          limit: int = 1400) -> bytes | None:
    """The answer to `request` from `history` (message i has sequence number i + 1), or
    None for a request to refuse: not 20 bytes, another session, sequence 0 or past the
    end of the history, a count of 0 or 0xFFFF."""
    # TODO: check the request, then pack the wanted messages that fit.
    raise NotImplementedError
