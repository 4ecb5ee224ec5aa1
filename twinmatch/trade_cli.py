"""`twinmatch trade`: tick to trade (chapter 15), the harness around both twins.

Two ways to run it:

* ``twinmatch trade --day FILE``: self-contained. An order-entry server (chapter 12) and
  an exchange simulator replaying FILE over MoldUDP64 (chapter 13) start in this process,
  on 127.0.0.1; the trader (``--impl``) reads the feed, keeps the books, and sends its
  orders to the server. At the end: the counts and the latency budget, stage by stage.
* ``twinmatch trade --order-port P [--port F]``: the trader alone, against a running
  ``twinmatch serve`` and ``twinmatch feed send``.

The budget (``budget()``): from every order's stage stamps (contract.trade.STAGES), the
time between consecutive stages and end to end, p50/p99/p99.9, with the cost of one
stamp subtracted from each user-space stage (chapter 7's rule).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import struct
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from contract.trade import BOOK_TYPES, STAGES, StrategyConfig

if TYPE_CHECKING:  # `twinmatch --help` must not import numpy (tests/test_packaging.py)
    import numpy as np

# (label, from stage, to stage, a user-space stage: the stamp cost is subtracted)
SPANS: Final = (
    ("kernel -> user (socket wait + read)", "kernel", "user", False),
    ("user -> decoded", "user", "decoded", True),
    ("decoded -> book applied", "decoded", "applied", True),
    ("applied -> decided + encoded", "applied", "encoded", True),
    ("encoded -> send returned", "encoded", "sent", True),
    ("send -> server stamped (Accepted)", "sent", "server", False),
    ("server stamped -> ack read", "server", "acked", False),
    ("user space: read -> order encoded", "user", "encoded", True),
    ("tick to trade: kernel rx -> send returned", "kernel", "sent", False),
    ("order round trip: send -> ack read", "sent", "acked", False),
)
PERCENTILES: Final = (50.0, 99.0, 99.9)


def budget(rows: np.ndarray, stamp_cost_ns: int) -> list[dict[str, Any]]:
    """Per span: n, p50, p99, p99.9 (ns) over the orders that have both stamps."""
    import numpy as np

    index = {name: i for i, name in enumerate(STAGES)}
    out: list[dict[str, Any]] = []
    for label, a, b, user in SPANS:
        x, y = rows[:, index[a]], rows[:, index[b]]
        ok = (x > 0) & (y > 0)
        d = (y[ok] - x[ok]).astype(np.int64)
        if user:
            d = np.maximum(d - stamp_cost_ns, 0)
        row: dict[str, Any] = {"span": label, "n": int(d.size)}
        for p in PERCENTILES:
            row[f"p{p:g}"] = int(np.percentile(d, p, method="higher")) if d.size else None
        out.append(row)
    return out


# A percentile is printed only with this many samples beyond it: over 64 orders a
# "p99.9" would be the largest one, a single sample rather than a tail.
TAIL_SAMPLES: Final = 10


def budget_text(table: list[dict[str, Any]]) -> str:
    lines = [f"{'span':44} {'n':>6} {'p50 us':>9} {'p99 us':>9} {'p99.9 us':>9}"]
    for r in table:
        cells = ["-" if r[f"p{p:g}"] is None or r["n"] * (1 - p / 100) < TAIL_SAMPLES
                 else f"{r[f'p{p:g}'] / 1e3:9.2f}" for p in PERCENTILES]
        lines.append(f"{r['span']:44} {r['n']:>6} " + " ".join(f"{c:>9}" for c in cells))
    return "\n".join(lines)


def day_stocks(raw: bytes) -> list[str]:
    """The stock of every R (Stock Directory) message of a framed ITCH day."""
    stocks, off = [], 0
    while off + 2 <= len(raw):
        (length,) = struct.unpack_from(">H", raw, off)
        if length >= 19 and raw[off + 2] == ord("R"):
            stocks.append(raw[off + 13 : off + 21].decode("ascii", "replace").rstrip())
        off += 2 + length
    return stocks


OPEN_NS: Final = 34_200 * 1_000_000_000   # 09:30, the S 'Q' of a generated day


def market_open(raw: bytes, seconds: float) -> bytes:
    """The first ``seconds`` of a framed ITCH day's market hours, with its header: every
    message before 09:30 (S, R, H: the directory the books need) re-stamped to the
    nanoseconds just before 09:30, so that a sender paced by the timestamps starts the
    open at once instead of waiting out the night. The burst the chapter measures."""
    offsets, off = [], 0
    while off + 2 <= len(raw):
        offsets.append(off)
        off += 2 + struct.unpack_from(">H", raw, off)[0]
    if off != len(raw):
        raise ValueError(f"cut message at byte {offsets[-1] if offsets else 0}")

    def stamp(o: int) -> int:
        return int.from_bytes(raw[o + 7 : o + 13], "big")

    header = [o for o in offsets if stamp(o) < OPEN_NS]
    end = OPEN_NS + int(seconds * 1e9)
    body = [o for o in offsets if OPEN_NS <= stamp(o) < end]
    out = bytearray()
    for k, o in enumerate(header):
        msg = bytearray(raw[o : o + 2 + struct.unpack_from(">H", raw, o)[0]])
        msg[7:13] = (OPEN_NS - len(header) + k).to_bytes(6, "big")
        out += msg
    for o in body:
        out += raw[o : o + 2 + struct.unpack_from(">H", raw, o)[0]]
    return bytes(out)


def offline_orders(raw: bytes, config: StrategyConfig | None = None) -> bytes:
    """The orders the strategy sends for a framed ITCH day, worked out without a socket:
    the naive market and strategy, message by message, no order ever left open. What a
    live run must send when nothing stops it on time (the kill switch's open-order cap)."""
    from naive.itch import decode
    from naive.market import Market
    from naive.trade import Strategy

    events, _ = decode(raw)
    market, strategy = Market("book"), Strategy(config)
    names: dict[int, bytes] = {}
    out = bytearray()
    for i in range(len(events)):
        kind, locate = int(events["type"][i]), int(events["locate"][i])
        if kind == ord("R"):
            names[locate] = bytes(events["stock"][i]).ljust(8)
        market.run(events[i : i + 1])
        if kind in BOOK_TYPES:
            bid, ask = market.top(locate)
            out += strategy.decide(locate, names.get(locate, b" " * 8),
                                   int(events["timestamp"][i]), bid, ask, 0)
    return bytes(out)


def make_trader(impl: str, port: int, orders: socket.socket, config: StrategyConfig,
                request_port: int | None, **kw: Any) -> Any:
    """A trader twin on a fresh UDP socket bound to 127.0.0.1:port."""
    if impl == "naive":
        from naive import feed as naive_feed
        from naive.trade import Trader

        sock = naive_feed.open_socket(port)
        try:
            return Trader(sock, orders, config, None, request_port, **kw)
        except BaseException:
            sock.close()
            raise
    from optimized.trade import Trader as OptimizedTrader

    return OptimizedTrader(port, orders, config, request_port, **kw)


class StopTrading(Exception):
    """SIGINT or SIGTERM: the run ends at the next per-second report."""


@dataclass
class TradeRun:
    report: dict[str, Any]
    rows: np.ndarray
    sent_log: bytes
    stamp_cost_ns: int
    books_csv: str = ""
    exchange: dict[str, Any] = field(default_factory=dict)
    server: dict[str, int] = field(default_factory=dict)
    seconds: list[dict[str, Any]] = field(default_factory=list)


def start_server(impl: str, stocks: list[str]) -> Any:
    """An order-entry server on 127.0.0.1 (any free port) that knows the day's stocks."""
    from contract.soupbin import EntryConfig

    cfg = EntryConfig(symbols=tuple(stocks) or ("AAPL",), clock="wall")
    if impl == "naive":
        from naive.entry import Server
        server: Any = Server(cfg, 0)
    else:
        from optimized.entry import Server as OptimizedServer
        server = OptimizedServer(cfg, 0)
    server.start()
    return server


def run_day(raw: bytes, impl: str = "optimized", speed: float = 0.0,
            config: StrategyConfig | None = None, server_impl: str = "optimized",
            max_seconds: float = 60.0, on_second: Any = None, stop: threading.Event | None = None,
            **kw: Any) -> TradeRun:
    """The self-contained run: server, exchange and trader, all on 127.0.0.1."""
    from naive.trade import connect_orders
    from twinmatch.feed_cli import Exchange, start_exchange

    config = config or StrategyConfig()
    server = start_server(server_impl, day_stocks(raw))
    seconds: list[dict[str, Any]] = []
    try:
        orders = connect_orders(server.port)
        try:
            trader = make_trader(impl, 0, orders, config, None, **kw)
            # linger: the re-request server outlives the trader's slowest retry
            exchange = Exchange(raw, trader.port, speed=speed, linger_ns=2_000_000_000)
            try:
                trader.set_request_port(exchange.request_port)
                thread, ex_stop, ex_result = start_exchange(exchange)

                def tick(rep: dict[str, Any]) -> None:
                    seconds.append(rep)
                    if on_second is not None:
                        on_second(rep)
                    if stop is not None and stop.is_set():
                        raise StopTrading

                try:
                    report = trader.run(int(max_seconds * 1e9), tick)
                except StopTrading:
                    report = trader.trade_report()
                    report["stop"] = "signal"
                ex_stop.set()
                thread.join(timeout=5.0)  # a paced sender wakes within its heartbeat
                books = trader.books_csv() if impl != "naive" else trader.market.books_csv()
                return TradeRun(report, trader.stage_rows(), bytes(trader.sent_log),
                                trader.stamp_cost_ns, books,
                                ex_result[0] if ex_result else {}, {}, seconds)
            finally:
                exchange.close()
                trader.close()
        finally:
            orders.close()
    finally:
        server.stop()


def trade_cmd(args: argparse.Namespace) -> int:
    """Chapter 15: feed -> book -> strategy -> OUCH, with a per-stage latency budget."""
    from naive.trade import connect_orders

    try:
        config = StrategyConfig(args.imbalance, args.qty, int(args.cooldown_ms * 1e6),
                                args.max_per_second, args.max_open, args.max_orders).check()
    except ValueError as exc:
        print(f"twinmatch trade: {exc}", file=sys.stderr)
        return 2
    if args.spin and args.impl != "optimized":
        print("twinmatch trade: --spin is the optimized trader's", file=sys.stderr)
        return 2
    extra: dict[str, Any] = {"idle_ns": int(args.idle_ms * 1e6)}
    if args.impl == "optimized":
        extra.update(batch=args.batch, spin=args.spin, path=args.path)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    def second(rep: dict[str, Any]) -> None:
        if not args.json:
            t = rep["trade"]
            print(f"  messages {rep['messages']:>10,}  orders {t['sent']:>6,}  "
                  f"acks {t['accepted']:>6,}  open {t['open']:>3}  lost {rep['lost']}",
                  file=sys.stderr)

    if args.day is not None:
        try:
            raw = args.day.read_bytes()
        except OSError as exc:
            print(f"twinmatch trade: {exc}", file=sys.stderr)
            return 1
        if args.open_seconds:
            raw = market_open(raw, args.open_seconds)
        run = run_day(raw, args.impl, args.speed, config, args.server_impl,
                      args.max_seconds, second, stop, **extra)
        report, rows, cost = run.report, run.rows, run.stamp_cost_ns
    else:
        try:
            orders = connect_orders(args.order_port)
        except (OSError, ConnectionError) as exc:
            print(f"twinmatch trade: order session: {exc}", file=sys.stderr)
            return 1
        try:
            trader = make_trader(args.impl, args.port, orders, config,
                                 args.request_port or None, **extra)

            def tick(rep: dict[str, Any]) -> None:
                second(rep)
                if stop.is_set():
                    raise StopTrading

            try:
                report = trader.run(int(args.max_seconds * 1e9), tick)
            except StopTrading:
                report = trader.trade_report()
                report["stop"] = "signal"
            rows, cost = trader.stage_rows(), trader.stamp_cost_ns
            trader.close()
        finally:
            orders.close()
    import numpy as np

    table = budget(rows, cost)
    if args.stages_out:
        from twinmatch.atomic import write_file

        write_file(args.stages_out, rows.astype(np.int64).tobytes())
    if args.json:
        print(json.dumps({"report": report, "budget": table, "stamp_cost_ns": cost}))
    else:
        t = report["trade"]
        print(f"stop: {report['stop']}; messages {report['messages']:,}; orders sent "
              f"{t['sent']:,} (accepted {t['accepted']:,}, canceled {t['canceled']:,}, "
              f"rejected {t['rejected']:,}); stopped by checks: cooldown {t['cooldown']:,}, "
              f"throttled {t['throttled']:,}, capped {t['capped']:,}, kill switch "
              f"{t['kill_switch']}, killed {t['killed']:,}")
        print(f"stamp cost subtracted: {cost} ns per user-space stage")
        print(budget_text(table))
    return 0


def add_trade_parser(sub: Any) -> None:
    t = sub.add_parser("trade", help="chapter 15: tick to trade (feed -> book -> OUCH)")
    t.add_argument("--impl", choices=["naive", "optimized"], default="optimized")
    t.add_argument("--day", type=Path, help="framed ITCH day: run server and feed in-process")
    t.add_argument("--speed", type=float, default=0.0, help="with --day: 1 real time, 0 flat out")
    t.add_argument("--open-seconds", type=float, default=0.0,
                   help="with --day: only the first N seconds after 09:30 (and the header)")
    t.add_argument("--server-impl", choices=["naive", "optimized"], default="optimized")
    t.add_argument("--order-port", type=int, default=0, help="without --day: the server's port")
    t.add_argument("--port", type=int, default=0, help="without --day: the feed's UDP port")
    t.add_argument("--request-port", type=int, default=0, help="re-request server (0: none)")
    t.add_argument("--imbalance", type=int, default=3)
    t.add_argument("--qty", type=int, default=100)
    t.add_argument("--cooldown-ms", type=float, default=1000.0)
    t.add_argument("--max-per-second", type=int, default=50)
    t.add_argument("--max-open", type=int, default=64)
    t.add_argument("--max-orders", type=int, default=100_000)
    t.add_argument("--batch", type=int, default=64, help="optimized: datagrams per recvmmsg")
    t.add_argument("--path", choices=["recvmmsg", "recvmsg", "io_uring"], default="recvmmsg",
                   help="optimized: how the feed is read (chapter 15's receive paths)")
    t.add_argument("--spin", action="store_true", help="optimized: busy-poll (burns a core)")
    t.add_argument("--idle-ms", type=float, default=5000.0)
    t.add_argument("--max-seconds", type=float, default=3600.0)
    t.add_argument("--stages-out", type=Path, help="write the stage stamps (int64, 9 a row)")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=trade_cmd)
