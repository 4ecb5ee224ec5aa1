"""Chapter 1's steps (optimized.book.book_step) against the naive twin.

Each step is native/book.hpp compiled with only its first decisions (the bitset, warm
node reuse, fingerprints, branch-free code, prefetch). tests/test_book.py runs the whole
behavioural suite over every step; here random streams, through apply() and the per-call
API, with a 64-level window so that far levels and window moves happen all the time,
and a realistic flow, must give every step the naive twin's fills, rejects and book.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naive.book as naive
import optimized._native as native
from optimized.book import BOOK_STEPS, Book, BookStep0, book_step
from tests.bench.conftest import cached_flow
from tests.test_book_differential_native import BATCH_OP, STREAMS, call, normalise, state
from twinmatch.dtypes import OPS_DTYPE

STEPS = range(len(BOOK_STEPS))


def step_books() -> list[Any]:
    return [book_step(i)(window_levels=64, initial_orders=4) for i in STEPS]


def test_steps_are_named_in_order() -> None:
    names = [name for name, _ in BOOK_STEPS]
    assert names[0] == "flat" and names[-1] == "prefetch"
    assert len(set(names)) == len(names)
    assert all(adds for _, adds in BOOK_STEPS)
    assert book_step(len(BOOK_STEPS) - 1) is Book  # the last step is the product's Book
    assert book_step(0) is BookStep0
    for bad in (-1, len(BOOK_STEPS)):
        with pytest.raises(ValueError, match="book step must be in"):
            book_step(bad)


def test_every_step_has_the_book_api() -> None:
    public = {n for n in dir(native.MapBook) if not n.startswith("_")} | {"__len__"}
    for i in STEPS:
        assert public <= set(dir(book_step(i))), i


@settings(max_examples=200, deadline=None)
@given(st.lists(BATCH_OP, max_size=80))
def test_apply_agrees_in_every_step(stream: list[tuple[int, int, int, int, int, int]]) -> None:
    ops = np.zeros(len(stream), dtype=OPS_DTYPE)
    for k, (op, oid, new_id, price, qty, side) in enumerate(stream):
        ops[k] = (oid, new_id, price, qty, op, side)
    reference = naive.Book()
    want_fills, want_rejects = reference.apply(ops)
    for i, book in zip(STEPS, step_books(), strict=True):
        fills, rejects = book.apply(ops)
        assert fills.tolist() == want_fills.tolist(), BOOK_STEPS[i][0]
        assert rejects.tolist() == want_rejects.tolist(), BOOK_STEPS[i][0]
        assert state(book) == state(reference), BOOK_STEPS[i][0]


@settings(max_examples=150, deadline=None)
@given(STREAMS)
def test_per_call_api_agrees_in_every_step(
        stream: list[tuple[int, int, int, int, int, int]]) -> None:
    reference = naive.Book()
    books = step_books()
    for op, oid, new_id, price, qty, side in stream:
        want = normalise(call(reference, op, oid, new_id, price, qty, side))
        for i, book in zip(STEPS, books, strict=True):
            got = normalise(call(book, op, oid, new_id, price, qty, side))
            assert got == want, (BOOK_STEPS[i][0], op, oid, new_id, price, qty, side)
    for i, book in zip(STEPS, books, strict=True):
        assert state(book) == state(reference), BOOK_STEPS[i][0]


def test_realistic_flow_agrees_in_every_step() -> None:
    """The benchmark's workload shape (tests/bench: cached_flow), at a test's size, with
    the default window: every step's fills, rejects and depth equal naive's."""
    ops = cached_flow(20_000, seed=7)
    reference = naive.Book()
    want_fills, want_rejects = reference.apply(ops)
    for i in STEPS:
        book = book_step(i)()
        fills, rejects = book.apply(ops)
        assert np.array_equal(fills, want_fills), BOOK_STEPS[i][0]
        assert np.array_equal(rejects, want_rejects), BOOK_STEPS[i][0]
        for side in (0, 1):
            assert book.depth(side, 10**6) == reference.depth(side, 10**6), BOOK_STEPS[i][0]
        assert len(book) == len(reference)


def test_scan_without_bitset_finds_the_next_level() -> None:
    """Step 0 finds a new best price by walking the level array: levels far apart inside
    the window, at both ends of it, emptied best first, on both sides."""
    for i in STEPS:
        book = book_step(i)(window_levels=1024)
        book.add_limit(1, 0, 5_000, 1)  # the window centres here: base 4_488
        for oid, price in ((2, 4_489), (3, 4_700), (4, 4_999)):
            book.add_limit(oid, 0, price, 1)
        for oid, price in ((12, 5_511), (13, 5_300), (14, 5_001)):
            book.add_limit(oid, 1, price, 1)
        bids, asks = [5_000, 4_999, 4_700, 4_489], [5_001, 5_300, 5_511]
        for oid in (1, 4, 3):
            assert book.best_bid() == (bids[0], 1)
            book.cancel(oid)
            bids.pop(0)
        assert book.best_bid() == (4_489, 1)
        for oid in (14, 13):
            assert book.best_ask() == (asks[0], 1)
            book.cancel(oid)
            asks.pop(0)
        assert book.best_ask() == (5_511, 1)
        book.cancel(2)
        book.cancel(12)
        assert book.best_bid() is None and book.best_ask() is None, BOOK_STEPS[i][0]
