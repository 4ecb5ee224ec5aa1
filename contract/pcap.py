"""What both PCAP twins (naive/pcap.py, optimized/pcap.py) report the same way.

The statistics a scan keeps, by name and in the order both twins report them, the number
of MoldUDP64 streams tracked apart, and the default chunk a file is read in.
native/pcap.hpp's ``Stats`` and ``kMaxStreams`` are the C++ side; tests/test_contract.py
checks the extension's keys and bound against these. (What each statistic counts is in
naive/pcap.py's docstring.)
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_CHUNK", "MAX_STREAMS", "STAT_KEYS", "STREAM_KEYS"]

DEFAULT_CHUNK: Final = 1 << 22  # bytes read at a time: both twins cut the file at the same points
MAX_STREAMS: Final = 64  # streams tracked apart; packets of any further one: ``untracked``

# The statistics, in the order both twins report them. Every value is an int but `session`,
# which follows them.
STAT_KEYS: Final[tuple[str, ...]] = (
    "nanosecond", "big_endian", "snaplen", "packets", "truncated", "non_ipv4", "non_udp",
    "ipv4_fragments", "malformed", "not_moldudp64", "bad_moldudp64", "moldudp64",
    "unsequenced", "heartbeats", "end_of_session", "messages", "gaps", "gap_messages",
    "first_gap_seq", "duplicate_packets", "duplicate_messages", "streams", "untracked",
    "filtered", "next_seq",
)
# One stream's own counts (``Scanner.streams()``), in this order.
STREAM_KEYS: Final[tuple[str, ...]] = (
    "group", "port", "session", "packets", "messages", "gaps", "gap_messages", "next_seq",
)
