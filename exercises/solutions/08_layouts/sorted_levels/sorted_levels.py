"""A level index policy: one side's price levels in a sorted list, the best at the end.

The policy every layout of chapter 8 follows (native/layouts.hpp), in Python: ``find``,
``insert`` (a new, empty level), ``erase``, ``best`` and ``levels_best_first``. A level is
any object; the book stores its orders in it. ``bid`` says which side: for bids the best
price is the highest, for asks the lowest.
"""

from __future__ import annotations

import bisect
from typing import Any


class SortedLevels:
    def __init__(self, bid: bool) -> None:
        self.bid = bid
        # Worst first, best last: bids ascending, asks descending. Asks are stored by
        # their negated price, so one ascending list of keys serves both sides.
        self.keys: list[int] = []
        self.levels: list[Any] = []

    def _key(self, price: int) -> int:
        return price if self.bid else -price

    def find(self, price: int) -> Any | None:
        key = self._key(price)
        i = bisect.bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key:
            return self.levels[i]
        return None

    def insert(self, price: int, level: Any) -> None:
        """Precondition: no level at ``price`` yet."""
        key = self._key(price)
        i = bisect.bisect_left(self.keys, key)
        self.keys.insert(i, key)  # shifts the len - i entries after i: few near the best
        self.levels.insert(i, level)

    def erase(self, price: int) -> None:
        """Precondition: a level at ``price``."""
        i = bisect.bisect_left(self.keys, self._key(price))
        del self.keys[i]
        del self.levels[i]

    def best(self) -> int | None:
        if not self.keys:
            return None
        return self._key(self.keys[-1])  # negating twice gives an ask's price back

    def levels_best_first(self) -> list[tuple[int, Any]]:
        return [(self._key(k), lv) for k, lv in zip(reversed(self.keys), reversed(self.levels),
                                                    strict=True)]
