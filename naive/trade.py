"""Tick to trade, the readable twin: feed in, book, decision, order out, in one loop.

:class:`Trader` is chapter 13's live-feed receiver (``naive.feed.Receiver``: sequence
order, held-back packets, re-requests) whose market, after every book message, is shown
to :class:`Strategy` (the rule and the risk checks of ``contract/trade.py``); an order
the strategy wants goes at once, as an OUCH 5.0 Enter Order over the SoupBinTCP session
``connect_orders`` opened with ``twinmatch serve``. One thread, one ``select`` loop over
the feed's UDP socket and the order session's TCP socket.

Every order carries its stage stamps (``contract.trade.STAGES``), all ``time.time_ns()``
(CLOCK_REALTIME, the clock of the kernel's receive timestamp).
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import time
from collections.abc import Callable
from typing import Any, Final

import numpy as np

from contract import soupbin as sb
from contract.feed import HOST, MAX_DATAGRAM, check_host
from contract.trade import BOOK_TYPES, STAGES, STAT_KEYS, StrategyConfig, enter_order
from naive import itch
from naive.feed import Receiver, kernel_time
from naive.histogram import Histogram
from naive.market import Market

__all__ = ["Strategy", "Trader", "connect_orders"]

Report = dict[str, Any]
DAY_NS: Final = 86_400 * 1_000_000_000
_BOOK_TYPES: Final = frozenset(BOOK_TYPES)
_ACCEPTED_TS: Final = struct.Struct(">Q")   # Accepted: type, then Timestamp u64
_URN: Final = struct.Struct(">I")
_R: Final = ord("R")


def stamp_cost() -> int:
    """The median cost of one ``time.time_ns()`` here (ns): what a stage delta between
    two stamps includes beyond the work (chapter 7's rule: measure it, subtract it)."""
    t = [time.time_ns() for _ in range(1001)]
    return int(np.median(np.diff(t)))


def connect_orders(port: int, user: str = "USER01", password: str = "PASSWD",
                   timeout: float = 5.0) -> socket.socket:
    """A SoupBinTCP session with the order-entry server on 127.0.0.1:port, logged in
    (every wait bounded by ``timeout``); a refused login is a ConnectionError."""
    sock = socket.create_connection((check_host(HOST), port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(sb.login_request(user, password))
        framer = sb.Framer(max_packet=70_000)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            data = sock.recv(4096)
            if not data:
                raise ConnectionError("order-entry server closed the connection at login")
            for packet in framer.feed(data):
                if packet[:1] == sb.LOGIN_ACCEPTED:
                    if framer.pending:
                        raise ConnectionError("order-entry server sent more than the login")
                    sock.setblocking(False)
                    return sock
                if packet[:1] == sb.LOGIN_REJECTED:
                    raise ConnectionError(f"login rejected: {packet[1:2]!r}")
        raise TimeoutError(f"no Login Accepted within {timeout} s")
    except BaseException:
        sock.close()
        raise


# --8<-- [start:strategy]
class Strategy:
    """contract/trade.py's rule and risk checks; per-symbol state in dicts."""

    def __init__(self, config: StrategyConfig | None = None) -> None:
        self.cfg = (config or StrategyConfig()).check()
        self.stats = dict.fromkeys(STAT_KEYS, 0)
        self.signal: dict[int, int] = {}       # locate -> +1 BUY, -1 SELL, 0 none
        self.last_order: dict[int, int] = {}   # locate -> feed time of its last order
        self.second, self.in_second = -1, 0    # the feed's second, orders sent in it
        self.urn = 0
        self.tripped = False

    def decide(self, locate: int, stock: bytes, ts: int, bid: tuple[int, int] | None,
               ask: tuple[int, int] | None, open_orders: int) -> bytes:
        """After one book message of ``locate``: the framed order to send, or b''."""
        cfg, st = self.cfg, self.stats
        st["book_messages"] += 1
        signal = 0
        if bid is not None and ask is not None and bid[0] < ask[0]:
            if bid[1] >= cfg.imbalance * ask[1]:
                signal = 1
            elif ask[1] >= cfg.imbalance * bid[1]:
                signal = -1
        before = self.signal.get(locate, 0)
        self.signal[locate] = signal
        if signal == 0 or signal == before:
            return b""
        st["signals"] += 1
        return self.check(locate, stock, ts, signal, bid, ask, open_orders)
    # --8<-- [end:strategy]

    # --8<-- [start:checks]
    def check(self, locate: int, stock: bytes, ts: int, signal: int,
              bid: Any, ask: Any, open_orders: int) -> bytes:
        """The risk checks, in contract/trade.py's order; then the order."""
        cfg, st = self.cfg, self.stats
        if self.tripped:
            st["killed"] += 1
            return b""
        last = self.last_order.get(locate)
        if last is not None and ts - last < cfg.cooldown_ns:
            st["cooldown"] += 1
            return b""
        if ts // 1_000_000_000 != self.second:
            self.second, self.in_second = ts // 1_000_000_000, 0
        if self.in_second >= cfg.max_per_second:
            st["throttled"] += 1
            return b""
        if st["sent"] >= cfg.max_orders:
            st["capped"] += 1
            return b""
        if open_orders >= cfg.max_open:
            self.tripped = True
            st["kill_switch"] += 1
            return b""
        self.urn += 1
        st["sent"] += 1
        self.in_second += 1
        self.last_order[locate] = ts
        price, shares = ask if signal > 0 else bid
        return enter_order(self.urn, b"B" if signal > 0 else b"S", min(cfg.qty, shares),
                           stock, price)
    # --8<-- [end:checks]


class Trader(Receiver):
    """A feed receiver whose every book message goes past the strategy; orders out on
    ``orders`` (a logged-in SoupBinTCP socket, non-blocking: ``connect_orders``)."""

    def __init__(self, sock: socket.socket, orders: socket.socket,
                 config: StrategyConfig | None = None, market: Market | None = None,
                 request_port: int | None = None, **kw: Any) -> None:
        super().__init__(sock, market, request_port, **kw)
        self.orders = orders
        self.strategy = Strategy(config)
        # A packet longer than 65,534 bytes or of length 0 breaks the session, as in the
        # C++ twin (its buffer holds 64 KiB): the run stops, "orders closed".
        self.framer = sb.Framer(max_packet=65_534)
        self.leaves: dict[int, int] = {}      # UserRefNum -> shares not yet answered for
        self.rows: list[list[int]] = []       # STAGES per order, index UserRefNum - 1
        self.stamps = (0, 0)                  # the delivered packet's (kernel, user)
        self.names: dict[int, bytes] = {}     # locate -> stock, 8 bytes (R messages)
        self.sent_log = bytearray()           # every order sent, in order
        self.stamp_cost_ns = stamp_cost()
        self.last_sent_ns = 0

    # --8<-- [start:apply]
    def deliver(self, seq: int, count: int, blocks: bytes, t_kernel: int,
                t_user: int) -> None:
        self.stamps = (t_kernel, t_user)
        super().deliver(seq, count, blocks, t_kernel, t_user)

    def apply(self, blocks: bytes) -> None:
        """Decode the packet's messages; apply each, show the book to the strategy."""
        pos = 0
        while pos < len(blocks):
            events, _counts, used, error = itch.scan(blocks[pos:])
            t_decoded = time.time_ns()
            for i in range(len(events)):
                kind = events["type"][i]
                if kind == _R:
                    stock = bytes(events["stock"][i]).ljust(8)
                    self.names[int(events["locate"][i])] = stock
                self.market.run(events[i : i + 1])
                if kind in _BOOK_TYPES:
                    self.look(events[i], t_decoded)
            if error is None:
                return
            self.stats["bad_itch"] += 1
            pos += used + 2 + int.from_bytes(blocks[pos + used : pos + used + 2], "big")

    def look(self, event: Any, t_decoded: int) -> None:
        t_applied = time.time_ns()
        locate = int(event["locate"])
        bid, ask = self.market.top(locate)
        st = self.strategy.stats
        order = self.strategy.decide(locate, self.names.get(locate, b" " * 8),
                                     int(event["timestamp"]), bid, ask, st["open"])
        if not order:
            return
        t_decided = time.time_ns()  # decide() encodes too: one stamp for both
        stamps = [*self.stamps, t_decoded, t_applied, t_decided, t_decided]
        self.send_order(order, stamps)
    # --8<-- [end:apply]

    def send_order(self, order: bytes, stamps: list[int]) -> None:
        st = self.strategy.stats
        try:
            sent = self.orders.send(order)
        except OSError:
            sent = -1
        now = time.time_ns()
        if sent != len(order):
            st["send_errors"] += 1
            self.strategy.tripped = True  # a session that cannot take an order: stop
            return
        self.last_sent_ns = now
        urn = self.strategy.urn
        self.leaves[urn] = int.from_bytes(order[9:13], "big")  # the Enter Order's Quantity
        self.sent_log += order
        st["open"] += 1
        self.rows.append([*stamps, now, 0, 0])

    def read_answers(self) -> None:
        """Whatever the server has sent: count the answers, stamp the Accepted."""
        try:
            data = self.orders.recv(65536)
        except BlockingIOError:
            return
        except OSError:  # reset by the server: the session is gone
            data = b""
        now = time.time_ns()
        try:
            packets = self.framer.feed(data) if data else None
        except sb.FrameError:
            packets = None
        if packets is None:
            self.stop = "orders closed"
            return
        st = self.strategy.stats
        for packet in packets:
            if packet[:1] != sb.SEQUENCED or len(packet) < 14:
                continue
            kind, urn = packet[1:2], _URN.unpack_from(packet, 10)[0]
            if urn not in self.leaves:
                continue
            if kind == b"A":
                st["accepted"] += 1
                server = _ACCEPTED_TS.unpack_from(packet, 2)[0]
                row = self.rows[urn - 1]
                row[7] = row[6] - row[6] % DAY_NS + server  # the send's day + since midnight
                row[8] = now
            elif kind in (b"C", b"J"):
                st["canceled" if kind == b"C" else "rejected"] += 1
                self.close_order(urn)
            elif kind == b"E":
                st["executed"] += 1
                self.leaves[urn] -= struct.unpack_from(">I", packet, 14)[0]
                if self.leaves[urn] <= 0:
                    self.close_order(urn)

    def close_order(self, urn: int) -> None:
        if self.leaves.pop(urn, None) is not None:
            self.strategy.stats["open"] -= 1

    def stage_rows(self) -> np.ndarray:
        """One row per order sent: the STAGES stamps (0: not seen, e.g. no Accepted)."""
        return np.array(self.rows, dtype=np.int64).reshape(len(self.rows), len(STAGES))

    def trade_report(self) -> Report:
        out = self.report()
        out["trade"] = dict(self.strategy.stats)
        return out

    # --8<-- [start:loop]
    def run(self, max_ns: int = 60_000_000_000,
            on_second: Callable[[Report], None] | None = None) -> Report:
        """Read the feed and the order session until the feed ends (and every order is
        answered, or 1 s more), ``idle_ns`` of silence, or ``max_ns``; the report."""
        begin = last_rx = time.time_ns()
        next_tick, last_hb, ended = begin + 1_000_000_000, begin, 0
        socks = [self.sock, self.orders]
        while True:
            now = time.time_ns()
            wake = min(last_rx + self.idle_ns, begin + max_ns, next_tick)
            ready, _, _ = select.select(socks, [], [], max(0, min(wake - now, 10**8)) / 1e9)
            if self.orders in ready:
                self.read_answers()
            if self.sock in ready:
                data, anc, flags, _ = self.sock.recvmsg(MAX_DATAGRAM, 64)
                last_rx = time.time_ns()
                self.first_ns = self.first_ns or last_rx
                if not flags & socket.MSG_TRUNC:
                    self.on_packet(data, kernel_time(anc, last_rx), last_rx)
            now = time.time_ns()
            self.check_gap(now)
            if now - max(last_hb, self.last_sent_ns) >= 1_000_000_000:  # SoupBinTCP R
                with contextlib.suppress(OSError):  # a dead session shows in recv
                    self.orders.send(sb.frame(sb.CLIENT_HEARTBEAT))
                last_hb = now
            if self.stop == "running":
                if self.done():
                    ended = ended or now
                    if not self.strategy.stats["open"] or now - ended > 1_000_000_000:
                        self.stop = "end"
                elif now - last_rx >= self.idle_ns:
                    self.stop = "idle"
                elif now - begin >= max_ns:
                    self.stop = "deadline"
            if now >= next_tick or self.stop != "running":
                if on_second is not None:
                    on_second(self.trade_report())
                self.second = (Histogram(), Histogram())  # the next second starts afresh
                next_tick += 1_000_000_000
            if self.stop != "running":
                self.stop_ns = now
                return self.trade_report()
    # --8<-- [end:loop]
