"""What only the optimized book has: its price window, node pool, id hash and layout.

The shared behavioural suite (tests/test_book.py) checks the API; these tests push the
native data structures to their edges (far prices, growth, colliding ids) and compare
with the naive twin where the behaviour is observable.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pytest

import naive.book as naive
from contract.dtypes import (
    OP_CANCEL,
    OP_EXECUTE,
    OP_LIMIT,
    OP_MARKET,
    OP_REDUCE,
    OP_REPLACE,
    OPS_DTYPE,
)
from optimized.book import Book, Fill, MapBook, Side, layout_info

MAX_PRICE = 2**32 - 1
MAX_ID = 2**64 - 1


def snapshot(book: Any) -> tuple[Any, ...]:
    return (
        len(book),
        book.best_bid(),
        book.best_ask(),
        tuple(book.depth(Side.BUY, 10**9)),
        tuple(book.depth(Side.SELL, 10**9)),
    )


def test_layout() -> None:
    info = layout_info()
    assert info["node_bytes"] == 32
    assert info["hash_slot_bytes"] == 8
    assert info["op_record_bytes"] == 32
    assert Book().stats()["window_levels"] == info["default_window_levels"]


@pytest.mark.parametrize("window", [0, 63, 100, 2**27])
def test_bad_window_is_rejected(window: int) -> None:
    with pytest.raises(ValueError):
        Book(window_levels=window)


def test_far_prices_and_recentre() -> None:
    """Prices 1 and 4,000,000,000 in one book; the window moves when it empties."""
    books: list[Any] = [Book(), naive.Book(), MapBook()]
    for b in books:
        b.add_limit(1, Side.BUY, 1, 5)                  # inside the initial window
        b.add_limit(2, Side.SELL, 4_000_000_000, 7)     # far above the window: slow path
        b.add_limit(3, Side.SELL, MAX_PRICE, 2)         # the very top price
    fast = books[0]
    assert fast.stats()["far_levels"] == 2
    assert len({snapshot(b) for b in books}) == 1
    assert fast.best_ask() == (4_000_000_000, 7)

    for b in books:
        assert b.cancel(1) == 5                         # window now holds no orders
        b.add_limit(4, Side.BUY, 3_999_999_000, 1)      # re-centres; far levels move in
    stats = fast.stats()
    assert stats["far_levels"] == 1  # 4e9 moved into the window; 2**32-1 is still far
    assert stats["recentres"] == 1  # the initial window [0, 2**18) already held price 1
    assert stats["window_base"] <= 3_999_999_000 < stats["window_base"] + stats["window_levels"]
    assert len({snapshot(b) for b in books}) == 1

    # A bid far below the window again, and matching across window and far levels.
    for b in books:
        b.add_limit(5, Side.BUY, 1, 3)
    fills = [b.add_market(6, Side.SELL, 5) for b in books]
    assert fills[0] == fills[1] == fills[2]
    assert fills[0] == ([(4, 6, 3_999_999_000, 1, Side.SELL), (5, 6, 1, 3, Side.SELL)], 1)
    sweeps = [b.add_limit(7, Side.BUY, MAX_PRICE, 10) for b in books]
    assert sweeps[0] == sweeps[1] == sweeps[2]
    assert [f.price for f in sweeps[0]] == [4_000_000_000, MAX_PRICE]
    assert len({snapshot(b) for b in books}) == 1
    assert fast.order(7) == (Side.BUY, MAX_PRICE, 1)


def test_window_follows_the_market_past_a_stale_order() -> None:
    """A window that still holds an order the market has left behind moves to the touch
    anyway: the stale level goes to the far map, and orders near the touch are in the
    window again (the fast path)."""
    books: list[Any] = [Book(window_levels=1024), naive.Book(), MapBook()]
    for b in books:
        b.add_limit(1, Side.BUY, 1_000_000, 5)  # stays behind
        b.add_limit(2, Side.SELL, 1_000_100, 5)
        b.cancel(2)
        for k in range(10):  # the market trades up and away, one far level at a time
            b.add_limit(10 + k, Side.SELL, 1_500_000 + 100 * k, 3)
        b.add_limit(30, Side.BUY, 1_499_900, 4)  # the best bid now: the touch has left
        b.add_limit(31, Side.BUY, 1_499_800, 2)  # the window, which moves to it
    fast = books[0]
    stats = fast.stats()
    assert stats["recentres"] == 2  # the first order's, then the move to the touch
    assert stats["window_base"] <= 1_500_000 < stats["window_base"] + stats["window_levels"]
    assert stats["far_levels"] == 1 + 5  # the stale bid, and asks beyond the new window
    assert len({snapshot(b) for b in books}) == 1
    # The stale order is still an ordinary order: it can trade and be cancelled.
    sweeps = [b.add_market(40, Side.SELL, 8) for b in books]
    assert sweeps[0] == sweeps[1] == sweeps[2]
    assert [(f.resting_id, f.qty) for f in sweeps[0][0]] == [(30, 4), (31, 2), (1, 2)]
    for b in books:
        assert b.cancel(1) == 3
    assert len({snapshot(b) for b in books}) == 1


def test_window_moves_are_paid_for() -> None:
    """Moving the window's m levels to the far map waits until m orders have gone to the
    far map since the last such move: a touch that keeps jumping costs a bounded amount
    per order (the three twins still agree throughout)."""
    books: list[Any] = [Book(window_levels=64), naive.Book(), MapBook()]
    fast = books[0]

    def add(order_id: int, side: Side, price: int) -> None:
        for b in books:
            b.add_limit(order_id, side, price, 1)

    for k in range(20):
        add(1 + k, Side.BUY, 1000 + k)  # 20 levels in the window
    add(100, Side.SELL, 100_000)  # far: the best bid is still in the window
    add(101, Side.BUY, 99_990)  # far, and now the best bid: the touch has left
    assert fast.stats()["recentres"] == 1
    add(102, Side.BUY, 99_980)  # moves the 20 levels out, re-centres on 99,990
    assert fast.stats()["recentres"] == 2
    for b in books:
        b.cancel(100)
    add(103, Side.SELL, 300_000)  # both touches leave the window again ...
    add(104, Side.BUY, 299_000)
    for k in range(18):  # ... but 20 far orders must come first: 2 above, 18 here
        add(200 + k, Side.BUY, 298_000 - k)
    assert fast.stats()["recentres"] == 2
    add(300, Side.BUY, 297_000)  # the 21st finds the move paid for
    assert fast.stats()["recentres"] == 3
    assert fast.stats()["window_base"] <= 299_000 < fast.stats()["window_base"] + 64
    assert len({snapshot(b) for b in books}) == 1


def test_depth_merges_window_and_far_levels() -> None:
    fast, slow = Book(window_levels=64), naive.Book()
    both: list[Any] = [fast, slow]
    prices = [1_000_000 + d for d in (-3, -1, -40, -500, -100_000)] + [7, 1]
    for b in both:
        for i, p in enumerate(prices):
            b.add_limit(i, Side.BUY, p, i + 1)
        for i, p in enumerate([1_000_010, 1_000_020, 1_000_100, 3_000_000_000]):
            b.add_limit(100 + i, Side.SELL, p, 1)
    assert fast.stats()["far_levels"] > 0
    assert snapshot(fast) == snapshot(slow)
    assert fast.depth(Side.BUY, 3) == slow.depth(naive.Side.BUY, 3)


def test_pool_and_hash_grow_past_initial_capacity() -> None:
    """A million resting orders in a book sized for 16: growth, never a lost order."""
    n = 1_000_000
    book = Book(initial_orders=16)
    assert book.stats()["pool_capacity"] == 16
    ids = np.arange(n, dtype=np.uint64) * np.uint64(2**40) + np.uint64(12345)  # spread ids
    ops = np.zeros(n, dtype=OPS_DTYPE)
    ops["order_id"] = ids
    ops["op"] = OP_LIMIT
    ops["side"] = np.arange(n) % 2
    # bids below 1,000,000, asks above: nothing crosses; some prices fall outside the window
    ops["price"] = np.where(ops["side"] == 0, 999_000 - (np.arange(n) % 300_000),
                            1_001_000 + (np.arange(n) % 300_000))
    ops["qty"] = 1 + np.arange(n) % 7
    fills, rejects = book.apply(ops)
    assert len(fills) == 0 and len(rejects) == 0
    assert len(book) == n
    stats = book.stats()
    assert stats["pool_capacity"] >= n and stats["hash_capacity"] >= 2 * n
    for k in (0, 1, n // 2, n - 1):
        assert book.order(int(ids[k])) == (Side(k % 2), int(ops["price"][k]), 1 + k % 7)
    cancels = np.zeros(n, dtype=OPS_DTYPE)
    cancels["order_id"] = ids[::-1]
    cancels["op"] = OP_CANCEL
    fills, rejects = book.apply(cancels)
    assert len(fills) == 0 and len(rejects) == 0
    assert len(book) == 0 and book.best_bid() is None and book.best_ask() is None


def test_extreme_ids() -> None:
    book = Book()
    book.add_limit(0, Side.BUY, 10, 1)
    book.add_limit(MAX_ID, Side.SELL, 20, 2)
    assert book.order(0) == (Side.BUY, 10, 1)
    assert book.order(MAX_ID) == (Side.SELL, 20, 2)
    assert book.order(1) is None and book.order(MAX_ID - 1) is None
    with pytest.raises(ValueError, match="duplicate_id"):
        book.add_limit(MAX_ID, Side.BUY, 5, 1)
    assert book.add_limit(1, Side.BUY, 20, 2) == [Fill(MAX_ID, 1, 20, 2, Side.BUY)]
    assert book.cancel(0) == 1
    assert len(book) == 0


def colliding_ids(book: Book, count: int) -> list[int]:
    """`count` ids (incl. 0 and 2**64-1 where they fit) sharing one home slot."""
    by_home: dict[int, list[int]] = defaultdict(list)
    for candidate in [0, MAX_ID, *range(1, 20_000)]:
        home = book.hash_home(candidate)
        by_home[home].append(candidate)
        if len(by_home[home]) == count:
            return by_home[home]
    raise AssertionError("no collision found")


@pytest.mark.parametrize("order", ["fifo", "lifo", "middle_first"])
def test_colliding_ids(order: str) -> None:
    """One long probe run; deleting from any place keeps every other id findable."""
    book = Book(initial_orders=16)
    cap = book.stats()["hash_capacity"]
    ids = colliding_ids(book, 12)  # 12 of 32 slots: below the 0.5 load that grows the table
    for k, i in enumerate(ids):
        book.add_limit(i, Side.BUY, 100 + k, 1)
    assert book.stats()["hash_capacity"] == cap
    if order == "lifo":
        ids = ids[::-1]
    elif order == "middle_first":
        ids = ids[6:] + ids[:6]
    for k, i in enumerate(ids):
        assert book.cancel(i) == 1
        for j in ids[k + 1 :]:
            assert book.order(j) is not None
        assert book.order(i) is None
    assert len(book) == 0


def test_hash_churn_against_a_dict() -> None:
    """Random add/cancel of colliding and extreme ids, checked against a Python dict."""
    rng = np.random.default_rng(7)
    book = Book(initial_orders=16)
    pool = colliding_ids(book, 10) + [2**63, 2**32, 2**32 - 1, 7 << 40, MAX_ID - 1]
    model: dict[int, int] = {}
    for step in range(5_000):
        i = int(pool[rng.integers(len(pool))])
        if i in model:
            assert book.cancel(i) == model.pop(i)
        else:
            book.add_limit(i, Side.BUY, 100, step + 1)
            model[i] = step + 1
        if step % 97 == 0:
            assert all(book.order(k) == (Side.BUY, 100, q) for k, q in model.items())
            assert len(book) == len(model)


def test_clear_keeps_capacity() -> None:
    for cls in (Book, MapBook):
        book: Any = cls()
        for i in range(1000):
            book.add_limit(i, Side(i % 2), 1000 + (i % 50) * (1 if i % 2 else -1) + i % 2, 3)
        book.add_limit(5000, Side.SELL, 3_000_000_000, 1)  # a far level too
        before = book.stats() if cls is Book else None
        book.clear()
        assert snapshot(book) == (0, None, None, (), ())
        assert book.order(0) is None
        if before is not None:
            after = book.stats()
            assert after["pool_capacity"] == before["pool_capacity"]
            assert after["hash_capacity"] == before["hash_capacity"]
            assert after["far_levels"] == 0
        assert book.add_limit(1, Side.BUY, 10, 1) == []
        assert book.add_limit(2, Side.SELL, 10, 1) == [Fill(1, 2, 10, 1, Side.SELL)]


def test_fill_behaves_like_its_tuple() -> None:
    f = Fill(1, 2, 300, 4, Side.SELL)
    t = (1, 2, 300, 4, 1)
    assert f == t and t == f and f == Fill(1, 2, 300, 4, Side.SELL)
    assert f != (1, 2, 300, 4, 0) and f != Fill(1, 2, 300, 5, Side.SELL)
    assert f != "x" and f != t[:4]
    assert hash(f) == hash(t)
    assert list(f) == list(t) and len(f) == 5
    assert f[0] == 1 and f[-1] == Side.SELL and f[1:3] == (2, 300)  # type: ignore[index,comparison-overlap]
    assert f == naive.Fill(1, 2, 300, 4, naive.Side.SELL)
    assert naive.Fill(1, 2, 300, 4, naive.Side.SELL) == f
    assert repr(f).startswith("Fill(resting_id=1, aggressor_id=2, price=300, qty=4, ")
    with pytest.raises(AttributeError):
        f.price = 5  # type: ignore[misc]
    with pytest.raises(IndexError):
        f[5]


def test_apply_accepts_strided_and_rejects_bad_shapes() -> None:
    ops = np.zeros(4, dtype=OPS_DTYPE)
    ops["order_id"] = [1, 99, 2, 99]
    ops["price"] = [10, 1, 10, 1]
    ops["qty"] = 1
    ops["side"] = [0, 0, 1, 0]
    fills, rejects = Book().apply(ops[::2])  # a non-contiguous view is copied once
    assert fills.tolist() == [(1, 2, 10, 1, 1, 1)]
    assert len(rejects) == 0
    with pytest.raises(TypeError):
        Book().apply([1, 2, 3])  # type: ignore[arg-type]


def test_apply_ns_reports_counts() -> None:
    ops = np.zeros(3, dtype=OPS_DTYPE)
    ops["order_id"] = [1, 2, 3]
    ops["price"] = [10, 10, 0]
    ops["qty"] = [5, 5, 1]
    ops["side"] = [0, 1, 0]
    for cls in (Book, MapBook):
        n_fills, n_rejects, ns = cls().apply_ns(ops)
        assert (n_fills, n_rejects) == (1, 1)
        assert ns > 0


def test_steady_state_does_not_grow() -> None:
    """Once a book has seen its largest size, more of the same flow reuses freed nodes
    and hash slots: the pool and the id table never grow again (no allocation)."""
    from twinmatch.flow import order_flow

    ops = order_flow(40_000, seed=7)
    book = Book(initial_orders=16)  # small, so the warm-up has to grow both
    book.apply(ops[:20_000])
    warm = book.stats()
    assert warm["pool_capacity"] > 16
    book.apply(ops[20_000:])  # the flow keeps the book about as big as it was
    after = book.stats()
    assert after["pool_capacity"] == warm["pool_capacity"]
    assert after["hash_capacity"] == warm["hash_capacity"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("book_class", [Book, MapBook], ids=["optimized", "baseline"])
def test_apply_releases_the_gil_and_guards_the_book(book_class: Any) -> None:
    """While apply() runs in one thread, another runs Python and is refused the book.

    Seeing "busy" at all proves the GIL was released (a held GIL would keep this thread
    waiting until apply() returned). Each attempt is one batch of a few tens of
    milliseconds; on a loaded 2-core machine a whole batch can pass before this thread is
    scheduled, so it tries again, up to a bound. The batch's result must not depend on
    what the other thread did meanwhile.
    """
    import threading

    from twinmatch.flow import cached_order_flow

    ops = cached_order_flow(200_000, seed=7)
    want_fills, want_rejects = naive.Book().apply(ops)
    seen_busy = 0
    for _attempt in range(30):
        book = book_class()
        started = threading.Event()
        result: list[Any] = []

        def run(book: Any = book, started: threading.Event = started,
                result: list[Any] = result) -> None:
            started.set()
            result.append(book.apply(ops))

        worker = threading.Thread(target=run)
        worker.start()
        started.wait()
        while worker.is_alive():
            try:
                len(book)
                book.best_bid()
            except RuntimeError as busy:
                assert "busy" in str(busy)
                seen_busy += 1
        worker.join()
        fills, rejects = result[0]
        assert fills.tobytes() == want_fills.tobytes()
        assert rejects.tobytes() == want_rejects.tobytes()
        if seen_busy:
            break
    assert seen_busy > 0, "no call was ever refused while apply() ran: was the GIL held?"


# ------------------------------------------------------ alignment of the big arrays


def test_pool_and_hash_are_cache_line_aligned() -> None:
    """32-byte nodes two to a cache line: the node pool starts on a 64-byte boundary (so
    no node straddles two lines), and on a 2 MB one once it is that big (huge pages),
    at every size it grows through. The id hash likewise."""
    huge = 2**21
    for initial in (16, 17, 100, 1000, 5000, 65536, 100_000):
        stats = Book(initial_orders=initial).stats()
        assert stats["pool_alignment"] >= 64, (initial, stats)
        assert stats["hash_alignment"] >= 64, (initial, stats)
        if stats["pool_capacity"] * layout_info()["node_bytes"] >= huge:
            assert stats["pool_alignment"] == huge, (initial, stats)
    book = Book(initial_orders=16)
    ops = np.zeros(150_000, dtype=OPS_DTYPE)
    ops["order_id"] = np.arange(len(ops))
    ops["price"] = 1 + np.arange(len(ops)) % 1000
    ops["qty"] = 1
    seen = set()
    for start in range(0, len(ops), 5_000):  # grows 16 -> 262,144 nodes on the way
        book.apply(ops[start : start + 5_000])
        stats = book.stats()
        seen.add(stats["pool_capacity"])
        assert stats["pool_alignment"] >= 64 and stats["hash_alignment"] >= 64, stats
        if stats["pool_capacity"] * 32 >= huge:
            assert stats["pool_alignment"] == huge, stats
    assert len(seen) > 5


# ---------------------------------------------------------------- the id hash


def test_sequential_ids_get_distinct_home_slots() -> None:
    """Fibonacci hashing's promise: a run of consecutive ids, as exchanges hand them out,
    lands on as many distinct home slots, for runs up to 45% of the table (it is kept at
    most half full; at exactly half, a few in a thousand share), wherever the run starts.
    The home slot is the product's top bits: with its low bits, 200,000 sequential ids in
    2**19 slots had about 67,000 homes."""
    for initial in (2**11, 2**15, 2**17, 200_000):
        book = Book(initial_orders=initial)
        slots = book.stats()["hash_capacity"]
        run = int(slots * 0.45)
        for start in (0, 10**9 + 7, 2**63 - 5_000, MAX_ID - run + 1, 0x1234_5678_FFFF_0000):
            homes = {book.hash_home(start + k) for k in range(run)}
            assert len(homes) == run, (slots, start)
    book = Book(initial_orders=200_000)
    assert book.stats()["hash_capacity"] == 2**19
    assert len({book.hash_home(k) for k in range(1, 200_001)}) == 200_000
    # and the realistic flow never finds the table crowded enough to re-key it
    from twinmatch.flow import order_flow

    flow_book = Book()
    flow_book.apply(order_flow(50_000, seed=7))
    assert flow_book.stats()["hash_rekeys"] == 0 and flow_book.stats()["hash_keyed"] == 0


GOLDEN = 0x9E3779B97F4A7C15


def unfold(y: int) -> int:
    """The id k with k + (k >> 32) == y (mod 2**64): the book's fold, undone."""
    for high in ((y >> 32), (y >> 32) - 1):
        low = (y - high * (2**32 + 1)) % 2**64
        if 0 <= high and low < 2**32:
            return (high << 32) | low
    raise AssertionError(y)


def crafted_ids(count: int, top: int = 0x2468ACE1) -> list[int]:
    """Ids an attacker who knows the hash makes: folded and multiplied by the golden-ratio
    constant, they all give the same top 32 bits, so the same fingerprint and the same
    home slot in any table."""
    inverse = pow(GOLDEN, -1, 2**64)
    return [unfold(inverse * ((top << 32) | j) % 2**64) for j in range(count)]


def test_crafted_ids_do_not_pile_up() -> None:
    """40,000 ids crafted to share one home slot: the table notices the long probe run,
    re-keys itself with a random multiplier once, and the ids spread out: the probes a
    lookup of every one of them makes stay a few per id (one run of 40,000 would be
    800 million), and the book behaves exactly as the naive twin's."""
    ids = crafted_ids(40_000)
    book = Book(initial_orders=16)
    homes = {book.hash_home(i) for i in ids[:1000]}
    assert len(homes) == 1  # the crafted ids do collide under the default multiplier
    ops = np.zeros(len(ids), dtype=OPS_DTYPE)
    ops["order_id"] = ids
    ops["op"] = OP_LIMIT
    ops["side"] = np.arange(len(ids)) % 2
    ops["price"] = np.where(ops["side"] == 0, 100 - np.arange(len(ids)) % 50,
                            101 + np.arange(len(ids)) % 50)
    ops["qty"] = 1
    fills, rejects = book.apply(ops)
    assert len(fills) == 0 and len(rejects) == 0 and len(book) == len(ids)
    stats = book.stats()
    assert stats["hash_keyed"] == 1 and 1 <= stats["hash_rekeys"] <= 8
    largest, total = book.hash_displacement()
    assert total <= 3 * len(ids) and largest <= 200, (largest, total)
    # Every id still found; then a mixed stream over them agrees with the naive twin.
    slow = naive.Book()
    slow.apply(ops)
    for i in ids[::997]:
        assert book.order(i) == slow.order(i)  # type: ignore[comparison-overlap]
    rng = np.random.default_rng(3)
    more = np.zeros(20_000, dtype=OPS_DTYPE)
    more["order_id"] = rng.choice(np.array(ids + crafted_ids(5_000, top=7), dtype=np.uint64),
                                  len(more))
    more["new_order_id"] = rng.choice(np.array(crafted_ids(10_000, top=99), dtype=np.uint64),
                                      len(more))
    more["op"] = rng.choice([OP_LIMIT, OP_CANCEL, OP_REPLACE], len(more), p=[0.4, 0.5, 0.1])
    more["side"] = rng.integers(0, 2, len(more))
    more["price"] = rng.integers(60, 140, len(more))
    more["qty"] = rng.integers(1, 5, len(more))
    got = book.apply(more)
    want = slow.apply(more)
    assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()
    assert snapshot(book) == snapshot(slow)
    assert book.hash_displacement()[1] <= 3 * len(book)


def test_crafted_ids_per_call_and_through_replace() -> None:
    """The re-key happens on the per-call path too, and when only replaces (which take no
    new slot) bring the crafted ids in."""
    ids = crafted_ids(3_000, top=0x13579BDF)
    # 30 books, 30 random keys: crafted ids are an arithmetic progression, which a random
    # multiplier alone keeps a progression (1 key in 100 left ~10+ probes per id); the
    # random salt breaks it, so every key spreads them.
    for _ in range(30):
        book = Book(initial_orders=16)
        for i in ids:
            book.add_limit(i, Side.BUY, 100, 1)
        assert book.stats()["hash_rekeys"] >= 1
        assert book.hash_displacement()[1] <= 3 * len(ids)
    assert all(book.order(i) == (Side.BUY, 100, 1) for i in ids)

    book = Book(initial_orders=4096)  # no growth on the way: only replaces re-key
    for k in range(3_000):
        book.add_limit(k, Side.SELL, 200 + k % 10, 1)
    for k, i in enumerate(crafted_ids(3_000, top=0x0F0F0F0F)):
        book.replace(k, i, 200 + k % 10, 2)
    assert book.stats()["hash_rekeys"] >= 1
    assert book.hash_displacement()[1] <= 3 * len(book)
    assert book.depth(Side.SELL, 1) == [(200, 600, 300)]


# ------------------------------------------- allocation failure: the strong guarantee


def fail_allocation_after(n: int) -> None:
    from optimized import _native

    _native._fail_allocation_after(n)  # type: ignore[attr-defined]


def state(book: Any, ids: Any) -> tuple[Any, ...]:
    """Everything observable about a book: depth of both sides and every id's order."""
    return snapshot(book) + (tuple(book.order(int(i)) for i in ids),)


def allocation_stream(n: int, seed: int) -> np.ndarray:
    """Operations that reach every allocation point of a small Book: pool and hash growth,
    far levels (window of 64 levels, prices spread wide), window moves, orders that sweep
    many levels (fills beyond the batch's reserved room), markets, replaces, executes."""
    rng = np.random.default_rng(seed)
    ops = np.zeros(n, dtype=OPS_DTYPE)
    ops["order_id"] = rng.integers(0, n // 2, n)
    ops["new_order_id"] = rng.integers(0, n // 2, n)
    ops["op"] = rng.choice([OP_LIMIT, OP_CANCEL, OP_MARKET, OP_REDUCE, OP_EXECUTE, OP_REPLACE],
                           n, p=[0.55, 0.2, 0.05, 0.05, 0.05, 0.1])
    ops["side"] = rng.integers(0, 2, n)
    centre = np.where(np.arange(n) < n // 2, 10_000, 40_000)  # the market moves away
    ops["price"] = centre + rng.choice([-1, 1], n) * rng.integers(0, 30, n) * \
        rng.choice([1, 1, 1, 20, 300], n)
    ops["qty"] = rng.choice([1, 2, 5, 50, 5_000], n, p=[0.4, 0.3, 0.2, 0.07, 0.03])
    return ops


SMALL_BOOKS: dict[str, Any] = {
    "optimized": lambda: Book(window_levels=64, initial_orders=16),
    "baseline": lambda: MapBook(initial_orders=16),
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", sorted(SMALL_BOOKS))
def test_allocation_failure_anywhere_changes_nothing_batch(kind: str) -> None:
    """Every allocation point an operation reaches fails in turn (a test-only hook makes
    the next one throw std::bad_alloc): apply() raises BookFull at that operation, with
    the fills and rejects of the ones before it, and the book is exactly the naive
    twin's after those ones, as if the failed operation had never started. Applying the
    rest then ends where the naive twin does."""
    ops = allocation_stream(3_000, seed=11)
    ids = np.unique(np.concatenate([ops["order_id"], ops["new_order_id"]]))
    want_fills, want_rejects = naive.Book().apply(ops)
    reference = naive.Book()
    done = 0  # ops the reference has applied
    book = SMALL_BOOKS[kind]()
    start, nth, failures = 0, 0, 0
    try:
        while True:
            fail_allocation_after(nth)
            try:
                fills, rejects = book.apply(ops[start:])
            except MemoryError as full:
                fail_allocation_after(-1)
                failures += 1
                assert failures < 5_000
                index = full.index  # type: ignore[attr-defined]
                # the BookFull of the batch carries what the ops before `index` did
                f = want_fills[(want_fills["op_index"] >= start)
                               & (want_fills["op_index"] < start + index)].copy()
                f["op_index"] -= start
                r = want_rejects[(want_rejects["index"] >= start)
                                 & (want_rejects["index"] < start + index)].copy()
                r["index"] -= start
                assert full.fills.tolist() == f.tolist()  # type: ignore[attr-defined]
                assert full.rejects.tolist() == r.tolist()  # type: ignore[attr-defined]
                reference.apply(ops[done : start + index])
                done = start + index
                assert state(book, ids) == state(reference, ids), (start, index, nth)
                # next: the same op's next allocation point, or the next op's first
                if index == 0:
                    nth += 1
                else:
                    start, nth = start + index, 1
                continue
            fail_allocation_after(-1)
            f = want_fills[want_fills["op_index"] >= start].copy()
            f["op_index"] -= start
            assert fills.tolist() == f.tolist()
            assert len(rejects) == int((want_rejects["index"] >= start).sum())
            reference.apply(ops[done:])
            assert state(book, ids) == state(reference, ids)
            break
    finally:
        fail_allocation_after(-1)
    assert failures > 100  # growth, far levels, window moves, sinks: many points reached


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", sorted(SMALL_BOOKS))
def test_allocation_failure_anywhere_changes_nothing_per_call(kind: str) -> None:
    """The same through the per-call API: each call is retried with a failure at its
    first, second, ... allocation point until it succeeds; every failed call raised
    MemoryError and left the book as it was, and the book ends as the naive twin's."""
    ops = allocation_stream(1_500, seed=5)
    ids = np.unique(np.concatenate([ops["order_id"], ops["new_order_id"]]))
    book = SMALL_BOOKS[kind]()
    reference = naive.Book()

    def call(b: Any, row: Any) -> Any:
        order_id, new_id, price, qty, op, side = (int(x) for x in row)
        if op == OP_LIMIT:
            return b.add_limit(order_id, side, price, qty)
        if op == OP_CANCEL:
            return b.cancel(order_id)
        if op == OP_MARKET:
            return b.add_market(order_id, side, qty)
        if op == OP_REDUCE:
            return b.reduce(order_id, qty)
        if op == OP_EXECUTE:
            return b.execute(order_id, qty)
        assert op == OP_REPLACE
        return b.replace(order_id, new_id, price, qty)

    failures = 0
    try:
        for row in ops[["order_id", "new_order_id", "price", "qty", "op", "side"]].tolist():
            try:
                want: Any = call(reference, row)
            except (ValueError, MemoryError) as exc:
                want = type(exc).__name__
            for nth in range(1_000):
                before = state(book, ids)
                fail_allocation_after(nth)
                try:
                    got: Any = call(book, row)
                except MemoryError:
                    fail_allocation_after(-1)
                    failures += 1
                    assert state(book, ids) == before, row
                    continue
                except ValueError as exc:
                    got = type(exc).__name__
                fail_allocation_after(-1)
                assert got == want, row
                break
    finally:
        fail_allocation_after(-1)
    assert state(book, ids) == state(reference, ids)
    assert failures > 50


def test_ids_the_fold_pairs_share_a_home_and_stay_distinct() -> None:
    """The fold (id + its high half) maps k and k + 2**64 - 2**32 + 1 to one number: they
    share a home slot (and fingerprint), and the id comparison keeps them apart."""
    book = Book()
    for k in (0, 5, 2**32 - 2):
        partner = k + 2**64 - 2**32 + 1
        assert book.hash_home(k) == book.hash_home(partner)
        book.add_limit(k, Side.BUY, 10, 1)
        book.add_limit(partner, Side.BUY, 11, 2)
        assert book.order(k) == (Side.BUY, 10, 1) and book.order(partner) == (Side.BUY, 11, 2)
        assert book.cancel(k) == 1 and book.order(partner) == (Side.BUY, 11, 2)
        assert book.cancel(partner) == 2
    assert len(book) == 0
