"""Benchmarks of chapter 15, group "tick_to_trade": feed -> book -> strategy -> OUCH.

The day is a generated one with the intraday profile (``gen market --profile intraday``:
a busy open, bursts within seconds), cut to the first seconds of its open with the header
before it (``twinmatch.trade_cli.market_open``). What each number includes:

* ``budget`` (both twins; speed 1 and 10): the exchange simulator (``twinmatch feed send``)
  in its own process replays the open paced by its timestamps; the trader (a twin, in this
  process) reads it from 127.0.0.1 and sends its orders to the optimized order-entry
  server (chapter 12, in this process on its own C++ thread, for both twins: the exchange
  is not what is compared). Per order, the stage stamps of contract/trade.py and the
  budget of twinmatch/trade_cli.py (p50/p99/p99.9 per span; one stamp's measured cost
  subtracted from each user-space span). Targets: ``tick-to-trade-p50`` (optimized,
  speed 1: kernel receive -> send returned) and ``tick-to-trade-user-p50`` (the read
  returned -> the order encoded).
* ``paired`` (target ``tick-to-trade-vs-naive``): the same open at speed 10, the twins
  interleaved (tests/bench/paired.py); a side's "time" is its own tick-to-trade p50, so
  the ratio is naive p50 / optimized p50.
* ``paths`` (the optimized trader; each receive path; speed 1, 10 and flat out): speeds 1
  and 10 from the simulator process (with its re-request server), flat out from the native
  sender (pre-built packets, sendmmsg, no re-request server: what the socket drops is
  lost). Drops (messages the receiver's socket lost), recovered, lost, socket-to-book
  p50/p99/p99.9 over every datagram (kernel receive -> its messages in the book and seen
  by the strategy), CPU per message (the trader's thread CPU time over the run / messages).
  The strategy trades as in ``budget``.
* ``paired`` receive paths (``trade-recvmmsg64-vs-recvmsg``, ``trade-io-uring-vs-recvmsg``):
  a backlog the native sender left in the socket (untimed), drained by the trader with its
  strategy idle (no signal can fire): first datagram to the end of session read.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from contract.trade import ORDER_BYTES, StrategyConfig
from tests.bench.conftest import SMALL
from tests.bench.paired import Side, paired
from tests.bench.test_bench_live_feed import free_port, messages_in, write
from twinmatch.feed_cli import native_sender
from twinmatch.trade_cli import (
    budget,
    day_stocks,
    make_trader,
    market_open,
    offline_orders,
    start_server,
)

ROOT = Path(__file__).resolve().parents[2]
DAY = (1_000_000, 100) if SMALL else (6_000_000, 300)  # messages, symbols (intraday)
OPEN_SECONDS = 1.0 if SMALL else 10.0
SPEEDS = (10.0,) if SMALL else (1.0, 10.0)  # the smoke run: does it still run?
SESSION = "TWINMATCH1"
# The bench's strategy: quicker to fire than the default, so the open gives hundreds of
# orders; the kill switch's open-order cap high enough not to trip on loopback.
CONFIG = StrategyConfig(imbalance=2, cooldown_ns=20_000_000, max_per_second=1000,
                        max_open=10_000)
IDLE = StrategyConfig(imbalance=1 << 20)  # no signal can fire: receiving alone
PATHS = [("recvmmsg", 64), ("recvmmsg", 1), ("recvmsg", 1), ("io_uring", 64)]


@cache
def open_window(seconds: float = OPEN_SECONDS) -> bytes:
    from twinmatch.gen import market_day_bytes

    raw, _ = market_day_bytes(DAY[0], DAY[1], 15, profile="intraday")
    return market_open(raw, seconds)


@cache
def expected_orders() -> int:
    """How many orders the bench's strategy sends on the open window (naive, offline)."""
    return len(offline_orders(open_window(), CONFIG)) // ORDER_BYTES


def have_io_uring() -> bool:
    from optimized.trade import HAVE_IO_URING

    return HAVE_IO_URING


def sender(path: Path, port: int, request_port: int, speed: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "twinmatch", "feed", "send", str(path), "--port", str(port),
         "--request-port", str(request_port), "--speed", str(speed), "--seed", "13",
         "--heartbeat-ms", "100", "--linger-ms", "500"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def trade_run(impl: str, speed: float, config: StrategyConfig = CONFIG,
              seconds: float = OPEN_SECONDS, **kw: Any) -> dict[str, Any]:
    """One run: server, trader, then the feed (a sender process, or the native sender
    flat out at speed 0). The trader's report, stage rows, CPU seconds and times."""
    from naive.trade import connect_orders

    data = open_window(seconds)
    server = start_server("optimized", day_stocks(data))
    orders = connect_orders(server.port)
    try:
        request_port = free_port() if speed > 0 else None
        trader = make_trader(impl, 0, orders, config, request_port, session=SESSION,
                             idle_ns=3_000_000_000, **kw)
        proc, thread, stopped = None, None, threading.Event()
        if speed > 0:
            path = write(f"trade-{impl}-{speed}", data)
            proc = sender(path, trader.port, request_port or 0, speed)
        else:  # flat out from a thread that holds no GIL while it sends
            tx = native_sender(data, trader.port)

            def send() -> None:
                time.sleep(0.05)  # the trader is in its loop by now
                tx.send(0, None, 64)
                for _ in range(30_000):  # end of session every 2 ms until the trader stops
                    tx.control(messages_in(data) + 1, end=True)
                    if stopped.wait(0.002):
                        return

            thread = threading.Thread(target=send, daemon=True)
            thread.start()
        try:
            cpu0 = time.thread_time()
            rep = trader.run(120_000_000_000)
            cpu = time.thread_time() - cpu0
            if proc is not None:
                proc.communicate(timeout=60)
        finally:
            stopped.set()
            if thread is not None:
                thread.join(10)
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
        out = {"report": rep, "rows": trader.stage_rows(), "cpu_s": cpu,
               "stamp_cost_ns": trader.stamp_cost_ns,
               "seconds": (trader.stop_ns - trader.first_ns) / 1e9}
        trader.close()
        return out
    finally:
        orders.close()
        server.stop()


def summary(run: dict[str, Any]) -> dict[str, Any]:
    rep = run["report"]
    t = rep["trade"]
    return {"messages": rep["messages"], "gap_messages": rep["gap_messages"],
            "recovered": rep["recovered"], "lost": rep["lost"],
            "orders": t["sent"], "accepted": t["accepted"], "kill_switch": t["kill_switch"],
            "stamp_cost_ns": run["stamp_cost_ns"], "seconds": run["seconds"],
            "cpu_ns_per_message": run["cpu_s"] * 1e9 / max(1, rep["messages"]),
            "budget": budget(run["rows"], run["stamp_cost_ns"])}


def span(table: list[dict[str, Any]], prefix: str) -> dict[str, Any]:
    return next(r for r in table if r["span"].startswith(prefix))


BUDGETS = [("naive", False), ("optimized", False), ("optimized", True)]


@pytest.mark.benchmark(group="tick_to_trade")
@pytest.mark.parametrize("speed", SPEEDS)
@pytest.mark.parametrize(("impl", "spin"), BUDGETS,
                         ids=["naive", "optimized", "optimized-spin"])
def test_budget(benchmark: Any, impl: str, spin: bool, speed: float) -> None:
    results: list[dict[str, Any]] = []
    kw: dict[str, Any] = {"spin": True} if spin else {}

    want = expected_orders()

    def run() -> None:
        r = trade_run(impl, speed, **kw)
        assert r["report"]["stop"] == "end" and r["report"]["lost"] == 0, r["report"]["stop"]
        # the naive twin's answer, worked out without sockets: the same orders were sent
        assert r["report"]["trade"]["sent"] == want, (r["report"]["trade"]["sent"], want)
        results.append(summary(r))

    benchmark.pedantic(run, rounds=1, iterations=1)
    res = results[-1]
    benchmark.extra_info.update({
        "ops": res["messages"], "speed": speed, "trade": res, "spin": spin,
        "includes": "sender process -> loopback UDP -> trader (feed, book, strategy, OUCH "
                    "encode, send) -> optimized server; stage stamps per order"})
    if impl == "optimized" and not spin and speed == 1.0:
        t2t = span(res["budget"], "tick to trade")
        user = span(res["budget"], "user space")
        benchmark.extra_info["measure"] = {
            "key": "tick-to-trade-p50", "value": t2t["p50"] / 1e3,
            "detail": f"{t2t['n']} orders; p99 {t2t['p99'] / 1e3:.1f} us"}
        benchmark.extra_info["measure_user"] = {
            "key": "tick-to-trade-user-p50", "value": user["p50"] / 1e3,
            "detail": f"{user['n']} orders; p99 {user['p99'] / 1e3:.2f} us"}
    if impl == "naive" and speed == 1.0:
        user = span(res["budget"], "user space")
        benchmark.extra_info["measure"] = {
            "key": "tick-to-trade-naive-user-p50", "value": user["p50"] / 1e3,
            "detail": f"{user['n']} orders; the naive twin's read -> order encoded"}


PAIRED_SECONDS = 1.0 if SMALL else 3.0


def p50_side(impl: str) -> Side:
    def run(_: Any) -> float:
        r = trade_run(impl, 1.0, seconds=PAIRED_SECONDS)
        t2t = span(budget(r["rows"], r["stamp_cost_ns"]), "tick to trade")
        assert t2t["n"] > 0
        return float(t2t["p50"]) / 1e9

    return Side(impl, run, ops=1)


@pytest.mark.benchmark(group="tick_to_trade")
def test_paired_vs_naive(benchmark: Any) -> None:
    paired(benchmark, "tick-to-trade-vs-naive", p50_side("optimized"), p50_side("naive"),
           pairs=11, warmup=0,
           includes="a side's time is its tick-to-trade p50 (kernel receive -> send "
                    "returned) over one replay of the open at real time (speed 1: neither "
                    "twin falls behind the feed): the ratio is naive p50 / optimized p50",
           workload=f"{PAIRED_SECONDS:g} s of a generated intraday open ({DAY[0]:,} "
                    f"messages, {DAY[1]} symbols)")


@pytest.mark.benchmark(group="tick_to_trade")
@pytest.mark.parametrize("speed", (0.0,) if SMALL else (1.0, 10.0, 0.0))
@pytest.mark.parametrize(("path", "batch"), PATHS, ids=[f"{p}-{b}" for p, b in PATHS])
def test_paths(benchmark: Any, path: str, batch: int, speed: float) -> None:
    if path == "io_uring" and not have_io_uring():
        pytest.skip("this build has no io_uring path (liburing missing when it was built)")
    results: list[dict[str, Any]] = []

    def run() -> None:
        r = trade_run("optimized", speed, path=path, batch=batch)
        rep = r["report"]
        assert rep["stop"] == "end", rep["stop"]
        if rep["lost"] == 0:  # flat out, what the socket dropped is lost (no re-request)
            assert rep["trade"]["sent"] == expected_orders()
        res = summary(r)
        res["socket_to_book_ns"] = rep["socket_to_book"]
        res["messages_per_s"] = rep["messages"] / max(r["seconds"], 1e-9)
        results.append(res)

    benchmark.pedantic(run, rounds=1, iterations=1)
    if speed == 1.0 and batch == 64:  # socket-to-book at real time, for the targets
        s2b = results[-1]["socket_to_book_ns"]
        benchmark.extra_info["measure"] = {
            "key": f"socket-to-book-p50-{path.replace('_', '-')}", "value": s2b["p50"] / 1e3,
            "detail": f"{s2b['count']:,} datagrams; p99 {s2b['p99'] / 1e3:.1f} us"}
    benchmark.extra_info.update({
        "ops": results[-1]["messages"], "speed": speed, "path": path, "batch": batch,
        "paths": results[-1],
        "includes": ("native sender flat out (no re-request server)" if speed == 0 else
                     "sender process paced by the feed's timestamps, re-requests answered")
                    + " -> the optimized trader by this receive path; socket-to-book per "
                      "datagram; CPU: the trader thread's"})


def drain_side(name: str, path: str, batch: int) -> Side:
    """A backlog left in a fresh trader's socket (untimed), then drained."""
    from naive.trade import connect_orders

    data = open_window()
    n = messages_in(data)

    def setup() -> Any:
        server = start_server("optimized", day_stocks(data))
        orders = connect_orders(server.port)
        trader = make_trader("optimized", 0, orders, IDLE, None, session=SESSION,
                             idle_ns=2_000_000_000, path=path, batch=batch)
        tx = native_sender(data, trader.port)
        assert tx.send(0, None, 64) == tx.packets
        tx.control(n + 1, end=True)
        return trader, orders, server

    def run(state: Any) -> float:
        trader, orders, server = state
        rep = trader.run(60_000_000_000)
        orders.close()
        server.stop()
        assert rep["stop"] == "end" and rep["lost"] == 0, (rep["stop"], rep["lost"])
        return float((trader.stop_ns - trader.first_ns) / 1e9)

    return Side(name, run, ops=n, setup=setup)


@pytest.mark.benchmark(group="tick_to_trade")
@pytest.mark.parametrize(("key", "fast"), [
    ("trade-recvmmsg64-vs-recvmsg", ("recvmmsg", 64)),
    ("trade-io-uring-vs-recvmsg", ("io_uring", 64))])
def test_paired_paths(benchmark: Any, key: str, fast: tuple[str, int]) -> None:
    if fast[0] == "io_uring" and not have_io_uring():
        pytest.skip("this build has no io_uring path (liburing missing when it was built)")
    data = open_window()
    paired(benchmark, key, drain_side("-".join(map(str, fast)), *fast),
           drain_side("recvmsg", "recvmsg", 1), pairs=11, warmup=1,
           includes="a backlog the native sender left in the trader's socket, drained with "
                    "the strategy idle: first datagram to the end of session read",
           workload=f"{messages_in(data):,} messages: {OPEN_SECONDS:g} s of a generated "
                    "intraday open")
