"""Exercise 01_order_book/fifo: price-time priority in plain Python.

Complete the three TODOs (the price level's container, matching, reduce), then run
``make check EX=01_order_book/fifo``. Everything not marked TODO is already right.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import NamedTuple

BUY, SELL = 0, 1


class Fill(NamedTuple):
    """One trade, at the resting order's price (compares equal to naive.book.Fill)."""

    resting_id: int
    aggressor_id: int
    price: int
    qty: int
    aggressor_side: int


@dataclass(slots=True)
class Order:
    order_id: int
    side: int
    price: int
    qty: int


class Level:
    """The orders resting at one price, oldest first, and their total quantity."""

    def __init__(self) -> None:
        # TODO: choose the container. It must keep arrival order (the oldest order is
        # the first to trade) AND let cancel remove any order by id without searching
        # the level. A list keeps the order, but what does list.remove cost when a
        # level holds 50,000 orders? Change push_back, front and remove to match.
        self.orders: list[Order] = []
        self.qty = 0

    def push_back(self, order: Order) -> None:
        self.orders.append(order)
        self.qty += order.qty

    def front(self) -> Order:
        return self.orders[0]

    def remove(self, order: Order) -> None:
        self.orders.remove(order)
        self.qty -= order.qty


class FifoBook:
    """One symbol's book: the contract's method names, valid input assumed."""

    def __init__(self) -> None:
        self.orders: dict[int, Order] = {}                  # every resting order by id
        self.levels: tuple[dict[int, Level], dict[int, Level]] = ({}, {})  # per side
        self.prices: tuple[list[int], list[int]] = ([], [])  # per side, ascending

    def __len__(self) -> int:
        return len(self.orders)

    # ------------------------------------------------------------ queries (given)

    def best_price(self, side: int) -> int | None:
        prices = self.prices[side]
        if not prices:
            return None
        return prices[-1] if side == BUY else prices[0]

    def best_bid(self) -> tuple[int, int] | None:
        price = self.best_price(BUY)
        return None if price is None else (price, self.levels[BUY][price].qty)

    def best_ask(self) -> tuple[int, int] | None:
        price = self.best_price(SELL)
        return None if price is None else (price, self.levels[SELL][price].qty)

    def depth(self, side: int, levels: int) -> list[tuple[int, int, int]]:
        """(price, total qty, order count) for up to ``levels`` prices, best first."""
        prices = self.prices[side]
        best_first = reversed(prices) if side == BUY else iter(prices)
        out: list[tuple[int, int, int]] = []
        for price in best_first:
            if len(out) >= levels:
                break
            level = self.levels[side][price]
            out.append((price, level.qty, len(level.orders)))
        return out

    # ------------------------------------------------------------------ operations

    def add_limit(self, order_id: int, side: int, price: int, qty: int) -> list[Fill]:
        fills, left = self.match(order_id, side, price, qty)
        if left > 0:
            self.rest(Order(order_id, side, price, left))
        return fills

    def cancel(self, order_id: int) -> int:
        order = self.orders[order_id]
        self.remove(order)
        return order.qty

    def reduce(self, order_id: int, qty: int) -> int:
        # TODO: this cancels the order and adds it again with the smaller quantity, so
        # it goes to the back of its level's queue. A reduce must keep the order's
        # place in time (on most exchanges only a new price or a bigger size loses it).
        # Returns the quantity left resting; reducing by all of it removes the order.
        order = self.orders[order_id]
        self.remove(order)
        if order.qty > qty:
            self.rest(Order(order_id, order.side, order.price, order.qty - qty))
        return order.qty - qty

    def match(self, aggressor_id: int, side: int, price: int, qty: int) -> tuple[list[Fill], int]:
        """Trade against the other side while it crosses; returns (fills, qty left)."""
        # TODO: while qty is left and the best price on the other side crosses ``price``
        # (a buy trades with asks at or below its price, a sell with bids at or above),
        # trade with the OLDEST order at the BEST price: one Fill per resting order
        # touched, at the resting order's price, for min(qty, its qty). take() removes a
        # resting order once it is used up. What is left of qty is the remainder, which
        # add_limit rests at the back of its own price level.
        fills: list[Fill] = []
        return fills, qty

    # ---------------------------------------------------------- bookkeeping (given)

    def rest(self, order: Order) -> None:
        levels = self.levels[order.side]
        if order.price not in levels:
            levels[order.price] = Level()
            bisect.insort(self.prices[order.side], order.price)
        levels[order.price].push_back(order)
        self.orders[order.order_id] = order

    def take(self, order: Order, qty: int) -> None:
        """Trade or reduce ``qty`` off a resting order; at zero it leaves the book."""
        order.qty -= qty
        self.levels[order.side][order.price].qty -= qty
        if order.qty == 0:
            self.remove(order)

    def remove(self, order: Order) -> None:
        del self.orders[order.order_id]
        levels = self.levels[order.side]
        level = levels[order.price]
        level.remove(order)
        if not level.orders:
            del levels[order.price]
            prices = self.prices[order.side]
            del prices[bisect.bisect_left(prices, order.price)]
