"""Checker for 01_order_book/fifo: price-time priority, against naive.book on random streams."""

from __future__ import annotations

import gc
import random
import time
from types import ModuleType
from typing import Any

import pytest
from exercise_support import load_module

from naive.book import Book, Side

BUY, SELL = 0, 1
# Cancelling the same number of orders from a level 10x longer may cost a little more
# (caches), but not 10x: that would mean each cancel searches the level.
MAX_CANCEL_RATIO = 4.0
BOOK_SIZE = 50_000
# Trading through a level 10x longer does 10x the work; a container whose "oldest
# order" costs more as orders leave the front makes it ~100x (quadratic).
MAX_DRAIN_RATIO = 30.0
DRAIN_SIZE = 100_000


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "fifo_book.py")


def fills(got: Any) -> list[tuple[int, ...]]:
    return [tuple(f) for f in got]


def test_oldest_first_at_one_price(mod: ModuleType) -> None:
    book = mod.FifoBook()
    for oid in (1, 2, 3):
        assert fills(book.add_limit(oid, SELL, 100, 100)) == []
    got = fills(book.add_limit(9, BUY, 100, 250))
    assert got == [(1, 9, 100, 100, BUY), (2, 9, 100, 100, BUY), (3, 9, 100, 50, BUY)], (
        "three sells of 100 at price 100 arrived as 1, 2, 3; a buy of 250 must fill 1 and 2 "
        f"fully and 50 of 3, in that order. Got {got}")
    assert book.best_ask() == (100, 50) and book.best_bid() is None and len(book) == 1


def test_best_price_first_at_the_resting_price(mod: ModuleType) -> None:
    book = mod.FifoBook()
    book.add_limit(1, SELL, 102, 10)
    book.add_limit(2, SELL, 101, 10)
    book.add_limit(3, SELL, 100, 10)
    got = fills(book.add_limit(9, BUY, 101, 25))
    assert got == [(3, 9, 100, 10, BUY), (2, 9, 101, 10, BUY)], (
        "a buy at 101 takes the ask at 100 first, then 101, never 102; each fill is at "
        f"the RESTING order's price. Got {got}")
    assert book.best_bid() == (101, 5), "the 5 left over must rest as a bid at 101"
    assert book.best_ask() == (102, 10)


def test_remainder_rests_behind_earlier_orders(mod: ModuleType) -> None:
    book = mod.FifoBook()
    book.add_limit(1, BUY, 50, 5)
    book.add_limit(2, SELL, 49, 3)        # trades 3 with order 1: nothing of 2 rests
    book.add_limit(3, SELL, 51, 4)
    book.add_limit(4, BUY, 51, 10)        # takes 4 of order 3, 6 rest at 51 as a bid
    book.add_limit(5, BUY, 51, 7)         # joins the back of the 51 level
    assert book.depth(BUY, 5) == [(51, 13, 2), (50, 2, 1)]
    got = fills(book.add_limit(6, SELL, 50, 20))
    assert got == [(4, 6, 51, 6, SELL), (5, 6, 51, 7, SELL), (1, 6, 50, 2, SELL)], (
        f"a remainder rests behind the orders already at its price. Got {got}")
    assert book.best_ask() == (50, 5) and book.best_bid() is None


def test_reduce_keeps_priority(mod: ModuleType) -> None:
    book = mod.FifoBook()
    book.add_limit(1, BUY, 100, 10)
    book.add_limit(2, BUY, 100, 10)
    assert book.reduce(1, 4) == 6
    assert book.best_bid() == (100, 16)
    got = fills(book.add_limit(9, SELL, 100, 8))
    assert got == [(1, 9, 100, 6, SELL), (2, 9, 100, 2, SELL)], (
        f"order 1 was reduced, not replaced: it keeps its place ahead of order 2. Got {got}")
    assert book.reduce(2, 8) == 0 and len(book) == 0 and book.best_bid() is None, (
        "reducing by all that rests removes the order")


def test_cancel(mod: ModuleType) -> None:
    book = mod.FifoBook()
    for oid in range(1, 6):
        book.add_limit(oid, SELL, 100 + oid % 2, 10 * oid)
    assert book.cancel(3) == 30
    assert book.depth(SELL, 5) == [(100, 60, 2), (101, 60, 2)]
    assert book.cancel(2) == 20 and book.cancel(4) == 40
    assert book.depth(SELL, 5) == [(101, 60, 2)] and len(book) == 2


def random_stream(book: Any, ref: Book, seed: int, n: int) -> None:
    """Feed the same valid operations to both books, comparing after each."""
    rng = random.Random(seed)
    live: list[int] = []  # ids that may still rest in ref (checked before use)
    for step in range(n):
        live = [oid for oid in live if ref.order(oid) is not None] if step % 50 == 0 else live
        oid = rng.choice(live) if live else 0
        order = ref.order(oid) if live else None
        roll = rng.random()
        if roll < 0.6 or order is None:
            oid = step + 1
            side, price, qty = rng.randrange(2), rng.randint(95, 105), rng.randint(1, 50)
            what = f"add_limit({oid}, {side}, {price}, {qty})"
            want = fills(ref.add_limit(oid, Side(side), price, qty))
            got = fills(book.add_limit(oid, side, price, qty))
            assert got == want, f"step {step}, {what}: fills {got}, expected {want}"
            live.append(oid)
        elif roll < 0.8:
            what = f"cancel({oid})"
            assert book.cancel(oid) == ref.cancel(oid), f"step {step}, {what}"
        else:
            qty = rng.randint(1, order[2])
            what = f"reduce({oid}, {qty})"
            assert book.reduce(oid, qty) == ref.reduce(oid, qty), f"step {step}, {what}"
        assert book.best_bid() == ref.best_bid(), f"step {step}, after {what}: best_bid"
        assert book.best_ask() == ref.best_ask(), f"step {step}, after {what}: best_ask"
        assert len(book) == len(ref), f"step {step}, after {what}: len"
        if step % 25 == 0:
            for side in (BUY, SELL):
                assert book.depth(side, 20) == ref.depth(Side(side), 20), (
                    f"step {step}, after {what}: depth({side}, 20)")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_streams_agree_with_naive_book(mod: ModuleType, seed: int) -> None:
    random_stream(mod.FifoBook(), Book(), seed, 3000)


def cancel_time(mod: ModuleType, level_size: int, cancels: int, repeat: int = 3) -> float:
    """Seconds to cancel ``cancels`` random orders from a level of ``level_size`` orders.

    The book always holds BOOK_SIZE orders (the rest at other prices, interleaved), so
    both measurements touch as much memory and only the level's length differs.
    """
    rng = random.Random(level_size)
    every = BOOK_SIZE // level_size
    best = float("inf")
    for _ in range(repeat):
        book = mod.FifoBook()
        for oid in range(BOOK_SIZE):
            price = 100 if oid % every == 0 else 90 + oid % every
            book.add_limit(oid, BUY, price, 1)
        victims = rng.sample(range(0, BOOK_SIZE, every), cancels)
        start = time.perf_counter()
        for oid in victims:
            book.cancel(oid)
        best = min(best, time.perf_counter() - start)
        assert len(book) == BOOK_SIZE - cancels
    return best


def test_cancel_does_not_search_the_level(mod: ModuleType) -> None:
    small = cancel_time(mod, BOOK_SIZE // 10, 300)
    large = cancel_time(mod, BOOK_SIZE, 300)
    ratio = large / small
    assert ratio < MAX_CANCEL_RATIO, (
        f"300 cancels took {large * 1e3:.2f} ms from a level of {BOOK_SIZE:,} orders and "
        f"{small * 1e3:.2f} ms from a level of {BOOK_SIZE // 10:,}: {ratio:.1f}x. A cancel "
        f"that does not search the level stays under {MAX_CANCEL_RATIO:.0f}x")


def drain_time(mod: ModuleType, orders: int) -> float:
    """Fastest of 3: one sell that trades through a level of ``orders`` buys, oldest first."""
    best = float("inf")
    for _ in range(3):
        book = mod.FifoBook()
        for oid in range(orders):
            book.add_limit(oid, BUY, 100, 1)
        gc.disable()  # its passes over the new fills grow with all that is alive
        try:
            start = time.process_time()
            got = book.add_limit(orders, SELL, 100, orders)
            best = min(best, time.process_time() - start)
        finally:
            gc.enable()
        assert len(got) == orders and len(book) == 0
    return best


def test_taking_the_oldest_does_not_slow_down(mod: ModuleType) -> None:
    small = max(drain_time(mod, DRAIN_SIZE // 10), 1e-3)
    large = drain_time(mod, DRAIN_SIZE)
    ratio = large / small
    assert ratio < MAX_DRAIN_RATIO, (
        f"trading through a level of {DRAIN_SIZE:,} orders took {large * 1e3:.1f} ms, through "
        f"{DRAIN_SIZE // 10:,} {small * 1e3:.1f} ms: {ratio:.0f}x. 10x the orders is 10x the "
        f"work; over {MAX_DRAIN_RATIO:.0f}x, finding the oldest order costs more as orders "
        "leave the front of the level (what does a plain dict do with deleted keys?)")
