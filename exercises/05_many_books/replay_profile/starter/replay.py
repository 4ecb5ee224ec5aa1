"""Replay a day of adds, executions and deletes into one book per symbol (starter).

The results are right, and a day with many symbols replays far slower than it should.
Profile it before you read on (see the README): where does the time go?
"""

from __future__ import annotations

from dataclasses import dataclass, field

# A message: ("A", locate, ref, side, price, shares), ("E", ref, shares) or ("D", ref).
Message = tuple[object, ...]


@dataclass
class SymbolBook:
    """One symbol's book in book mode: the total shares resting at each price."""

    locate: int
    levels: tuple[dict[int, int], dict[int, int]] = field(default_factory=lambda: ({}, {}))

    def change(self, side: int, price: int, shares: int) -> None:
        level = self.levels[side]
        left = level.get(price, 0) + shares
        if left:
            level[price] = left
        else:
            del level[price]

    def top(self) -> tuple[int | None, int | None]:
        """(best bid, best ask): the highest buy price and the lowest sell price."""
        bids, asks = self.levels
        return (max(bids) if bids else None, min(asks) if asks else None)


class Market:
    """Every symbol's book, and every live order by its reference."""

    def __init__(self) -> None:
        self.books: list[SymbolBook] = []
        self.orders: dict[int, list[int]] = {}  # ref -> [locate, side, price, shares]
        self.messages = 0

    def book(self, locate: int) -> SymbolBook:
        """The book of one symbol (made on its first message)."""
        # TODO: the profiler's top line leads here. Make it not depend on how many
        # symbols the day has; every result must stay the same.
        for book in self.books:
            if book.locate == locate:
                return book
        book = SymbolBook(locate)
        self.books.append(book)
        return book

    def add(self, locate: int, ref: int, side: int, price: int, shares: int) -> None:
        self.orders[ref] = [locate, side, price, shares]
        self.book(locate).change(side, price, shares)

    def execute(self, ref: int, shares: int) -> None:
        order = self.orders[ref]
        self.book(order[0]).change(order[1], order[2], -shares)
        order[3] -= shares
        if order[3] == 0:
            del self.orders[ref]

    def delete(self, ref: int) -> None:
        locate, side, price, shares = self.orders.pop(ref)
        self.book(locate).change(side, price, -shares)

    def top_of_books(self) -> dict[int, tuple[int | None, int | None]]:
        """Every symbol's (best bid, best ask), by locate."""
        return {book.locate: book.top() for book in self.books}


def replay(messages: list[Message]) -> Market:
    market = Market()
    for m in messages:
        market.messages += 1
        if m[0] == "A":
            market.add(*m[1:])
        elif m[0] == "E":
            market.execute(*m[1:])
        else:
            market.delete(*m[1:])
    return market
