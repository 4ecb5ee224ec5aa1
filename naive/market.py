"""Many books, the readable twin: one book per stock locate.

A replay feeds decoded ITCH events (``EVENT_DTYPE`` arrays from ``itch.read_file`` or
``pcap.read_file``) through :meth:`Market.run`, in one of two modes:

* ``book`` -- a feed handler. It rebuilds NASDAQ's books from A F E C X D U and never
  matches: the exchange already matched, and the feed says what happened. Each locate's
  book is a :class:`FeedBook`, which rests every add where the feed puts it, even
  through the other side: NASDAQ's book does lock and cross (during a halt's quotation
  period, IPO and auction quoting), and a handler mirrors the feed. The market tracks
  each symbol's trading state from H messages (it never gates an update) and reports
  how often and how long (in ITCH nanoseconds) books were locked or crossed.
  Whatever the feed should never say to a handler that saw the whole day is counted as
  an anomaly (``contract.dtypes.ANOMALIES``) and changes nothing:

  - E C X D U naming no live order: ``unknown_ref`` (a delete twice is one of these);
  - A F U adding a reference already live: ``duplicate_ref``;
  - E C executing, X cancelling, more shares than rest: ``over_execution``, ``over_cancel``;
  - price 0 (A F U), 0 shares, a side other than B/S: ``bad_price``, ``bad_shares``,
    ``bad_side``.

  E and C produce a fill each (resting order, aggressor 0): the day's executions. E
  trades at the resting price; C at its own Execution Price, whatever it is (0
  included): the spec says the print is at that price, not at the display price.
* ``match`` -- a matching engine, one ``naive.book.Book`` per locate. A F are incoming
  limit orders that match when they cross (price 0 is a market order, the CSV
  convention), X reduces, D cancels, U replaces and may match; the engine produces its
  own fills, so E C (like P Q B) are only counted. A bad operation is a reject with the
  book's reason code (``REASONS``).

Order references are unique for the day across all symbols, so one dict maps each live
reference to its locate. Every ITCH message also carries a locate: when the two disagree
the dict wins and the message counts as ``locate_mismatch``.

Text from the feed (stock names, type and trading-state bytes) is shown by one rule,
:func:`contract.feed_text.show_bytes`: printable ASCII as itself (but backslash, comma and
double quote), any other byte as ``\\xNN``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from contract.dtypes import ANOMALIES, EVENT_DTYPE, FILL_DTYPE, REASONS, as_records, records
from contract.feed_text import show_bytes, show_stock
from contract.market import BOOK_STATES, MODES, check_locate, check_mode, check_order_ref
from naive.book import Book, Fill, OrderRejected, Side

__all__ = ["ANOMALIES", "BOOK_STATES", "MODES", "FeedBook", "Market", "show_bytes"]

_A, _F, _E, _C, _X, _D, _U, _R, _H = (ord(c) for c in "AFECXDURH")
_BUY, _SELL = ord("B"), ord("S")
_NORMAL, _LOCKED, _CROSSED = 0, 1, 2

FillRow = tuple[int, int, int, int, int, int]






# --8<-- [start:feedbook]
class FeedBook:
    """One symbol's book as the feed describes it (book mode).

    Orders rest where the feed puts them and nothing ever matches, so the book may be
    locked (best bid = best ask) or crossed (best bid > best ask).
    """

    def __init__(self) -> None:
        self._orders: dict[int, list[int]] = {}  # ref -> [side, price, shares]
        # price -> its orders' refs in queue order (a dict keeps insertion order), per side
        self._levels: tuple[dict[int, dict[int, None]], dict[int, dict[int, None]]] = ({}, {})
        self._best: list[int | None] = [None, None]  # best price per side

    def __len__(self) -> int:
        return len(self._orders)

    def order(self, ref: int) -> tuple[Side, int, int] | None:
        found = self._orders.get(ref)
        return None if found is None else (Side(found[0]), found[1], found[2])

    def rest(self, ref: int, side: Side, price: int, shares: int) -> None:
        """A new order joins the back of its price's queue (whatever the other side)."""
        self._levels[side].setdefault(price, {})[ref] = None
        self._orders[ref] = [side, price, shares]
        best = self._best[side]
        if best is None or (price > best if side == Side.BUY else price < best):
            self._best[side] = price

    def take(self, ref: int, shares: int) -> int:
        """Take 1..resting shares off an order (it keeps its place); returns what is left."""
        order = self._orders[ref]
        order[2] -= shares
        if order[2] == 0:
            self.remove(ref)
        return order[2]

    def remove(self, ref: int) -> None:
        side, price, _ = self._orders.pop(ref)
        levels = self._levels[side]
        del levels[price][ref]
        if not levels[price]:
            del levels[price]
            if price == self._best[side]:
                pick = max if side == Side.BUY else min
                self._best[side] = pick(levels) if levels else None

    def best_price(self, side: Side) -> int | None:
        return self._best[side]

    def _top(self, side: Side) -> tuple[int, int] | None:
        price = self._best[side]
        if price is None:
            return None
        return price, sum(self._orders[ref][2] for ref in self._levels[side][price])

    def best_bid(self) -> tuple[int, int] | None:
        return self._top(Side.BUY)

    def best_ask(self) -> tuple[int, int] | None:
        return self._top(Side.SELL)

    def _prices(self, side: Side) -> list[int]:
        return sorted(self._levels[side], reverse=side == Side.BUY)  # best first

    def depth(self, side: Side, levels: int) -> list[tuple[int, int, int]]:
        out = []
        for price in self._prices(side)[:max(levels, 0)]:
            refs = self._levels[side][price]
            out.append((price, sum(self._orders[r][2] for r in refs), len(refs)))
        return out

    def walk(self, side: Side) -> Iterator[tuple[int, int, int, int]]:
        """(price, priority, ref, shares): levels best first, each queue oldest first."""
        for price in self._prices(side):
            for priority, ref in enumerate(self._levels[side][price]):
                yield price, priority, ref, self._orders[ref][2]
# --8<-- [end:feedbook]


class Market:
    """One book per stock locate, in ``book`` (feed handler) or ``match`` (engine) mode."""

    # --8<-- [start:state]
    def __init__(self, mode: str = "book") -> None:
        self.mode = check_mode(mode)
        # locate -> book, created at its first order: a FeedBook in book mode, a Book in
        # match mode
        self._books: dict[int, FeedBook | Book] = {}
        self._refs: dict[int, int] = {}         # live order reference -> locate
        self._names: dict[int, bytes] = {}      # locate -> the 8 stock bytes of its R
        self._trading: dict[int, int] = {}      # locate -> trading state byte of its last H
        self._activity: dict[int, int] = {}     # locate -> book messages (A F E C X D U)
        self._events: dict[int, int] = {}       # type byte -> events seen
        self._anomalies = dict.fromkeys(ANOMALIES, 0)
        self._rejects = dict.fromkeys(REASONS[1:], 0)
        self.fills = 0
        self.volume = 0
        # Locked / crossed books (book mode): each locate's state and since when (ITCH ns)
        self._state: dict[int, tuple[int, int]] = {}
        self._episodes = [0, 0, 0]              # by state: times a book entered it
        self._state_ns = [0, 0, 0]              # by state: time spent in it (closed episodes)
        self._clock = 0                         # the latest timestamp seen
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
            "events": {show_bytes(bytes([t])): n for t, n in sorted(self._events.items())},
            "anomalies": dict(self._anomalies),
            "rejects": dict(self._rejects),
        }

    def activity(self) -> list[tuple[int, int]]:
        """(locate, book messages) for every locate that had one, by locate."""
        return sorted(self._activity.items())

    def stock(self, locate: int) -> str:
        """The symbol an R message gave the locate (show_bytes, trailing spaces cut), or ''."""
        return show_stock(self._names.get(check_locate(locate), b""))

    def trading_state(self, locate: int) -> str:
        """The trading state (H T P Q ...) of the locate's last H message, or ''."""
        state = self._trading.get(check_locate(locate))
        return "" if state is None else show_bytes(bytes([state]))

    def trading_states(self) -> dict[str, int]:
        """How many locates are in each trading state (by their last H message)."""
        out: dict[str, int] = {}
        for state in self._trading.values():
            key = show_bytes(bytes([state]))
            out[key] = out.get(key, 0) + 1
        return dict(sorted(out.items()))  # by shown key, as the C++ twin

    # --8<-- [start:book_states]
    def book_states(self) -> dict[str, int]:
        """Locked and crossed books (book mode): how often a book entered each state, how
        long books spent in it (ITCH ns; an episode still open counts up to the latest
        timestamp seen) and how many books are in it now."""
        out: dict[str, int] = {}
        for state, name in ((_LOCKED, "locked"), (_CROSSED, "crossed")):
            open_now = [since for s, since in self._state.values() if s == state]
            out[name] = self._episodes[state]
            out[f"{name}_ns"] = self._state_ns[state] + sum(
                max(self._clock - since, 0) for since in open_now)
            out[f"{name}_now"] = len(open_now)
        return out
    # --8<-- [end:book_states]

    def top(self, locate: int) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """((bid, qty) | None, (ask, qty) | None) of one locate's book."""
        book = self._books.get(check_locate(locate))
        if book is None:
            return None, None
        return book.best_bid(), book.best_ask()

    def depth(self, locate: int, side: int, levels: int) -> list[tuple[int, int, int]]:
        book = self._books.get(check_locate(locate))
        if side not in (0, 1):
            raise ValueError("side must be 0 or 1")
        return [] if book is None else book.depth(Side(side), levels)

    def order(self, order_ref: int) -> tuple[int, int, int, int] | None:
        """(locate, side, price, shares) of a live order, or None."""
        locate = self._refs.get(check_order_ref(order_ref))
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
            ts, ref, new_ref, _, shares, price, locate, kind, side, _, _ = row
            self._events[kind] = self._events.get(kind, 0) + 1
            self._clock = max(self._clock, ts)
            if kind == _R:  # the raw 8 bytes (tolist() would strip trailing NULs)
                self._names[locate] = events[index:index + 1]["stock"].tobytes()
                continue
            if kind == _H:  # the trading state: recorded, never gates an update
                self._trading[locate] = side
                continue
            if kind not in (_A, _F, _E, _C, _X, _D, _U):
                continue  # S P Q B ...: counted only
            self._activity[locate] = self._activity.get(locate, 0) + 1
            if self.mode == "match":
                self._match_one(index, kind, locate, ref, new_ref, side, shares, price, fills)
                continue
            touched = self._book_one(index, kind, locate, ref, new_ref, side, shares, price,
                                     fills)
            if touched is not None:
                self._watch(touched, ts)
        return records(fills, FILL_DTYPE)  # padding zeroed, as the C++ twin writes it
    # --8<-- [end:run]

    # ------------------------------------------------------------- the rules

    def _anomaly(self, kind: str) -> None:
        """Count a bad book-mode message (it changes nothing)."""
        self._anomalies[kind] += 1

    def _reject(self, reason: str) -> None:
        """Count a bad match-mode message with the book's reason code."""
        self._rejects[reason] += 1

    def _locate_of(self, locate: int, ref: int) -> int | None:
        """The locate whose book holds ``ref`` (the dict wins over the message)."""
        found = self._refs.get(ref)
        if found is not None and found != locate:
            self._anomalies["locate_mismatch"] += 1
        return found

    # --8<-- [start:watch]
    def _watch(self, locate: int, ts: int) -> None:
        """After a book-mode message changed a book: is it locked or crossed now?"""
        book = self._books[locate]
        assert isinstance(book, FeedBook)
        bid, ask = book.best_price(Side.BUY), book.best_price(Side.SELL)
        now = _NORMAL
        if bid is not None and ask is not None and bid >= ask:
            now = _LOCKED if bid == ask else _CROSSED
        was, since = self._state.get(locate, (_NORMAL, 0))
        if now == was:
            return
        if was != _NORMAL:
            self._state_ns[was] += max(ts - since, 0)  # a clock going back adds nothing
            del self._state[locate]
        if now != _NORMAL:
            self._episodes[now] += 1
            self._state[locate] = (now, ts)
    # --8<-- [end:watch]

    # --8<-- [start:book_one]
    def _feed_book(self, locate: int) -> FeedBook:
        book = self._books.get(locate)
        if book is None:
            book = self._books[locate] = FeedBook()
        assert isinstance(book, FeedBook)
        return book

    def _book_one(self, index: int, kind: int, locate: int, ref: int, new_ref: int,
                  side_byte: int, shares: int, price: int, out: list[FillRow]) -> int | None:
        """One book-mode message; returns the locate whose book it changed, or None."""
        if kind in (_A, _F):
            if side_byte not in (_BUY, _SELL):
                self._anomaly("bad_side")
                return None
            if price == 0:
                self._anomaly("bad_price")
                return None
            if shares == 0:
                self._anomaly("bad_shares")
                return None
            if ref in self._refs:
                self._anomaly("duplicate_ref")
                return None
            side = Side.BUY if side_byte == _BUY else Side.SELL
            self._feed_book(locate).rest(ref, side, price, shares)  # even through the touch
            self._refs[ref] = locate
            return locate
        if kind == _U and price == 0:
            self._anomaly("bad_price")
            return None
        if kind != _D and shares == 0:
            self._anomaly("bad_shares")
            return None
        found = self._locate_of(locate, ref)
        if found is None:
            self._anomaly("unknown_ref")
            return None
        book = self._books[found]
        assert isinstance(book, FeedBook)
        resting = book.order(ref)
        assert resting is not None
        rest_side, rest_price, rest_shares = resting
        if kind in (_E, _C, _X) and shares > rest_shares:
            self._anomaly("over_cancel" if kind == _X else "over_execution")
            return None
        if kind in (_E, _C):
            if book.take(ref, shares) == 0:  # keeps its place in the queue
                del self._refs[ref]
            # E trades at the resting price; C at its own Execution Price (0 included).
            fill_price = price if kind == _C else rest_price
            out.append((ref, 0, fill_price, shares, index, 1 - rest_side))
            self.fills += 1
            self.volume += shares
        elif kind == _X:
            if book.take(ref, shares) == 0:
                del self._refs[ref]
        elif kind == _D:
            book.remove(ref)
            del self._refs[ref]
        else:  # U: the old order leaves, the new one rests at the back, same side
            if new_ref != ref and new_ref in self._refs:
                self._anomaly("duplicate_ref")
                return None
            book.remove(ref)
            del self._refs[ref]
            book.rest(new_ref, rest_side, price, shares)
            self._refs[new_ref] = found
        return found
    # --8<-- [end:book_one]

    # --8<-- [start:match_one]
    def _match_book(self, locate: int) -> Book:
        book = self._books.get(locate)
        if book is None:
            book = self._books[locate] = Book()
        assert isinstance(book, Book)
        return book

    def _match_one(self, index: int, kind: int, locate: int, ref: int, new_ref: int,
                   side_byte: int, shares: int, price: int, out: list[FillRow]) -> None:
        """One match-mode message: A F enter the engine, X D U change an order, E C wait."""
        if kind in (_E, _C):
            return  # an engine makes its own executions
        if kind in (_A, _F):
            if side_byte not in (_BUY, _SELL):
                return self._reject("bad_side")
            if shares == 0:
                return self._reject("bad_qty")
            if ref in self._refs:
                return self._reject("duplicate_id")
            book = self._match_book(locate)
            side = Side.BUY if side_byte == _BUY else Side.SELL
            if price == 0:  # the CSV convention: a market order
                fills = book.add_market(ref, side, shares)[0]
            else:
                fills = book.add_limit(ref, side, price, shares)
            return self._settle(book, locate, ref, fills, index, out)
        if kind == _U and price == 0:
            return self._reject("bad_price")
        if kind != _D and shares == 0:
            return self._reject("bad_qty")
        found = self._locate_of(locate, ref)
        if found is None:
            return self._reject("unknown_id")
        target = self._books[found]
        assert isinstance(target, Book)
        if kind == _X:
            try:
                left = target.reduce(ref, shares)
            except OrderRejected:  # only over_reduce is left to fail
                return self._reject("over_reduce")
            if left == 0:
                del self._refs[ref]
        elif kind == _D:
            target.cancel(ref)
            del self._refs[ref]
        else:  # U: replace, and the new order may match
            if new_ref != ref and new_ref in self._refs:
                return self._reject("duplicate_id")
            del self._refs[ref]
            fills = target.replace(ref, new_ref, price, shares)
            self._settle(target, found, new_ref, fills, index, out)
        return None

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
    # --8<-- [end:match_one]
