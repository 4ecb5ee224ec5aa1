"""Chapter 12: the exchange publishes its own ITCH 5.0 market data (``--itch-out``).

Both twins write the same bytes; the books a reader rebuilds from the feed with chapter
5's market equal the exchange's own books; every message type the feed uses is checked
against a hand-worked scenario; a feed file that cannot be written is counted, and the
exchange goes on trading.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from naive.book import Side
from naive.itch import decode, parse_message
from naive.market import Market
from tests.entry_client import Client, cancel, enter, mass_cancel, modify, replace, wait_stat
from tests.test_entry import GOLDEN, IMPLS, config, golden_config, play, random_stream, server_class


def messages(feed: bytes) -> list[Any]:
    """The feed file's messages as records (it is an ITCH file: 2-byte length, message)."""
    out, at = [], 0
    while at < len(feed):
        n = int.from_bytes(feed[at:at + 2], "big")
        out.append(parse_message(feed[at + 2:at + 2 + n]))
        at += 2 + n
    return out


def counts_of(feed: bytes) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in messages(feed):
        out[type(m).__name__] = out.get(type(m).__name__, 0) + 1
    return out


def run_stream(impl: str, path: Path, stream: list[tuple[int, bytes]],
               users: int = 1) -> tuple[bytes, dict[str, int], Any]:
    """Send ``stream`` (user index, framed message) one message at a time; the feed file,
    the stats and the server (stopped)."""
    srv = server_class(impl)(config(), itch_out=path)
    port = srv.start()
    clients = [Client(port) for _ in range(users)]
    for k, c in enumerate(clients):
        c.login(f"USER0{k + 1}")
    for i, (user, data) in enumerate(stream, 1):
        clients[user].send(data)
        assert wait_stat(srv, "messages_in", i) == i
    srv.stop()
    for c in clients:
        c.close()
    return path.read_bytes(), srv.stats(), srv


@pytest.fixture(params=IMPLS)
def impl(request: pytest.FixtureRequest) -> str:
    return str(request.param)


SCENARIO = [
    enter(1, b"B", 100, 1_000_000),                    # rests: A
    enter(2, b"S", 30, 990_000),                       # trades at once: E on order 1 only
    enter(3, b"S", 500, 1_010_000, display=b"N"),      # hidden: nothing
    enter(4, b"B", 50, 1_020_000),                     # takes from the hidden one: P
    cancel(1, 40),                                     # 70 -> 40: X 30
    replace(1, 5, 200, 1_000_100),                     # rests in full: U 1 -> 5, 170
    replace(5, 6, 200, 1_010_000),                     # trades: D 5, P (nothing rests)
    enter(7, b"B", 10, 1_000_000, display=b"A"),       # attributed: F with MPID "USER"
    modify(7, b"B", 0),                                # D 7
    enter(8, b"S", 10, 1_200_000, tif=b"3"),           # an IOC that rests nowhere: nothing
    enter(9, b"B", 25, 1_001_000, symbol=b"MSFT"),     # locate 2
    mass_cancel(10),                                   # D 9
]


def test_each_rule_on_a_worked_scenario(impl: str, tmp_path: Path) -> None:
    feed, stats, _ = run_stream(impl, tmp_path / "feed.itch", [(0, m) for m in SCENARIO])
    got = messages(feed)
    head, body, tail = got[:7], got[7:-3], got[-3:]
    assert [m.event_code for m in head[:1] + head[5:]] == [b"O", b"S", b"Q"]
    assert [(m.locate, m.stock) for m in head[1:5]] == [
        (1, b"AAPL    "), (2, b"MSFT    "), (3, b"NVDA    "), (4, b"AMZN    ")]
    assert [m.event_code for m in tail] == [b"M", b"E", b"C"]
    t0 = 34_200_000_000_000                            # the fixed clock: 09:30 + message number
    rows = [(type(m).__name__, m.timestamp - t0) + tuple(m)[3:] for m in body]
    assert rows == [
        ("AddOrder", 1, 1, b"B", 100, b"AAPL    ", 1_000_000),
        ("OrderExecuted", 2, 1, 30, 1),
        ("Trade", 4, 0, b"B", 50, b"AAPL    ", 1_010_000, 2),
        ("OrderCancel", 5, 1, 30),
        ("OrderReplace", 6, 1, 5, 170, 1_000_100),
        ("OrderDelete", 7, 5),
        ("Trade", 7, 0, b"B", 170, b"AAPL    ", 1_010_000, 3),
        ("AddOrderMpid", 8, 7, b"B", 10, b"AAPL    ", 1_000_000, b"USER"),
        ("OrderDelete", 9, 7),
        ("AddOrder", 11, 9, b"B", 25, b"MSFT    ", 1_001_000),
        ("OrderDelete", 12, 9),
    ]
    assert [m.locate for m in body][-2:] == [2, 2]
    assert stats["market_data_out"] == len(got) and stats["market_data_errors"] == 0


def mixed_displays(stream: list[tuple[int, bytes]], seed: int) -> list[tuple[int, bytes]]:
    """The same stream with each Enter Order's Display set to Y, N or A at random (framed:
    2-byte length, 'U', then the OUCH message, whose Display is byte 27)."""
    import random
    rng = random.Random(seed)
    out = []
    for user, data in stream:
        if data[3:4] == b"O":
            data = data[:30] + rng.choice((b"Y", b"Y", b"N", b"A")) + data[31:]
        out.append((user, data))
    return out


@pytest.mark.parametrize("seed,wide", [(3, False), (4, True)])
def test_twins_publish_the_same_bytes(seed: int, wide: bool, tmp_path: Path) -> None:
    stream = mixed_displays(random_stream(seed, 600, users=2, wide=wide), seed)
    naive = run_stream("naive", tmp_path / "n.itch", stream, users=2)
    optimized = run_stream("optimized", tmp_path / "o.itch", stream, users=2)
    assert naive[0] == optimized[0]
    assert naive[1] == optimized[1]
    kinds = {type(m).__name__ for m in messages(naive[0])}
    assert naive[1]["market_data_out"] > 40
    assert {"AddOrder", "AddOrderMpid", "OrderDelete"} <= kinds, kinds


def test_the_feed_rebuilds_the_exchanges_books(tmp_path: Path) -> None:
    """Chapter 5's market, in book mode, replays the feed into exactly the books the
    exchange holds at the end (every order displayed), with no unknown reference."""
    stream = random_stream(9, 3000, users=1, wide=True)
    feed, _, srv = run_stream("naive", tmp_path / "feed.itch", stream)
    market = Market("book")
    events, counts = decode(feed)
    assert counts.get("errors", 0) == 0
    market.run(events)
    anomalies = market.counts()
    assert not any(anomalies.get("rejects", {}).values()), anomalies
    resting = 0
    for index, book in enumerate(srv.exchange.books):
        for side in (Side.BUY, Side.SELL):
            mine = book.depth(side, 10_000)
            theirs = market.depth(index + 1, int(side), 10_000)
            assert theirs == mine, (index, side)
            resting += sum(n for _, _, n in mine)
    assert resting > 20                                # the stream leaves a real book
    assert counts_of(feed).get("AddOrder", 0) > 500


def test_golden_session_feed(impl: str) -> None:
    """The golden transcript's session (tests/data/entry/session.json) publishes exactly
    tests/data/entry/session.itch: recorded by `python -m tests.test_entry`."""
    expected = json.loads((GOLDEN / "session.json").read_text())
    want = (GOLDEN / "session.itch").read_bytes()
    path = GOLDEN.parent / f"_session-{impl}.itch"      # tests/data: never left behind
    srv = server_class(impl)(golden_config(), itch_out=path)
    try:
        play(srv.start(), expected)
    finally:
        srv.stop()
    try:
        assert path.read_bytes() == want
    finally:
        path.unlink()


def test_a_feed_that_cannot_be_written_is_counted(impl: str) -> None:
    """/dev/full refuses every write (ENOSPC): counted once, the file is given up, and the
    exchange goes on answering orders."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    srv = server_class(impl)(config(), itch_out="/dev/full")
    c = Client(srv.start())
    c.login()
    for urn in range(1, 4):
        c.send(enter(urn, b"B", 100, 1_000_000))
    assert wait_stat(srv, "messages_in", 3) == 3
    srv.stop()
    c.close()
    stats = srv.stats()
    assert stats["market_data_errors"] == 1
    assert stats["messages_out"] >= 3 + 2          # accepted, start and end of day


def test_an_unwritable_feed_path_is_a_clear_error(impl: str, tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "feed.itch"
    proc = subprocess.run([sys.executable, "-m", "twinmatch", "serve", "--impl", impl,
                           "--itch-out", str(target)], capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "twinmatch serve: error:" in proc.stderr and "feed.itch" in proc.stderr


def test_serve_itch_out_then_replay(tmp_path: Path) -> None:
    """`twinmatch serve --itch-out FILE`, then `twinmatch replay FILE`: the command a
    reader runs to carry the exchange's feed into chapter 5's market (or chapter 13's
    sender)."""
    feed_path = tmp_path / "exchange.itch"
    proc = subprocess.Popen([sys.executable, "-m", "twinmatch", "serve", "--clock", "fixed",
                             "--itch-out", str(feed_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().rsplit(":", 1)[1])
        c = Client(port)
        c.login()
        c.send(enter(1, b"B", 100, 1_000_000) + enter(2, b"S", 40, 1_000_000))
        c.packets(4)                                # start of day, 2 accepted, 1 executed
        c.close()
    finally:
        proc.send_signal(2)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0
    stats = json.loads(out.strip().splitlines()[-1])
    assert stats["market_data_out"] == len(messages(feed_path.read_bytes()))
    replay = subprocess.run([sys.executable, "-m", "twinmatch", "replay", str(feed_path),
                             "--json"], capture_output=True, text=True, timeout=60, check=False)
    assert replay.returncode == 0, replay.stderr
    report = json.loads(replay.stdout)
    assert report["messages"] == stats["market_data_out"]
    assert not any(report["anomalies"].values()) and not any(report["rejects"].values())
    assert report["by_type"]["A"] == 1 and report["by_type"]["E"] == 1   # the sell never rested
    aapl = next(t for t in report["top"] if t["stock"] == "AAPL")
    assert (aapl["bid"], aapl["bid_qty"], aapl["ask"]) == (1_000_000, 60, None)


def test_no_feed_is_made_without_a_listener(impl: str) -> None:
    """Without itch_out the exchange makes no ITCH message at all (no work for nobody)."""
    srv = server_class(impl)(config())
    c = Client(srv.start())
    c.login()
    c.send(enter(1, b"B", 100, 1_000_000) + enter(2, b"S", 40, 1_000_000))
    assert wait_stat(srv, "messages_in", 2) == 2
    srv.stop()
    c.close()
    assert srv.stats()["market_data_out"] == 0
