"""Many books, the readable twin: one ``naive.book.Book`` per stock locate.

A replay feeds decoded ITCH events (``EVENT_DTYPE`` arrays from ``itch.read_file`` or
``pcap.read_file``) through :meth:`Market.run`, in one of two modes:

* ``book`` -- a feed handler. It rebuilds NASDAQ's books from A F E C X D U and never
  matches: the exchange already matched, and the feed says what happened. Whatever the
  feed should never say to a handler that saw the whole day is counted as an anomaly
  (``twinmatch.dtypes.ANOMALIES``) and changes nothing:

  - E C X D U naming no live order: ``unknown_ref`` (a delete twice is one of these);
  - A F U adding a reference already live: ``duplicate_ref``;
  - E C executing, X cancelling, more shares than rest: ``over_execution``, ``over_cancel``;
  - A F U priced through the opposite side: ``crossed``. NASDAQ's book never crosses, so
    the handler must have missed a message; it drops the add (for U: the old order still
    leaves, the new one is dropped) rather than trade on its own;
  - price 0 (A F U), 0 shares, a side other than B/S: ``bad_price``, ``bad_shares``,
    ``bad_side``.

  E and C produce a fill each (resting order, aggressor 0, E at the resting price, C at
  its own execution price): the day's executions.
* ``match`` -- a matching engine. A F are incoming limit orders that match when they
  cross (price 0 is a market order, the CSV convention), X reduces, D cancels, U replaces
  and may match; the engine produces its own fills, so E C (like P Q B) are only counted.
  A bad operation is a reject with the book's reason code (``REASONS``).

Order references are unique for the day across all symbols, so one dict maps each live
reference to its locate. Every ITCH message also carries a locate: when the two disagree
the dict wins and the message counts as ``locate_mismatch``.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from naive.book import Book, Fill, OrderRejected, Side
from twinmatch.dtypes import ANOMALIES, EVENT_DTYPE, FILL_DTYPE, REASONS, as_records, records

__all__ = ["ANOMALIES", "MODES", "Market"]

MODES: Final = ("book", "match")
_A, _F, _E, _C, _X, _D, _U, _R = (ord(c) for c in "AFECXDUR")
_BUY, _SELL = ord("B"), ord("S")

FillRow = tuple[int, int, int, int, int, int]


class Market:
    """One book per stock locate, in ``book`` (feed handler) or ``match`` (engine) mode."""

    # --8<-- [start:state]
    def __init__(self, mode: str = "book") -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be 'book' or 'match', got {mode!r}")
        self.mode = mode
        self._books: dict[int, Book] = {}       # locate -> book, created at its first order
        self._refs: dict[int, int] = {}         # live order reference -> locate
        self._names: dict[int, bytes] = {}      # locate -> stock (from R messages)
        self._activity: dict[int, int] = {}     # locate -> book messages (A F E C X D U)
        self._events: dict[int, int] = {}       # type byte -> events seen
        self._anomalies = dict.fromkeys(ANOMALIES, 0)
        self._rejects = dict.fromkeys(REASONS[1:], 0)
        self.fills = 0
        self.volume = 0
    # --8<-- [end:state]

    # ---------------------------------------------------------------- queries

    def __len__(self) -> int:
        return len(self._refs)

    @property
    def books(self) -> int:
        return len(self._books)

    def counts(self) -> dict[str, dict[str, int]]:
        """Events by type, anomalies by kind, rejects by reason."""
        return {
            "events": {chr(t): n for t, n in sorted(self._events.items())},
            "anomalies": dict(self._anomalies),
            "rejects": dict(self._rejects),
        }

    def activity(self) -> list[tuple[int, int]]:
        """(locate, book messages) for every locate that had one, by locate."""
        return sorted(self._activity.items())

    def stock(self, locate: int) -> str:
        return self._names.get(locate, b"").decode("latin-1").rstrip(" ")

    def top(self, locate: int) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """((bid, qty) | None, (ask, qty) | None) of one locate's book."""
        book = self._books.get(locate)
        if book is None:
            return None, None
        return book.best_bid(), book.best_ask()

    def depth(self, locate: int, side: int, levels: int) -> list[tuple[int, int, int]]:
        book = self._books.get(locate)
        return [] if book is None else book.depth(Side(side), levels)

    def order(self, order_ref: int) -> tuple[int, int, int, int] | None:
        """(locate, side, price, shares) of a live order, or None."""
        locate = self._refs.get(order_ref)
        if locate is None:
            return None
        found = self._books[locate].order(order_ref)
        assert found is not None
        return locate, int(found[0]), found[1], found[2]

    # --8<-- [start:books_csv]
    def books_csv(self) -> str:
        """Every resting order: locate, stock, side, price, priority, order_ref, shares."""
        lines = ["locate,stock,side,price,priority,order_ref,shares\n"]
        for locate in sorted(self._books):
            stock = self.stock(locate)
            for side, letter in ((Side.BUY, "B"), (Side.SELL, "S")):
                rows = list(self._books[locate].walk(side))
                rows.sort(key=lambda row: row[0])  # stable: queue order kept within a price
                for price, priority, ref, shares in rows:
                    lines.append(f"{locate},{stock},{letter},{price},{priority},{ref},{shares}\n")
        return "".join(lines)
    # --8<-- [end:books_csv]

    # ------------------------------------------------------------------ batch

    # --8<-- [start:run]
    def run(self, events: np.ndarray) -> np.ndarray:
        """Apply EVENT_DTYPE events in order; returns their fills (FILL_DTYPE).

        A fill's ``op_index`` is the index of the event that caused it.
        """
        events = as_records(events, EVENT_DTYPE, "events")
        fills: list[FillRow] = []
        for index, row in enumerate(events.tolist()):
            _, ref, new_ref, _, shares, price, locate, kind, side, _, stock = row
            self._events[kind] = self._events.get(kind, 0) + 1
            if kind == _R:
                self._names[locate] = stock.ljust(8)
                continue
            if kind not in (_A, _F, _E, _C, _X, _D, _U):
                continue  # S H P Q B ...: counted only
            self._activity[locate] = self._activity.get(locate, 0) + 1
            if kind in (_A, _F):
                self._add(index, locate, ref, side, shares, price, fills)
            elif kind in (_E, _C):
                self._execute(index, locate, ref, shares, price if kind == _C else 0, fills)
            elif kind == _X:
                self._cancel(locate, ref, shares)
            elif kind == _D:
                self._delete(locate, ref)
            else:
                self._replace(index, locate, ref, new_ref, shares, price, fills)
        return records(fills, FILL_DTYPE)  # padding zeroed, as the C++ twin writes it
    # --8<-- [end:run]

    # ------------------------------------------------------------- the rules

    def _problem(self, anomaly: str, reason: str) -> None:
        """Count a bad message: an anomaly in book mode, a reject in match mode."""
        if self.mode == "book":
            self._anomalies[anomaly] += 1
        else:
            self._rejects[reason] += 1

    def _book(self, locate: int) -> Book:
        book = self._books.get(locate)
        if book is None:
            book = self._books[locate] = Book()
        return book

    def _locate_of(self, locate: int, ref: int) -> int | None:
        """The locate whose book holds ``ref`` (the dict wins over the message)."""
        found = self._refs.get(ref)
        if found is not None and found != locate:
            self._anomalies["locate_mismatch"] += 1
        return found

    @staticmethod
    def _crosses(book: Book, side: Side, price: int) -> bool:
        best = book.best_ask() if side == Side.BUY else book.best_bid()
        if best is None:
            return False
        return best[0] <= price if side == Side.BUY else best[0] >= price

    def _settle(self, book: Book, locate: int, ref: int, fills: list[Fill], index: int,
                out: list[FillRow]) -> None:
        """Match mode: record fills, forget filled resting orders, remember a remainder."""
        for f in fills:
            out.append((f.resting_id, f.aggressor_id, f.price, f.qty, index, f.aggressor_side))
            self.fills += 1
            self.volume += f.qty
            if book.order(f.resting_id) is None:
                del self._refs[f.resting_id]
        if book.order(ref) is not None:
            self._refs[ref] = locate

    # --8<-- [start:add]
    def _add(self, index: int, locate: int, ref: int, side_byte: int, shares: int, price: int,
             out: list[FillRow]) -> None:
        if side_byte not in (_BUY, _SELL):
            return self._problem("bad_side", "bad_side")
        side = Side.BUY if side_byte == _BUY else Side.SELL
        if self.mode == "book":
            if price == 0:
                return self._problem("bad_price", "bad_price")
            if shares == 0:
                return self._problem("bad_shares", "bad_qty")
            if ref in self._refs:
                return self._problem("duplicate_ref", "duplicate_id")
            book = self._book(locate)
            if self._crosses(book, side, price):  # a feed handler never matches: drop it
                return self._problem("crossed", "")
            book.add_limit(ref, side, price, shares)  # cannot match: it does not cross
            self._refs[ref] = locate
            return None
        if shares == 0:
            return self._problem("bad_shares", "bad_qty")
        if ref in self._refs:
            return self._problem("duplicate_ref", "duplicate_id")
        book = self._book(locate)
        if price == 0:  # the CSV convention: a market order
            fills = book.add_market(ref, side, shares)[0]
        else:
            fills = book.add_limit(ref, side, price, shares)
        self._settle(book, locate, ref, fills, index, out)
        return None
    # --8<-- [end:add]

    # --8<-- [start:execute]
    def _execute(self, index: int, locate: int, ref: int, shares: int, exec_price: int,
                 out: list[FillRow]) -> None:
        if self.mode == "match":
            return  # an engine makes its own executions
        if shares == 0:
            return self._problem("bad_shares", "bad_qty")
        found = self._locate_of(locate, ref)
        if found is None:
            return self._problem("unknown_ref", "unknown_id")
        book = self._books[found]
        resting = book.order(ref)
        assert resting is not None
        side, price, qty = resting
        if shares > qty:
            return self._problem("over_execution", "over_reduce")
        if book.reduce(ref, shares) == 0:  # keeps its place in the queue
            del self._refs[ref]
        # C carries its own execution price; E trades at the resting price.
        out.append((ref, 0, exec_price or price, shares, index, 1 - side))
        self.fills += 1
        self.volume += shares
        return None
    # --8<-- [end:execute]

    def _cancel(self, locate: int, ref: int, shares: int) -> None:
        """X: a partial cancel."""
        if shares == 0:
            return self._problem("bad_shares", "bad_qty")
        found = self._locate_of(locate, ref)
        if found is None:
            return self._problem("unknown_ref", "unknown_id")
        try:
            left = self._books[found].reduce(ref, shares)
        except OrderRejected:  # only over_reduce is left to fail
            return self._problem("over_cancel", "over_reduce")
        if left == 0:
            del self._refs[ref]
        return None

    def _delete(self, locate: int, ref: int) -> None:
        found = self._locate_of(locate, ref)
        if found is None:
            return self._problem("unknown_ref", "unknown_id")
        self._books[found].cancel(ref)
        del self._refs[ref]
        return None

    # --8<-- [start:replace]
    def _replace(self, index: int, locate: int, ref: int, new_ref: int, shares: int, price: int,
                 out: list[FillRow]) -> None:
        if price == 0:
            return self._problem("bad_price", "bad_price")
        if shares == 0:
            return self._problem("bad_shares", "bad_qty")
        found = self._locate_of(locate, ref)
        if found is None:
            return self._problem("unknown_ref", "unknown_id")
        if new_ref != ref and new_ref in self._refs:
            return self._problem("duplicate_ref", "duplicate_id")
        book = self._books[found]
        del self._refs[ref]
        if self.mode == "book":
            resting = book.order(ref)
            assert resting is not None
            if self._crosses(book, resting[0], price):  # old leaves, new is dropped
                book.cancel(ref)
                return self._problem("crossed", "")
            book.replace(ref, new_ref, price, shares)  # cannot match: it does not cross
            self._refs[new_ref] = found
            return None
        fills = book.replace(ref, new_ref, price, shares)
        self._settle(book, found, new_ref, fills, index, out)
        return None
    # --8<-- [end:replace]

