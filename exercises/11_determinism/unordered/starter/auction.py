"""A batch-auction engine for many symbols, with one planted nondeterminism.

Commands arrive as (time, symbol, order_id, side, price, qty), side "B" or "S". Orders
with the same time form a batch. At the end of each batch, every symbol that received
an order in it is uncrossed: while its best bid is at or above its best ask, they trade
(at the ask's price, the smaller quantity), and each trade gets the next number of ONE
trade counter shared by all symbols. Whatever does not trade rests for later batches.

Run the same commands twice, in two processes, and the trades should be identical,
byte for byte: that is what lets a journal of the commands rebuild the engine. In this
file they are not, from one process to the next. Find out why and fix it (the README
says what order the symbols must be uncrossed in). TODO
"""

from __future__ import annotations

from dataclasses import dataclass, field

Command = tuple[int, str, int, str, int, int]   # time, symbol, order_id, side, price, qty
Trade = tuple[int, str, int, int, int, int]     # trade_id, symbol, buy_id, sell_id, price, qty


@dataclass
class _Book:
    bids: list[list[int]] = field(default_factory=list)  # [price, arrival, order_id, qty]
    asks: list[list[int]] = field(default_factory=list)


class Auction:
    def __init__(self) -> None:
        self.books: dict[str, _Book] = {}
        self.trades: list[Trade] = []
        self._next_trade = 1
        self._arrival = 0

    def run(self, commands: list[Command]) -> list[Trade]:
        """Apply every command in order; returns every trade, in the order made."""
        batch_time: int | None = None
        touched: set[str] = set()  # the symbols that received an order in this batch
        for time, symbol, order_id, side, price, qty in commands:
            if time != batch_time and touched:
                self._end_of_batch(touched)
                touched = set()
            batch_time = time
            self._add(symbol, order_id, side, price, qty)
            touched.add(symbol)
        if touched:
            self._end_of_batch(touched)
        return self.trades

    def _add(self, symbol: str, order_id: int, side: str, price: int, qty: int) -> None:
        book = self.books.setdefault(symbol, _Book())
        self._arrival += 1
        (book.bids if side == "B" else book.asks).append([price, self._arrival, order_id, qty])

    def _end_of_batch(self, touched: set[str]) -> None:
        for symbol in touched:
            self._uncross(symbol)

    def _uncross(self, symbol: str) -> None:
        book = self.books[symbol]
        book.bids.sort(key=lambda o: (-o[0], o[1]))  # best price first, then oldest
        book.asks.sort(key=lambda o: (o[0], o[1]))
        while book.bids and book.asks and book.bids[0][0] >= book.asks[0][0]:
            bid, ask = book.bids[0], book.asks[0]
            qty = min(bid[3], ask[3])
            self.trades.append((self._next_trade, symbol, bid[2], ask[2], ask[0], qty))
            self._next_trade += 1
            bid[3] -= qty
            ask[3] -= qty
            if bid[3] == 0:
                book.bids.pop(0)
            if ask[3] == 0:
                book.asks.pop(0)
