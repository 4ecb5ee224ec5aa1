"""Differential tests: random operation streams, identical results from every book.

The naive book is the specification; the optimized Book (with a tiny 64-level window,
so that far levels, re-centring and the std::map slow path are exercised constantly)
and the std::map baseline must agree with it on every fill, reject, depth and count,
through the per-call API and through apply().
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import naive.book as naive
from contract.dtypes import OPS_DTYPE, REASON_CODE
from optimized.book import Book, MapBook

MAX_ID = 2**64 - 1
IDS = st.one_of(st.integers(0, 12), st.sampled_from([MAX_ID, MAX_ID - 1, 2**32, 2**63]))
# Prices around two clusters far apart (beyond a 64-level window), plus the extremes.
PRICES = st.one_of(
    st.integers(95, 105),
    st.integers(100_000, 100_004),
    st.sampled_from([0, 1, 2**32 - 1, 2**32]),
)
QTYS = st.one_of(st.integers(0, 6), st.sampled_from([2**32 - 1, 2**32]))
OP = st.tuples(st.integers(0, 6), IDS, IDS, PRICES, QTYS, st.sampled_from([0, 0, 1, 1, 2]))
STREAMS = st.lists(OP, max_size=60)


def books() -> list[Any]:
    return [naive.Book(), Book(window_levels=64, initial_orders=4), MapBook(initial_orders=4)]


def state(book: Any) -> tuple[Any, ...]:
    return (
        len(book),
        book.best_bid(),
        book.best_ask(),
        book.depth(0, 10**9),
        book.depth(1, 10**9),
        [book.order(i) for i in [*range(13), MAX_ID, MAX_ID - 1, 2**32, 2**63]],
    )


def call(book: Any, op: int, oid: int, new_id: int, price: int, qty: int, side: int) -> Any:
    """One operation through the per-call API; a reject becomes ("rejected", id, reason)."""
    try:
        if op in (0, 1) and side > 1:
            try:
                book.add_limit(oid, side, price, qty)
            except ValueError as err:  # side is checked before anything else
                return ("bad side", type(err).__name__)
        if op == 0:
            return book.add_limit(oid, side, price, qty)
        if op == 1:
            return book.add_market(oid, side, qty)
        if op == 2:
            return book.cancel(oid)
        if op == 3:
            return book.reduce(oid, qty)
        if op == 4:
            return book.execute(oid, qty)
        if op == 5:
            return book.replace(oid, new_id, price, qty)
        return book.depth(side % 2, qty)
    except ValueError as err:  # both twins' OrderRejected are ValueErrors with .reason
        reason = getattr(err, "reason", None)
        if reason is None:
            raise
        return ("rejected", getattr(err, "order_id", None), reason)


def normalise(result: Any) -> Any:
    """Fills of either twin as plain tuples, so results compare structurally."""
    if isinstance(result, list):
        return [tuple(int(x) for x in r) for r in result]
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], list):
        return normalise(result[0]), result[1]
    if hasattr(result, "aggressor_side"):
        return tuple(int(x) for x in result)
    return result


@settings(max_examples=300, deadline=None)
@given(STREAMS)
def test_per_call_api_agrees(stream: list[tuple[int, int, int, int, int, int]]) -> None:
    all_books = books()
    for op, oid, new_id, price, qty, side in stream:
        results = [normalise(call(b, op, oid, new_id, price, qty, side)) for b in all_books]
        assert results[1] == results[0], (op, oid, new_id, price, qty, side)
        assert results[2] == results[0], (op, oid, new_id, price, qty, side)
        states = [state(b) for b in all_books]
        assert states[1] == states[0]
        assert states[2] == states[0]


BATCH_OP = st.tuples(
    st.integers(0, 8),                     # 6..8: bad op codes
    IDS,
    IDS,
    st.one_of(st.integers(95, 105), st.integers(100_000, 100_004),
              st.sampled_from([0, 1, 2**32 - 1])),
    st.one_of(st.integers(0, 6), st.just(2**32 - 1)),
    st.integers(0, 3),                     # 2, 3: bad sides
)


@settings(max_examples=300, deadline=None)
@given(st.lists(BATCH_OP, max_size=80))
def test_apply_agrees(stream: list[tuple[int, int, int, int, int, int]]) -> None:
    ops = np.zeros(len(stream), dtype=OPS_DTYPE)
    for k, (op, oid, new_id, price, qty, side) in enumerate(stream):
        ops[k] = (oid, new_id, price, qty, op, side)
    all_books = books()
    results = [b.apply(ops) for b in all_books]
    for fills, rejects in results[1:]:
        assert fills.dtype == results[0][0].dtype and rejects.dtype == results[0][1].dtype
        assert fills.tolist() == results[0][0].tolist()
        assert rejects.tolist() == results[0][1].tolist()
    states = [state(b) for b in all_books]
    assert states[1] == states[0] and states[2] == states[0]
    assert set(results[0][1]["reason"].tolist()) <= set(REASON_CODE.values())


def test_long_random_stream_agrees() -> None:
    """One longer stream with a moving price, compared in full (fills, rejects, depth)."""
    rng = np.random.default_rng(2024)
    n = 20_000
    ops = np.zeros(n, dtype=OPS_DTYPE)
    mid = 50_000
    for k in range(n):
        mid += int(rng.integers(-40, 41))  # drifts well beyond a 64-level window
        side = int(rng.integers(0, 2))
        ops[k] = (
            int(rng.integers(0, 400)),
            int(rng.integers(0, 400)),
            max(1, mid + int(rng.integers(-30, 31))),
            int(rng.integers(1, 50)),
            int(rng.choice([0, 0, 0, 1, 2, 2, 3, 4, 5])),
            side,
        )
    all_books = books()
    results = [b.apply(ops) for b in all_books]
    for fills, rejects in results[1:]:
        assert np.array_equal(fills, results[0][0])
        assert np.array_equal(rejects, results[0][1])
    states = [state(b) for b in all_books]
    assert states[1] == states[0] and states[2] == states[0]
    assert all_books[1].stats()["recentres"] > 0
