"""A tiny feed handler: orders of many symbols by reference, anomalies counted (starter)."""

from __future__ import annotations

KINDS = ("unknown_ref", "duplicate_ref", "over_execution")


class FeedHandler:
    """Book mode in miniature: A (add), E (execute), D (delete); never matches."""

    def __init__(self) -> None:
        self.orders: dict[int, list[int]] = {}  # ref -> [locate, side (0 buy), price, shares]
        self.anomalies = dict.fromkeys(KINDS, 0)

    def best(self, locate: int, side: int) -> int | None:
        """Best price of one side of one symbol: highest bid, lowest ask (None if empty)."""
        prices = [o[2] for o in self.orders.values() if o[0] == locate and o[1] == side]
        if not prices:
            return None
        return max(prices) if side == 0 else min(prices)

    def add(self, locate: int, ref: int, side: int, price: int, shares: int) -> None:
        # TODO: a reference already live is a duplicate_ref (and is not added). An add
        # priced through the other side of its symbol is added all the same: the feed
        # handler mirrors the feed, and NASDAQ's book does lock and cross.
        self.orders[ref] = [locate, side, price, shares]

    def state(self, locate: int) -> str:
        """'locked' (best bid = best ask), 'crossed' (bid > ask) or '' for one symbol."""
        # TODO: compare the symbol's best bid and best ask (see best()).
        return ""

    def execute(self, ref: int, shares: int) -> None:
        # TODO: count unknown_ref and over_execution (and change nothing then); an order
        # executed down to 0 shares leaves the book.
        order = self.orders.get(ref)
        if order is not None:
            order[3] = max(0, order[3] - shares)

    def delete(self, ref: int) -> None:
        # TODO: deleting a reference that is not live (a delete twice) is unknown_ref.
        self.orders.pop(ref, None)
