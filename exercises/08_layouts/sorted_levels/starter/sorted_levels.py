"""A level index policy: one side's price levels in a sorted list, the best at the end.

The policy every layout of chapter 8 follows (native/layouts.hpp), in Python: ``find``,
``insert`` (a new, empty level), ``erase``, ``best`` and ``levels_best_first``. A level is
any object; the book stores its orders in it. ``bid`` says which side: for bids the best
price is the highest, for asks the lowest.
"""

from __future__ import annotations

import bisect  # noqa: F401 - you will want it
from typing import Any


class SortedLevels:
    def __init__(self, bid: bool) -> None:
        self.bid = bid
        # TODO: keep the levels sorted WORST first, so that the best is the last element.
        self.keys: list[int] = []
        self.levels: list[Any] = []

    def find(self, price: int) -> Any | None:
        raise NotImplementedError("binary search for price; its level, or None")

    def insert(self, price: int, level: Any) -> None:
        """Precondition: no level at ``price`` yet."""
        raise NotImplementedError("insert (price, level) in order")

    def erase(self, price: int) -> None:
        """Precondition: a level at ``price``."""
        raise NotImplementedError("remove the level at price")

    def best(self) -> int | None:
        raise NotImplementedError("the best price (the last element), or None")

    def levels_best_first(self) -> list[tuple[int, Any]]:
        raise NotImplementedError("[(price, level), ...] best first")
