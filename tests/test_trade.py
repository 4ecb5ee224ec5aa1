"""Tick to trade (chapter 15): both twins' strategy, risk checks, encoder and loop.

The strategy is tested alone (both twins, fed book states by hand); the loop end to end on
127.0.0.1 with the chapter 12 server and the chapter 13 exchange simulator: the same day
gives the same orders, byte for byte, in both twins. Every wait is bounded.
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from contract.trade import ORDER_BYTES, STAGES, StrategyConfig, enter_order
from twinmatch import gen
from twinmatch.trade_cli import budget, budget_text, run_day

TWINS = ["naive", "optimized"]
ROOT = Path(__file__).resolve().parent.parent
STOCK = b"ABC     "


def strategy(twin: str, **kw: Any) -> Any:
    return importlib.import_module(f"{twin}.trade").Strategy(StrategyConfig(**kw))


@pytest.mark.parametrize("twin", TWINS)
def test_signal_is_edge_triggered_and_takes_the_other_side(twin: str) -> None:
    s = strategy(twin, cooldown_ns=0)
    # balanced: nothing; bid 3x the ask: BUY at the ask, at most the ask's shares
    assert s.decide(1, STOCK, 10, (100, 300), (101, 300), 0) == b""
    order = s.decide(1, STOCK, 11, (100, 900), (101, 40), 0)
    assert order == enter_order(1, b"B", 40, STOCK, 101)
    assert len(order) == ORDER_BYTES
    # still BUY: no new order; back to none, then BUY again: a second order
    assert s.decide(1, STOCK, 12, (100, 950), (101, 40), 0) == b""
    assert s.decide(1, STOCK, 13, (100, 100), (101, 40), 0) == b""
    assert s.decide(1, STOCK, 14, (100, 500), (101, 100), 0) == enter_order(
        2, b"B", 100, STOCK, 101)
    # SELL at the bid; another symbol has its own state
    assert s.decide(2, STOCK, 15, (99, 10), (102, 30), 0) == enter_order(
        3, b"S", 10, STOCK, 99)
    st = s.stats
    assert (st["book_messages"], st["signals"], st["sent"]) == (6, 3, 3)


@pytest.mark.parametrize("twin", TWINS)
def test_no_signal_on_locked_crossed_or_one_sided_books(twin: str) -> None:
    s = strategy(twin, cooldown_ns=0)
    for bid, ask in (((101, 900), (101, 10)), ((102, 900), (101, 10)),
                     (None, (101, 10)), ((100, 900), None), (None, None)):
        assert s.decide(1, STOCK, 1, bid, ask, 0) == b""
    assert s.stats["signals"] == 0


def _flip(s: Any, locate: int, ts: int, open_orders: int = 0) -> bytes:
    """Reset the symbol's signal, then raise a BUY: one order wanted."""
    s.decide(locate, STOCK, ts, (100, 100), (101, 100), open_orders)
    order: bytes = s.decide(locate, STOCK, ts, (100, 900), (101, 100), open_orders)
    return order


@pytest.mark.parametrize("twin", TWINS)
def test_risk_checks_in_order(twin: str) -> None:
    # cooldown, by the feed's clock, per symbol
    s = strategy(twin, cooldown_ns=1000)
    assert _flip(s, 1, 5_000)
    assert not _flip(s, 1, 5_999) and s.stats["cooldown"] == 1
    assert _flip(s, 1, 6_000)
    assert _flip(s, 2, 6_001)
    # orders per second of the feed's clock
    s = strategy(twin, cooldown_ns=0, max_per_second=2)
    assert _flip(s, 1, 10**9) and _flip(s, 2, 10**9 + 1)
    assert not _flip(s, 3, 2 * 10**9 - 1) and s.stats["throttled"] == 1
    assert _flip(s, 3, 2 * 10**9)
    # orders per run
    s = strategy(twin, cooldown_ns=0, max_orders=1)
    assert _flip(s, 1, 1) and not _flip(s, 2, 2) and s.stats["capped"] == 1
    # the kill switch: open orders at the cap trip it; nothing is sent after
    s = strategy(twin, cooldown_ns=0, max_open=2)
    assert _flip(s, 1, 1, open_orders=1)
    assert not _flip(s, 2, 2, open_orders=2)
    assert s.tripped and s.stats["kill_switch"] == 1
    assert not _flip(s, 3, 3, open_orders=0) and s.stats["killed"] == 1
    assert s.stats["sent"] == 1


def test_strategies_agree_on_random_books() -> None:
    """The same stream of book states gives the same orders from both twins."""
    rng = np.random.default_rng(15)
    a, b = strategy("naive", cooldown_ns=30_000_000, max_per_second=7), \
        strategy("optimized", cooldown_ns=30_000_000, max_per_second=7)
    sent = 0
    for ts in range(0, 40_000, 7):
        locate = int(rng.integers(1, 6))
        bid = None if rng.random() < 0.1 else (int(rng.integers(90, 101)),
                                               int(rng.integers(1, 2000)))
        ask = None if rng.random() < 0.1 else (int(rng.integers(99, 111)),
                                               int(rng.integers(1, 2000)))
        stock = f"S{locate}".encode().ljust(8)
        out = a.decide(locate, stock, ts * 10**6, bid, ask, 0)
        assert out == b.decide(locate, stock, ts * 10**6, bid, ask, 0)
        sent += bool(out)
    st = a.stats
    assert sent > 100 and st == b.stats
    assert st["cooldown"] > 0 and st["throttled"] > 0


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="imbalance"):
        StrategyConfig(imbalance=0).check()
    with pytest.raises(ValueError, match="qty"):
        StrategyConfig(qty=1_000_000).check()


# ---- the loop, end to end on 127.0.0.1 ----------------------------------------------------

@pytest.fixture(scope="module")
def small_day() -> tuple[bytes, bytes]:
    return gen.market_day_bytes(30_000, 20, 15, profile="intraday")


@pytest.fixture(scope="module")
def runs(small_day: tuple[bytes, bytes]) -> dict[str, Any]:
    raw, _books = small_day
    cfg = StrategyConfig(cooldown_ns=100_000_000, max_open=10_000)
    # Recovery with room to spare (a loaded machine can starve the simulator's thread,
    # which answers the re-requests): every gap is recovered, none given up.
    return {twin: run_day(raw, twin, speed=0.0, config=cfg, max_seconds=60.0,
                          idle_ns=3_000_000_000, timeout_ns=100_000_000, retries=100)
            for twin in TWINS}


def test_same_day_same_orders_byte_for_byte(runs: dict[str, Any],
                                            small_day: tuple[bytes, bytes]) -> None:
    naive, opt = runs["naive"], runs["optimized"]
    for run in (naive, opt):
        assert run.report["stop"] == "end", run.report
        assert run.report["lost"] == 0 and run.report["missing"] == 0
        assert run.books_csv == small_day[1].decode()
    assert len(naive.sent_log) > 20 * ORDER_BYTES
    assert naive.sent_log == opt.sent_log
    # and the orders a socketless replay of the day works out (twinmatch.trade_cli)
    from twinmatch.trade_cli import offline_orders

    cfg = StrategyConfig(cooldown_ns=100_000_000, max_open=10_000)
    assert naive.sent_log == offline_orders(small_day[0], cfg)
    assert naive.report["trade"] == opt.report["trade"]
    t = opt.report["trade"]
    assert t["sent"] == t["accepted"] == t["canceled"] and t["open"] == 0


def test_stage_stamps_are_ordered(runs: dict[str, Any]) -> None:
    for run in runs.values():
        rows = run.rows
        assert rows.shape == (run.report["trade"]["sent"], len(STAGES))
        sent = STAGES.index("sent")
        assert bool(np.all(rows[:, : sent + 1] > 0))
        assert bool(np.all(np.diff(rows[:, 1 : sent + 1], axis=1) >= 0)), "user .. sent"
        acked = rows[:, STAGES.index("acked")]
        assert bool(np.all(acked >= rows[:, sent]))
        table = budget(rows, run.stamp_cost_ns)
        assert table[-2]["n"] == len(rows) and table[-2]["p50"] > 0
        assert "tick to trade" in budget_text(table)


def test_cli_trade_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    """A paced run (real time) stopped by SIGTERM: exit 0 within the per-second turn,
    the report says why it stopped."""
    gen.write_market_day(tmp_path, 20_000, 10, 3, profile="intraday")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "twinmatch", "trade", "--day", str(tmp_path / "day.itch"),
         "--speed", "1", "--open-seconds", "60", "--max-seconds", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        time.sleep(2.0)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    assert proc.returncode == 0, err
    assert "stop: signal" in out and "tick to trade" in out


def test_market_open_window(small_day: tuple[bytes, bytes]) -> None:
    """The open's window keeps the header (re-stamped just before 09:30) and the first
    seconds of the session, timestamps still strictly increasing."""
    from naive.itch import decode
    from twinmatch.trade_cli import OPEN_NS, market_open

    raw = small_day[0]
    cut = market_open(raw, 30.0)
    events, counts = decode(cut)
    ts = events["timestamp"].astype(np.int64)
    assert bool(np.all(np.diff(ts) > 0))
    assert counts["R"] == 20 and ts[-1] < OPEN_NS + 30 * 10**9
    full, _ = decode(raw)
    full_ts = full["timestamp"].astype(np.int64)
    in_window = np.count_nonzero((full_ts >= OPEN_NS) & (full_ts < OPEN_NS + 30 * 10**9))
    assert len(events) == in_window + np.count_nonzero(full_ts < OPEN_NS)


@pytest.mark.parametrize("path", ["recvmsg", "io_uring"])
def test_every_receive_path_sends_the_same_orders(path: str, runs: dict[str, Any],
                                                  small_day: tuple[bytes, bytes]) -> None:
    """The receive path changes how datagrams are read, never what is decided."""
    from optimized.trade import HAVE_IO_URING

    if path == "io_uring" and not HAVE_IO_URING:
        pytest.skip("this build has no io_uring path (liburing missing when it was built)")
    cfg = StrategyConfig(cooldown_ns=100_000_000, max_open=10_000)
    run = run_day(small_day[0], "optimized", speed=0.0, config=cfg, max_seconds=60.0,
                  idle_ns=3_000_000_000, timeout_ns=100_000_000, retries=100, path=path,
                  batch=16)
    assert run.report["stop"] == "end" and run.report["lost"] == 0
    assert run.sent_log == runs["optimized"].sent_log
    assert run.report["socket_to_book"]["count"] > 0


def test_bad_path_and_config_are_refused() -> None:
    from optimized.trade import Trader

    with pytest.raises(ValueError, match="path"):
        Trader(0, None, path="afxdp")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_open"):
        StrategyConfig(max_open=0).check()


@pytest.mark.timeout(300)
def test_trade_loop_under_address_and_ub_sanitizers(tmp_path: Path) -> None:
    """native/trade.hpp's loop on every receive path and the intraday clock, compiled
    with -fsanitize=address,undefined (tests/native/trade_stress.cpp): hostile datagrams
    between the real ones, answers for unknown orders; every order arrives whole."""
    import shutil

    from optimized.trade import HAVE_IO_URING

    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found: cannot build the sanitized trade stress")
    exe = tmp_path / "trade_stress"
    uring = ["-DTWINMATCH_HAVE_LIBURING=1"] if HAVE_IO_URING else []
    built = subprocess.run(
        [gxx, "-std=c++20", "-O1", "-g", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=undefined", *uring, "-I", str(ROOT / "native"),
         str(ROOT / "tests" / "native" / "trade_stress.cpp"), "-o", str(exe),
         *(["-luring"] if uring else [])],
        capture_output=True, text=True, timeout=240)
    if built.returncode != 0:
        pytest.skip(f"g++ cannot build with the sanitizers here: {built.stderr[-300:]}")
    run = subprocess.run([str(exe), "20000"], capture_output=True, text=True, timeout=120,
                         env={"ASAN_OPTIONS": "detect_leaks=0",
                              "UBSAN_OPTIONS": "print_stacktrace=1"})
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    assert run.stdout.strip().endswith("trade stress: ok")


@pytest.mark.parametrize("twin", TWINS)
def test_a_server_that_hangs_up_stops_the_run(twin: str,
                                              small_day: tuple[bytes, bytes]) -> None:
    """The order session closes under the trader (a server that logs it in, then hangs
    up): the run stops, "orders closed", promptly and without an exception."""
    import socket
    import threading

    from contract import soupbin as sb
    from naive.trade import connect_orders
    from twinmatch.feed_cli import Exchange, start_exchange
    from twinmatch.trade_cli import make_trader, market_open

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(5)
            conn.recv(1024)  # the Login Request
            conn.sendall(sb.login_accepted(b"HANGUP    ", 1))
            time.sleep(0.2)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    orders = connect_orders(listener.getsockname()[1])
    try:
        trader = make_trader(twin, 0, orders, StrategyConfig(), None,
                             idle_ns=5_000_000_000)
        exchange = Exchange(market_open(small_day[0], 60.0), trader.port, speed=1.0)
        ex_thread, ex_stop, _ = start_exchange(exchange)
        t0 = time.monotonic()
        try:
            rep = trader.run(20_000_000_000)
            took = time.monotonic() - t0
        finally:
            ex_stop.set()
            ex_thread.join(5)
            exchange.close()
            trader.close()
        assert rep["stop"] == "orders closed", rep["stop"]
        assert took < 3.0
    finally:
        orders.close()
        listener.close()
        thread.join(5)
