"""From an ITCH day to research tables, the readable twin (the rule set; C++: native/tables.hpp).

:class:`TableBuilder` reads framed ITCH records (a file's bytes, or the blocks a PCAP
scanner delivers), keeps every book with the market of chapter 5 in book mode
(:class:`naive.market.Market`), and appends rows to the tables ``contract.tables`` names:

* ``bbo`` -- after a message changed a book, a row if that book's best bid or offer
  (price, total shares, order count) differs from the last row for its locate;
* ``depth`` -- the same for the top N levels of both sides;
* ``messages`` -- each A F E C X D U that changed a book, with the resting order's side,
  price and locate filled in (``prev_price``/``prev_shares``: the order before the message;
  for U, ``price``/``shares`` are the new order's), so a row needs no earlier row to read;
* ``trades`` -- E at the resting order's price, C at its own price if printable, P, Q
  (cross shares are 8 bytes wide), B (a break: match number only); an E or C for more
  shares than its order holds is refused by the book (the market counts it) but its print
  is kept: the exchange disseminated it;
* ``halts`` (H and h), ``noii`` (I), ``symbols`` (R): the messages as they come.

Whether a message changed a book is read from the book itself: the order it names before
and after (an add: absent before, present after; E C: it produced a fill; X: the shares
left are the shares before minus the message's; D: gone after; U: the new order rests with
the new price and shares and the old one is gone). A message the market counts as an
anomaly changes nothing and makes no row. Trading state (H) is recorded in ``bbo`` and never
gates an update: NASDAQ keeps order maintenance flowing during a halt.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from contract.dtypes import EVENT_DTYPE
from contract.itch_errors import ItchError, byte_view
from contract.tables import (
    DEFAULT_DEPTH,
    LOBSTER_EMPTY_ASK,
    LOBSTER_EMPTY_BID,
    LOBSTER_END_NS,
    LOBSTER_HALT_PRICE,
    LOBSTER_START_NS,
    TABLES,
    check_depth,
    check_symbols,
    check_tables,
    columns,
    lobster_columns,
)
from naive.itch import (
    LENGTHS,
    EventRow,
    Noii,
    OperationalHalt,
    StockDirectory,
    StockTradingAction,
    event_row,
    parse_message,
)
from naive.market import Market

__all__ = ["TableBuilder"]

_A, _F, _E, _C, _X, _D, _U, _P, _Q, _B = (ord(c) for c in "AFECXDUPQB")
_BOOK = frozenset((_A, _F, _E, _C, _X, _D, _U))
Order = tuple[int, int, int, int]  # (locate, side 0/1, price, shares)
_SIDE_BYTE = (ord("B"), ord("S"))


class TableBuilder:
    """Rows of the asked-for tables from successive pieces of one feed."""

    def __init__(self, tables: Sequence[str] | str = TABLES,
                 symbols: Sequence[str] | str | None = None,
                 depth: int = DEFAULT_DEPTH, lobster: int = 0) -> None:
        self.tables = check_tables(tables)
        self.depth = check_depth(depth)
        self.lobster = 0 if lobster == 0 else check_depth(lobster)  # its levels; 0: off
        self._filter = check_symbols(symbols)
        self._market = Market("book")
        self._names: dict[int, bytes] = {}      # locate -> the 8 bytes of its R
        self._wanted: set[int] = set()          # locates whose R names a filtered symbol
        self._trading: dict[int, int] = {}      # locate -> state byte of its last H
        self._last_bbo: dict[int, tuple[int, ...]] = {}
        self._last_depth: dict[int, tuple[int, ...]] = {}
        self._level_orders: dict[tuple[int, int, int], int] = {}  # (locate, side, price) -> n
        self._rows: dict[str, list[tuple[object, ...]]] = {t: [] for t in self.tables}
        if self.lobster:
            self._rows["lobster"] = []
        self.messages = 0   # records read (the last row's seq)
        self.offset = 0     # feed bytes consumed

    # ------------------------------------------------------------ reading

    # --8<-- [start:feed]
    def feed(self, buffer: bytes | memoryview) -> int:
        """Read the whole records at the start of ``buffer`` (which starts at feed offset
        ``self.offset``); return the bytes used. A partial record at the end is left for
        the next call. A bad length prefix raises ItchError naming its offset, after every
        record before it has made its rows."""
        mv = byte_view(buffer).cast("B")
        off = 0
        while off + 2 <= len(mv):
            length = int.from_bytes(mv[off:off + 2], "big")
            if length == 0:
                self.offset += off
                raise ItchError(self.offset, "zero_length", -1, 0)
            if off + 2 + length > len(mv):
                break  # cut by the end of this piece: the caller brings the rest
            code = mv[off + 2]
            if code in LENGTHS and LENGTHS[code] != length:
                self.offset += off
                raise ItchError(self.offset, "bad_length", code, length,
                                f"type needs {LENGTHS[code]}")
            self.messages += 1
            if code in LENGTHS:  # unknown types are counted (in seq) and skipped
                self._message(mv[off + 2:off + 2 + length])
            off += 2 + length
        self.offset += off
        return off
    # --8<-- [end:feed]

    def take(self) -> dict[str, dict[str, np.ndarray]]:
        """The rows since the last take(), table -> column -> array (see contract.tables)."""
        out = {}
        for table in self._rows:
            cols = (lobster_columns(self.lobster) if table == "lobster"
                    else columns(table, self.depth))
            rows = self._rows[table]
            arrays = {name: np.zeros(len(rows), dtype=dtype) for name, dtype in cols}
            if rows:
                for (name, _), values in zip(cols, zip(*rows, strict=True), strict=True):
                    arrays[name][:] = values
            out[table] = arrays
            self._rows[table] = []
        return out

    def counters(self) -> dict[str, int]:
        """What the replay found: records read, anomalies by kind, books locked/crossed
        (episodes), live orders now."""
        out = {"messages": self.messages}
        out.update(self._market.counts()["anomalies"])
        states = self._market.book_states()
        out["locked"], out["crossed"] = states["locked"], states["crossed"]
        out["live_orders"] = len(self._market)
        return out

    # ------------------------------------------------------------ the rules

    def _keep(self, table: str, locate: int) -> bool:
        return table in self._rows and (self._filter is None or locate in self._wanted)

    def _common(self, ts: int, locate: int) -> tuple[int, int, int, bytes]:
        return ts, self.messages, locate, self._names.get(locate, b"")

    # --8<-- [start:message]
    def _message(self, message: memoryview) -> None:
        rec = parse_message(message)
        if isinstance(rec, StockDirectory):
            self._names[rec.locate] = rec.stock
            if self._filter is not None:
                if rec.stock in self._filter:
                    self._wanted.add(rec.locate)
                else:
                    self._wanted.discard(rec.locate)
            if self._keep("symbols", rec.locate):
                self._rows["symbols"].append(self._common(rec.timestamp, rec.locate) + (
                    rec.market_category[0], rec.financial_status[0], rec.round_lot_size,
                    rec.round_lots_only[0], rec.issue_classification[0], rec.issue_sub_type,
                    rec.authenticity[0], rec.short_sale_threshold[0], rec.ipo_flag[0],
                    rec.luld_tier[0], rec.etp_flag[0], rec.etp_leverage_factor,
                    rec.inverse_indicator[0]))
        elif isinstance(rec, StockTradingAction):
            self._trading[rec.locate] = rec.trading_state[0]  # recorded, never a gate
            halt = LOBSTER_HALT_PRICE.get(rec.trading_state[0])
            if halt is not None:
                self._lobster(rec.timestamp, rec.locate, (7, 0, 0, halt, -1))
            if self._keep("halts", rec.locate):
                self._rows["halts"].append(self._common(rec.timestamp, rec.locate) + (
                    ord("H"), rec.trading_state[0], rec.reason, 0))
        elif isinstance(rec, OperationalHalt):
            if self._keep("halts", rec.locate):
                self._rows["halts"].append(self._common(rec.timestamp, rec.locate) + (
                    ord("h"), rec.halt_action[0], b"", rec.market_code[0]))
        elif isinstance(rec, Noii):
            if self._keep("noii", rec.locate):
                self._rows["noii"].append(self._common(rec.timestamp, rec.locate) + (
                    rec.paired_shares, rec.imbalance_shares, rec.imbalance_direction[0],
                    rec.far_price, rec.near_price, rec.reference_price, rec.cross_type[0],
                    rec.price_variation[0]))
        row = event_row(rec)
        if row is None:
            return
        event = np.zeros(1, dtype=EVENT_DTYPE)
        event[0] = row
        if row[7] in _BOOK:
            self._book(row, event)
            return
        self._market.run(event)  # S R H P Q B: the market counts them (and keeps R, H)
        if row[7] in (_P, _Q, _B):
            self._trade(row)
        ts, ref, _, _, shares, price, locate, kind, side, _, _ = row
        if kind == _P:  # a hidden order traded: LOBSTER type 5
            self._lobster(ts, locate, (5, ref, shares, price, 1 if side == ord("B") else -1))
        elif kind == _Q:  # the cross (shares in order_ref): type 6 (UNVERIFIED: id, direction)
            self._lobster(ts, locate, (6, 0, ref, price, -1))
    # --8<-- [end:message]

    def _order(self, ref: int) -> Order | None:
        return self._market.order(ref)

    # --8<-- [start:book]
    def _book(self, e: EventRow, event: np.ndarray) -> None:
        """One A F E C X D U (``e``: its event row, ``event``: the same as a one-record
        EVENT_DTYPE array): apply it, then write the rows it causes (if it changed a book)."""
        _, ref, new_ref, _, shares, price, _, kind, _, printable, _ = e
        before = self._order(ref)
        fills = self._market.run(event)
        if kind in (_A, _F):
            after = self._order(ref)
            if before is None and after is not None:  # else refused: counted, no change
                self._count(after[0], after[1], price, +1)
                self._changed(e, after[0], after[1], price, shares, 0, 0, 0)
            return
        if before is None:
            return  # unknown reference: counted by the market, changes nothing
        locate, side, old_price, old_shares = before
        if kind in (_E, _C):
            exec_price = price if kind == _C else old_price  # E prints at the resting price
            if len(fills) == 0:  # refused and counted, the book unchanged, but an
                # over-execution was printed by the exchange: its trade row stays
                if shares > old_shares and (kind == _E or printable == ord("Y")):
                    self._trade(e, locate, side, exec_price)
                return
            if shares == old_shares:  # the order left the book
                self._count(locate, side, old_price, -1)
            self._changed(e, locate, side, old_price, shares, old_price, old_shares, exec_price)
            if kind == _E or printable == ord("Y"):
                self._trade(e, locate, side, exec_price)
        elif kind == _X:
            after = self._order(ref)
            if shares > 0 and (0 if after is None else after[3]) == old_shares - shares:
                if after is None:
                    self._count(locate, side, old_price, -1)
                self._changed(e, locate, side, old_price, shares, old_price, old_shares, 0)
        elif kind == _D:
            if self._order(ref) is None:
                self._count(locate, side, old_price, -1)
                self._changed(e, locate, side, old_price, old_shares, old_price, old_shares, 0)
        else:  # U: the new order rests, same side, new price and shares; the old one left
            gone = new_ref == ref or self._order(ref) is None
            if gone and self._order(new_ref) == (locate, side, price, shares):
                self._count(locate, side, old_price, -1)
                self._count(locate, side, price, +1)
                self._changed(e, locate, side, price, shares, old_price, old_shares, 0)

    def _count(self, locate: int, side: int, price: int, delta: int) -> None:
        """Orders resting at (locate, side, price), kept as the C++ twin keeps them: the
        bbo's order count after every message without counting a queue."""
        key = (locate, side, price)
        n = self._level_orders.get(key, 0) + delta
        if n:
            self._level_orders[key] = n
        else:
            del self._level_orders[key]
    # --8<-- [end:book]

    def _changed(self, e: EventRow, locate: int, side: int, price: int, shares: int,
                 prev_price: int, prev_shares: int, exec_price: int) -> None:
        """A message changed ``locate``'s book: its messages row, then bbo and depth."""
        ts, ref, new_ref, match, _, _, _, kind, _, printable, _ = e
        if self._keep("messages", locate):
            self._rows["messages"].append(self._common(ts, locate) + (
                kind, ref, new_ref, _SIDE_BYTE[side], price, shares, prev_price, prev_shares,
                exec_price, match, printable if kind == _C else 0))
        if self.lobster:
            self._lobster_book(e, locate, side, price, shares, prev_price, prev_shares)
        if self._keep("bbo", locate):
            top = self._best(locate)
            if self._last_bbo.get(locate, (0,) * 6) != top:
                self._last_bbo[locate] = top
                self._rows["bbo"].append(self._common(ts, locate) + top
                                         + (self._trading.get(locate, 0),))
        if self._keep("depth", locate):
            levels = self._top(locate, self.depth)
            if self._last_depth.get(locate, (0,) * (6 * self.depth)) != levels:
                self._last_depth[locate] = levels
                self._rows["depth"].append(self._common(ts, locate) + levels)

    def _best(self, locate: int) -> tuple[int, ...]:
        """The bbo columns: (bid price, size, orders, ask price, size, orders), 0s if empty."""
        out: list[int] = []
        for top, side in zip(self._market.top(locate), (0, 1), strict=True):
            if top is None:
                out += [0, 0, 0]
            else:
                out += [top[0], top[1], self._level_orders[(locate, side, top[0])]]
        return tuple(out)

    # --8<-- [start:top]
    def _top(self, locate: int, n: int) -> tuple[int, ...]:
        """The top ``n`` levels of both sides, as the bbo / depth columns order them: for
        each side, n prices, n sizes, n order counts (an empty level is 0, 0, 0); n = 1 is
        the bbo's (bid price, size, orders, ask price, size, orders)."""
        out: list[int] = []
        for side in (0, 1):
            levels = self._market.depth(locate, side, n)
            levels += [(0, 0, 0)] * (n - len(levels))
            for field in range(3):
                out.extend(level[field] for level in levels)
        return tuple(out)
    # --8<-- [end:top]

    # --8<-- [start:lobster]
    def _lobster_book(self, e: EventRow, locate: int, side: int, price: int,
                      shares: int, prev_price: int, prev_shares: int) -> None:
        """LOBSTER's rows for a message that changed a book. A replace (no LOBSTER
        type): a deletion, whose book lacks the new order, then a submission."""
        ts, ref, new_ref, _, _, _, _, kind, _, _, _ = e
        direction = 1 if side == 0 else -1
        if kind in (_A, _F):
            self._lobster(ts, locate, (1, ref, shares, price, direction))
        elif kind in (_E, _C):  # at the resting order's price, whatever C printed
            self._lobster(ts, locate, (4, ref, shares, prev_price, direction))
        elif kind == _X:
            self._lobster(ts, locate, (2, ref, shares, prev_price, direction))
        elif kind == _D:
            self._lobster(ts, locate, (3, ref, prev_shares, prev_price, direction))
        else:  # U
            self._lobster(ts, locate, (3, ref, prev_shares, prev_price, direction),
                          without=(side, price, shares))
            self._lobster(ts, locate, (1, new_ref, shares, price, direction))

    def _lobster(self, ts: int, locate: int, message: tuple[int, int, int, int, int],
                 without: tuple[int, int, int] | None = None) -> None:
        """One LOBSTER row (regular session only): the message, then the book after it,
        less ``without`` (side, price, shares), which it holds but the row must not."""
        if (not self._keep("lobster", locate)
                or not LOBSTER_START_NS <= ts <= LOBSTER_END_NS):
            return
        n = self.lobster
        book: list[list[tuple[int, int]]] = [[], []]  # [bids, asks], each best first
        for side in (0, 1):
            for price, size, orders in self._market.depth(locate, side, n + 1):
                if without is not None and without[:2] == (side, price):
                    size, orders = size - without[2], orders - 1
                if orders:
                    book[side].append((price, size))
        row: list[int] = []
        for k in range(n):
            ask = book[1][k] if k < len(book[1]) else (LOBSTER_EMPTY_ASK, 0)
            bid = book[0][k] if k < len(book[0]) else (LOBSTER_EMPTY_BID, 0)
            row += [ask[0], ask[1], bid[0], bid[1]]
        self._rows["lobster"].append(self._common(ts, locate) + message + tuple(row))
    # --8<-- [end:lobster]

    def _trade(self, e: EventRow, locate: int | None = None, side: int = 0,
               price: int = 0) -> None:
        """A trades row: E C (``locate``, resting ``side`` and print ``price`` given), P Q B."""
        ts, ref, _, match, shares, wire_price, wire_locate, kind, wire_side, printable, _ = e
        loc = wire_locate if locate is None else locate
        if not self._keep("trades", loc):
            return
        if kind in (_E, _C):
            row = (kind, ref, _SIDE_BYTE[side], price, shares, match, 0)
        elif kind == _P:
            row = (kind, ref, wire_side, wire_price, shares, match, 0)
        elif kind == _Q:  # the cross's shares travel in order_ref (see EVENT_DTYPE)
            row = (kind, 0, 0, wire_price, ref, match, printable)
        else:  # B: a break names only the match number
            row = (kind, 0, 0, 0, 0, match, 0)
        self._rows["trades"].append(self._common(ts, loc) + row)
