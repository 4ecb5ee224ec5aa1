"""What both live-feed receivers (naive/feed.py, optimized/feed.py) share: the rules and names.

A receiver reads MoldUDP64 packets (``spec/itch50.md`` §4) from a UDP socket on 127.0.0.1,
delivers their ITCH messages to a market in sequence order, and fills gaps by sending
MoldUDP64 request packets (``spec/order-entry.md`` §3) to a re-request server. Both twins
count every packet the same way, under these names, in this order (native/feed.hpp's
``FeedStats`` holds the same fields; tests/test_feed.py checks the two agree):

* ``packets``: datagrams read. ``truncated``: a datagram longer than ``MAX_DATAGRAM`` (cut
  by the read; skipped whole). ``not_moldudp64``: shorter than the 20-byte header.
  ``bad_moldudp64``: its message blocks overrun the datagram (a count beyond the payload, a
  length past the end), sequence 0, or a next sequence number (``seq + count``) past
  2**64 - 1 (the rule of chapter 4's PCAP readers).
  ``wrong_session``: a session other than the receiver's (the configured one, else the
  one it adopted). ``unsynced``: a heartbeat or end of session that came before the
  receiver knew its session and position (no session configured, or ``start`` 0, and no
  data packet yet): it vouches for nothing, so it is counted and changes nothing.
  ``suspect``: a packet whose sequence numbers reach more than ``max_jump`` past the
  highest known (a lie, or a jump nothing can confirm): counted, changes nothing.
* ``data_packets`` (valid, with messages), ``heartbeats`` (count 0), ``end_of_session``
  (count 0xFFFF).
* ``messages``: delivered to the market, each exactly once, in sequence order.
* ``duplicate_packets`` / ``duplicate_messages``: already delivered (or already buffered).
* ``gaps``: packets (or heartbeats) that revealed missing messages beyond any already known
  missing; ``gap_messages``: how many they revealed. ``buffered``: packets held back
  because they arrived ahead of a gap; ``overflow``: packets that found ``hold`` packets
  already held (see the rules below).
* ``requests``: request packets sent; ``recovered``: messages of a gap that reached the
  market after all (from a reply or a late, reordered packet); ``lost``: messages given up
  on, after ``retries`` unanswered requests for them (or at once with no re-request server
  once the timeout passes). ``recovered + lost + missing == gap_messages`` at any moment,
  where ``missing`` (in the report) is what is still outstanding.
* ``next_seq``: the next sequence number expected.
* ``bad_itch``: messages, in sequence inside a well-framed packet, that the ITCH decoder
  refuses (a zero length, a wrong length for the type): each is skipped, the messages
  around it are applied (counted by the twins' Python side: the market decodes).

The rules both twins follow:

* The session is ``session`` when configured; otherwise the session of the first valid
  data packet (a heartbeat is no evidence: any stray one would do). That first data
  packet also sets the position when ``start`` is 0, and is the one packet not judged by
  ``max_jump``. A claim beyond ``known + max_jump`` is believed only when
  ``RESYNC_PACKETS`` data packets in a row continue each other from there.
* ``expected`` starts at ``start`` (1 by default: a receiver that starts late re-requests
  everything before the first packet it sees; 0 means "whatever arrives first").
* A packet with ``seq + count <= expected`` is a duplicate; one that overlaps delivers only
  its new messages; one with ``seq > expected`` is buffered (a duplicate if that sequence is
  already buffered) and its sequence numbers count as known.
* While messages are missing, one request is outstanding: ``(session, expected,
  min(first known sequence after the gap - expected, MAX_REQUEST))``. It is sent again when
  ``timeout_ns`` passes without progress; after ``retries`` re-sends the whole run of
  missing messages up to the next buffered packet (or the highest known sequence) is lost.
* A packet that must be held back when ``hold`` packets already are (``overflow``): if the
  kernel received it ``timeout_ns`` or more after the first request for the missing run
  (so a timely reply would have been read before it), the missing messages before it (or
  before the first held packet, if lower) are given up at once, the held packets then in
  sequence are delivered, and it is held or delivered in turn. Otherwise it is dropped and
  its messages are missing like any other gap's. Size ``hold`` for the socket's backlog
  plus the feed's packet rate times ``timeout_ns`` (chapter 13).
* The run ends on an end-of-session packet once nothing is missing or buffered ("end"), or
  after ``idle_ns`` with no datagram at all ("idle"): heartbeats keep a receiver alive.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DEFAULT_FEED_PORT", "DEFAULT_REQUEST_PORT", "HOST", "MAX_DATAGRAM", "MAX_PAYLOAD",
    "MAX_HOLD", "MAX_JUMP", "MAX_PENDING", "MAX_REQUEST", "RESYNC_PACKETS", "STAT_KEYS",
    "STOP_REASONS", "check_host", "session_name",
]

# --8<-- [start:constants]
HOST: Final = "127.0.0.1"  # the only address a feed, a request or a reply is sent to
DEFAULT_FEED_PORT: Final = 30_001
DEFAULT_REQUEST_PORT: Final = 30_002
# The sender fills a packet (and the server a reply) up to this many payload bytes:
# nassau's re-request server's bound (spec/order-entry.md §3). MoldUDP64 itself names none
# (UNVERIFIED: what NASDAQ's own packets use).
MAX_PAYLOAD: Final = 1400
MAX_DATAGRAM: Final = 2048  # a receiver reads at most this many bytes of a datagram
MAX_REQUEST: Final = 0xFFFE  # a request's count: 0xFFFF would read as end of session
MAX_PENDING: Final = 1024  # packets a receiver holds back behind a gap, by default
MAX_HOLD: Final = 16_384  # the most it may be configured to hold (2 KiB each)
MAX_JUMP: Final = 1 << 20  # messages past the highest known sequence a packet may claim
RESYNC_PACKETS: Final = 3  # data packets in a row that make a longer jump believed
# --8<-- [end:constants]

STAT_KEYS: Final[tuple[str, ...]] = (
    "packets", "truncated", "not_moldudp64", "bad_moldudp64", "wrong_session", "unsynced",
    "suspect", "data_packets", "heartbeats", "end_of_session", "messages", "duplicate_packets",
    "duplicate_messages", "gaps", "gap_messages", "buffered", "overflow", "requests",
    "recovered", "lost", "next_seq", "bad_itch",
)
STOP_REASONS: Final = ("running", "end", "idle", "deadline")


def check_host(host: str) -> str:
    """Only 127.0.0.1 (the network rule of chapter 13): anything else is a ValueError."""
    if host != HOST:
        raise ValueError(f"feed sockets talk to {HOST} only, not {host!r}")
    return host


def session_name(session: str | bytes) -> bytes:
    """A MoldUDP64 session name as it is on the wire: at most 10 ASCII bytes
    (spec/itch50.md §4), padded with spaces on the right as the simulator pads it (the
    spec names no padding: UNVERIFIED for NASDAQ's session names)."""
    raw = session.encode("ascii") if isinstance(session, str) else bytes(session)
    if len(raw) > 10:
        raise ValueError(f"a MoldUDP64 session is at most 10 bytes, got {raw!r}")
    return raw.ljust(10)
