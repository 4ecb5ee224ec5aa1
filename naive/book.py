"""The naive twin of the order book: one symbol, price-time priority, in plain Python.

This file is the specification a reader learns from. Every rule the optimized twin
(``native/book.hpp``) follows is written here first, in the plainest code that is not
needlessly slow:

* each price level is an ``OrderedDict`` of order id -> order, so the first key is
  the oldest order (FIFO), found in O(1), and a cancel is an O(1) ``del``;
* each side keeps a sorted ``list`` of its prices (``bisect``), so the best price is
  ``prices[-1]`` for bids and ``prices[0]`` for asks;
* one ``dict`` maps every resting order id to its order, for cancel/reduce/execute.
"""

from __future__ import annotations

import bisect
import enum
import operator
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from contract.dtypes import (
    FILL_DTYPE,
    MAX_ID,
    MAX_PRICE,
    MAX_QTY,
    OP_CANCEL,
    OP_EXECUTE,
    OP_LIMIT,
    OP_MARKET,
    OP_REDUCE,
    OP_REPLACE,
    OPS_DTYPE,
    REASON_CODE,
    REJECT_DTYPE,
    as_records,
    records,
)

__all__ = ["Book", "BookFull", "Fill", "OrderRejected", "Side"]

# Resting orders a book can hold at most (the C++ twin's id table holds 2**31 ids).
MAX_ORDERS = 2**31

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


# --8<-- [start:types]
class Side(enum.IntEnum):
    BUY = 0
    SELL = 1


class Fill(NamedTuple):
    """One trade: the resting order traded with the aggressor at the resting price."""

    resting_id: int
    aggressor_id: int
    price: int
    qty: int
    aggressor_side: Side


class OrderRejected(ValueError):
    """An operation the book refused; the book is unchanged."""

    def __init__(self, order_id: int, reason: str) -> None:
        super().__init__(f"order {order_id} rejected: {reason}")
        self.order_id = order_id
        self.reason = reason


class BookFull(MemoryError):
    """The book cannot take one more resting order (max_orders, or memory).

    Raised before the operation changes anything. From apply(): ``index`` is the
    operation that failed, ``fills`` and ``rejects`` those of the operations before it,
    which the book has applied. From a single-op call they are None.
    """

    def __init__(self, message: str, index: int | None = None,
                 fills: np.ndarray | None = None, rejects: np.ndarray | None = None) -> None:
        super().__init__(message)
        self.index = index
        self.fills = fills
        self.rejects = rejects


@dataclass(slots=True)
class _Order:
    order_id: int
    side: Side
    price: int
    qty: int


@dataclass(slots=True)
class _Level:
    """All orders at one price: a FIFO queue and its total.

    An OrderedDict, not a plain dict: both remember insertion order, but a plain dict
    finds its first key by scanning past the slots its deleted keys left at the front,
    so taking the oldest order of a level, again and again, would cost more each time.
    An OrderedDict keeps its keys in a linked list and finds the first in O(1).
    """

    orders: OrderedDict[int, _Order] = field(default_factory=OrderedDict)
    qty: int = 0
# --8<-- [end:types]


def _integer(name: str, value: int, low: int, high: int) -> int:
    """An integer argument as the C++ signature takes it: anything Python can use as an
    index (int, bool, a numpy integer: ``operator.index``) that fits in low..high, as a
    plain int. Anything else (a float, a str, a number out of range) is a TypeError."""
    try:
        number = operator.index(value)
    except TypeError:
        number = None
    if number is None or not low <= number <= high:
        raise TypeError(f"{name} must be an int in {low}..{high}, got {value!r}")
    return number


def _id(order_id: int) -> int:
    """Ids are uint64, like the C++ signature."""
    return _integer("order id", order_id, 0, MAX_ID)


def _int64(name: str, value: int) -> int:
    """Prices, quantities and sides arrive as int64 (as in C++)."""
    return _integer(name, value, _INT64_MIN, _INT64_MAX)


def _side(value: int) -> Side:
    """A side arrives as an int64 (TypeError otherwise) that must be 0 or 1 (ValueError)."""
    return Side(_int64("side", value))


class Book:
    """One symbol's limit order book."""

    # --8<-- [start:state]
    def __init__(self, max_orders: int = MAX_ORDERS) -> None:
        max_orders = _integer("max_orders", max_orders, 0, 2**32 - 1)  # a uint32 in C++
        if not 1 <= max_orders <= MAX_ORDERS:
            raise ValueError("max_orders must be in 1..2^31")
        self._max_orders = max_orders  # a memory budget: more resting orders raise BookFull
        self._orders: dict[int, _Order] = {}
        # price -> level, per side; a level's dict keeps insertion order, so FIFO is free.
        self._levels: tuple[dict[int, _Level], dict[int, _Level]] = ({}, {})
        # Sorted ascending; the best bid is the last, the best ask the first.
        self._prices: tuple[list[int], list[int]] = ([], [])
    # --8<-- [end:state]

    def __len__(self) -> int:
        return len(self._orders)

    # ----------------------------------------------------------------- queries

    def best_bid(self) -> tuple[int, int] | None:
        return self._top(Side.BUY)

    def best_ask(self) -> tuple[int, int] | None:
        return self._top(Side.SELL)

    def _top(self, side: Side) -> tuple[int, int] | None:
        price = self._best_price(side)
        if price is None:
            return None
        return price, self._levels[side][price].qty

    def _best_price(self, side: Side) -> int | None:
        prices = self._prices[side]
        if not prices:
            return None
        return prices[-1] if side == Side.BUY else prices[0]

    def depth(self, side: Side, levels: int) -> list[tuple[int, int, int]]:
        """(price, total qty, order count) for up to ``levels`` prices, best first."""
        levels = _int64("levels", levels)
        side = _side(side)
        prices = self._prices[side]
        best_first = reversed(prices) if side == Side.BUY else iter(prices)
        out: list[tuple[int, int, int]] = []
        for price in best_first:
            if len(out) >= levels:
                break
            level = self._levels[side][price]
            out.append((price, level.qty, len(level.orders)))
        return out

    def order(self, order_id: int) -> tuple[Side, int, int] | None:
        order_id = _id(order_id)
        found = self._orders.get(order_id)
        if found is None:
            return None
        return found.side, found.price, found.qty

    # --8<-- [start:walk]
    def walk(self, side: Side) -> Iterator[tuple[int, int, int, int]]:
        """Every resting order of one side as (price, priority, order id, qty).

        Levels best first; within a level, oldest first (priority 0 trades next).
        """
        side = _side(side)
        prices = self._prices[side]
        for price in reversed(prices) if side == Side.BUY else prices:
            for priority, order in enumerate(self._levels[side][price].orders.values()):
                yield price, priority, order.order_id, order.qty
    # --8<-- [end:walk]

    # ------------------------------------------------------------- operations

    # --8<-- [start:add_limit]
    def add_limit(self, order_id: int, side: Side, price: int, qty: int) -> list[Fill]:
        """Match against the opposite side while it crosses; rest any remainder."""
        order_id = _id(order_id)
        side_number = _int64("side", side)
        price = _int64("price", price)
        qty = _int64("qty", qty)
        side = Side(side_number)  # after every type check: a bad side value is a ValueError
        if not 1 <= price <= MAX_PRICE:
            raise OrderRejected(order_id, "bad_price")
        if not 1 <= qty <= MAX_QTY:
            raise OrderRejected(order_id, "bad_qty")
        if order_id in self._orders:
            raise OrderRejected(order_id, "duplicate_id")
        if len(self._orders) >= self._max_orders:  # checked before it may match, as in C++
            raise BookFull("book full: it holds max_orders resting orders")
        fills, left = self._match(order_id, side, qty, price)
        if left > 0:
            self._rest(_Order(order_id, side, price, left))
        return fills
    # --8<-- [end:add_limit]

    def add_market(self, order_id: int, side: Side, qty: int) -> tuple[list[Fill], int]:
        """Sweep the opposite side at any price; what finds no liquidity is cancelled."""
        order_id = _id(order_id)
        side_number = _int64("side", side)
        qty = _int64("qty", qty)
        side = Side(side_number)
        if not 1 <= qty <= MAX_QTY:
            raise OrderRejected(order_id, "bad_qty")
        if order_id in self._orders:
            raise OrderRejected(order_id, "duplicate_id")
        return self._match(order_id, side, qty, None)

    def cancel(self, order_id: int) -> int:
        """Remove a resting order; returns the quantity removed."""
        order_id = _id(order_id)
        order = self._orders.get(order_id)
        if order is None:
            raise OrderRejected(order_id, "unknown_id")
        self._remove(order)
        return order.qty

    # --8<-- [start:reduce]
    def reduce(self, order_id: int, qty: int) -> int:
        """Partial cancel: the order keeps its place in the queue. Returns qty left."""
        order, qty = self._check_take(order_id, qty)
        self._take(order, qty)
        return order.qty
    # --8<-- [end:reduce]

    def execute(self, order_id: int, qty: int) -> Fill:
        """A resting order trades by id (ITCH E/C); its remainder keeps its place."""
        order, qty = self._check_take(order_id, qty)
        self._take(order, qty)
        return Fill(order.order_id, 0, order.price, qty, Side(1 - order.side))

    def _check_take(self, order_id: int, qty: int) -> tuple[_Order, int]:
        """The checks reduce and execute share: qty, then id, then enough resting.

        Returns the order and the quantity as a plain int."""
        order_id = _id(order_id)
        qty = _int64("qty", qty)
        if not 1 <= qty <= MAX_QTY:
            raise OrderRejected(order_id, "bad_qty")
        order = self._orders.get(order_id)
        if order is None:
            raise OrderRejected(order_id, "unknown_id")
        if qty > order.qty:
            raise OrderRejected(order_id, "over_reduce")
        return order, qty

    # --8<-- [start:replace]
    def replace(self, order_id: int, new_order_id: int, price: int, qty: int) -> list[Fill]:
        """ITCH U: the old order leaves; a new one (same side) enters at the back."""
        order_id = _id(order_id)
        new_order_id = _id(new_order_id)
        price = _int64("price", price)
        qty = _int64("qty", qty)
        if not 1 <= price <= MAX_PRICE:
            raise OrderRejected(order_id, "bad_price")
        if not 1 <= qty <= MAX_QTY:
            raise OrderRejected(order_id, "bad_qty")
        old = self._orders.get(order_id)
        if old is None:
            raise OrderRejected(order_id, "unknown_id")
        if new_order_id != order_id and new_order_id in self._orders:
            raise OrderRejected(new_order_id, "duplicate_id")
        self._remove(old)
        return self.add_limit(new_order_id, old.side, price, qty)
    # --8<-- [end:replace]

    # --------------------------------------------------------------- matching

    # --8<-- [start:match]
    def _match(
        self, aggressor_id: int, side: Side, qty: int, limit: int | None
    ) -> tuple[list[Fill], int]:
        """Trade ``qty`` against the opposite side, best price first, oldest first.

        ``limit`` None is a market order. Returns the fills and the quantity left.
        """
        opposite = Side(1 - side)
        fills: list[Fill] = []
        while qty > 0:
            best = self._best_price(opposite)
            if best is None or not self._crosses(side, limit, best):
                break
            level = self._levels[opposite][best]
            resting = next(iter(level.orders.values()))  # the oldest order at this price
            traded = min(qty, resting.qty)
            fills.append(Fill(resting.order_id, aggressor_id, best, traded, side))
            qty -= traded
            self._take(resting, traded)
        return fills, qty

    @staticmethod
    def _crosses(side: Side, limit: int | None, best: int) -> bool:
        if limit is None:
            return True
        return best <= limit if side == Side.BUY else best >= limit
    # --8<-- [end:match]

    # --8<-- [start:rest]
    def _rest(self, order: _Order) -> None:
        levels = self._levels[order.side]
        level = levels.get(order.price)
        if level is None:
            level = levels[order.price] = _Level()
            bisect.insort(self._prices[order.side], order.price)
        level.orders[order.order_id] = order  # joins the back of the queue
        level.qty += order.qty
        self._orders[order.order_id] = order

    def _take(self, order: _Order, qty: int) -> None:
        """Trade or reduce ``qty`` off a resting order; at zero it leaves the book."""
        order.qty -= qty
        self._levels[order.side][order.price].qty -= qty
        if order.qty == 0:
            self._remove(order)

    def _remove(self, order: _Order) -> None:
        del self._orders[order.order_id]
        levels = self._levels[order.side]
        level = levels[order.price]
        del level.orders[order.order_id]
        level.qty -= order.qty
        if not level.orders:
            del levels[order.price]
            prices = self._prices[order.side]
            del prices[bisect.bisect_left(prices, order.price)]
    # --8<-- [end:rest]

    # ------------------------------------------------------------------ batch

    # --8<-- [start:apply]
    def apply(self, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Run an OPS_DTYPE array; return (fills FILL_DTYPE, rejects REJECT_DTYPE).

        The same operations as the single-op methods, in a plain loop; a rejected
        operation is recorded as (index, reason code) and the loop carries on. If the
        book is full, BookFull says at which operation, with the results of the ones
        before it (the book has applied them).
        """
        ops = as_records(ops, OPS_DTYPE, "ops")  # the same checks as the C++ twin's
        fills: list[tuple[int, int, int, int, int, int]] = []
        rejects: list[tuple[int, int]] = []
        index = 0
        try:
            for index, row in enumerate(ops.tolist()):
                order_id, new_order_id, price, qty, op, side = row
                try:
                    for fill in self._apply_one(op, order_id, new_order_id, price, qty, side):
                        fills.append((fill[0], fill[1], fill[2], fill[3], index, fill[4]))
                except OrderRejected as rejected:
                    rejects.append((index, REASON_CODE[rejected.reason]))
        except MemoryError as full:  # BookFull, or memory ran out: keep what was done
            raise BookFull(f"{full} (at operation {index})", index,
                           records(fills, FILL_DTYPE), records(rejects, REJECT_DTYPE)) from full
        return records(fills, FILL_DTYPE), records(rejects, REJECT_DTYPE)

    def _apply_one(
        self, op: int, order_id: int, new_order_id: int, price: int, qty: int, side: int
    ) -> list[Fill]:
        if op in (OP_LIMIT, OP_MARKET) and side not in (Side.BUY, Side.SELL):
            raise OrderRejected(order_id, "bad_side")
        if op == OP_LIMIT:
            return self.add_limit(order_id, Side(side), price, qty)
        if op == OP_MARKET:
            return self.add_market(order_id, Side(side), qty)[0]
        if op == OP_CANCEL:
            self.cancel(order_id)
            return []
        if op == OP_REDUCE:
            self.reduce(order_id, qty)
            return []
        if op == OP_EXECUTE:
            return [self.execute(order_id, qty)]
        if op == OP_REPLACE:
            return self.replace(order_id, new_order_id, price, qty)
        raise OrderRejected(order_id, "bad_op")
    # --8<-- [end:apply]
