"""Many books (chapter 5): both market twins, book and match mode, anomalies, real captures."""

from __future__ import annotations

import importlib
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contract.dtypes import ANOMALIES, EVENT_DTYPE, FILL_DTYPE
from twinmatch import cli
from twinmatch.gen import market_day_bytes, write_itch_flow, write_market_day
from twinmatch.replay import lobster_events, replay, sniff

from .conftest import real_file

IMPLS = ("naive", "optimized")
SLOW = os.environ.get("TWINMATCH_SLOW") == "1"


@pytest.fixture(params=IMPLS)
def market_impl(request: pytest.FixtureRequest) -> Any:
    """Each market twin's module in turn."""
    return importlib.import_module(f"{request.param}.market")


def decode(raw: bytes) -> np.ndarray:
    events: np.ndarray = importlib.import_module("optimized.itch").decode(raw)[0]
    return events


def ev(kind: str, locate: int = 1, ref: int = 0, side: str = "B", shares: int = 0,
       price: int = 0, new_ref: int = 0, stock: str = "") -> tuple[Any, ...]:
    return (0, ref, new_ref, 0, shares, price, locate, ord(kind), ord(side), 0,
            stock.encode().ljust(8) if stock else b"")


def events(*rows: tuple[Any, ...]) -> np.ndarray:
    return np.array(list(rows), dtype=EVENT_DTYPE)


def fill_tuples(fills: np.ndarray) -> list[tuple[int, ...]]:
    return [tuple(int(x) for x in r) for r in fills.tolist()]


# --------------------------------------------------------------- generated days


@pytest.fixture(scope="module")
def day() -> tuple[np.ndarray, str]:
    raw, books = market_day_bytes(120_000, 60, seed=5)
    return decode(raw), books.decode()


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("flow") / "flow.itch"
    write_itch_flow(path, 60_000, symbols=40, seed=3)
    return path, path.with_name("flow.books.csv").read_text()


def test_book_mode_reproduces_simulator_books(market_impl: Any, day: tuple[np.ndarray, str]
                                              ) -> None:
    events_, books = day
    m = market_impl.Market("book")
    fills = m.run(events_)
    assert m.counts()["anomalies"] == dict.fromkeys(ANOMALIES, 0)
    assert m.books_csv() == books
    # E and C are the day's executions: one fill each.
    assert len(fills) == int(np.isin(events_["type"], [ord("E"), ord("C")]).sum())


def test_book_mode_in_batches_is_the_same(market_impl: Any, day: tuple[np.ndarray, str]) -> None:
    events_, books = day
    m = market_impl.Market("book")
    for chunk in np.array_split(events_, 7):
        m.run(chunk)
    assert m.books_csv() == books


def test_match_mode_identical_fills_and_books(flow: tuple[Path, str]) -> None:
    path, books = flow
    results = [replay(path, impl, "match", keep_fills=True) for impl in IMPLS]
    naive, opt = results
    assert naive.fills is not None and opt.fills is not None
    assert len(naive.fills) > 100
    assert naive.fills.dtype == opt.fills.dtype == FILL_DTYPE
    assert naive.fills.tobytes() == opt.fills.tobytes()  # padding too: byte for byte
    assert naive.market.books_csv() == opt.market.books_csv() == books
    for key in ("fills", "volume", "anomalies", "rejects", "live_orders", "top"):
        assert naive.report[key] == opt.report[key]


# ----------------------------------------------------------------- anomalies

ANOMALY_CASES = {
    "unknown_execution": ([ev("E", ref=99, shares=5)], {"unknown_ref": 1}),
    "unknown_replace": ([ev("U", ref=99, new_ref=100, shares=5, price=10)], {"unknown_ref": 1}),
    "over_execution": ([ev("A", ref=1, shares=10, price=100), ev("E", ref=1, shares=11)],
                       {"over_execution": 1}),
    "over_cancel": ([ev("A", ref=1, shares=10, price=100), ev("X", ref=1, shares=11)],
                    {"over_cancel": 1}),
    "delete_twice": ([ev("A", ref=1, shares=10, price=100), ev("D", ref=1), ev("D", ref=1)],
                     {"unknown_ref": 1}),
    "duplicate_across_books": ([ev("A", locate=1, ref=1, shares=10, price=100),
                                ev("A", locate=2, ref=1, shares=10, price=100)],
                               {"duplicate_ref": 1}),
    "locate_mismatch": ([ev("A", locate=1, ref=1, shares=10, price=100),
                         ev("D", locate=2, ref=1)], {"locate_mismatch": 1}),
    "bad_fields": ([ev("A", ref=1, shares=10, price=0), ev("A", ref=2, shares=0, price=5),
                    ev("A", ref=3, side="x", shares=1, price=5)],
                   {"bad_price": 1, "bad_shares": 1, "bad_side": 1}),
}


@pytest.mark.parametrize("case", sorted(ANOMALY_CASES))
def test_anomalies_counted_identically(market_impl: Any, case: str) -> None:
    rows, expected = ANOMALY_CASES[case]
    m = market_impl.Market("book")
    m.run(events(*rows))
    want = dict.fromkeys(ANOMALIES, 0) | expected
    assert m.counts()["anomalies"] == want


def test_anomaly_changes_nothing(market_impl: Any) -> None:
    m = market_impl.Market("book")
    m.run(events(ev("A", ref=1, shares=10, price=100), ev("E", ref=1, shares=11),
                 ev("X", ref=1, shares=11), ev("D", ref=7), ev("A", ref=1, shares=3, price=5)))
    assert m.order(1) == (1, 0, 100, 10)
    assert len(m) == 1


def tev(kind: str, ts: int, **kw: Any) -> tuple[Any, ...]:
    """ev() with a timestamp (ITCH ns since midnight)."""
    return (ts, *ev(kind, **kw)[1:])


# --8<-- [start:crossing]
def test_book_mode_rests_crossing_orders(market_impl: Any) -> None:
    """A feed handler mirrors the feed: an add through the other side rests, nothing
    matches, and the market reports how often and how long books were locked/crossed."""
    m = market_impl.Market("book")
    fills = m.run(events(
        tev("A", 100, ref=1, side="S", shares=10, price=100),
        tev("A", 200, ref=2, side="B", shares=5, price=100),    # locks the book
        tev("A", 250, ref=3, side="B", shares=4, price=101),    # crosses it
        tev("U", 400, ref=3, new_ref=4, shares=4, price=102),   # still crossed
        tev("D", 700, ref=4),                                   # locked again
        tev("A", 800, locate=2, ref=9, side="B", shares=1, price=50),
        tev("X", 1000, ref=2, shares=5),                        # bid gone: normal
        tev("A", 1500, ref=5, side="B", shares=2, price=120),   # crossed, still open
        tev("S", 2000),
    ))
    assert len(fills) == 0
    assert sum(m.counts()["anomalies"].values()) == 0
    assert m.books_csv() == (
        "locate,stock,side,price,priority,order_ref,shares\n"
        "1,,B,120,0,5,2\n1,,S,100,0,1,10\n2,,B,50,0,9,1\n")
    assert m.top(1) == ((120, 2), (100, 10))
    assert m.book_states() == {
        "locked": 2, "locked_ns": (250 - 200) + (1000 - 700), "locked_now": 0,
        "crossed": 2, "crossed_ns": (700 - 250) + (2000 - 1500), "crossed_now": 1,
    }
# --8<-- [end:crossing]


def test_crossed_replace_goes_to_the_back(market_impl: Any) -> None:
    m = market_impl.Market("book")
    m.run(events(ev("A", ref=1, side="S", shares=10, price=100),
                 ev("A", ref=2, side="B", shares=5, price=101),
                 ev("A", ref=3, side="B", shares=6, price=90),
                 ev("U", ref=3, new_ref=3, shares=7, price=101)))
    assert m.depth(1, 0, 5) == [(101, 12, 2)]
    assert m.books_csv().splitlines()[1:3] == ["1,,B,101,0,2,5", "1,,B,101,1,3,7"]


def test_trading_state_is_tracked_never_gates(market_impl: Any) -> None:
    m = market_impl.Market("book")
    m.run(events(ev("H", locate=3, side="H", stock="HALT"),
                 ev("A", locate=3, ref=1, side="S", shares=10, price=100),
                 ev("A", locate=3, ref=2, side="B", shares=10, price=101),
                 ev("H", locate=4, side="Q"), ev("E", locate=3, ref=1, shares=4)))
    assert m.trading_state(3) == "H" and m.trading_state(4) == "Q" and m.trading_state(5) == ""
    assert m.trading_states() == {"H": 1, "Q": 1}
    assert m.order(1) == (3, 1, 100, 6) and m.order(2) == (3, 0, 101, 10)
    m.run(events(ev("H", locate=3, side="T")))
    assert m.trading_states() == {"Q": 1, "T": 1}


def test_c_executes_at_its_own_price_even_zero(market_impl: Any) -> None:
    """C's Execution Price is the print's price (itch50.md section 3), 0 included."""
    m = market_impl.Market("book")
    fills = m.run(events(ev("A", ref=1, side="S", shares=10, price=100),
                         ev("C", ref=1, shares=3, price=0), ev("C", ref=1, shares=3, price=97),
                         ev("E", ref=1, shares=4)))
    assert fill_tuples(fills) == [(1, 0, 0, 3, 1, 0), (1, 0, 97, 3, 2, 0), (1, 0, 100, 4, 3, 0)]
    assert m.volume == 10 and len(m) == 0


@pytest.mark.parametrize("mode", ["book", "match"])
@pytest.mark.parametrize("locate", [-1, 65_536, 2**70])
def test_locate_outside_uint16_one_answer(market_impl: Any, mode: str, locate: int) -> None:
    m = market_impl.Market(mode)
    calls: list[Callable[[], object]] = [
        lambda: m.stock(locate), lambda: m.top(locate), lambda: m.depth(locate, 0, 5),
        lambda: m.trading_state(locate)]
    for call in calls:
        with pytest.raises(ValueError, match=f"^locate must be 0..65535, got {locate}$"):
            call()
    with pytest.raises(TypeError, match="^locate must be an int, got str$"):
        m.top("1")


def test_fresh_locates_anywhere_in_the_table(market_impl: Any) -> None:
    """Every locate starts empty and unnamed (the optimized market's table is the kernel's
    zero pages until a message writes there): the last locate, one never written, and
    one with orders but no R message all answer alike in both twins."""
    m = market_impl.Market("book")
    m.run(events(
        ev("A", locate=65_535, ref=1, side="B", shares=10, price=100),
        ev("R", locate=30_000, stock="QQQ"),
        ev("A", locate=30_000, ref=2, side="S", shares=7, price=500),
    ))
    assert m.stock(65_535) == "" and m.stock(12_345) == "" and m.stock(30_000) == "QQQ"
    assert m.top(12_345) == (None, None) and m.trading_state(12_345) == ""
    assert m.top(65_535) == ((100, 10), None)
    assert m.books_csv() == (
        "locate,stock,side,price,priority,order_ref,shares\n"
        "30000,QQQ,S,500,0,2,7\n65535,,B,100,0,1,10\n")
    assert m.books == 2


def test_book_mode_executions_and_books_csv(market_impl: Any) -> None:
    m = market_impl.Market("book")
    fills = m.run(events(
        ev("R", locate=7, stock="ZZ"),
        ev("A", locate=7, ref=1, side="B", shares=10, price=100),
        ev("A", locate=7, ref=2, side="B", shares=20, price=100),
        ev("A", locate=7, ref=3, side="S", shares=5, price=2_000_000_000),
        ev("A", locate=7, ref=4, side="B", shares=5, price=1),
        ev("E", locate=7, ref=1, shares=4),
        ev("C", locate=7, ref=2, shares=20, price=99),
        ev("U", locate=7, ref=4, new_ref=5, shares=6, price=100),
    ))
    assert fill_tuples(fills) == [(1, 0, 100, 4, 5, 1), (2, 0, 99, 20, 6, 1)]
    assert m.books_csv() == (
        "locate,stock,side,price,priority,order_ref,shares\n"
        "7,ZZ,B,100,0,1,6\n7,ZZ,B,100,1,5,6\n7,ZZ,S,2000000000,0,3,5\n")
    assert m.top(7) == ((100, 12), (2_000_000_000, 5))
    assert m.stock(7) == "ZZ"
    assert m.activity() == [(7, 7)]


def test_match_mode_rules(market_impl: Any) -> None:
    m = market_impl.Market("match")
    fills = m.run(events(
        ev("A", ref=1, side="S", shares=10, price=100),
        ev("A", ref=2, side="S", shares=10, price=101),
        ev("E", ref=1, shares=5),                     # ignored: the engine makes its own
        ev("A", ref=3, side="B", shares=15, price=101),
        ev("D", ref=1),                                # filled already: unknown
        ev("A", ref=4, side="B", shares=3, price=0),  # market order
        ev("A", ref=2, side="B", shares=3, price=50),  # duplicate
    ))
    assert fill_tuples(fills) == [(1, 3, 100, 10, 3, 0), (2, 3, 101, 5, 3, 0),
                                  (2, 4, 101, 3, 5, 0)]
    assert m.counts()["rejects"]["unknown_id"] == 1
    assert m.counts()["rejects"]["duplicate_id"] == 1
    assert m.order(2) == (1, 1, 101, 2)
    assert m.volume == 18 and m.fills == 3


def test_wide_prices_many_symbols_memory_bounded(market_impl: Any) -> None:
    """8,000+ symbols, prices from $0.0001 to $200,000: memory follows the orders."""
    n_sym = 8_200
    rows = [ev("R", locate=s, stock=f"S{s}") for s in range(1, n_sym + 1)]
    prices = [1, 2_000_000_000, 50, 1_999_999_000, 10_000, 123_456_789]
    ref = 1
    for s in range(1, n_sym + 1):
        for k, p in enumerate(prices):
            rows.append(ev("A", locate=s, ref=ref, side="B" if k % 2 == 0 else "S",
                           shares=1 + k, price=p if k % 2 else min(p, 9_999)))
            ref += 1
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    m = market_impl.Market("book")
    m.run(events(*rows))
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert len(m) == n_sym * len(prices)
    assert m.books == n_sym
    assert sum(m.counts()["anomalies"].values()) == 0
    if not os.environ.get("TWINMATCH_SANITIZED"):  # ASan's calloc touches every page
        assert grew_mb < 600, f"{grew_mb:.0f} MB for {len(m):,} orders"


def test_twins_agree_on_wide_books() -> None:
    rows = [ev("A", locate=1 + i % 3, ref=i + 1, side="B" if i % 2 else "S",
               shares=1 + i, price=(i * 7919) % 5000 + (10_000 if i % 2 == 0 else 1))
            for i in range(400)]
    out = []
    for impl in IMPLS:
        m = importlib.import_module(f"{impl}.market").Market("book")
        m.run(events(*rows))
        out.append(m.books_csv())
    assert out[0] == out[1]


def random_stream(seed: int, n: int) -> np.ndarray:
    """A F E C X D U over a few locates, references from every range the order table
    treats differently: dense from 0, page and block edges, far apart, at and past 2^34,
    up to 2^64-1; prices from 1 to 2^32-1; some messages bad on purpose."""
    rng = np.random.default_rng(seed)
    pools = [np.arange(0, 3000), 1023 + np.arange(-3, 4), (1 << 20) + np.arange(-3, 4),
             np.arange(40) * (1 << 22) + 5, (1 << 34) + np.arange(-3, 4),
             np.array([2**64 - 1, 2**64 - 2, 2**63])]
    refs = np.concatenate([p.astype(np.uint64) for p in pools])
    live: list[int] = []
    rows = []
    for _ in range(n):
        kind = rng.choice(list("AAAAFEECXXDDUU"))
        if kind in "AF" or not live:
            ref = int(refs[rng.integers(len(refs))])
            price = int(rng.choice([1, 2**32 - 1, int(rng.integers(9_990, 10_010))]))
            rows.append(ev("A", locate=int(rng.integers(1, 4)), ref=ref, side="BS"[rng.integers(2)],
                           shares=int(rng.integers(0, 50)), price=price))
            live.append(ref)
            continue
        ref = live[int(rng.integers(len(live)))]
        new_ref = int(refs[rng.integers(len(refs))]) if rng.random() < 0.7 else ref
        rows.append(ev(kind, locate=int(rng.integers(1, 4)), ref=ref, new_ref=new_ref,
                       shares=int(rng.integers(0, 60)), price=int(rng.integers(0, 10_020))))
        if kind == "U":
            live.append(new_ref)
    return events(*rows)


@pytest.mark.parametrize("mode", ["book", "match"])
@pytest.mark.parametrize("seed", range(6))
def test_twins_agree_on_any_references(mode: str, seed: int) -> None:
    stream = random_stream(seed, 3000)
    out = []
    for impl in IMPLS:
        m = importlib.import_module(f"{impl}.market").Market(mode)
        fills = m.run(stream)
        refs = sorted({int(r) for r in stream["order_ref"]}
                      | {int(r) for r in stream["new_order_ref"]})
        out.append((fills.tobytes(), m.books_csv(), m.counts(), len(m), m.book_states(),
                    [m.order(r) for r in refs]))
    assert out[0] == out[1]


def test_bad_mode_and_dtype(market_impl: Any) -> None:
    with pytest.raises(ValueError):
        market_impl.Market("auction")
    with pytest.raises(TypeError):
        market_impl.Market("book").run(np.zeros(3, dtype=np.uint8))
    with pytest.raises(ValueError, match="one-dimensional"):
        market_impl.Market("book").run(np.zeros((2, 2), dtype=EVENT_DTYPE))


def test_events_in_another_layout(market_impl: Any) -> None:
    """Concatenated EVENT_DTYPE arrays come back packed: the same fields, so accepted."""
    rows = events(ev("A", ref=1, side="S", shares=5, price=100, stock="AAPL"),
                  ev("A", ref=2, side="B", shares=3, price=100, stock="AAPL"))
    packed = np.concatenate([rows[:1], rows[1:]])
    assert packed.dtype != EVENT_DTYPE
    want = market_impl.Market("match").run(rows)
    assert len(want) == 1
    assert market_impl.Market("match").run(packed).tobytes() == want.tobytes()


# ------------------------------------------------------- out of memory, memory per book

def _state(m: Any) -> tuple[Any, ...]:
    return (m.books_csv(), m.counts(), len(m), m.books, m.book_states(), m.activity(),
            m.fills, m.volume)


# --8<-- [start:oom]
@pytest.mark.parametrize("mode", ["book", "match"])
def test_failed_allocation_leaves_market_unchanged(mode: str) -> None:
    """Every growth step an event needs (order and level pools, the reference map, a new
    book, a map node) can fail: the event then changes nothing, the error names it, and
    the events before it stay applied. Optimized only: the naive twin has no hook."""
    from optimized.market import Market

    rows = []
    for i in range(300):
        locate = 1 + i % 7
        rows.append(ev("A", locate=locate, ref=i + 1, side="BS"[i % 2], shares=10 + i,
                       price=1000 + (i * 37) % 50))
        if i % 5 == 4:
            rows.append(ev("U", locate=locate, ref=i + 1, new_ref=10_000 + i, shares=3,
                           price=1000 + (i * 11) % 60))
        if i % 9 == 8:
            rows.append(ev("D", locate=1 + (i - 8) % 7, ref=i - 7))
    stream = events(*rows)
    whole = Market(mode)
    want_fills = whole.run(stream)
    failures = 0
    for budget in range(0, 60, 2):
        m = Market(mode)
        m.set_growth_budget(budget)
        try:
            got = m.run(stream)
        except MemoryError as e:
            failures += 1
            at = int(str(e).split("at event ")[1].split(":")[0])
            before = Market(mode)
            before.run(stream[:at])
            assert _state(m) == _state(before), f"budget {budget}: event {at} left a trace"
            m.set_growth_budget(-1)
            m.run(stream[at:])
            assert _state(m) == _state(whole)
            continue
        assert got.tobytes() == want_fills.tobytes()
    assert failures > 3  # several growth steps were failed, in every kind of event
# --8<-- [end:oom]


MEMORY_PROBE = """
import resource, sys
import numpy as np
from contract.dtypes import EVENT_DTYPE
impl, mode = sys.argv[1], sys.argv[2]
Market = __import__(impl + ".market", fromlist=["Market"]).Market
n = 65_536
ev = np.zeros(n, dtype=EVENT_DTYPE)
ev["type"] = ord("A")
ev["locate"] = np.arange(n)
ev["order_ref"] = np.arange(1, n + 1)
ev["side"] = ord("B")
ev["shares"] = 100
ev["price"] = 1_000_000 + np.arange(n) % 977
m = Market(mode)
m.run(ev[:1])  # the first book: what every market pays once
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
m.run(ev[1:])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert m.books == n and len(m) == n
print((after - before) / 1024)
"""


# --8<-- [start:memory]
@pytest.mark.parametrize("mode", ["book", "match"])
def test_65536_one_order_books_memory(market_impl: Any, mode: str) -> None:
    """Memory follows the live orders: 65,536 books of one order each add less than
    200 MB of resident memory (peak RSS, measured in a fresh process), in both twins."""
    out = subprocess.run([sys.executable, "-c", MEMORY_PROBE, market_impl.__name__.split(".")[0],
                          mode], capture_output=True, text=True, timeout=600, check=True)
    grew_mb = float(out.stdout.strip())
    if not os.environ.get("TWINMATCH_SANITIZED"):  # ASan's allocator costs more per book
        assert grew_mb < 200, f"{grew_mb:.0f} MB for 65,536 one-order books"
# --8<-- [end:memory]


# The order pool is one flat array in reserved address space (native/market.hpp,
# OrderPool). Where the big reservation is refused it takes less and, when that is full,
# moves the array into one twice the size: the market must not notice either.


def _pool_stream(n: int) -> np.ndarray:
    """n adds over 5 locates and both sides, then every third one deleted and every
    fifth of the rest executed in part: links and levels throughout the pool."""
    ev = np.zeros(n + n // 3 + n // 5, dtype=EVENT_DTYPE)
    adds = ev[:n]
    adds["type"] = ord("A")
    adds["locate"] = 1 + np.arange(n) % 5
    adds["order_ref"] = np.arange(1, n + 1)
    adds["side"] = np.where(np.arange(n) % 2 == 0, ord("B"), ord("S"))
    adds["shares"] = 100
    adds["price"] = np.where(adds["side"] == ord("B"), 100_000, 200_000) + \
        100 * (np.arange(n) % 300)
    dels = ev[n:n + n // 3]
    dels["type"] = ord("D")
    dels["order_ref"] = adds["order_ref"][::3][:len(dels)]
    dels["locate"] = adds["locate"][::3][:len(dels)]
    execs = ev[n + n // 3:]
    execs["type"] = ord("E")
    execs["order_ref"] = adds["order_ref"][1::5][:len(execs)]
    execs["locate"] = adds["locate"][1::5][:len(execs)]
    execs["shares"] = 40
    return ev


@pytest.mark.parametrize("mode", ["book", "match"])
def test_order_pool_moved_when_its_reservation_fills(mode: str) -> None:
    """A pool that could reserve only 2 MiB (65,536 nodes) moves into 4, 8 MiB ... as
    200,000 orders arrive; every order, link and level is where it was."""
    from optimized import _native
    from optimized.market import Market

    stream = _pool_stream(200_000)
    whole = Market(mode)
    want = whole.run(stream)
    assert whole.window_stats()["pool_reserved"] == 1 << 30  # 33.5M nodes of 32 bytes
    _native._cap_pool_reservation(2 << 20)  # type: ignore[attr-defined]
    try:
        m = Market(mode)
    finally:
        _native._cap_pool_reservation(0)  # type: ignore[attr-defined]
    for part in np.array_split(stream, 7):  # moves between runs, and inside them
        m.run(part)
    stats = m.window_stats()
    assert stats["pool_reserved"] == 8 << 20 and stats["pool_chunks"] == 4  # two moves
    assert _state(m)[:6] == _state(whole)[:6]
    if mode == "match":
        assert m.fills == whole.fills and len(want) == whole.fills


POOL_PROBE = """
import resource, sys
import numpy as np
from tests.test_market import _pool_stream
from optimized.market import Market
stream = _pool_stream(100_000)
want = Market("book")
want.run(stream)
vm = int(next(l for l in open("/proc/self/status") if l.startswith("VmSize")).split()[1])
room = 512 << 20  # address space left: half the pool's 1 GiB reservation
resource.setrlimit(resource.RLIMIT_AS, (vm * 1024 + room, resource.RLIM_INFINITY))
m = Market("book")
m.run(stream)
assert m.books_csv() == want.books_csv() and len(m) == len(want)
print(m.window_stats()["pool_reserved"])
"""


def test_order_pool_reserves_what_a_ulimit_allows() -> None:
    """Under a ulimit -v the pool's reservation is refused, so it takes a smaller one
    (halving) and the replay is the same (a fresh process: the limit stays there)."""
    out = subprocess.run([sys.executable, "-c", POOL_PROBE], capture_output=True, text=True,
                         timeout=300, cwd=Path(__file__).parent.parent)
    assert out.returncode == 0, out.stderr[-2000:]
    reserved = int(out.stdout.strip())
    assert (2 << 20) <= reserved <= (512 << 20)


# --------------------------------------------------------------- real captures

REAL_EXPECTED = {
    # D of an order added before the capture began; 38 A/F rest.
    "moldudp64-multiple-packets.pcap": ({"unknown_ref": 1}, 38),
    "moldudp64-add-order.pcap": ({}, 1),
    "moldudp64-20230822-add-order-sanitized.pcap": ({}, 5),
    # Executions of orders added before the capture: all unknown.
    "moldudp64-20230822-order-executed-sanitized.pcap": ({"unknown_ref": 5}, 0),
    "stock-directory-sample.itch": ({}, 0),
}


@pytest.mark.parametrize("name", sorted(REAL_EXPECTED))
@pytest.mark.parametrize("impl", IMPLS)
def test_real_captures(name: str, impl: str) -> None:
    anomalies, live = REAL_EXPECTED[name]
    result = replay(real_file(name), impl, "book")
    assert result.report["anomalies"] == dict.fromkeys(ANOMALIES, 0) | anomalies
    assert result.report["live_orders"] == live


def test_real_directory_names_locates() -> None:
    result = replay(real_file("stock-directory-sample.itch"), "optimized")
    assert result.market.stock(13) == "AAPL"













def lobster_book_rows(path: Path) -> np.ndarray:
    return np.loadtxt(path, delimiter=",", dtype=np.int64)


# --8<-- [start:lobster_oracle]
def resync(market: Any, side: int, price: int, want: int, next_ref: list[int],
           seeds: dict[tuple[int, int], list[int]]) -> None:
    """Make our level at (side, price) hold ``want`` shares: add a stand-in order for
    shares we lack, or take shares off the level's youngest orders for shares we have
    too many of (changes the window made while the level was out of sight)."""
    levels = {p: q for p, q, _ in market.depth(1, side, 10**6)}
    have = levels.get(price, 0)
    if want > have:
        next_ref[0] += 1
        market.run(events(ev("A", ref=next_ref[0], side="BS"[side], shares=want - have,
                             price=price)))
        seeds.setdefault((side, price), []).append(next_ref[0])
        return
    excess = have - want
    rows = [r.split(",") for r in market.books_csv().splitlines()[1:]]
    queue = [r for r in rows if r[2] == "BS"[side] and int(r[3]) == price]
    for r in reversed(queue):
        if excess == 0:
            break
        take = min(excess, int(r[6]))
        market.run(events(ev("D" if take == int(r[6]) else "X", ref=int(r[5]), shares=take)))
        excess -= take


@pytest.mark.parametrize("impl", IMPLS)
def test_lobster_orderbook_reproduced(impl: str) -> None:
    """Replay LOBSTER messages; reproduce the 10-level orderbook file for what it shows.

    Two things are unknown. The book before 09:30:00: the first orderbook row (the book
    after message 1) seeds one stand-in order per level, and a message about an order
    the window never showed (an ``unknown_ref`` anomaly) is applied to the stand-in at its
    price. And LOBSTER's level-10 message file leaves out every event beyond the 10th
    level: while a level is out of sight it can change silently. So a level that was
    visible in the previous row must match exactly (every change to it came through a
    message), and a level that comes back into sight is resynchronised and counted.
    """
    orders = importlib.import_module(f"{impl}.orders")
    messages = orders.read_lobster(real_file("lobster-AAPL-2012-06-21-message-10.csv"))
    book = lobster_book_rows(real_file("lobster-AAPL-2012-06-21-orderbook-10.csv"))
    market = importlib.import_module(f"{impl}.market").Market("book")
    evs = lobster_events(messages, "AAPL")  # evs[0] is the R; evs[1] is message 1
    first = book[0].reshape(10, 4)
    seeds: dict[tuple[int, int], list[int]] = {}  # (side, price) -> stand-in refs
    seed_rows = [ev("R", stock="AAPL")]
    for level, (ask, ask_size, bid, bid_size) in enumerate(first.tolist()):
        for side, price, size in ((1, ask, ask_size), (0, bid, bid_size)):
            if size > 0:
                ref = 10**15 + 2 * level + side
                seeds[(side, price)] = [ref]
                seed_rows.append(ev("A", ref=ref, side="BS"[side], shares=size, price=price))
    market.run(events(*seed_rows))
    next_ref = [2 * 10**15]
    unknown = checked = resynced = 0
    for k in range(2, len(evs)):
        e = evs[k:k + 1]
        before = market.counts()["anomalies"]["unknown_ref"]
        market.run(e)
        if market.counts()["anomalies"]["unknown_ref"] != before:  # a pre-window order
            unknown += 1
            left = int(e["shares"][0])
            for seed in seeds.get((0 if e["side"][0] == ord("B") else 1, int(e["price"][0])),
                                  []):
                found = market.order(seed)
                if found is None or left == 0:
                    continue
                take = min(left, found[3])
                market.run(events(ev("D" if take == found[3] else "X", ref=seed, shares=take)))
                left -= take
        prev, row = book[k - 2].reshape(10, 4), book[k - 1].reshape(10, 4)
        for side, pc, sc in ((1, 0, 1), (0, 2, 3)):
            seen_before = {p for p, s in prev[:, [pc, sc]].tolist() if s > 0}
            ours = {p: q for p, q, _ in market.depth(1, side, 10**6)}
            for p, s in row[:, [pc, sc]].tolist():
                if s <= 0:
                    continue
                if p in seen_before:
                    assert ours.get(p, 0) == s, f"message {k}: side {side} price {p}"
                    checked += 1
                elif ours.get(p, 0) != s:
                    resync(market, side, p, s, next_ref, seeds)
                    resynced += 1
    assert unknown > 0  # the window does reference orders from before 09:30
    assert checked > 10 * resynced  # nearly every level is checked, not resynchronised
# --8<-- [end:lobster_oracle]


# ----------------------------------------------------------------- the CLI


@pytest.fixture(scope="module")
def day_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("day")
    write_market_day(out, 20_000, symbols=30, seed=9, formats=("itch", "gz", "pcap", "csv"))
    return out


@pytest.mark.parametrize("name,fmt", [("day.itch", "itch"), ("day.itch.gz", "itch"),
                                      ("day.pcap", "pcap"), ("day.csv", "messages")])
def test_cli_replay_every_format(day_files: Path, name: str, fmt: str, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert sniff(day_files / name) == fmt
    books = tmp_path / "books.csv"
    fills = tmp_path / "fills.csv"
    assert cli.main(["replay", str(day_files / name), "--json", "--books", str(books),
                     "--fills", str(fills)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["messages"] == 20_000
    assert sum(report["anomalies"].values()) == 0
    assert books.read_text() == (day_files / "day.books.csv").read_text()
    assert fills.read_text().count("\n") == 1 + report["fills"]
    for key in ("by_type", "volume", "rejects", "live_orders", "seconds", "messages_per_s",
                "peak_rss_mb", "top"):
        assert key in report


def test_cli_replay_csv_and_lobster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv_path = tmp_path / "orders.csv"
    csv_path.write_text("order_id,price,quantity,side\n1,100,5,1\n2,101,5,0\n3,0,2,0\n1,0,0,1\n")
    assert sniff(csv_path) == "csv"
    assert cli.main(["replay", str(csv_path), "--mode", "match", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["fills"] == 1 and report["rejects"]["unknown_id"] == 1
    lob = real_file("lobster-AAPL-2012-06-21-message-10.csv")
    assert sniff(lob) == "lobster"
    assert cli.main(["replay", str(lob), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["top"][0]["stock"] == "AAPL"
    assert report["anomalies"]["unknown_ref"] > 0


def test_cli_compare(day_files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compare", str(day_files / "day.itch")]) == 0
    out = capsys.readouterr().out
    assert "identical" in out and "DIFFERENT" not in out and "speedup" in out


# ------------------------------------------------------------------ scale


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.skipif(not SLOW, reason="set TWINMATCH_SLOW=1 (50M messages, minutes)")
def test_scale_50m_optimized(tmp_path: Path) -> None:
    write_market_day(tmp_path, 50_000_000, symbols=8_000, seed=11)
    result = replay(tmp_path / "day.itch", "optimized", "book")
    r = result.report
    print(f"\n50M optimized: {r['seconds']:.1f} s, {r['ns_per_message']:.0f} ns/message, "
          f"peak {r['peak_rss_mb']:.0f} MB, live {r['live_orders']:,}")
    assert r["messages"] == 50_000_000
    assert sum(r["anomalies"].values()) == 0
    assert result.market.books_csv() == (tmp_path / "day.books.csv").read_text()
    assert r["peak_rss_mb"] < 4_000


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.skipif(not SLOW, reason="set TWINMATCH_SLOW=1 (5M messages, naive twin)")
def test_scale_5m_naive(tmp_path: Path) -> None:
    write_market_day(tmp_path, 5_000_000, symbols=2_000, seed=12)
    result = replay(tmp_path / "day.itch", "naive", "book")
    r = result.report
    print(f"\n5M naive: {r['seconds']:.1f} s, {r['ns_per_message']:.0f} ns/message, "
          f"peak {r['peak_rss_mb']:.0f} MB")
    assert sum(r["anomalies"].values()) == 0
    assert result.market.books_csv() == (tmp_path / "day.books.csv").read_text()


@pytest.mark.parametrize("raw, shown", [
    (b"AAPL", "AAPL"),
    (b"a,b", "a\\x2cb"),          # a comma would split a books-CSV column
    (b'q"x', "q\\x22x"),          # a double quote would open a quoted CSV field
    (b"back\\", "back\\x5c"),     # the escape character itself is escaped: reversible
    (b"\x00\x7f\x80\xff ~", "\\x00\\x7f\\x80\\xff ~"),
])
def test_feed_text_rule_is_one_rule(raw: bytes, shown: str) -> None:
    from contract.feed_text import show_bytes
    from optimized.market import show_bytes as native_show

    assert show_bytes(raw) == shown
    assert native_show(raw) == shown
    # Reversible: every escape is \xNN and a backslash never appears otherwise.
    assert shown.encode().decode("unicode_escape").encode("latin-1") == raw


# ------------------------------------------------- one pass: decode and apply at once


def _two_pass(mode: str, path: Path, chunk: int) -> tuple[Any, list[Any], Exception | None]:
    """The reference for the fused path: optimized.itch.read_file, then Market.run."""
    from optimized import itch
    from optimized.market import Market

    m = Market(mode)
    out: list[Any] = []
    try:
        for events_, counts in itch.read_file(path, chunk):
            out.append((m.run(events_).tobytes(), counts))
    except Exception as exc:  # noqa: BLE001 - compared with the fused path's
        return m, out, exc
    return m, out, None


def _one_pass(mode: str, path: Path, chunk: int) -> tuple[Any, list[Any], Exception | None]:
    from optimized.market import Market

    m = Market(mode)
    out: list[Any] = []
    try:
        for fills, counts in m.run_file(path, chunk):
            out.append((fills.tobytes(), counts))
    except Exception as exc:  # noqa: BLE001
        return m, out, exc
    return m, out, None


def _same_outcome(mode: str, path: Path, chunk: int) -> None:
    a, batches_a, err_a = _two_pass(mode, path, chunk)
    b, batches_b, err_b = _one_pass(mode, path, chunk)
    assert batches_b == batches_a
    assert _state(b) == _state(a)
    assert type(err_b) is type(err_a) and str(err_b) == str(err_a)


@pytest.mark.parametrize("mode", ["book", "match"])
@pytest.mark.parametrize("chunk", [13, 1000, 65_536, 1 << 23])
@pytest.mark.parametrize("gz", [False, True])
def test_run_file_is_decode_then_run(mode: str, chunk: int, gz: bool, tmp_path: Path) -> None:
    """Market.run_file (each message applied as it is decoded, what replay runs for the
    optimized twin) gives what read_file + run gives, batch for batch: fills, counts,
    books, every report field; at any chunk size, plain or gzip."""
    raw, books = market_day_bytes(30_000, 25, seed=11, flow=mode == "match")
    path = tmp_path / "day.itch"
    if gz:
        import gzip

        path.write_bytes(gzip.compress(raw, 1))
    else:
        path.write_bytes(raw)
    _same_outcome(mode, path, chunk)
    if mode == "book":
        _, _, err = _one_pass(mode, path, chunk)
        assert err is None


def _corrupt(raw: bytes, seed: int) -> bytes:
    import random

    rng = random.Random(seed)
    b = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(4)
        at = rng.randrange(len(b))
        if kind == 0:
            b[at] = rng.randrange(256)  # any byte: a length, a type, a field
        elif kind == 1:
            del b[at:at + rng.randint(1, 40)]
        elif kind == 2:
            b[at:at] = bytes([0, rng.randrange(64), rng.randrange(256)])
        else:
            b = b[:at]
    return bytes(b)


@pytest.mark.parametrize("mode", ["book", "match"])
@pytest.mark.parametrize("seed", range(24))
def test_run_file_bad_input_like_two_pass(mode: str, seed: int, tmp_path: Path) -> None:
    """Bad input through the one-pass path: the same ItchError (offset, reason, text),
    the same anomalies or rejects, and everything before the bad record applied, as
    decoding first and applying after gives."""
    raw, _ = market_day_bytes(3_000, 5, seed=seed, flow=mode == "match")
    path = tmp_path / "bad.itch"
    path.write_bytes(_corrupt(raw, seed))
    for chunk in (7, 4096, 1 << 20):
        _same_outcome(mode, path, chunk)


def test_run_itch_errors_name_the_record() -> None:
    """run_itch stops at a zero or wrong length (error at its offset + base) and at a
    partial record (no error: the caller's next window), applying what came before."""
    from optimized.market import Market

    add = (36).to_bytes(2, "big") + b"A" + bytes(10) + (7).to_bytes(8, "big") + b"B" \
        + (100).to_bytes(4, "big") + b"ABC     " + (5000).to_bytes(4, "big")
    for tail, reason, consumed in ((b"\x00\x00", "zero_length", 38),
                                   ((5).to_bytes(2, "big") + b"A1234", "bad_length", 38),
                                   (b"\x00\x24A", None, 38), (b"", None, 38)):
        m = Market("book")
        fills, counts, used, error = m.run_itch(add + tail, base=100)
        assert used == consumed and counts["A"] == 1 and len(m) == 1 and len(fills) == 0
        if reason is None:
            assert error is None
        else:
            assert error is not None and error.reason == reason and error.offset == 138


@pytest.mark.parametrize("mode", ["book", "match"])
def test_run_itch_failed_allocation_leaves_market_unchanged(mode: str) -> None:
    """The strong out-of-memory guarantee holds on the one-pass path too: the error names
    the event, which changed nothing; the events before it are applied."""
    from optimized.market import Market

    raw, _ = market_day_bytes(2_000, 7, seed=4, flow=mode == "match")
    stream = decode(raw)
    whole = Market(mode)
    whole.run_itch(raw)
    failures = 0
    for budget in range(0, 40, 3):
        m = Market(mode)
        m.set_growth_budget(budget)
        try:
            m.run_itch(raw)
        except MemoryError as e:
            failures += 1
            at = int(str(e).split("at event ")[1].split(":")[0])
            before = Market(mode)
            before.run(stream[:at])
            assert _state(m) == _state(before), f"budget {budget}: event {at} left a trace"
            continue
        assert _state(m) == _state(whole)
    assert failures > 3


def test_best_price_follows_emptied_levels() -> None:
    """The best bid and ask after the best level empties (the next best is the emptied
    level's neighbour), and levels of one price on both sides and in two locates kept
    apart (the level table's key is locate, side and price): both twins, step by step."""
    rows = []
    ref = 0
    for locate in (1, 2):
        for price in (500, 700, 600, 650, 800, 550):
            for side in "BS":
                ref += 1
                rows.append(ev("A", locate=locate, ref=ref, side=side, shares=10, price=price))
    deletes = [ev("D", locate=1 + (r - 1) // 12, ref=r) for r in (9, 10, 3, 11, 4, 7, 12, 1)]
    deletes += [ev("X", locate=2, ref=r, shares=10) for r in (21, 22, 15, 16)]
    got = []
    for impl in IMPLS:
        m = importlib.import_module(f"{impl}.market").Market("book")
        m.run(events(*rows))
        steps = []
        for d in deletes:
            m.run(events(d))
            steps.append((m.top(1), m.top(2), m.depth(1, 0, 9), m.depth(2, 1, 9),
                          m.book_states()))
        got.append((steps, m.books_csv()))
    assert got[0] == got[1]
    steps = got[1][0]
    assert steps[0][0] == ((700, 10), (500, 10))  # 800 bid (ref 9) deleted: 700 is next


# Locates either side of the table's page edges (21 Locates of 192 bytes to a 4 KiB page)
# and at both ends: the optimized table is zero pages until a message writes a locate.
EDGE_LOCATES = (0, 1, 20, 21, 22, 4095, 30_000, 65_535)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("RHAAAFEXDUC"), st.sampled_from(EDGE_LOCATES),
                          st.integers(1, 10), st.sampled_from("BS"), st.integers(0, 30),
                          st.integers(98, 103), st.integers(1, 10), st.integers(-2, 50)),
                max_size=150))
def test_twins_agree_on_crossing_books_anywhere_in_the_table(
        rows: list[tuple[str, int, int, str, int, int, int, int]]) -> None:
    """Book mode on a few prices around one level, so books lock and cross and uncross
    all the time, with R and H messages, references that name another locate's order,
    and clocks that sometimes go back: both twins count the same episodes and times
    (the optimized one looks only after a best price moved), and report the same
    activity, trading states, names and books for every locate, written or not."""
    ts, stream = 0, []
    for kind, locate, ref, side, shares, price, new_ref, step in rows:
        ts = max(0, ts + step)
        state = ord("H" if side == "B" else "T")
        stream.append((ts, ref, new_ref, 0, shares, price, locate, ord(kind),
                       state if kind == "H" else ord(side), ord("Y"),
                       f"S{locate}".encode().ljust(8) if kind == "R" else b""))
    got = []
    for impl in IMPLS:
        m = importlib.import_module(f"{impl}.market").Market("book")
        m.run(np.array(stream, dtype=EVENT_DTYPE))
        per_locate = [(m.stock(loc), m.trading_state(loc), m.top(loc)) for loc in EDGE_LOCATES]
        got.append((m.book_states(), m.activity(), m.trading_states(), m.books_csv(),
                    m.counts(), m.books, len(m), per_locate))
    assert got[0] == got[1]


# Prices for match mode: a cluster around one window, and far ones either side of it and at
# the ends of the price range, so an incoming order meets a resting side with no window, a
# far best level, and levels that do or do not fill it alone (fills_completely's two paths).
MATCH_PRICES = (1, 2, 9_990, 9_999, 10_000, 10_001, 10_100, 50_000, 4_000_000, 2**32 - 1, 0)


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("AAAAFXDUE"), st.sampled_from((1, 2, 21)),
                          st.integers(1, 12), st.sampled_from("BS"), st.integers(0, 40),
                          st.sampled_from(MATCH_PRICES), st.integers(1, 12)),
                max_size=120))
def test_twins_agree_in_match_mode_on_any_price(
        rows: list[tuple[str, int, int, str, int, int, int]]) -> None:
    """Match mode on near and far prices (0: a market order), duplicate and unknown
    references, over-reductions and replaces: both twins make the same fills, rejects,
    books and counts."""
    stream = [(i, ref, new_ref, 0, shares, price, locate, ord(kind), ord(side), 0, b"")
              for i, (kind, locate, ref, side, shares, price, new_ref) in enumerate(rows)]
    got = []
    for impl in IMPLS:
        m = importlib.import_module(f"{impl}.market").Market("match")
        fills = m.run(np.array(stream, dtype=EVENT_DTYPE))
        got.append((fill_tuples(fills), m.books_csv(), m.counts(), m.books, len(m),
                    m.fills, m.volume))
    assert got[0] == got[1]
