"""The behavioural suite of the order book, run over naive, optimized and baseline, and
over chapter 1's steps (optimized.book.book_step: the optimized Book compiled with only
its first decisions; the last step is Book itself)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import optimized.book
from contract.dtypes import (
    OP_CANCEL,
    OP_EXECUTE,
    OP_LIMIT,
    OP_MARKET,
    OP_REDUCE,
    OP_REPLACE,
    OPS_DTYPE,
    REASON_CODE,
)
from tests.conftest import BOOK_IMPLS, BookImpl, load_book_impl

BUY, SELL = 0, 1
MAX_PRICE = 2**32 - 1
MAX_QTY = 2**32 - 1
MAX_ID = 2**64 - 1

STEP_IMPLS = tuple(f"step{i}" for i in range(len(optimized.book.BOOK_STEPS) - 1))


@pytest.fixture(params=BOOK_IMPLS + STEP_IMPLS)
def impl(request: pytest.FixtureRequest) -> BookImpl:
    """The twins and the baseline (tests/conftest.py), then each of chapter 1's steps."""
    name = str(request.param)
    if name.startswith("step"):
        return BookImpl(name, optimized.book, optimized.book.book_step(int(name[4:])))
    return load_book_impl(name)


def as_tuples(fills: Any) -> list[tuple[int, int, int, int, int]]:
    return [tuple(int(x) for x in f) for f in fills]  # type: ignore[misc]


def rejected(impl: BookImpl, reason: str, order_id: int | None = None) -> Any:
    """pytest.raises for OrderRejected that also checks reason and id afterwards."""
    return _Rejected(impl, reason, order_id)


class _Rejected:
    def __init__(self, impl: BookImpl, reason: str, order_id: int | None) -> None:
        self.impl, self.reason, self.order_id = impl, reason, order_id
        self._ctx: Any = None

    def __enter__(self) -> None:
        self._ctx = pytest.raises(self.impl.OrderRejected)
        self.info = self._ctx.__enter__()

    def __exit__(self, *exc: Any) -> bool:
        suppressed = bool(self._ctx.__exit__(*exc))
        assert isinstance(self.info.value, ValueError)
        err: Any = self.info.value
        assert err.reason == self.reason
        if self.order_id is not None:
            assert err.order_id == self.order_id
            assert str(self.order_id) in str(err)
        return suppressed


def snapshot(book: Any) -> tuple[Any, ...]:
    return (
        len(book),
        book.best_bid(),
        book.best_ask(),
        book.depth(BUY, 1000),
        book.depth(SELL, 1000),
    )


# ----------------------------------------------------------------- basics


def test_empty_book(impl: BookImpl) -> None:
    book = impl.new()
    assert len(book) == 0
    assert book.best_bid() is None
    assert book.best_ask() is None
    assert book.depth(BUY, 5) == []
    assert book.depth(SELL, 5) == []
    assert book.order(1) is None


def test_side_is_int_enum(impl: BookImpl) -> None:
    assert impl.Side.BUY == 0 and impl.Side.SELL == 1
    assert int(impl.Side.SELL) == 1


def test_resting_orders_and_queries(impl: BookImpl) -> None:
    book = impl.new()
    assert book.add_limit(1, BUY, 100, 10) == []
    assert book.add_limit(2, BUY, 100, 5) == []
    assert book.add_limit(3, BUY, 99, 7) == []
    assert book.add_limit(4, SELL, 105, 3) == []
    assert book.add_limit(5, SELL, 103, 4) == []
    assert len(book) == 5
    assert book.best_bid() == (100, 15)
    assert book.best_ask() == (103, 4)
    assert book.depth(BUY, 10) == [(100, 15, 2), (99, 7, 1)]
    assert book.depth(SELL, 10) == [(103, 4, 1), (105, 3, 1)]
    assert book.depth(BUY, 1) == [(100, 15, 2)]
    assert book.depth(SELL, 0) == []
    side, price, qty = book.order(3)
    assert (side, price, qty) == (BUY, 99, 7)
    assert side == impl.Side.BUY


# --------------------------------------------------------------- matching


def test_price_time_priority(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, SELL, 101, 5)
    book.add_limit(2, SELL, 100, 5)
    book.add_limit(3, SELL, 100, 5)
    book.add_limit(4, SELL, 102, 5)
    fills = book.add_limit(10, BUY, 101, 12)
    # best price first (100: 2 then 3 by arrival), then 101; each at the resting price
    assert as_tuples(fills) == [(2, 10, 100, 5, BUY), (3, 10, 100, 5, BUY), (1, 10, 101, 2, BUY)]
    assert book.order(1) == (SELL, 101, 3)
    assert book.best_ask() == (101, 3)
    assert len(book) == 2


def test_fill_compares_equal_to_tuple(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, SELL, 100, 5)
    (fill,) = book.add_limit(2, BUY, 100, 5)
    assert fill == (1, 2, 100, 5, BUY)
    assert (fill.resting_id, fill.aggressor_id, fill.price, fill.qty) == (1, 2, 100, 5)
    assert fill.aggressor_side == impl.Side.BUY
    assert tuple(fill) == (1, 2, 100, 5, 0)


def test_partial_fill_rests_remainder(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, BUY, 100, 5)
    fills = book.add_limit(2, SELL, 99, 8)
    assert as_tuples(fills) == [(1, 2, 100, 5, SELL)]
    assert book.best_bid() is None
    assert book.best_ask() == (99, 3)
    assert book.order(2) == (SELL, 99, 3)


def test_limit_does_not_cross_beyond_its_price(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, SELL, 101, 5)
    assert book.add_limit(2, BUY, 100, 5) == []
    assert book.best_bid() == (100, 5)
    assert book.best_ask() == (101, 5)


def test_remainder_rests_behind_earlier_orders(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, SELL, 100, 2)
    book.add_limit(2, BUY, 101, 1)   # rests at 101? no: crosses 100 first
    assert book.order(1) == (SELL, 100, 1)
    book.add_limit(3, BUY, 99, 4)
    book.add_limit(4, BUY, 100, 6)   # takes 1 at 100, rests 5 at 100
    book.add_limit(5, BUY, 100, 2)
    fills = book.add_limit(6, SELL, 100, 6)
    assert as_tuples(fills) == [(4, 6, 100, 5, SELL), (5, 6, 100, 1, SELL)]
    assert book.order(5) == (BUY, 100, 1)


def test_market_sweep_with_unfilled_remainder(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, SELL, 100, 3)
    book.add_limit(2, SELL, 200, 4)
    book.add_limit(3, SELL, 4_000_000_000, 5)
    fills, unfilled = book.add_market(9, BUY, 20)
    assert as_tuples(fills) == [
        (1, 9, 100, 3, BUY),
        (2, 9, 200, 4, BUY),
        (3, 9, 4_000_000_000, 5, BUY),
    ]
    assert unfilled == 8
    assert len(book) == 0
    assert book.order(9) is None  # a market order never rests


def test_market_on_empty_side(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, BUY, 100, 3)
    fills, unfilled = book.add_market(2, BUY, 7)
    assert list(fills) == [] and unfilled == 7
    assert book.best_bid() == (100, 3)
    fills, unfilled = book.add_market(3, SELL, 2)
    assert as_tuples(fills) == [(1, 3, 100, 2, SELL)] and unfilled == 0


def test_sweep_of_many_orders_at_one_price(impl: BookImpl) -> None:
    book = impl.new()
    for i in range(100):
        book.add_limit(i, SELL, 500, 10)
    fills = book.add_limit(1000, BUY, 500, 1000)
    assert [f[0] for f in fills] == list(range(100))
    assert len(book) == 0 and book.best_ask() is None


# ------------------------------------------------- cancel, reduce, execute


def test_cancel(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, BUY, 100, 10)
    book.add_limit(2, BUY, 100, 5)
    assert book.cancel(1) == 10
    assert book.depth(BUY, 5) == [(100, 5, 1)]
    assert book.cancel(2) == 5
    assert len(book) == 0 and book.best_bid() is None


def test_reduce_keeps_priority(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, SELL, 100, 10)
    book.add_limit(2, SELL, 100, 10)
    assert book.reduce(1, 7) == 3
    fills = book.add_limit(3, BUY, 100, 4)
    assert as_tuples(fills) == [(1, 3, 100, 3, BUY), (2, 3, 100, 1, BUY)]


def test_reduce_to_zero_removes(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, SELL, 100, 10)
    assert book.reduce(1, 10) == 0
    assert book.order(1) is None and len(book) == 0 and book.best_ask() is None


def test_execute(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, BUY, 100, 10)
    book.add_limit(2, BUY, 100, 10)
    fill = book.execute(1, 4)
    assert fill == (1, 0, 100, 4, SELL)  # aggressor side is opposite the resting order
    assert book.order(1) == (BUY, 100, 6)
    # the remainder keeps its priority
    fills = book.add_limit(3, SELL, 100, 7)
    assert as_tuples(fills) == [(1, 3, 100, 6, SELL), (2, 3, 100, 1, SELL)]
    fill = book.execute(2, 9)
    assert fill == (2, 0, 100, 9, SELL)
    assert len(book) == 0


def test_execute_sell_side(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(5, SELL, 70, 3)
    assert book.execute(5, 3) == (5, 0, 70, 3, BUY)
    assert book.order(5) is None


# ------------------------------------------------------------------ replace


def test_replace_loses_priority(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, BUY, 100, 5)
    book.add_limit(2, BUY, 100, 5)
    assert book.replace(1, 11, 100, 5) == []
    assert book.order(1) is None
    assert book.order(11) == (BUY, 100, 5)
    fills = book.add_limit(3, SELL, 100, 6)
    assert as_tuples(fills) == [(2, 3, 100, 5, SELL), (11, 3, 100, 1, SELL)]


def test_replace_same_id_and_new_price(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, SELL, 100, 5)
    book.add_limit(2, SELL, 100, 5)
    assert book.replace(1, 1, 101, 8) == []
    assert book.order(1) == (SELL, 101, 8)
    assert book.depth(SELL, 5) == [(100, 5, 1), (101, 8, 1)]


def test_replace_may_match(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, BUY, 100, 5)
    book.add_limit(2, SELL, 105, 3)
    fills = book.replace(1, 7, 106, 5)
    assert as_tuples(fills) == [(2, 7, 105, 3, BUY)]
    assert book.order(7) == (BUY, 106, 2)
    assert book.order(1) is None


# ------------------------------------------------------------------ rejects


def test_reject_duplicate_id(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, BUY, 100, 5)
    before = snapshot(book)
    with rejected(impl, "duplicate_id", 1):
        book.add_limit(1, SELL, 200, 5)
    with rejected(impl, "duplicate_id", 1):
        book.add_market(1, SELL, 5)
    assert snapshot(book) == before


def test_reject_unknown_id(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, BUY, 100, 5)
    before = snapshot(book)
    calls: list[Callable[[], Any]] = [
        lambda: book.cancel(2),
        lambda: book.reduce(2, 1),
        lambda: book.execute(2, 1),
        lambda: book.replace(2, 3, 100, 1),
    ]
    for call in calls:
        with rejected(impl, "unknown_id", 2):
            call()
    assert snapshot(book) == before


def test_filled_id_is_free_again(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, BUY, 100, 5)
    book.add_limit(2, SELL, 100, 5)
    with rejected(impl, "unknown_id", 1):
        book.cancel(1)
    assert book.add_limit(1, SELL, 90, 1) == []


def test_reject_bad_price(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, BUY, 100, 5)
    before = snapshot(book)
    for price in (0, -1, MAX_PRICE + 1, 2**63 - 1):
        with rejected(impl, "bad_price", 2):
            book.add_limit(2, BUY, price, 5)
        with rejected(impl, "bad_price", 1):
            book.replace(1, 3, price, 5)
    assert snapshot(book) == before


def test_reject_bad_qty(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, BUY, 100, 5)
    before = snapshot(book)
    for qty in (0, -5, MAX_QTY + 1):
        with rejected(impl, "bad_qty", 2):
            book.add_limit(2, BUY, 100, qty)
        with rejected(impl, "bad_qty", 2):
            book.add_market(2, SELL, qty)
        with rejected(impl, "bad_qty", 1):
            book.reduce(1, qty)
        with rejected(impl, "bad_qty", 1):
            book.execute(1, qty)
        with rejected(impl, "bad_qty", 1):
            book.replace(1, 3, 100, qty)
    assert snapshot(book) == before


def test_reject_over_reduce(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, BUY, 100, 5)
    before = snapshot(book)
    with rejected(impl, "over_reduce", 1):
        book.reduce(1, 6)
    with rejected(impl, "over_reduce", 1):
        book.execute(1, 6)
    assert snapshot(book) == before


def test_replace_to_other_live_id_is_duplicate(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, BUY, 100, 5)
    book.add_limit(2, BUY, 99, 5)
    before = snapshot(book)
    with rejected(impl, "duplicate_id", 2):
        book.replace(1, 2, 101, 5)
    assert snapshot(book) == before


def test_validation_order(impl: BookImpl) -> None:
    """The first failing check names the reason, identically in every twin."""
    book = impl.new()
    book.add_limit(1, BUY, 100, 5)
    with rejected(impl, "bad_price"):
        book.add_limit(1, BUY, 0, 0)  # price before qty before duplicate
    with rejected(impl, "bad_qty"):
        book.add_limit(1, BUY, 100, 0)
    with rejected(impl, "bad_qty"):
        book.reduce(9, 0)  # qty before unknown id
    with rejected(impl, "bad_price"):
        book.replace(9, 1, 0, 5)  # price before unknown id


def test_argument_types(impl: BookImpl) -> None:
    book = impl.new()
    with pytest.raises(TypeError):
        book.add_limit(-1, BUY, 100, 5)
    with pytest.raises(TypeError):
        book.add_limit(2**64, BUY, 100, 5)
    with pytest.raises(TypeError):
        book.add_limit(1, BUY, 2**64, 5)
    with pytest.raises(ValueError):
        book.add_limit(1, 2, 100, 5)
    # Every argument's type is checked before any value (as a C++ signature does).
    with pytest.raises(TypeError):
        book.add_limit(2, 5, 2**70, 1)
    with pytest.raises(TypeError):
        book.add_limit(1, 1.0, 100, 5)
    with pytest.raises(TypeError):
        book.add_market(1, 1.0, 5)
    with pytest.raises(TypeError):
        book.order(-1)
    with pytest.raises(TypeError):
        book.order(2**64)
    with pytest.raises(TypeError):
        book.depth(BUY, 2**63)
    with pytest.raises(ValueError):
        book.depth(3, 1)
    assert len(book) == 0
    with pytest.raises(ValueError):
        impl.new(max_orders=0)
    with pytest.raises(ValueError):
        impl.new(max_orders=2**31 + 1)  # more than the C++ id table can hold
    with pytest.raises(TypeError):
        impl.new(max_orders=2**32)
    with pytest.raises(TypeError):
        impl.new(max_orders=-1)


# Every integer argument the way a C++ signature takes it, in all three books: anything
# Python can use as an index (int, bool, numpy integer scalars), in range; everything
# else a TypeError (a side that is an int but neither 0 nor 1 is a ValueError).
ARGUMENTS: list[tuple[str, Any, Any]] = [
    ("numpy uint64 id", np.uint64(2**64 - 1), None),
    ("numpy int64 id", np.int64(7), None),
    ("numpy int32 id", np.int32(7), None),
    ("bool id", True, None),
    ("python int id", 7, None),
    ("negative id", -1, TypeError),
    ("negative numpy id", np.int64(-1), TypeError),
    ("id over uint64", 2**64, TypeError),
    ("float id", 7.0, TypeError),
    ("numpy float id", np.float64(7), TypeError),
    ("numpy bool id", np.bool_(True), TypeError),
    ("str id", "7", TypeError),
    ("None id", None, TypeError),
]


def _outcome(impl: BookImpl, where: str, value: Any) -> tuple[Any, ...]:
    """What one call with `value` in one argument does to a small book: the exception
    type (by name: each twin has its own OrderRejected) or the result, and the book after."""
    book = impl.new()
    book.add_limit(1, SELL, 100, 10)
    calls: dict[str, Any] = {
        "add id": lambda: book.add_limit(value, BUY, 50, 1),
        "add side": lambda: book.add_limit(2, value, 50, 1),
        "add price": lambda: book.add_limit(2, BUY, value, 1),
        "add qty": lambda: book.add_limit(2, BUY, 50, value),
        "market qty": lambda: book.add_market(2, BUY, value),
        "cancel": lambda: book.cancel(value),
        "order": lambda: book.order(value),
        "reduce qty": lambda: book.reduce(1, value),
        "execute qty": lambda: book.execute(1, value),
        "replace new id": lambda: book.replace(1, value, 101, 10),
        "depth levels": lambda: book.depth(SELL, value),
    }
    try:
        result = calls[where]()
    except (TypeError, ValueError, MemoryError) as exc:
        kind = "OrderRejected" if isinstance(exc, impl.OrderRejected) else type(exc).__name__
        result = ("raised", kind)
    if isinstance(result, list):
        result = [tuple(f) for f in result]
        assert all(type(x) is int for f in result for x in f[:4])  # plain ints, always
    elif isinstance(result, tuple) and result and isinstance(result[0], list):
        result = ([tuple(f) for f in result[0]], result[1])
    elif result is not None and not isinstance(result, (int, tuple)):
        result = tuple(result)
    walk = [(p, q, c) for side in (BUY, SELL) for p, q, c in book.depth(side, 100)]
    ids = [book.order(i) for i in (1, 2, 7, 2**64 - 1)]
    return result, walk, ids, len(book)


WHERE = ("add id", "add side", "add price", "add qty", "market qty", "cancel", "order",
         "reduce qty", "execute qty", "replace new id", "depth levels")


@pytest.mark.parametrize(("label", "value", "error"), ARGUMENTS, ids=[a[0] for a in ARGUMENTS])
def test_argument_types_are_the_same_in_every_twin(
    impl: BookImpl, label: str, value: Any, error: Any
) -> None:
    """An id, side, price, qty or count of one Python type is taken, or refused with the
    same exception type, by every book, with the same effect; numpy integers are taken."""
    from tests.conftest import load_book_impl

    naive = load_book_impl("naive")
    for where in WHERE:
        got = _outcome(impl, where, value)
        assert got == _outcome(naive, where, value), where
        if error is not None and where in ("add id", "cancel", "order", "replace new id"):
            assert got[0] == ("raised", error.__name__), where
    if error is None:  # taken: a numpy integer id is the same id as the int
        assert _outcome(impl, "add id", value) == _outcome(impl, "add id", int(value))


def test_max_orders_argument_types(impl: BookImpl) -> None:
    assert len(impl.new(max_orders=np.uint32(5))) == 0
    for bad in (5.0, np.float64(5), "5", -1, 2**32):
        with pytest.raises(TypeError):
            impl.new(max_orders=bad)


def drain_seconds(impl: BookImpl, n: int) -> float:
    """CPU time of one market order that trades, one by one, n orders resting at one price.
    The garbage collector is off meanwhile: its passes over the n new Fill objects grow
    with everything alive, and would make any book look superlinear."""
    import gc
    import time

    book = impl.new()
    for i in range(n):
        book.add_limit(i, SELL, 100, 1)
    gc.disable()
    try:
        start = time.process_time()
        fills, unfilled = book.add_market(n, BUY, n)
        took = time.process_time() - start
    finally:
        gc.enable()
    assert len(fills) == n and unfilled == 0 and len(book) == 0
    return took


@pytest.mark.timeout(300)
def test_draining_a_level_is_linear(impl: BookImpl) -> None:
    """Taking the oldest order of a level is O(1) in every twin, however many have left
    it before: draining 100,000 orders costs about 10 times draining 10,000 (a plain
    dict's first key, found past its deleted slots, made it about 100 times). CPU time of
    this process only, the best of a few runs, and a generous bound."""
    small = min(drain_seconds(impl, 10_000) for _ in range(3))
    large = min(drain_seconds(impl, 100_000) for _ in range(2))
    assert large < 30 * max(small, 1e-3), (small, large)  # 1 ms: below it, timer noise


# ------------------------------------------------------------------ capacity


def test_max_orders(impl: BookImpl) -> None:
    """A full book refuses one more resting order with BookFull (a MemoryError, not a
    reject), before changing anything; what needs no new resting order still works."""
    book = impl.new(max_orders=2)
    book.add_limit(1, SELL, 100, 10)
    book.add_limit(2, BUY, 90, 10)
    full = impl.module.BookFull
    assert issubclass(full, MemoryError) and not issubclass(full, ValueError)
    before = (book.depth(BUY, 5), book.depth(SELL, 5))
    with pytest.raises(full) as caught:
        book.add_limit(3, BUY, 80, 5)
    assert caught.value.index is None
    with pytest.raises(full):  # checked before matching, even for an order that would trade
        book.add_limit(4, BUY, 100, 5)
    with rejected(impl, "duplicate_id"):  # a reject comes first
        book.add_limit(1, BUY, 80, 5)
    assert (book.depth(BUY, 5), book.depth(SELL, 5)) == before and len(book) == 2
    assert [tuple(f) for f in book.add_market(5, BUY, 4)[0]] == [(1, 5, 100, 4, BUY)]
    assert [tuple(f) for f in book.replace(2, 6, 95, 5)] == []  # one leaves, one enters
    book.cancel(6)
    book.add_limit(7, BUY, 80, 5)
    assert len(book) == 2


def test_apply_book_full_keeps_results(impl: BookImpl) -> None:
    """apply() on a full book stops at the operation that needs one more order; the
    ones before it are applied, and their fills and rejects come with the error."""
    ops = np.zeros(6, dtype=OPS_DTYPE)
    ops[0] = (1, 0, 100, 10, OP_LIMIT, SELL)
    ops[1] = (2, 0, 100, 4, OP_LIMIT, BUY)  # trades with 1, nothing rests
    ops[2] = (3, 0, 0, 5, OP_LIMIT, BUY)  # bad price: a reject
    ops[3] = (4, 0, 99, 5, OP_LIMIT, BUY)  # rests: the book is full now
    ops[4] = (5, 0, 98, 5, OP_LIMIT, BUY)  # no room
    ops[5] = (1, 0, 0, 0, OP_CANCEL, 0)
    book = impl.new(max_orders=2)
    with pytest.raises(impl.module.BookFull) as caught:
        book.apply(ops)
    err = caught.value
    assert err.index == 4 and "at operation 4" in str(err)
    assert err.fills.tolist() == [(1, 2, 100, 4, 1, BUY)]
    assert err.rejects.tolist() == [(2, REASON_CODE["bad_price"])]
    assert len(book) == 2 and book.best_bid() == (99, 5) and book.best_ask() == (100, 6)
    fills, rejects = book.apply(ops[5:])  # carry on from there
    assert len(fills) == 0 and len(rejects) == 0 and len(book) == 1


@pytest.mark.parametrize("shape", [(), (2, 2)])
def test_apply_wrong_shape(impl: BookImpl, shape: tuple[int, ...]) -> None:
    ops = np.zeros(shape, dtype=OPS_DTYPE)
    ops["order_id"] = 1
    ops["price"] = 100
    ops["qty"] = 1
    book = impl.new()
    with pytest.raises(ValueError, match="one-dimensional"):
        book.apply(ops)
    assert len(book) == 0


# ----------------------------------------------------------------- extremes


def test_extreme_values(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(0, BUY, 1, MAX_QTY)
    book.add_limit(MAX_ID, SELL, MAX_PRICE, MAX_QTY)
    book.add_limit(5, BUY, 1, MAX_QTY)  # level total above 2**32
    assert book.order(0) == (BUY, 1, MAX_QTY)
    assert book.order(MAX_ID) == (SELL, MAX_PRICE, MAX_QTY)
    assert book.best_bid() == (1, 2 * MAX_QTY)
    assert book.best_ask() == (MAX_PRICE, MAX_QTY)
    fills = book.add_limit(7, SELL, 1, MAX_QTY)
    assert as_tuples(fills) == [(0, 7, 1, MAX_QTY, SELL)]
    fills, unfilled = book.add_market(8, BUY, MAX_QTY)
    assert as_tuples(fills) == [(MAX_ID, 8, MAX_PRICE, MAX_QTY, BUY)] and unfilled == 0
    assert book.cancel(5) == MAX_QTY
    assert len(book) == 0


def test_prices_far_apart(impl: BookImpl) -> None:
    book = impl.new()
    book.add_limit(1, BUY, 1, 10)
    book.add_limit(2, SELL, 4_000_000_000, 10)
    book.add_limit(3, BUY, 2, 10)
    book.add_limit(4, SELL, 3_999_999_999, 10)
    assert book.best_bid() == (2, 10)
    assert book.best_ask() == (3_999_999_999, 10)
    assert book.depth(BUY, 5) == [(2, 10, 1), (1, 10, 1)]
    assert book.depth(SELL, 5) == [(3_999_999_999, 10, 1), (4_000_000_000, 10, 1)]
    fills = book.add_limit(5, SELL, 1, 25)
    assert as_tuples(fills) == [(3, 5, 2, 10, SELL), (1, 5, 1, 10, SELL)]
    assert book.best_ask() == (1, 5)
    fills = book.add_limit(6, BUY, 4_000_000_000, 30)
    assert as_tuples(fills) == [
        (5, 6, 1, 5, BUY),
        (4, 6, 3_999_999_999, 10, BUY),
        (2, 6, 4_000_000_000, 10, BUY),
    ]
    assert book.best_bid() == (4_000_000_000, 5)


def test_emptied_and_refilled(impl: BookImpl) -> None:
    book = impl.new()
    for round_ in range(3):
        base = 1_000 + round_ * 10_000_000
        for i in range(50):
            book.add_limit(i, BUY, base + i, 1)
            book.add_limit(100 + i, SELL, base + 100 + i, 1)
        assert book.best_bid() == (base + 49, 1)
        assert book.best_ask() == (base + 100, 1)
        assert len(book) == 100
        for i in range(50):
            book.cancel(i)
            book.cancel(100 + i)
        assert len(book) == 0 and book.best_bid() is None and book.best_ask() is None


def test_many_levels_and_orders(impl: BookImpl) -> None:
    book = impl.new()
    for i in range(5000):
        book.add_limit(i, BUY if i % 2 else SELL, 1_000_000 + (i % 2) * -5000 + i // 2 * 1, 3)
    assert len(book) == 5000
    bids = book.depth(BUY, 10_000)
    asks = book.depth(SELL, 10_000)
    assert len(bids) == 2500 and len(asks) == 2500
    assert [p for p, _, _ in bids] == sorted((p for p, _, _ in bids), reverse=True)
    assert bids[0][0] < asks[0][0]


# -------------------------------------------------------------------- batch


def make_ops(rows: list[tuple[int, int, int, int, int, int]]) -> np.ndarray:
    """rows of (op, order_id, side, price, qty, new_order_id)."""
    ops = np.zeros(len(rows), dtype=OPS_DTYPE)
    for i, (op, oid, side, price, qty, new_id) in enumerate(rows):
        ops[i] = (oid, new_id, price, qty, op, side)
    return ops


def test_apply_matches_single_ops(impl: BookImpl) -> None:
    rows = [
        (OP_LIMIT, 1, SELL, 100, 5, 0),
        (OP_LIMIT, 2, SELL, 101, 5, 0),
        (OP_LIMIT, 3, BUY, 101, 7, 0),
        (OP_LIMIT, 2, BUY, 90, 7, 0),          # duplicate_id
        (OP_CANCEL, 77, 0, 0, 0, 0),           # unknown_id
        (OP_LIMIT, 4, BUY, 0, 1, 0),           # bad_price
        (OP_LIMIT, 5, BUY, 99, 0, 0),          # bad_qty
        (OP_REDUCE, 2, 0, 0, 9, 0),            # over_reduce
        (OP_LIMIT, 6, 2, 99, 1, 0),            # bad_side
        (9, 7, 0, 99, 1, 0),                   # bad_op
        (OP_EXECUTE, 2, 0, 0, 1, 0),
        (OP_REPLACE, 2, 0, 95, 4, 8),
        (OP_MARKET, 9, BUY, 0, 3, 0),
        (OP_LIMIT, 10, BUY, 96, 2, 0),
        (OP_REDUCE, 10, 0, 0, 1, 0),
    ]
    book = impl.new()
    fills, rejects = book.apply(make_ops(rows))
    assert [tuple(int(x) for x in r) for r in rejects] == [
        (3, REASON_CODE["duplicate_id"]),
        (4, REASON_CODE["unknown_id"]),
        (5, REASON_CODE["bad_price"]),
        (6, REASON_CODE["bad_qty"]),
        (7, REASON_CODE["over_reduce"]),
        (8, REASON_CODE["bad_side"]),
        (9, REASON_CODE["bad_op"]),
    ]
    got = [tuple(int(x) for x in f) for f in fills]
    assert got == [
        # resting, aggressor, price, qty, op_index, side  (FILL_DTYPE field order)
        (1, 3, 100, 5, 2, BUY),
        (2, 3, 101, 2, 2, BUY),
        (2, 0, 101, 1, 10, BUY),
        (8, 9, 95, 3, 12, BUY),
        (8, 10, 95, 1, 13, BUY),
    ]
    assert list(fills.dtype.names) == [
        "resting_id", "aggressor_id", "price", "qty", "op_index", "aggressor_side"
    ]
    assert book.best_ask() is None
    assert book.best_bid() is None
    assert len(book) == 0


def test_apply_empty(impl: BookImpl) -> None:
    book = impl.new()
    fills, rejects = book.apply(np.zeros(0, dtype=OPS_DTYPE))
    assert len(fills) == 0 and len(rejects) == 0


def test_apply_wrong_dtype(impl: BookImpl) -> None:
    book = impl.new()
    with pytest.raises(TypeError, match="OPS_DTYPE"):
        book.apply(np.zeros(3, dtype=np.int64))
    # The field names right, a type wrong: refused, not converted.
    fields = OPS_DTYPE.fields
    assert fields is not None
    other = np.dtype([(name, "<u8" if name == "price" else fields[name][0]) for name in fields])
    with pytest.raises(TypeError, match="OPS_DTYPE"):
        book.apply(np.zeros(3, dtype=other))
    assert len(book) == 0


def test_apply_same_fields_other_layout(impl: BookImpl) -> None:
    """np.concatenate packs OPS_DTYPE records (numpy drops the padding that makes them 32
    bytes); the fields are the same, so apply() converts the array instead of refusing it."""
    ops = np.zeros(3, dtype=OPS_DTYPE)
    ops[0] = (1, 0, 100, 5, OP_LIMIT, SELL)
    ops[1] = (2, 0, 100, 3, OP_LIMIT, BUY)
    ops[2] = (9, 0, 0, 0, OP_CANCEL, 0)  # unknown id: a reject
    packed = np.concatenate([ops[:1], ops[1:]])
    assert packed.dtype != OPS_DTYPE and packed.dtype.itemsize < OPS_DTYPE.itemsize
    want_fills, want_rejects = impl.new().apply(ops)
    for given in (packed, ops[["order_id", "new_order_id", "price", "qty", "op", "side"]]):
        book = impl.new()
        fills, rejects = book.apply(given)
        assert fills.tobytes() == want_fills.tobytes()
        assert rejects.tobytes() == want_rejects.tobytes()
        assert book.best_ask() == (100, 2)
