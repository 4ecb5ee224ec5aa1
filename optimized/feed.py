"""A live MoldUDP64 feed handler in C++ (``native/feed.hpp``): the same API as ``naive/feed.py``.

The socket loop, the packet checks, the held-back packets and the re-requests run in C++:
``recvmmsg`` reads up to ``batch`` datagrams per system call, with the GIL released while
it waits. What a poll delivered (framed ITCH blocks, in sequence, in the receiver's own
buffer) goes to ``optimized.market.Market.run_itch`` in one call, then the latencies of
its packets are recorded in one pass. So the Python loop here runs once per poll, not per
packet or message. The latencies mean what they mean in the naive twin: *socket-to-book*
from the kernel's receive timestamp, *decode-to-book* from the moment ``recvmmsg``
returned, both to the moment ``run_itch`` returned (for a whole poll's packets at once).

``spin=True`` busy-waits for the next datagram instead of sleeping in ``poll(2)`` (it
burns a core: never on a machine whose cores are shared); ``busy_poll_us`` asks the kernel
for ``SO_BUSY_POLL``, which may be refused (``busy_poll_error`` says why: an errno).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from contract.feed import MAX_HOLD, MAX_JUMP, MAX_PENDING, STAT_KEYS, check_host, session_name
from contract.histogram import PERCENTILES
from optimized import _native
from optimized.histogram import Histogram
from optimized.market import Market

__all__ = ["Receiver", "Sender"]

Report = dict[str, Any]
U16_MAX = 0xFFFF
U64_MAX = 2**64 - 1


class Receiver:
    """One MoldUDP64 stream into a market, on a UDP socket bound to 127.0.0.1:port.
    ``session``: the feed's session name (None: the session of the first data packet)."""

    def __init__(self, port: int = 0, market: Market | None = None,
                 request_port: int | None = None, start: int = 1,
                 timeout_ns: int = 50_000_000, retries: int = 20,
                 idle_ns: int = 2_000_000_000, batch: int = 64, rcvbuf: int = 1 << 22,
                 spin: bool = False, busy_poll_us: int = 0,
                 session: str | bytes | None = None, hold: int = MAX_PENDING,
                 max_jump: int = MAX_JUMP) -> None:
        if not 0 <= port <= U16_MAX:
            raise ValueError(f"port must be 0..65535, got {port}")
        if not 1 <= hold <= MAX_HOLD:
            raise ValueError(f"hold must be 1..{MAX_HOLD} packets, got {hold}")
        if not 1 <= max_jump <= U64_MAX:
            raise ValueError(f"max_jump must be 1..2**64-1 messages, got {max_jump}")
        name = b"" if session is None else session_name(session)
        self._r = _native.FeedReceiver(port, -1, start, timeout_ns, retries, batch, rcvbuf,
                                       spin, busy_poll_us, name, hold, max_jump)
        self.set_request_port(request_port)
        self.market = market if market is not None else Market("book")
        self.idle_ns = idle_ns
        self.bad_itch = 0
        self.stop = "running"
        self.first_ns = self.stop_ns = 0  # wall clock of the first datagram, of the stop
        self.socket_to_book = Histogram()
        self.decode_to_book = Histogram()
        self.second = (Histogram(), Histogram())  # the same two, for the current second

    @property
    def port(self) -> int:
        return int(self._r.port)

    @property
    def batches(self) -> int:
        """recvmmsg calls that returned datagrams; ``datagrams / batches`` is the mean fill."""
        return int(self._r.batches)

    @property
    def busy_poll_error(self) -> int:
        return int(self._r.busy_poll_error)

    def set_request_port(self, port: int | None) -> None:
        """Where requests go: 127.0.0.1:port (None: no re-request server)."""
        if port is not None:
            check_host("127.0.0.1")
            if not 0 < port <= U16_MAX:
                raise ValueError(f"request port must be 1..65535, got {port}")
        self._r.request_port = -1 if port is None else port

    def close(self) -> None:
        """Nothing to do by hand: the socket closes with the receiver (kept for the API)."""

    @property
    def stats(self) -> dict[str, int]:
        values = [int(v) for v in self._r.stats()]
        out = dict(zip(STAT_KEYS[: len(values)], values, strict=True))
        out["bad_itch"] = self.bad_itch
        return out

    def on_packet(self, payload: bytes, t_kernel: int, t_user: int) -> None:
        """Account for one datagram's payload (as if read from the socket); deliver."""
        self._r.on_packet(np.frombuffer(payload, dtype=np.uint8), t_kernel, t_user)
        self._deliver()

    def check_gap(self, now: int) -> None:
        self._r.check_gap(now)
        self._deliver()

    # --8<-- [start:deliver]
    def _deliver(self) -> None:
        """Hand what the C++ side delivered to the market; record its packets' latencies."""
        blocks = self._r.out()
        if len(blocks):
            pos = 0
            while pos < len(blocks):  # a record the decoder refuses: counted, skipped
                _fills, _counts, used, error = self.market.run_itch(blocks[pos:])
                if error is None:
                    break
                self.bad_itch += 1
                pos += used
                pos += 2 + (int(blocks[pos]) << 8 | int(blocks[pos + 1]))
            now = time.time_ns()
            times = self._r.times()
            s2b, d2b = np.maximum(now - times[:, 0], 0), np.maximum(now - times[:, 1], 0)
            for h, values in ((self.socket_to_book, s2b), (self.decode_to_book, d2b),
                              (self.second[0], s2b), (self.second[1], d2b)):
                h.record_many(values)
        self._r.take()
    # --8<-- [end:deliver]

    def missing(self) -> int:
        return int(self._r.missing())

    def done(self) -> bool:
        return bool(self._r.done())

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

    # --8<-- [start:loop]
    def run(self, max_ns: int = 60_000_000_000,
            on_second: Callable[[Report], None] | None = None) -> Report:
        """Read until end of session, `idle_ns` of silence, or `max_ns`; the report."""
        begin = last_rx = time.time_ns()
        next_tick = begin + 1_000_000_000
        while True:
            now = time.time_ns()
            wake = min(last_rx + self.idle_ns, begin + max_ns, next_tick)
            deadline = int(self._r.request_deadline)
            if deadline >= 0:
                wake = min(wake, deadline)
            if self._r.poll(max(0, wake - now)):  # waits, reads, checks, holds, delivers
                last_rx = time.time_ns()
                self.first_ns = self.first_ns or last_rx
            # What poll() delivered goes to the market first: check_gap may deliver held
            # packets too, and needs the delivery buffer's room for them.
            self._deliver()
            now = time.time_ns()
            self._r.check_gap(now)
            self._deliver()
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


class Sender:
    """The benchmarks' feed sender (no naive twin: it is a tool, not a component): the
    packets ``(byte start, byte end, first sequence, message count)`` of the framed ITCH
    ``raw``, built once, then sent to 127.0.0.1:port with ``sendmmsg``, GIL released."""

    def __init__(self, raw: bytes, plan: list[tuple[int, int, int, int]], port: int,
                 session: str | bytes) -> None:
        cols = list(zip(*plan, strict=True)) if plan else [(), (), (), ()]
        self._s = _native.FeedSender(
            np.frombuffer(raw, dtype=np.uint8), np.asarray(cols[0], dtype=np.int64),
            np.asarray(cols[1], dtype=np.int64), np.asarray(cols[2], dtype=np.uint64),
            np.asarray(cols[3], dtype=np.uint16), port, session_name(session))

    @property
    def packets(self) -> int:
        return int(self._s.packets)

    def send(self, first: int = 0, last: int | None = None, batch: int = 64) -> int:
        """Send packets first .. last-1 flat out; how many the kernel took."""
        return int(self._s.send(first, self.packets if last is None else last, batch))

    def control(self, next_seq: int, end: bool = False) -> None:
        """A heartbeat (or end of session) carrying next_seq."""
        self._s.control(next_seq, end)


def latency_summary(h: Histogram) -> dict[str, int]:
    """count, p50, p90, p99, p99.9, max (ns) of a histogram."""
    out = {"count": h.count}
    for name, ppm in PERCENTILES:
        out[name] = h.at_ppm(ppm)
    out["max"] = h.max
    return out
