"""A live MoldUDP64 feed handler, the readable twin: one plain socket loop.

:class:`Receiver` reads datagrams from a UDP socket on 127.0.0.1, puts the ITCH messages
of each MoldUDP64 packet into the market in sequence order (``naive.market.Market``, book
mode), holds back packets that arrive ahead of a gap, and asks a re-request server for what
is missing. The rules and the names of its counts are in ``contract/feed.py``; the framing
(the 20-byte header, the message blocks) is chapter 9's, ``naive/pcap.py``'s ``block_ends``.

Two latencies are recorded per data packet, when its messages are in the book:
*socket-to-book* starts at the kernel's receive timestamp (``SO_TIMESTAMPNS``), so it
includes the wait in the socket buffer; *decode-to-book* starts when ``recvmsg`` returned,
so it is this loop's own work (and any wait behind a gap).
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Callable
from typing import Any, Final

from contract.feed import (
    HOST,
    MAX_DATAGRAM,
    MAX_HOLD,
    MAX_JUMP,
    MAX_PENDING,
    MAX_REQUEST,
    RESYNC_PACKETS,
    STAT_KEYS,
    check_host,
    session_name,
)
from contract.histogram import PERCENTILES
from naive import itch
from naive.histogram import Histogram
from naive.market import Market
from naive.pcap import END_OF_SESSION, MOLD_HEADER_LEN, U64_MAX, block_ends

__all__ = ["Receiver", "open_socket", "request_packet"]

# Linux's SO_TIMESTAMPNS (asm-generic/socket.h; the `socket` module does not export it):
# each datagram carries the kernel's CLOCK_REALTIME receive time as a struct timespec.
SO_TIMESTAMPNS: Final = 35

Report = dict[str, Any]


def open_socket(port: int = 0, rcvbuf: int = 1 << 22) -> socket.socket:
    """A UDP socket bound to 127.0.0.1:port (0: any free port), kernel timestamps on."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind((HOST, port))
    return sock


def request_packet(session: bytes, seq: int, count: int) -> bytes:
    """A MoldUDP64 request: the downstream header's layout, count = messages wanted."""
    return session + struct.pack(">QH", seq, count)


def kernel_time(ancdata: list[tuple[int, int, bytes]], fallback: int) -> int:
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack("qq", data[:16])
            return int(sec * 1_000_000_000 + nsec)
    return fallback


class Receiver:
    """One MoldUDP64 stream into a market. ``request_port``: the re-request server's port
    on 127.0.0.1 (None: no server, gaps are lost once the timeout passes). ``session``:
    the feed's session name (None: the session of the first data packet)."""

    def __init__(self, sock: socket.socket, market: Market | None = None,
                 request_port: int | None = None, start: int = 1,
                 timeout_ns: int = 50_000_000, retries: int = 20,
                 idle_ns: int = 2_000_000_000, session: str | bytes | None = None,
                 hold: int = MAX_PENDING, max_jump: int = MAX_JUMP) -> None:
        if not 1 <= hold <= MAX_HOLD:
            raise ValueError(f"hold must be 1..{MAX_HOLD} packets, got {hold}")
        if not 1 <= max_jump <= U64_MAX:
            raise ValueError(f"max_jump must be 1..2**64-1 messages, got {max_jump}")
        self.sock = sock
        self.market = market if market is not None else Market("book")
        self.request_to: tuple[str, int] | None = None
        self.set_request_port(request_port)
        self.stats: dict[str, int] = dict.fromkeys(STAT_KEYS, 0)
        self.expected = start  # next sequence number to deliver; 0 = take the first seen
        self.known = start     # one past the highest sequence number known to exist
        self.session = None if session is None else session_name(session)
        self.synced = False  # a data packet of the session has been accepted
        self.pending: dict[int, tuple[int, bytes, int, int]] = {}  # seq -> count, blocks, times
        self.request: tuple[int, int] | None = None  # (first seq asked for, deadline ns)
        self.tries = 0
        self.asked_at = 0  # when the run at request[0] was first asked for
        self.timeout_ns, self.retries, self.idle_ns = timeout_ns, retries, idle_ns
        self.hold = hold  # packets it may hold back behind gaps
        self.max_jump = max_jump  # how far past `known` a packet may reach and be believed
        self.resync = (0, 0)  # (the seq that continues the last too-far packet, run length)
        self.end_seen = False
        self.stop = "running"
        self.first_ns = self.stop_ns = 0  # wall clock of the first datagram, of the stop
        self.socket_to_book = Histogram()
        self.decode_to_book = Histogram()
        self.second = (Histogram(), Histogram())  # the same two, for the current second
        self.stats["next_seq"] = start

    @property
    def port(self) -> int:
        port: int = self.sock.getsockname()[1]
        return port

    def set_request_port(self, port: int | None) -> None:
        """Where requests go: 127.0.0.1:port (None: no re-request server)."""
        self.request_to = None if port is None else (check_host(HOST), port)

    def close(self) -> None:
        self.sock.close()

    # --8<-- [start:packet]
    def on_packet(self, payload: bytes, t_kernel: int, t_user: int) -> None:
        """Account for one datagram; deliver whatever is now in sequence."""
        st = self.stats
        st["packets"] += 1
        if len(payload) < MOLD_HEADER_LEN:
            st["not_moldudp64"] += 1
            return
        session = payload[:10]
        seq, count = struct.unpack_from(">QH", payload, 10)
        ends: list[int] | None = []
        if count not in (0, END_OF_SESSION):  # data: blocks must fit; seq+count a u64
            ends = block_ends(memoryview(payload), count)
            if ends is None or seq == 0 or seq + count > U64_MAX:
                st["bad_moldudp64"] += 1
                return
        if not self.trusted(session, seq, count if ends else 0):
            return
        if not ends:  # heartbeat or end of session: seq is the next sequence number
            st["heartbeats" if count == 0 else "end_of_session"] += 1
            self.end_seen |= count == END_OF_SESSION
            self.learn(seq, seq)
            return
        st["data_packets"] += 1
        self.place(seq, count, payload[MOLD_HEADER_LEN : ends[-1]], t_kernel, t_user)
    # --8<-- [end:packet]

    # --8<-- [start:trust]
    def trusted(self, session: bytes, seq: int, count: int) -> bool:
        """Is this packet (count 0: a heartbeat or end) of our session, and believable?
        Counted if not."""
        st = self.stats
        if self.session is not None and session != self.session:
            st["wrong_session"] += 1
            return False
        if not self.synced:
            if count:  # the first data packet: evidence of the session and where it is
                self.session, self.synced = session, True
                if self.expected == 0:  # start 0: it sets where we are
                    self.expected = self.known = seq
                return True  # the one packet not judged by max_jump
            if self.session is None or self.expected == 0:
                st["unsynced"] += 1  # whose heartbeat, or where from? It proves nothing
                return False
        if seq + count - self.known <= self.max_jump:
            return True
        # Too far ahead: believed only when RESYNC_PACKETS data packets in a row
        # continue each other from there (a heartbeat alone never is).
        if count:
            run = self.resync[1] + 1 if seq == self.resync[0] else 1
            self.resync = (seq + count, run)
            if run >= RESYNC_PACKETS:
                self.resync = (0, 0)
                return True
        st["suspect"] += 1
        return False
    # --8<-- [end:trust]

    # --8<-- [start:place]
    def place(self, seq: int, count: int, blocks: bytes, t_kernel: int,
              t_user: int) -> None:
        """A data packet of the session: a duplicate, held back, or delivered."""
        st = self.stats
        if seq + count <= self.expected or seq in self.pending:
            st["duplicate_packets"] += 1
            st["duplicate_messages"] += count
            return
        self.learn(seq, seq)  # what is missing before it
        if seq > self.expected and len(self.pending) >= self.hold:
            st["overflow"] += 1  # no room to hold it
            if not self.waited_out(t_kernel):
                return  # dropped: its messages are now missing, to be asked for
            # The server had its time: give up what is missing before this packet (or
            # before the first held one); what is held behind that is delivered.
            self.give_up(min(seq, min(self.pending)))
        self.learn(seq, seq + count)
        if seq + count <= self.expected:  # what a give-up released covered it
            st["duplicate_packets"] += 1
            st["duplicate_messages"] += count
            return
        if seq > self.expected:  # ahead of a gap: hold it back
            st["buffered"] += 1
            self.pending[seq] = (count, blocks, t_kernel, t_user)
            return
        self.deliver(seq, count, blocks, t_kernel, t_user)
        self.drain()
    # --8<-- [end:place]

    def waited_out(self, t_kernel: int) -> bool:
        """Was the run at `expected` asked for at least `timeout_ns` before the kernel
        received this packet? Then any timely reply would have been read before it,
        however far behind this receiver is."""
        return (self.request is not None and self.request[0] == self.expected
                and t_kernel - self.asked_at >= self.timeout_ns)

    def give_up(self, end: int) -> None:
        """Count messages expected .. end-1 as lost; deliver what is then in sequence."""
        self.stats["lost"] += end - self.expected
        self.expected = end
        self.stats["next_seq"] = end
        self.request = None
        self.drain()

    def learn(self, first: int, end: int) -> None:
        """A packet holding sequence numbers first .. end-1 arrived: any below `first`
        not yet known to exist are a newly revealed gap."""
        if first > self.known:
            self.stats["gaps"] += 1
            self.stats["gap_messages"] += first - self.known
        self.known = max(self.known, end)

    # --8<-- [start:deliver]
    def deliver(self, seq: int, count: int, blocks: bytes, t_kernel: int, t_user: int) -> None:
        """Messages seq .. seq+count-1 (framed blocks), of which some may be old."""
        skip = self.expected - seq  # messages of this packet already delivered
        pos = 0
        for _ in range(skip):
            pos += 2 + int.from_bytes(blocks[pos : pos + 2], "big")
        self.apply(blocks[pos:])
        now = time.time_ns()
        self.socket_to_book.record_delta(t_kernel, now)
        self.decode_to_book.record_delta(t_user, now)
        self.second[0].record_delta(t_kernel, now)
        self.second[1].record_delta(t_user, now)
        self.stats["duplicate_messages"] += skip
        self.stats["messages"] += count - skip
        self.expected = seq + count
        self.stats["next_seq"] = self.expected
    # --8<-- [end:deliver]

    def apply(self, blocks: bytes) -> None:
        """Decode and apply framed ITCH; a record the decoder refuses is counted, skipped."""
        pos = 0
        while pos < len(blocks):
            events, _counts, used, error = itch.scan(blocks[pos:])
            self.market.run(events)
            if error is None:
                return
            self.stats["bad_itch"] += 1
            pos += used + 2 + int.from_bytes(blocks[pos + used : pos + used + 2], "big")

    def drain(self) -> None:
        """Deliver the held-back packets that are now in sequence."""
        while self.pending:
            seq = min(self.pending)
            if seq > self.expected:
                return
            count, blocks, t_kernel, t_user = self.pending.pop(seq)
            if seq + count <= self.expected:
                self.stats["duplicate_packets"] += 1
                self.stats["duplicate_messages"] += count
            else:
                self.deliver(seq, count, blocks, t_kernel, t_user)

    # --8<-- [start:gap]
    def check_gap(self, now: int) -> None:
        """Ask for the first run of missing messages; give it up after `retries` tries."""
        while self.expected < self.known:
            end = min(self.pending) if self.pending else self.known  # the run: expected..end-1
            if self.request is not None and self.request[0] == self.expected:
                if now < self.request[1]:
                    return  # asked already; the reply has time yet
                self.tries += 1
                if self.tries > (self.retries if self.request_to else 0):
                    self.give_up(end)  # skip the run
                    continue
            else:
                self.tries, self.asked_at = 0, now  # a new run: its first request
            if self.request_to is not None and self.session is not None:
                count = min(end - self.expected, MAX_REQUEST)
                self.sock.sendto(request_packet(self.session, self.expected, count),
                                 self.request_to)
                self.stats["requests"] += 1
            self.request = (self.expected, now + self.timeout_ns)
            return
        self.request = None
    # --8<-- [end:gap]

    def missing(self) -> int:
        """Messages known to exist, not delivered, not held back, not given up."""
        covered, pos = 0, self.expected
        for seq in sorted(self.pending):
            end = seq + self.pending[seq][0]
            if end > pos:
                covered += end - max(seq, pos)
                pos = end
        return self.known - self.expected - covered

    def report(self) -> Report:
        """The counts (contract.feed.STAT_KEYS), ``missing``, ``stop``, and the latencies."""
        st = self.stats
        missing = self.missing()
        st["recovered"] = st["gap_messages"] - st["lost"] - missing
        out: Report = dict(st)
        out["missing"] = missing
        out["stop"] = self.stop
        for name, h in (("socket_to_book", self.socket_to_book),
                        ("decode_to_book", self.decode_to_book),
                        ("second_socket_to_book", self.second[0]),
                        ("second_decode_to_book", self.second[1])):
            out[name] = latency_summary(h)
        return out

    def done(self) -> bool:
        return self.end_seen and self.expected >= self.known and not self.pending

    # --8<-- [start:loop]
    def run(self, max_ns: int = 60_000_000_000,
            on_second: Callable[[Report], None] | None = None) -> Report:
        """Read until end of session, `idle_ns` of silence, or `max_ns`; the report."""
        begin = last_rx = time.time_ns()
        next_tick = begin + 1_000_000_000
        while True:
            now = time.time_ns()
            wake = min(last_rx + self.idle_ns, begin + max_ns, next_tick)
            if self.request is not None:
                wake = min(wake, self.request[1])
            ready, _, _ = select.select([self.sock], [], [], max(0, wake - now) / 1e9)
            if ready:
                data, anc, flags, _ = self.sock.recvmsg(MAX_DATAGRAM, 64)
                last_rx = time.time_ns()
                self.first_ns = self.first_ns or last_rx
                if flags & socket.MSG_TRUNC:  # longer than any packet we send: skip it
                    self.stats["packets"] += 1
                    self.stats["truncated"] += 1
                else:
                    self.on_packet(data, kernel_time(anc, last_rx), last_rx)
            now = time.time_ns()
            self.check_gap(now)
            if self.done():
                self.stop = "end"
            elif now - last_rx >= self.idle_ns:
                self.stop = "idle"
            elif now - begin >= max_ns:
                self.stop = "deadline"
            if now >= next_tick or self.stop != "running":
                if on_second is not None:
                    on_second(self.report())
                self.second = (Histogram(), Histogram())  # the next second starts afresh
                next_tick += 1_000_000_000
            if self.stop != "running":
                self.stop_ns = now
                return self.report()
    # --8<-- [end:loop]


def latency_summary(h: Histogram) -> dict[str, int]:
    """count, p50, p90, p99, p99.9, max (ns) of a histogram."""
    out = {"count": h.count}
    for name, ppm in PERCENTILES:
        out[name] = h.at_ppm(ppm)
    out["max"] = h.max
    return out
