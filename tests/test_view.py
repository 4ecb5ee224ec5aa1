"""`twinmatch view` (chapter 16): the replay side's snapshots and the JSON API.

Both twins publish the same JSON at the same replay position; the API answers with the
documented schemas, a 4xx JSON error for a bad parameter or an unknown symbol, fifty
clients at once, and goes on serving after a client drops an event stream mid-frame.
Servers run on 127.0.0.1, in a thread of the test; every wait is bounded.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from twinmatch.gen import write_market_day
from twinmatch.view import MAX_DEPTH, LiveReplay, Snapshot
from twinmatch.view_web import BackgroundServer, book_json, stream_frames

TIMEOUT = 30.0


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_market_day(tmp_path_factory.mktemp("view"), 20_000, symbols=12,
                            seed=3).paths[0]


def finished(replay: LiveReplay) -> Snapshot:
    replay.start()
    replay.thread.join(TIMEOUT)
    assert not replay.thread.is_alive(), "the replay did not finish in time"
    return replay.snapshot


def comparable(snap: Snapshot) -> dict[str, Any]:
    """Everything but timings: books, tape, counters, the most active symbols."""
    return {"messages": snap.messages, "clock_ns": snap.clock_ns, "fraction": snap.fraction,
            "fills": snap.fills, "volume": snap.volume, "live_orders": snap.live_orders,
            "books": {s: book_json(snap, s, MAX_DEPTH) for s in snap.books},
            "tape": snap.tape, "active": snap.active, "error": snap.error}


@pytest.mark.parametrize("limit", [20 * 256, None])  # (it stops at a slice boundary)
@pytest.mark.parametrize("mode", ["book", "match"])
def test_both_twins_publish_the_same_json(day: Path, limit: int | None, mode: str) -> None:
    naive = finished(LiveReplay(day, "naive", mode, slice_size=256, limit=limit))
    optimized = finished(LiveReplay(day, "optimized", mode, slice_size=256, limit=limit))
    assert naive.messages == (limit or 20_000)
    assert comparable(naive) == comparable(optimized)
    assert naive.books and naive.tape and naive.active


def test_the_final_books_are_the_replays(day: Path) -> None:
    """The snapshot's ladder is the market's depth (to MAX_DEPTH levels), as replay sees."""
    from twinmatch.replay import replay

    snap = finished(LiveReplay(day, "optimized"))
    market = replay(day, "optimized").market
    for symbol, book in snap.books.items():
        locate = book["locate"]
        assert market.stock(locate) == symbol
        assert list(book["bids"]) == market.depth(locate, 0, MAX_DEPTH)
        assert list(book["asks"]) == market.depth(locate, 1, MAX_DEPTH)


def test_a_bad_feed_is_shown_not_raised(tmp_path: Path, day: Path) -> None:
    cut = tmp_path / "cut.itch"
    cut.write_bytes(day.read_bytes()[:-3])
    snap = finished(LiveReplay(cut, "naive"))
    assert snap.done and "truncated_body at byte" in snap.error


@pytest.mark.parametrize("bad", [{"speed": -1.0}, {"speed": float("nan")},
                                 {"impl": "fast"}, {"fps": 0.0}, {"slice_size": 0}])
def test_bad_settings_are_refused(day: Path, bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        LiveReplay(day, **bad)


# ------------------------------------------------------------------- the server

class Served(BackgroundServer):
    def get(self, path: str) -> tuple[int, Any]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}",
                                        timeout=TIMEOUT) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def __enter__(self) -> Served:
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__()
        assert not self.thread.is_alive() and not self.replay.thread.is_alive()


@pytest.fixture(scope="module")
def done_server(day: Path) -> Iterator[Served]:
    with Served(LiveReplay(day, "optimized")) as served:
        deadline = time.monotonic() + TIMEOUT
        while not served.replay.snapshot.done:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        yield served


def _levels(levels: list[Any]) -> None:
    for level in levels:
        assert len(level) == 3 and all(isinstance(v, int) and v > 0 for v in level)


def test_api_book(done_server: Served) -> None:
    status, symbols = done_server.get("/api/symbols")
    assert status == 200 and symbols["messages"] == 20_000
    names = [s["symbol"] for s in symbols["symbols"]]
    assert names == sorted(names) and len(names) == 12
    for name in names:
        status, book = done_server.get(f"/api/book/{name}")
        assert status == 200
        assert set(book) == {"symbol", "locate", "depth", "messages", "clock_ns", "bids",
                             "asks"}
        assert book["symbol"] == name and book["depth"] == 10
        assert len(book["bids"]) <= 10 and len(book["asks"]) <= 10
        _levels(book["bids"])
        _levels(book["asks"])
        bids = [p for p, _, _ in book["bids"]]
        asks = [p for p, _, _ in book["asks"]]
        assert bids == sorted(bids, reverse=True) and asks == sorted(asks)
    status, one = done_server.get(f"/api/book/{names[0]}?depth=1")
    assert status == 200 and len(one["bids"]) <= 1 and len(one["asks"]) <= 1


def test_api_bbo_stats_trades(done_server: Served) -> None:
    status, bbo = done_server.get("/api/bbo")
    assert status == 200
    for name, top in bbo["bbo"].items():
        _, book = done_server.get(f"/api/book/{name}?depth=1")
        assert top["bid"] == (book["bids"][0][:2] if book["bids"] else None)
        assert top["ask"] == (book["asks"][0][:2] if book["asks"] else None)
    status, stats = done_server.get("/api/stats")
    assert status == 200 and stats["done"] and stats["messages"] == 20_000
    assert stats["impl"] == "optimized" and stats["error"] == ""
    assert stats["histogram"]["count"] > 0 and stats["active"]
    assert 0 <= stats["snapshot_share"] < 1
    assert stats["clock"].count(":") == 2
    status, trades = done_server.get("/api/trades?n=5")
    assert status == 200 and 0 < len(trades["trades"]) <= 5
    assert set(trades["trades"][0]) == {"symbol", "price", "qty", "side", "clock_ns"}


@pytest.mark.parametrize(("path", "status", "words"), [
    ("/api/book/NOSUCH", 404, "unknown symbol 'NOSUCH'"),
    ("/api/book/{sym}?depth=0", 400, "depth must be 1..50"),
    ("/api/book/{sym}?depth=51", 400, "depth must be 1..50"),
    ("/api/book/{sym}?depth=ten", 400, "depth must be an integer"),
    ("/api/book/{sym}?depth=-1", 400, "depth must be 1..50"),
    ("/api/trades?n=0", 400, "n must be 1..40"),
    ("/api/stream?symbol=NOSUCH", 404, "unknown symbol"),
    ("/api/stream?depth=x", 400, "depth must be an integer"),
    ("/api/nothing", 404, "Not Found"),
])
def test_api_errors_are_json(done_server: Served, path: str, status: int,
                             words: str) -> None:
    _, symbols = done_server.get("/api/symbols")
    got, body = done_server.get(path.format(sym=symbols["symbols"][0]["symbol"]))
    assert got == status and set(body) == {"error"} and words in body["error"], body


def test_api_refuses_writes(done_server: Served) -> None:
    request = urllib.request.Request(f"http://127.0.0.1:{done_server.port}/api/stats",
                                     data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(request, timeout=TIMEOUT)
    assert e.value.code == 405 and "error" in json.loads(e.value.read())


def test_fifty_clients_at_once(done_server: Served) -> None:
    _, symbols = done_server.get("/api/symbols")
    names = [s["symbol"] for s in symbols["symbols"]]
    paths = [f"/api/book/{names[i % len(names)]}?depth=5" if i % 2 else "/api/stats"
             for i in range(50)]
    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(done_server.get, paths))
    assert all(status == 200 for status, _ in answers)


def _stream_frames(port: int, n: int, query: str = "") -> list[dict[str, Any]]:
    frames = stream_frames(port, n, query, TIMEOUT)
    assert len(frames) == n, "the stream ended early"
    return frames


def test_stream_during_a_replay_and_a_client_that_leaves(day: Path) -> None:
    """Frames come while the replay runs, their position moving on; a client that drops
    the connection mid-stream leaves the server serving and the replay running."""
    with Served(LiveReplay(day, "naive", speed=20_000.0)) as served:
        frames = _stream_frames(served.port, 6)
        positions = [f["stats"]["messages"] for f in frames]
        assert positions == sorted(positions) and positions[-1] > positions[0]
        assert {"stats", "trades", "changed_ms"} <= set(frames[-1])
        # a client that leaves in the middle of a frame
        with socket.create_connection(("127.0.0.1", served.port), timeout=TIMEOUT) as s:
            s.sendall(b"GET /api/stream HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(100)
        before = served.replay.snapshot.messages
        status, stats = served.get("/api/stats")
        assert status == 200
        again = _stream_frames(served.port, 2)
        assert again[-1]["stats"]["messages"] >= before
        deadline = time.monotonic() + TIMEOUT
        while not served.replay.snapshot.done:
            assert time.monotonic() < deadline, "the replay stalled"
            time.sleep(0.05)
        assert served.replay.snapshot.messages == 20_000


# ----------------------------------------------------------------- the command

def _twinmatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "twinmatch", *args], capture_output=True,
                          text=True, timeout=TIMEOUT)


@pytest.mark.parametrize(("args", "words"), [
    (["nosuch.itch"], "nosuch.itch: no such file"),
    (["{day}", "--speed", "-1"], "--speed must be a number >= 0"),
    (["{day}", "--port", "70000"], "--port must be 0..65535, not 70000"),
    (["{day}", "--port", "{busy}"], "Address already in use"),
])
def test_view_refuses_bad_arguments(day: Path, args: list[str], words: str) -> None:
    with socket.socket() as busy:  # a port someone listens on
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = _twinmatch("view", *[a.format(day=day, busy=port) for a in args])
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr


@pytest.mark.parametrize("impl", ["naive", "optimized"])
def test_view_attached_to_a_live_feed(day: Path, impl: str) -> None:
    """--feed: chapter 13's exchange sends the day over UDP on 127.0.0.1; the receiver's
    thread publishes; at the end of the session the books are the replay's."""
    from twinmatch.feed_cli import Exchange, start_exchange
    from twinmatch.replay import replay
    from twinmatch.view import LiveFeed

    live = LiveFeed(0, impl, idle_s=1.0, max_seconds=TIMEOUT)
    exchange = Exchange(day.read_bytes(), live.port, linger_ns=500_000_000)
    live.rx.set_request_port(exchange.request_port)  # a dropped datagram is recovered
    with Served(live) as served:
        thread, _, _ = start_exchange(exchange)
        thread.join(TIMEOUT)
        exchange.close()
        deadline = time.monotonic() + TIMEOUT
        while not live.snapshot.done:
            assert time.monotonic() < deadline, "the receiver did not stop"
            time.sleep(0.05)
        status, stats = served.get("/api/stats")
        assert status == 200 and stats["messages"] == 20_000 and not stats["error"]
        market = replay(day, "optimized").market
        for symbol, book in live.snapshot.books.items():
            _, got = served.get(f"/api/book/{symbol}?depth=50")
            assert got["bids"] == [list(x) for x in market.depth(book["locate"], 0, 50)]
            assert got["asks"] == [list(x) for x in market.depth(book["locate"], 1, 50)]


@pytest.mark.parametrize("name", ["day.itch.gz", "day.pcap", "day.csv"])
def test_every_feed_replay_reads(tmp_path: Path, name: str) -> None:
    """gzip, PCAP and the message CSV give the ITCH file's snapshot (progress: raw only)."""
    made = write_market_day(tmp_path, 4_000, symbols=6, seed=5, formats=("itch", "gz",
                                                                          "pcap", "csv"))
    raw = finished(LiveReplay(made.paths[0], "optimized"))
    other = finished(LiveReplay(tmp_path / name, "naive"))
    assert raw.fraction == 1.0 and other.fraction is None
    assert {**comparable(other), "fraction": 1.0} == comparable(raw)


def test_symbols_limit_what_is_published(day: Path) -> None:
    every = finished(LiveReplay(day, "optimized"))
    chosen = set(sorted(every.books)[:2])
    some = finished(LiveReplay(day, "optimized", symbols=chosen))
    assert set(some.books) == chosen and {a["symbol"] for a in some.active} <= chosen
    assert all(some.books[s] == every.books[s] for s in chosen)
    assert {t["symbol"] for t in some.tape} <= chosen
