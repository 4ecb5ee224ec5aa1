"""Replay a day of adds, executions and deletes into one book per symbol (reference
solution)."""

from __future__ import annotations

from dataclasses import dataclass, field

# A message: ("A", locate, ref, side, price, shares), ("E", ref, shares) or ("D", ref).
Message = tuple[object, ...]

BUY, SELL = 0, 1
MAX_PRICE = 2_000_000_000  # $200,000 in ITCH's 1/10,000 dollar units
MAX_SHARES = 1_000_000


class BadMessage(ValueError):
    """A message that breaks the feed's rules; names what is wrong."""


def check_add(locate: int, ref: int, side: int, price: int, shares: int) -> None:
    """The rules of an add, checked before anything changes."""
    if side not in (BUY, SELL):
        raise BadMessage(f"ref {ref}: side must be 0 or 1, got {side}")
    if not 0 < price <= MAX_PRICE:
        raise BadMessage(f"ref {ref}: price {price} out of range")
    if not 0 < shares <= MAX_SHARES:
        raise BadMessage(f"ref {ref}: shares {shares} out of range")
    if locate <= 0:
        raise BadMessage(f"ref {ref}: locate {locate} must be positive")


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


@dataclass
class Activity:
    """What the day did, per symbol: messages, shares executed, their value (for VWAP)."""

    messages: dict[int, int] = field(default_factory=dict)
    volume: dict[int, int] = field(default_factory=dict)
    notional: dict[int, int] = field(default_factory=dict)

    def saw(self, locate: int) -> None:
        self.messages[locate] = self.messages.get(locate, 0) + 1

    def traded(self, locate: int, price: int, shares: int) -> None:
        self.volume[locate] = self.volume.get(locate, 0) + shares
        self.notional[locate] = self.notional.get(locate, 0) + price * shares

    def vwap(self, locate: int) -> float | None:
        """The volume-weighted average price executed in one symbol, in dollars."""
        volume = self.volume.get(locate, 0)
        return self.notional[locate] / volume / 10_000 if volume else None


class Market:
    """Every symbol's book, every live order by its reference, and the day's activity."""

    def __init__(self) -> None:
        self.books: dict[int, SymbolBook] = {}  # by locate, in order of first message
        self.orders: dict[int, list[int]] = {}  # ref -> [locate, side, price, shares]
        self.activity = Activity()
        self.messages = 0

    def book(self, locate: int) -> SymbolBook:
        """The book of one symbol (made on its first message)."""
        # A dict finds a locate in one hash probe; the starter compared it with every
        # symbol's book in turn, so a day of S symbols cost S / 2 comparisons a message.
        book = self.books.get(locate)
        if book is None:
            book = self.books[locate] = SymbolBook(locate)
        return book

    def add(self, locate: int, ref: int, side: int, price: int, shares: int) -> None:
        check_add(locate, ref, side, price, shares)
        if ref in self.orders:
            raise BadMessage(f"ref {ref}: already live")
        self.orders[ref] = [locate, side, price, shares]
        self.book(locate).change(side, price, shares)
        self.activity.saw(locate)

    def live(self, ref: int) -> list[int]:
        """The live order with this reference (its list: changes write through)."""
        order = self.orders.get(ref)
        if order is None:
            raise BadMessage(f"ref {ref}: no such live order")
        return order

    def execute(self, ref: int, shares: int) -> None:
        order = self.live(ref)
        if not 0 < shares <= order[3]:
            raise BadMessage(f"ref {ref}: cannot execute {shares} of {order[3]} shares")
        self.book(order[0]).change(order[1], order[2], -shares)
        self.activity.saw(order[0])
        self.activity.traded(order[0], order[2], shares)
        order[3] -= shares
        if order[3] == 0:
            del self.orders[ref]

    def delete(self, ref: int) -> None:
        locate, side, price, shares = self.live(ref)
        del self.orders[ref]
        self.book(locate).change(side, price, -shares)
        self.activity.saw(locate)

    def top_of_books(self) -> dict[int, tuple[int | None, int | None]]:
        """Every symbol's (best bid, best ask), by locate, in order of first message."""
        return {book.locate: book.top() for book in self.books.values()}


def dispatch(market: Market, m: Message) -> None:
    """Apply one message to the market by its type."""
    kind = m[0]
    if kind == "A":
        market.add(*m[1:])  # type: ignore[arg-type]
    elif kind == "E":
        market.execute(*m[1:])  # type: ignore[arg-type]
    elif kind == "D":
        market.delete(*m[1:])  # type: ignore[arg-type]
    else:
        raise BadMessage(f"unknown message type {kind!r}")


def replay(messages: list[Message]) -> Market:
    market = Market()
    for m in messages:
        market.messages += 1
        dispatch(market, m)
    return market
