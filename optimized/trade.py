"""Tick to trade in C++ (``native/trade.hpp``): the same API as ``naive/trade.py``.

The whole loop (recvmmsg, the MoldUDP64 rules, the book, the strategy, the encoder, the
send, the answers) runs in C++ on one thread with the GIL released; Python calls it once
per second of the run for the per-second report. ``spin=True`` busy-polls both sockets
instead of sleeping in ``poll(2)`` (it burns a core: on a 2-core machine shared with the
feed's sender and the server, it takes a core from them). Stage stamps after the read are
TSC-based (``clock`` says which clock it used; ``stamp_cost_ns`` what one stamp costs).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from contract.feed import MAX_HOLD, MAX_JUMP, MAX_PENDING, check_host, session_name
from contract.feed import STAT_KEYS as FEED_KEYS
from contract.trade import STAT_KEYS, StrategyConfig
from optimized import _native

__all__ = ["Strategy", "Trader"]

Report = dict[str, Any]
STOPS = ("running", "end", "idle", "deadline", "orders closed")
# The receive paths (native/trade.hpp's RxPath): recvmmsg batches (batch 1: one datagram
# per call), recvmsg one per call, io_uring (absent from a build without liburing).
PATHS = ("recvmmsg", "recvmsg", "io_uring")
HAVE_IO_URING: bool = bool(_native.TRADE_IO_URING)


class Strategy:
    """contract/trade.py's rule and risk checks (the C++ the trader runs)."""

    def __init__(self, config: StrategyConfig | None = None) -> None:
        self.cfg = (config or StrategyConfig()).check()
        c = self.cfg
        self._s = _native.TradeStrategy(c.imbalance, c.qty, c.cooldown_ns, c.max_per_second,
                                        c.max_open, c.max_orders)

    @property
    def stats(self) -> dict[str, int]:
        return dict(zip(STAT_KEYS, (int(v) for v in self._s.stats()), strict=True))

    @property
    def tripped(self) -> bool:
        return bool(self._s.tripped)

    def decide(self, locate: int, stock: bytes, ts: int, bid: tuple[int, int] | None,
               ask: tuple[int, int] | None, open_orders: int) -> bytes:
        """After one book message of ``locate``: the framed order to send, or b''."""
        bp, bq = bid if bid is not None else (0, 0)
        ap, aq = ask if ask is not None else (0, 0)
        return bytes(self._s.decide(locate, stock, ts, bp, bq, ap, aq, open_orders))


class Trader:
    """The feed on a UDP socket bound to 127.0.0.1:port, orders on ``orders`` (a
    logged-in SoupBinTCP socket: ``naive.trade.connect_orders``; it stays the caller's)."""

    def __init__(self, port: int, orders: socket.socket, config: StrategyConfig | None = None,
                 request_port: int | None = None, start: int = 1,
                 timeout_ns: int = 50_000_000, retries: int = 20,
                 idle_ns: int = 2_000_000_000, batch: int = 64, rcvbuf: int = 1 << 22,
                 spin: bool = False, session: str | bytes | None = None,
                 hold: int = MAX_PENDING, max_jump: int = MAX_JUMP,
                 path: str = "recvmmsg") -> None:
        if path not in PATHS:
            raise ValueError(f"path must be one of {', '.join(PATHS)}, not {path!r}")
        if not 0 <= port <= 0xFFFF:
            raise ValueError(f"port must be 0..65535, got {port}")
        if not 1 <= hold <= MAX_HOLD:
            raise ValueError(f"hold must be 1..{MAX_HOLD} packets, got {hold}")
        c = (config or StrategyConfig()).check()
        name = b"" if session is None else session_name(session)
        self.orders = orders
        self._t = _native.Trader(port, -1, start, timeout_ns, retries, batch, rcvbuf, spin,
                                 name, hold, max_jump, orders.fileno(), c.imbalance, c.qty,
                                 c.cooldown_ns, c.max_per_second, c.max_open, c.max_orders,
                                 PATHS.index(path))
        self.set_request_port(request_port)
        self.idle_ns = idle_ns
        self.stop = "running"

    @property
    def port(self) -> int:
        return int(self._t.port)

    def set_request_port(self, port: int | None) -> None:
        """Where requests go: 127.0.0.1:port (None: no re-request server)."""
        if port is not None:
            check_host("127.0.0.1")
            if not 0 < port <= 0xFFFF:
                raise ValueError(f"request port must be 1..65535, got {port}")
        self._t.request_port = -1 if port is None else port

    @property
    def stamp_cost_ns(self) -> int:
        return int(self._t.stamp_cost_ns)

    @property
    def first_ns(self) -> int:
        """CLOCK_REALTIME of the first datagram read (0: none yet)."""
        return int(self._t.first_ns)

    @property
    def stop_ns(self) -> int:
        """CLOCK_REALTIME of the stop (0: still running)."""
        return int(self._t.stop_ns)

    @property
    def clock(self) -> str:
        return str(self._t.clock)

    def close(self) -> None:
        """Nothing to do by hand: the feed socket closes with the trader (kept for the API)."""

    def stage_rows(self) -> np.ndarray:
        """One row per order sent: the STAGES stamps (0: not seen, e.g. no Accepted)."""
        return np.asarray(self._t.rows(), dtype=np.int64)

    @property
    def sent_log(self) -> bytes:
        return bytes(self._t.sent_log())

    def books_csv(self) -> str:
        return str(self._t.books_csv())

    def trade_report(self) -> Report:
        feed = dict(zip(FEED_KEYS, (int(v) for v in self._t.feed_stats()), strict=False))
        feed["bad_itch"] = int(self._t.bad_itch)
        missing = int(self._t.missing())
        feed["recovered"] = feed["gap_messages"] - feed["lost"] - missing
        out: Report = feed
        out["missing"] = missing
        out["stop"] = self.stop
        out["trade"] = dict(zip(STAT_KEYS, (int(v) for v in self._t.trade_stats()),
                                strict=True))
        count, p50, p99, p999 = (int(v) for v in self._t.socket_to_book())
        out["socket_to_book"] = {"count": count, "p50": p50, "p99": p99, "p99.9": p999}
        out["batches"] = int(self._t.batches)
        out["datagrams"] = int(self._t.datagrams)
        return out

    def run(self, max_ns: int = 60_000_000_000,
            on_second: Callable[[Report], None] | None = None) -> Report:
        """As naive/trade.py's run(): the loop in C++, one Python call per second."""
        begin = time.time_ns()
        while True:
            code = self._t.run_until(begin + (time.time_ns() - begin) // 10**9 * 10**9
                                     + 10**9, begin, self.idle_ns, max_ns)
            self.stop = STOPS[code]
            if on_second is not None:
                on_second(self.trade_report())
            if code != 0:
                return self.trade_report()
