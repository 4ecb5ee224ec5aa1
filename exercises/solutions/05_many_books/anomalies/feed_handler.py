"""A tiny feed handler: orders of many symbols by reference, anomalies counted (solution)."""

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
        if ref in self.orders:
            self.anomalies["duplicate_ref"] += 1
            return
        self.orders[ref] = [locate, side, price, shares]  # even through the other side

    def state(self, locate: int) -> str:
        """'locked' (best bid = best ask), 'crossed' (bid > ask) or '' for one symbol."""
        bid, ask = self.best(locate, 0), self.best(locate, 1)
        if bid is None or ask is None or bid < ask:
            return ""
        return "locked" if bid == ask else "crossed"

    def execute(self, ref: int, shares: int) -> None:
        order = self.orders.get(ref)
        if order is None:
            self.anomalies["unknown_ref"] += 1
            return
        if shares > order[3]:
            self.anomalies["over_execution"] += 1
            return
        order[3] -= shares
        if order[3] == 0:
            del self.orders[ref]

    def delete(self, ref: int) -> None:
        if self.orders.pop(ref, None) is None:
            self.anomalies["unknown_ref"] += 1
