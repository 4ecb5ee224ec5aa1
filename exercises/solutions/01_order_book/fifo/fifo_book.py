"""Exercise 01_order_book/fifo, reference solution: price-time priority in plain Python."""

from __future__ import annotations

import bisect
from collections import OrderedDict
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
        # An OrderedDict keeps insertion order, so its first value is the oldest order,
        # and `del` removes any order by id in O(1) (a list would have to search for it).
        # A plain dict keeps the order too, but finds its first value by stepping over
        # the slots its deleted keys left at the front: taking the oldest order again
        # and again, as a sweep through a long level does, would cost more each time.
        self.orders: OrderedDict[int, Order] = OrderedDict()
        self.qty = 0

    def push_back(self, order: Order) -> None:
        self.orders[order.order_id] = order
        self.qty += order.qty

    def front(self) -> Order:
        return next(iter(self.orders.values()))

    def remove(self, order: Order) -> None:
        del self.orders[order.order_id]
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
        # The order shrinks where it stands: same object, same place in its level.
        order = self.orders[order_id]
        self.take(order, qty)
        return order.qty

    def match(self, aggressor_id: int, side: int, price: int, qty: int) -> tuple[list[Fill], int]:
        """Trade against the other side while it crosses; returns (fills, qty left)."""
        other = 1 - side
        fills: list[Fill] = []
        while qty > 0:
            best = self.best_price(other)
            if best is None or (best > price if side == BUY else best < price):
                break
            resting = self.levels[other][best].front()  # the oldest at the best price
            traded = min(qty, resting.qty)
            fills.append(Fill(resting.order_id, aggressor_id, best, traded, side))
            qty -= traded
            self.take(resting, traded)
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
