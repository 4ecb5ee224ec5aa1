"""A MoldUDP64 re-request server's answer (chapter 13), without a socket.

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
    if len(request) != HEADER or request[:10] != session:
        return None
    seq, count = struct.unpack(">QH", request[10:])
    if seq < 1 or seq > len(history) or count in (0, 0xFFFF):
        return None
    body = b""
    carried = 0
    for message in history[seq - 1 : seq - 1 + count]:
        block = struct.pack(">H", len(message)) + message
        if carried and HEADER + len(body) + len(block) > limit:
            break
        body += block
        carried += 1
    return session + struct.pack(">QH", seq, carried) + body
