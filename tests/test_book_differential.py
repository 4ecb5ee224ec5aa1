"""Differential property tests: random operation streams give identical results in all twins.

Streams include marketable orders, replaces, executes and bad operations (unknown and
duplicate ids, zero price or quantity, over-reduce, bad side, bad op code), with a small
id space so collisions are common, and extreme prices and quantities.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract.dtypes import OPS_DTYPE
from tests.bench.test_bench_book import run_per_call
from tests.conftest import BOOK_IMPLS, load_book_impl

ids = st.one_of(st.integers(0, 12), st.sampled_from([2**64 - 1, 2**63]))
prices = st.one_of(st.integers(98, 104), st.sampled_from([0, 1, 2**32 - 1, 4_000_000_000]))
qtys = st.one_of(st.integers(0, 12), st.sampled_from([2**32 - 1, 2**31]))
op_rows = st.tuples(ids, ids, prices, qtys, st.sampled_from([0, 0, 0, 1, 2, 3, 4, 5, 6]),
                    st.sampled_from([0, 1, 0, 1, 2]))


def to_array(rows: list[tuple[int, int, int, int, int, int]]) -> np.ndarray:
    return np.array(rows, dtype=OPS_DTYPE)


def state(book: Any, all_ids: set[int]) -> tuple[Any, ...]:
    orders = {i: book.order(i) for i in sorted(all_ids)}
    return (len(book), book.best_bid(), book.best_ask(), book.depth(0, 10**6),
            book.depth(1, 10**6), {k: (int(v[0]), v[1], v[2]) if v else None
                                   for k, v in orders.items()})


def in_layout(ops: np.ndarray, layout: str) -> np.ndarray:
    """The same records as an OPS_DTYPE array, packed (what np.concatenate returns), or a
    strided view (every other record of a twice-as-long array)."""
    if layout == "packed":
        return np.concatenate([ops[: len(ops) // 2], ops[len(ops) // 2:]])
    if layout == "strided":
        wide = np.zeros(2 * len(ops), dtype=OPS_DTYPE)
        wide[::2] = ops
        return wide[::2]
    return ops


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op_rows, max_size=80), st.sampled_from(["plain", "packed", "strided"]))
def test_batch_identical(rows: list[tuple[int, int, int, int, int, int]], layout: str) -> None:
    ops = to_array(rows)
    all_ids = {r[0] for r in rows} | {r[1] for r in rows}
    results = []
    for name in BOOK_IMPLS:
        book = load_book_impl(name).new()
        fills, rejects = book.apply(in_layout(ops, layout))
        results.append((fills.tobytes(), rejects.tobytes(), state(book, all_ids)))
    assert results[1] == results[0], "optimized differs from naive"
    assert results[2] == results[0], "baseline differs from naive"
    if layout != "plain":  # and the layout changes nothing
        plain = load_book_impl("naive").new()
        fills, rejects = plain.apply(ops)
        assert (fills.tobytes(), rejects.tobytes(), state(plain, all_ids)) == results[0]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op_rows, max_size=80))
def test_single_ops_identical_to_batch(rows: list[tuple[int, int, int, int, int, int]]) -> None:
    # The single-op API takes only valid sides and op codes; those are batch-only rejects.
    rows = [r for r in rows if r[4] <= 5 and r[5] <= 1]
    ops = to_array(rows)
    all_ids = {r[0] for r in rows} | {r[1] for r in rows}
    reference = load_book_impl("naive").new()
    want_fills, want_rejects = reference.apply(ops)
    want = [(int(f["resting_id"]), int(f["aggressor_id"]), int(f["price"]), int(f["qty"]),
             int(f["op_index"]), int(f["aggressor_side"])) for f in want_fills]
    for name in BOOK_IMPLS:
        book = load_book_impl(name).new()
        fills, n_rejects = run_per_call(book, ops)
        assert fills == want, name
        assert n_rejects == len(want_rejects), name
        assert state(book, all_ids) == state(reference, all_ids), name


def apply_until_full(book: Any, ops: np.ndarray) -> tuple[Any, ...]:
    """apply(), and if the book fills up: where, and what the ops before it did."""
    try:
        fills, rejects = book.apply(ops)
        return ("done", fills.tobytes(), rejects.tobytes())
    except MemoryError as full:
        assert type(full).__name__ == "BookFull"
        return ("full", full.index, full.fills.tobytes(), full.rejects.tobytes())  # type: ignore[attr-defined]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op_rows, max_size=80), st.integers(1, 6))
def test_full_book_identical(rows: list[tuple[int, int, int, int, int, int]],
                             max_orders: int) -> None:
    """With a tiny max_orders, every twin stops at the same operation with the same
    results, and holds the same book (what the ops before it did)."""
    ops = to_array(rows)
    all_ids = {r[0] for r in rows} | {r[1] for r in rows}
    results = []
    for name in BOOK_IMPLS:
        book = load_book_impl(name).new(max_orders=max_orders)
        results.append((apply_until_full(book, ops), state(book, all_ids)))
        assert len(book) <= max_orders
    assert results[1] == results[0], "optimized differs from naive"
    assert results[2] == results[0], "baseline differs from naive"
