"""Order entry, the readable twin: SoupBinTCP + OUCH 5.0 in front of the matching engine.

Two halves:

* :class:`Exchange` is the protocol's logic and nothing else: it takes one inbound OUCH
  message from a logged-in user and appends that user's (and, for a fill, the other
  side's) outbound messages to their **sequenced logs**. Each user has one log for the
  day; a message's SoupBinTCP sequence number is its place in the log, from 1, and a
  login asking for sequence ``n`` is answered by replaying the log from ``n``. The engine
  behind it is chapter 1's :class:`naive.book.Book`, one per symbol: the same rules as the
  market's match mode.
* :class:`MarketData` is the exchange's own ITCH 5.0 feed: what every participant may
  see of the books (adds, executions, cancels, replaces of displayed orders; trades
  against hidden ones), derived from the same events as the OUCH messages. Chapter 3's
  decoders and chapter 5's market read it back; the test rebuilds the books from it.
* :class:`Server` is asyncio: one coroutine per TCP connection reads, frames, logs in,
  keeps the heartbeat timers and writes. It binds 127.0.0.1 only.

Every choice the spec leaves open is marked ``(a project choice)`` or UNVERIFIED, in the
same words as ``native/entry.hpp``.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from contract import ouch
from contract import soupbin as sb
from contract.soupbin import STAT_KEYS, EntryConfig
from naive.book import Book, Fill, Side
from naive.itch import STRUCTS

__all__ = ["Exchange", "MarketData", "Server"]


def _now_wall() -> int:
    """Nanoseconds since midnight UTC (OUCH timestamps are not Unix time)."""
    return time.time_ns() % 86_400_000_000_000


@dataclass
class _Order:
    """A live order as its owner sees it (the book holds side, price and shares left)."""

    user: int
    urn: int
    ref: int                    # Order Reference Number = the engine's order id
    locate: int
    side: bytes                 # B S T E as entered (T, E sell in the book)
    price: int
    tif: bytes
    display: bytes
    capacity: bytes
    ise: bytes
    cross: bytes
    clordid: bytes
    total: int                  # the chain's total liability (Replace counts it so)
    executed: int = 0


# --8<-- [start:market_data]
class MarketData:
    """The exchange's ITCH 5.0 feed, framed as an ITCH file (a 2-byte length before each
    message): ``take()`` hands over what was published since the last call.

    The rules (the spec is NASDAQ's ITCH 5.0; how NASDAQ itself sequences these around a
    replace that trades is UNVERIFIED, so these are project choices):

    * An order appears when it **rests**: A (display Y) or F (display A; the MPID is the
      first 4 letters of the user's name). An order that trades on arrival appears only
      with what is left of it; an IOC or market order never appears.
    * A fill against a resting displayed order is E (its reference, the shares, the same
      Match Number as the OUCH Executed); against a hidden one (display N) it is P with
      order reference 0 and side B, as NASDAQ has sent since 2014 (../shared/spec).
      The aggressor's side of a fill is never published: it was never on the book.
    * A partial cancel is X, a whole one D. A replace that rests in full at once with the
      same display is U (the original reference, the new one, shares, price); any other
      replace is D of the original, its fills, then A or F of what rests.
    * Locate = the symbol's place in the configuration + 1, announced by R at the start
      between S O and S S, S Q; the end of the day is S M, S E, S C. Tracking is 0.
    """

    def __init__(self, symbols: Sequence[str], users: Sequence[str], ts: int,
                 stats: dict[str, int], on: bool = True) -> None:
        self.stats = stats
        self.on = on                 # off: nobody listens, so nothing is made at all
        self.stocks = [s.encode().ljust(8) for s in symbols]
        self.mpids = [u.upper().encode()[:4].ljust(4) for u in users]
        self.out = bytearray()
        self.system(ts, b"O")
        for locate, stock in enumerate(self.stocks, 1):
            self._put(b"R", locate, ts, stock, b"Q", b"N", 100, b"N", b"C", b"Z ", b"P",
                      b"N", b"N", b"2", b"N", 0, b"N")
        self.system(ts, b"S")
        self.system(ts, b"Q")

    def _put(self, code: bytes, locate: int, ts: int, *body: object) -> None:
        if not self.on:
            return
        layout = STRUCTS[code]
        self.out += layout.size.to_bytes(2, "big")
        self.out += layout.pack(code, locate, 0, ts.to_bytes(6, "big"), *body)
        self.stats["market_data_out"] += 1

    def take(self) -> bytes:
        data, self.out = bytes(self.out), bytearray()
        return data

    def system(self, ts: int, code: bytes) -> None:
        self._put(b"S", 0, ts, code)

    def end(self, ts: int) -> None:
        for code in (b"M", b"E", b"C"):
            self.system(ts, code)

    def add(self, ts: int, order: _Order, shares: int) -> None:
        side = b"B" if order.side == b"B" else b"S"    # T and E sell
        head = (order.locate + 1, ts, order.ref, side, shares, self.stocks[order.locate],
                order.price)
        if order.display == b"Y":
            self._put(b"A", *head)
        elif order.display == b"A":
            self._put(b"F", *head, self.mpids[order.user])

    def executed(self, ts: int, order: _Order, shares: int, price: int, match: int) -> None:
        if order.display == b"N":
            self._put(b"P", order.locate + 1, ts, 0, b"B", shares, self.stocks[order.locate],
                      price, match)
        else:
            self._put(b"E", order.locate + 1, ts, order.ref, shares, match)

    def cancel(self, ts: int, order: _Order, shares: int) -> None:
        if order.display != b"N":
            self._put(b"X", order.locate + 1, ts, order.ref, shares)

    def delete(self, ts: int, order: _Order) -> None:
        if order.display != b"N":
            self._put(b"D", order.locate + 1, ts, order.ref)

    def replace(self, ts: int, old_ref: int, order: _Order, shares: int) -> None:
        if order.display != b"N":
            self._put(b"U", order.locate + 1, ts, old_ref, order.ref, shares, order.price)
# --8<-- [end:market_data]


class _User:
    def __init__(self) -> None:
        self.log: list[bytes] = []           # framed S packets; sequence = index + 1
        self.last_urn = 0                    # UserRefNums must rise strictly (spec §2.2)
        self.live: dict[int, _Order] = {}    # UserRefNum -> live order


# --8<-- [start:exchange]
class Exchange:
    """The order-entry logic: users' sequenced logs, UserRefNum rules, the engine."""

    def __init__(self, config: EntryConfig, publish: bool = False) -> None:
        """``publish``: make the ITCH feed (MarketData); the server asks for it only when
        it has somewhere to write it (``--itch-out``)."""
        self.config = config.check().resolved()   # the session id of this run
        self.user_ids = {name.upper(): i for i, name in enumerate(config.users)}
        self.passwords = [pw.upper() for pw in config.users.values()]
        self.users = [_User() for _ in config.users]
        self.symbols = {s.encode().ljust(8): i for i, s in enumerate(config.symbols)}
        self.books = [Book() for _ in config.symbols]
        self.orders: dict[int, _Order] = {}  # ref -> order, every live order
        self.next_ref = 1
        self.next_match = 1
        self.handled = 0
        self.stats = dict.fromkeys(STAT_KEYS, 0)
        self.dirty: set[int] = set()         # users whose logs grew since the last flush
        start = self.clock()
        self.market = MarketData(config.symbols, list(config.users), start, self.stats,
                                 on=publish)
        for user in range(len(self.users)):
            self._emit(user, ouch.SYSTEM_EVENT.pack(b"S", start, b"S"))  # start of day

    def clock(self) -> int:
        if self.config.clock == "fixed":
            return ouch.OPEN_TIME_NS + self.handled
        return _now_wall()

    def _emit(self, user: int, msg: bytes) -> None:
        self.users[user].log.append(sb.frame(sb.SEQUENCED, msg))
        self.dirty.add(user)
        self.stats["messages_out"] += 1

    def end_of_day(self) -> None:
        ts = self.clock()
        for user in range(len(self.users)):
            self._emit(user, ouch.SYSTEM_EVENT.pack(b"S", ts, b"E"))
        self.market.end(ts)

    # ---------------------------------------------------------------- dispatch
    def handle(self, user: int, msg: bytes) -> None:
        """One OUCH message from a logged-in user (the payload of a U packet)."""
        self.stats["messages_in"] += 1
        self.handled += 1
        kind = msg[:1]
        if kind not in ouch.INBOUND_SIZES:
            self.stats["unknown_message"] += 1   # D E Q and anything else (a project choice)
            return
        if not ouch.message_length_ok(msg):
            self.stats["bad_message_length"] += 1  # dropped, not answered (a project choice)
            return
        ts = self.clock()
        if kind == b"O":
            self._enter(user, msg, ts)
        elif kind == b"U":
            self._replace(user, msg, ts)
        elif kind == b"X":
            self._cancel(user, msg, ts)
        elif kind == b"M":
            self._modify(user, msg, ts)
        else:
            self._mass_cancel(user, msg, ts)
    # --8<-- [end:exchange]

    def _ignored(self) -> None:
        self.stats["ignored"] += 1

    # --8<-- [start:enter]
    def _enter_problem(self, side: bytes, qty: int, symbol: bytes, price: int, tif: bytes,
                       display: bytes, capacity: bytes, ise: bytes, cross: bytes,
                       clordid: bytes, appendage: bytes) -> int:
        """The Rejected reason for a bad Enter Order, or 0 (checked in this order).
        Where the spec has no code for the problem, the reason is Other (0x0F): marked
        "no code", a project choice."""
        if side not in (b"B", b"S", b"T", b"E"):
            return ouch.REJECT_INVALID_SIDE
        if not 0 < qty < ouch.MAX_QUANTITY_EXCLUSIVE:
            return ouch.REJECT_INVALID_QUANTITY
        if symbol not in self.symbols:
            return ouch.REJECT_INVALID_SYMBOL
        if price == 0 or (price > ouch.PRICE_MAX and price not in _MARKET):
            return ouch.REJECT_INVALID_PRICE
        if tif not in _TIFS:
            return ouch.REJECT_OTHER                # no code for a bad Time in Force
        if tif[0] == ouch.TIF_GTT and not ouch.expire_time_ok(appendage):
            return ouch.REJECT_OTHER                # no code: GTT without ExpireTime
        if display not in _DISPLAYS:
            return ouch.REJECT_INVALID_DISPLAY
        if capacity not in _CAPACITIES:
            return ouch.REJECT_OTHER                # no code for a bad Capacity
        if ise != b"N":
            return ouch.REJECT_ISO_NOT_ALLOWED      # no routing here (a project choice)
        if cross != b"N":
            return ouch.REJECT_INVALID_CROSS        # continuous market only
        if not ouch.clordid_ok(clordid):
            return ouch.REJECT_OTHER                # no code: a non-printable ClOrdID
        return 0

    def _enter(self, user: int, msg: bytes, ts: int) -> None:
        (_, urn, side, qty, symbol, price, tif, display, capacity, ise, cross, clordid,
         _) = ouch.ENTER.unpack_from(msg)
        u = self.users[user]
        if urn <= u.last_urn:
            return self._ignored()   # "assumed to be a retransmission" (spec §2.2)
        u.last_urn = urn             # accepted or rejected, the UserRefNum is used
        # (gaps are allowed here: whether NASDAQ allows them is UNVERIFIED)
        reason = self._enter_problem(side, qty, symbol, price, tif, display, capacity, ise,
                                     cross, clordid, msg[ouch.ENTER.size:])
        if reason:
            self.stats["rejected"] += 1
            self._emit(user, ouch.REJECTED.pack(b"J", ts, urn, reason, clordid))
            return
        ref = self.next_ref
        self.next_ref += 1
        order = _Order(user, urn, ref, self.symbols[symbol], side, price, tif, display,
                       capacity, ise, cross, clordid, qty)
        self._emit(user, ouch.ACCEPTED.pack(b"A", ts, urn, side, qty, symbol, price, tif,
                                            display, ref, capacity, ise, cross, b"L",
                                            clordid, 0))
        book = self.books[order.locate]
        book_side = Side.BUY if side == b"B" else Side.SELL
        self.orders[ref] = order
        u.live[urn] = order
        if price in _MARKET:         # sweeps what rests; never rests itself
            fills, unfilled = book.add_market(ref, book_side, qty)
        else:
            fills, unfilled = book.add_limit(ref, book_side, price, qty), 0
        self._settle(order, fills, ts)
        self._after_match(order, unfilled, ts)
    # --8<-- [end:enter]

    # --8<-- [start:fills]
    def _settle(self, aggressor: _Order, fills: list[Fill], ts: int) -> None:
        """Each fill: an Executed to the resting order's owner (liquidity A, added), then
        one to the aggressor's (R, removed), with the same Match Number."""
        for f in fills:
            resting = self.orders[f.resting_id]
            match = self.next_match
            self.next_match += 1
            for order, flag in ((resting, b"A"), (aggressor, b"R")):
                order.executed += f.qty
                self._emit(order.user, ouch.EXECUTED.pack(b"E", ts, order.urn, f.qty,
                                                          f.price, flag, match, 0))
            self.market.executed(ts, resting, f.qty, f.price, match)
            if self.books[resting.locate].order(resting.ref) is None:
                self._forget(resting)

    def _after_match(self, order: _Order, unfilled: int, ts: int, replaced: int = 0) -> None:
        """An IOC's remainder is canceled (reason I), as is a market order's unfilled part.
        What rests is published: A/F, or U from ``replaced`` (the old reference)."""
        left = self.books[order.locate].order(order.ref)
        if left is not None and order.tif[0] == ouch.TIF_IOC:
            self.books[order.locate].cancel(order.ref)
            unfilled = left[2]
            left = None
        if unfilled:
            self._emit(order.user, ouch.CANCELED.pack(b"C", ts, order.urn, unfilled,
                                                      ouch.CANCEL_IOC))
        if left is None:
            self._forget(order)
        elif replaced:
            self.market.replace(ts, replaced, order, left[2])
        else:
            self.market.add(ts, order, left[2])
    # --8<-- [end:fills]

    def _forget(self, order: _Order) -> None:
        self.orders.pop(order.ref, None)
        live = self.users[order.user].live
        if live.get(order.urn) is order:
            del live[order.urn]

    def _cancel_all(self, order: _Order, ts: int) -> None:
        left = self.books[order.locate].cancel(order.ref)
        self.market.delete(ts, order)
        self._emit(order.user, ouch.CANCELED.pack(b"C", ts, order.urn, left, ouch.CANCEL_USER))
        self._forget(order)

    # --8<-- [start:replace]
    def _replace(self, user: int, msg: bytes, ts: int) -> None:
        (_, orig, urn, qty, price, tif, display, ise, clordid,
         _) = ouch.REPLACE.unpack_from(msg)
        u = self.users[user]
        order = u.live.get(orig)
        if order is None or urn <= u.last_urn:
            return self._ignored()   # spec outcome 1: ignored, the new URN not used
        outstanding = qty - order.executed   # Quantity = the chain's total (spec §2.3)
        no_expiry = tif == b"6" and not ouch.expire_time_ok(msg[ouch.REPLACE.size:])
        if (not 0 < qty < ouch.MAX_QUANTITY_EXCLUSIVE or price == 0
                or price > ouch.PRICE_MAX or tif not in _TIFS or tif == b"E" or no_expiry
                or display not in _DISPLAYS or ise != b"N" or not ouch.clordid_ok(clordid)
                or outstanding <= 0):
            return self._cancel_all(order, ts)   # outcome 2: the original is canceled
        u.last_urn = urn
        ref = self.next_ref
        self.next_ref += 1
        del self.orders[order.ref]
        del u.live[orig]
        book = self.books[order.locate]
        fills = book.replace(order.ref, ref, price, outstanding)   # loses priority
        # On the feed: U if it rests in full at once, seen as before; else D, fills, A.
        as_u = not fills and display == order.display and tif[0] != ouch.TIF_IOC
        old_ref = order.ref
        if not as_u:
            self.market.delete(ts, order)
        order.urn, order.ref, order.price, order.total = urn, ref, price, qty
        order.tif, order.display, order.ise, order.clordid = tif, display, ise, clordid
        self.orders[ref] = order
        u.live[urn] = order
        symbol = self.config.symbols[order.locate].encode().ljust(8)
        self._emit(user, ouch.REPLACED.pack(b"U", ts, orig, urn, order.side, outstanding,
                                            symbol, price, tif, display, ref, order.capacity,
                                            ise, order.cross, b"L", clordid, 0))
        self._settle(order, fills, ts)
        self._after_match(order, 0, ts, replaced=old_ref if as_u else 0)
    # --8<-- [end:replace]

    # --8<-- [start:cancel]
    def _reduce_to(self, order: _Order, size: int, ts: int) -> int:
        """Cut a live order to ``size`` shares (0: cancel it); returns the decrement."""
        book = self.books[order.locate]
        found = book.order(order.ref)
        assert found is not None
        left = found[2]
        if size >= left:
            return 0                 # an increase, or no change: nothing to take
        if size == 0:
            book.cancel(order.ref)
            self.market.delete(ts, order)
            self._forget(order)
        else:
            book.reduce(order.ref, left - size)   # keeps its place in the queue
            self.market.cancel(ts, order, left - size)
        return left - size

    def _cancel(self, user: int, msg: bytes, ts: int) -> None:
        urn, size = int.from_bytes(msg[1:5], "big"), int.from_bytes(msg[5:9], "big")
        order = self.users[user].live.get(urn)
        if order is None:
            return self._ignored()   # a superfluous cancel is silently ignored (spec §2.3)
        taken = self._reduce_to(order, size, ts)
        if taken == 0:
            return self._ignored()
        self._emit(user, ouch.CANCELED.pack(b"C", ts, urn, taken, ouch.CANCEL_USER))

    def _modify(self, user: int, msg: bytes, ts: int) -> None:
        urn, side, size = (int.from_bytes(msg[1:5], "big"), msg[5:6],
                           int.from_bytes(msg[6:10], "big"))
        order = self.users[user].live.get(urn)
        if order is None:
            return self._ignored()
        if side != order.side and (side not in _SELLS or order.side not in _SELLS):
            return self._ignored()   # only S <-> T <-> E (spec §2.3; a project choice)
        order.side = side
        self._reduce_to(order, size, ts)         # increases are ignored, 0 cancels
        found = self.books[order.locate].order(order.ref)
        left = 0 if found is None else found[2]
        self._emit(user, ouch.MODIFIED.pack(b"M", ts, urn, side, left))

    def _mass_cancel(self, user: int, msg: bytes, ts: int) -> None:
        _, urn, firm, symbol, _ = ouch.MASS_CANCEL.unpack_from(msg)
        u = self.users[user]
        if urn <= u.last_urn:
            return self._ignored()
        u.last_urn = urn
        locate = None if symbol == b" " * 8 else self.symbols.get(symbol, -1)
        for live_urn in sorted(u.live):
            order = u.live[live_urn]
            if locate is None or order.locate == locate:
                self._cancel_all(order, ts)
        self._emit(user, ouch.MASS_CANCEL_RESPONSE.pack(b"X", ts, urn, firm, symbol, 0))
    # --8<-- [end:cancel]


_MARKET = (ouch.PRICE_MARKET_CROSS, ouch.PRICE_MARKET)
_TIFS = tuple(bytes([c]) for c in ouch.TIME_IN_FORCE)
_DISPLAYS = tuple(bytes([c]) for c in ouch.DISPLAYS)
_CAPACITIES = tuple(bytes([c]) for c in ouch.CAPACITIES)
_SELLS = (b"S", b"T", b"E")


class _Closed(Exception):
    """The server closes this connection; ``reason`` is the stats key it counts under."""

    def __init__(self, reason: str | None) -> None:
        super().__init__(reason)
        self.reason = reason


# --8<-- [start:session]
class _Session:
    """One TCP connection: framing, login, timers and the user's log as its output."""

    def __init__(self, server: Server, sock: socket.socket) -> None:
        self.server = server
        self.ex = server.exchange
        self.sock = sock                     # until run() wraps it in asyncio streams
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.framer = sb.Framer()
        self.reading: asyncio.Future[bytes] | None = None   # the read in progress
        self.user: int | None = None
        self.sent = 0                        # log entries already written
        self.written = 0                     # bytes handed to asyncio
        self.taken_seen = 0                  # bytes the kernel had taken at the last check
        self.idle_ms = self.ex.config.idle_timeout_ms
        now = time.monotonic()
        self.last_in = self.last_out = self.progress = now
        self.deadline = now + self.ex.config.login_timeout_ms / 1000
        self.read_ns = -1                    # the read whose answers wait to go out
        self.read_mark = 0                   # the log entry where those answers start

    def write(self, data: bytes) -> None:
        assert self.writer is not None
        self.writer.write(data)
        self.written += len(data)
        self.last_out = time.monotonic()

    def unsent(self) -> int:
        """Bytes asyncio still holds for this connection (the kernel has not taken)."""
        assert self.writer is not None
        return self.writer.transport.get_write_buffer_size()

    def pending(self) -> bool:
        return self.unsent() > 0 or (
            self.user is not None and self.sent < len(self.ex.users[self.user].log))

    def flush_log(self) -> None:
        """Write the user's log past what this connection has sent, while asyncio holds
        less than out_limit unsent bytes: the rest waits in the log (a replay included)."""
        assert self.user is not None
        log = self.ex.users[self.user].log
        limit = self.ex.config.out_limit
        while self.sent < len(log) and self.unsent() < limit:
            end = min(len(log), self.sent + 256)
            self.write(b"".join(log[self.sent:end]))
            self.sent = end
            if self.read_ns >= 0 and self.sent > self.read_mark:   # the first answer
                if len(self.server.timing_ns) < 1 << 20:     # the first 2**20, as C++
                    self.server.timing_ns.append(time.perf_counter_ns() - self.read_ns)
                self.read_ns = -1

    async def run(self) -> None:
        if self not in self.server.sessions:
            self.sock.close()                # evicted before it had its first turn
            return
        try:
            self.reader, self.writer = await asyncio.open_connection(sock=self.sock)
            while True:
                data = await self._read()
                if self not in self.server.sessions:
                    return               # dropped meanwhile (evicted, or did not read)
                if not data:
                    if self.framer.pending:
                        raise _Closed("eof_mid_packet")
                    raise _Closed(None)      # a plain close: what is owed still goes
                self.last_in = time.monotonic()
                read_ns = time.perf_counter_ns()     # the server's share starts here
                user = self.user
                mark = -1 if user is None else len(self.ex.users[user].log)
                try:
                    packets = self.framer.feed(data)
                except sb.FrameError as exc:
                    # The whole packets before the bad length are handled first (an
                    # order among them trades), then the connection is closed.
                    self.on_packets(exc.packets)
                    raise _Closed("bad_length" if exc.length == 0 else "too_long") from None
                if user is not None and self.read_ns < 0:
                    # mark before the answers: flush_log (in on_packets) times the first
                    self.read_ns, self.read_mark = read_ns, mark
                self.on_packets(packets)
                if (self.read_ns == read_ns and user is not None
                        and len(self.ex.users[user].log) <= mark):
                    self.read_ns = -1        # this read brought no answer to time
        except _Closed as closed:
            if closed.reason:
                self.ex.stats[closed.reason] += 1
            self.server.drop(self, abort=closed.reason == "slow_consumer")
        except (ConnectionError, OSError):
            if self.framer.pending:
                self.ex.stats["eof_mid_packet"] += 1   # a reset in the middle of a packet
            self.server.drop(self, abort=True)
        finally:
            self.server.drop(self, abort=False)

    def on_packets(self, packets: list[bytes]) -> None:
        """Handle whole packets in order, then write every log that grew."""
        try:
            for packet in packets:
                self.ex.stats["packets_in"] += 1
                self.on_packet(packet)
        finally:
            self.server.flush_all()

    async def _read(self) -> bytes:
        """The next bytes; meanwhile, every 10 ms, the timers and the rest of the log.

        The read is one task that the 10 ms timeout never cancels (``asyncio.wait``,
        not ``wait_for``): no bytes it has already taken off the stream can be lost
        with a cancelled read. One read is at most 8 KiB: then the other sessions have
        their turn (asyncio runs each ready coroutine once per turn of its loop).
        """
        assert self.reader is not None
        while True:
            self.timers()
            if self.reading is None:
                self.reading = asyncio.ensure_future(self.reader.read(8192))
            done, _ = await asyncio.wait({self.reading}, timeout=0.01)
            if done:
                task, self.reading = self.reading, None
                return task.result()

    def timers(self) -> None:
        now = time.monotonic()
        if self.user is None:
            if now >= self.deadline:
                raise _Closed("login_timeout")
            return
        if now - self.last_in >= self.idle_ms / 1000:
            raise _Closed("idle_timeout")
        self.flush_log()
        # A client with output waiting that took none of it for idle_ms does not read.
        taken = self.written - self.unsent()
        if taken != self.taken_seen or not self.pending():
            self.taken_seen, self.progress = taken, now
        elif now - self.progress >= self.idle_ms / 1000:
            raise _Closed("slow_consumer")
        if not self.pending() and now - self.last_out >= self.ex.config.heartbeat_ms / 1000:
            self.ex.stats["heartbeats_out"] += 1
            self.write(sb.frame(sb.SERVER_HEARTBEAT))
# --8<-- [end:session]

    # --8<-- [start:on_packet]
    def on_packet(self, packet: bytes) -> None:
        kind = packet[:1]
        if kind == sb.DEBUG:         # Debug text is ignored, before login too (spec §1.2)
            self.ex.stats["debug_in"] += 1
            return
        if self.user is None:
            if kind != sb.LOGIN_REQUEST:
                raise _Closed("before_login")
            if len(packet) not in (sb.LOGIN_LENGTH, sb.LOGIN_410_LENGTH):
                raise _Closed("bad_length")
            return self.login(sb.parse_login(packet))
        if kind == sb.UNSEQUENCED:
            self.ex.handle(self.user, packet[1:])
        elif kind in (sb.CLIENT_HEARTBEAT, sb.LOGOUT_REQUEST):
            if len(packet) != 1:
                raise _Closed("bad_length")
            if kind == sb.LOGOUT_REQUEST:
                self.ex.stats["logouts"] += 1
                raise _Closed(None)
        else:
            raise _Closed("unknown_packet")

    def login(self, req: sb.Login) -> None:
        cfg, ex = self.ex.config, self.ex
        user = ex.user_ids.get(req.user)
        if user is None or ex.passwords[user] != req.password:
            self.reject(sb.REJECT_NOT_AUTHORIZED, "login_rejected_auth")
        assert user is not None
        blank = req.session == b" " * 10
        if ((not blank and req.session != cfg.session_bytes) or req.seq is None
                or user in self.server.logged_in
                or len(self.server.logged_in) >= cfg.max_sessions):
            # a named session that is not this run's, a sequence number that is not a
            # number, the user already logged in elsewhere, or max_sessions logged in
            # (the last three: a project choice)
            self.reject(sb.REJECT_SESSION_UNAVAILABLE, "login_rejected_session")
        log = ex.users[user].log
        seq = req.seq if req.seq is not None else 0
        # 0: start with the next new message. Past the end: UNVERIFIED what NASDAQ does;
        # here it is treated as the next new message too (a project choice).
        if seq == 0 or seq > len(log) + 1:
            seq = len(log) + 1
        self.user = user
        self.server.logged_in[user] = self
        self.server.prelogin.pop(self, None)     # out of the pre-login pool
        if req.heartbeat_timeout_ms:          # 4.10: the client says how long to wait
            self.idle_ms = max(req.heartbeat_timeout_ms, 10)
        ex.stats["logins"] += 1
        ex.stats["replayed"] += len(log) - (seq - 1)
        self.sent = seq - 1
        self.write(sb.login_accepted(cfg.session_bytes, seq))
        self.flush_log()

    def reject(self, code: bytes, stat: str) -> None:
        self.write(sb.login_rejected(code))   # then the server closes the socket
        raise _Closed(stat)
    # --8<-- [end:on_packet]


# --8<-- [start:server]
class Server:
    """The asyncio server, run in a thread of its own: ``start()`` returns the port."""

    def __init__(self, config: EntryConfig | None = None, port: int = 0,
                 itch_out: str | Path | None = None) -> None:
        self.exchange = Exchange(config or EntryConfig(), publish=itch_out is not None)
        self.session = self.exchange.config.session     # this run's session id
        self.port = port
        # The exchange's ITCH feed goes to this file as it is made (else it is dropped):
        # unbuffered, one write per round of input, as the C++ twin does.
        self.itch_out: BinaryIO | None = (open(itch_out, "wb", buffering=0)
                                          if itch_out else None)
        self.sessions: set[_Session] = set()
        self.logged_in: dict[int, _Session] = {}
        # Connections not logged in yet, oldest first: a pool of their own, so they can
        # never take a logged-in session's place (a dict keeps insertion order).
        self.prelogin: dict[_Session, None] = {}
        self.closing = False
        self._reserve = -1                    # a spare descriptor for EMFILE (_shed)
        self.timing_ns: list[int] = []        # server-side read-to-write times, timings()
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
# --8<-- [end:server]

    def stats(self) -> dict[str, int]:
        return dict(self.exchange.stats)

    def timings(self) -> np.ndarray:
        """Server-side read-to-write times (ns), one per read that brought a logged-in
        session's requests: from the read to handing asyncio the first answer (it sends
        at once when nothing waits). Call it after stop()."""
        return np.asarray(self.timing_ns, dtype=np.int64)

    def write_market_data(self) -> None:
        """What the exchange published since the last call, to the feed file if any."""
        data = self.exchange.market.take()
        if self.itch_out is None or not data:
            return
        try:
            self.itch_out.write(data)
        except OSError:              # a full disk, say: count it, stop writing the feed
            self.exchange.stats["market_data_errors"] += 1
            self.close_market_data()

    def close_market_data(self) -> None:
        if self.itch_out is not None:
            try:
                self.itch_out.close()
            except OSError:
                self.exchange.stats["market_data_errors"] += 1
            self.itch_out = None

    def flush_all(self) -> None:
        """After inbound packets: each logged-in session whose log grew writes it."""
        self.write_market_data()
        dirty, self.exchange.dirty = self.exchange.dirty, set()
        for user in sorted(dirty):
            session = self.logged_in.get(user)
            if session is None:
                continue             # logged out: the log waits for a replay
            try:
                session.flush_log()
            except _Closed as closed:
                if closed.reason:
                    self.exchange.stats[closed.reason] += 1
                self.drop(session, abort=True)

    def drop(self, session: _Session, abort: bool) -> None:
        """Forget a connection and close it: gracefully (what was written still goes, a
        Login Rejected say) or, for a client that does not read, at once."""
        if session.user is not None and self.logged_in.get(session.user) is session:
            del self.logged_in[session.user]
        self.prelogin.pop(session, None)
        if session not in self.sessions:
            return
        self.sessions.discard(session)
        if session.writer is None:
            session.sock.close()     # evicted before its streams were made
        elif abort:
            session.writer.transport.abort()
        else:
            session.writer.close()

    # --8<-- [start:accept]
    def _accept(self, listener: socket.socket) -> None:
        """The listening socket is readable: accept a bounded batch (the sessions get
        their turn too), each into the pre-login pool."""
        for _ in range(16):
            try:
                conn, _ = listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    self._shed(listener)
                return               # anything else: try again on the next turn
            self._admit(conn)

    def _admit(self, conn: socket.socket) -> None:
        """A new connection joins the pre-login pool; when the pool is full, its oldest
        member is closed to make room. Logged-in sessions are never touched."""
        ex = self.exchange
        ex.stats["connections"] += 1
        if self.closing:
            ex.stats["too_many_connections"] += 1
            conn.close()
            return
        if len(self.prelogin) >= ex.config.prelogin_max:
            oldest = next(iter(self.prelogin))
            ex.stats["prelogin_evicted"] += 1
            self.drop(oldest, abort=True)
        conn.setblocking(False)
        if ex.config.sndbuf:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, ex.config.sndbuf)
        session = _Session(self, conn)
        self.sessions.add(session)
        self.prelogin[session] = None
        task = asyncio.ensure_future(self._run(session))
        self._tasks.add(task)                 # a reference, so it is not collected
        task.add_done_callback(self._tasks.discard)
    # --8<-- [end:accept]

    # --8<-- [start:shed]
    def _shed(self, listener: socket.socket) -> None:
        """No descriptor is left to accept with (EMFILE/ENFILE), and the listening
        socket stays readable: a loop that only retried would spin. Give back the
        reserve descriptor, accept the waiting connection and close it at once (the
        client sees a close, not a hang), and take the reserve again. Without a
        reserve, stop accepting for 100 ms."""
        self.exchange.stats["descriptors_exhausted"] += 1
        if self._reserve >= 0:
            os.close(self._reserve)
            self._reserve = -1
            try:
                listener.accept()[0].close()
            except OSError:
                pass
            self._reserve = _open_reserve()
        if self._reserve < 0:
            assert self._loop is not None
            self._loop.remove_reader(listener)
            self._loop.call_later(0.1, self._listen, listener)
    # --8<-- [end:shed]

    def _listen(self, listener: socket.socket) -> None:
        if self._reserve < 0:
            self._reserve = _open_reserve()
        if not self.closing:
            assert self._loop is not None
            self._loop.add_reader(listener, self._accept, listener)

    async def _run(self, session: _Session) -> None:
        try:
            await session.run()
        except asyncio.CancelledError:
            pass                     # the server is stopping: the session is over

    async def serve(self) -> None:
        """Listen on 127.0.0.1 until stop(): then End of Day, End of Session, close."""
        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(256)
        except OSError:
            listener.close()
            raise
        listener.setblocking(False)
        self.port = listener.getsockname()[1]
        self._reserve = _open_reserve()
        self._loop.add_reader(listener, self._accept, listener)
        self._ready.set()
        await self._stop.wait()
        self.closing = True
        self._loop.remove_reader(listener)
        listener.close()
        self.exchange.end_of_day()
        self.write_market_data()
        self.close_market_data()
        until = time.monotonic() + 0.5       # bounded: 500 ms in all for the goodbyes
        for session in list(self.logged_in.values()):
            assert session.user is not None and session.writer is not None
            log = self.exchange.users[session.user].log
            try:
                while session.sent < len(log) and time.monotonic() < until:
                    session.flush_log()
                    await asyncio.wait_for(session.writer.drain(),
                                           max(until - time.monotonic(), 0.001))
                if session.sent == len(log):
                    session.write(sb.frame(sb.END_OF_SESSION))
                    await asyncio.wait_for(session.writer.drain(),
                                           max(until - time.monotonic(), 0.001))
            except (TimeoutError, ConnectionError, OSError):
                pass
        for session in list(self.sessions):
            self.drop(session, abort=True)
        if self._reserve >= 0:
            os.close(self._reserve)
            self._reserve = -1
        await asyncio.sleep(0)

    def start(self) -> int:
        """Serve in a background thread; returns the bound port (bounded: 10 s)."""
        def run() -> None:
            try:
                asyncio.run(self._main())
            except BaseException as exc:  # a port in use, say: start() raises it
                self._error = exc
                self._ready.set()
        self._thread = threading.Thread(target=run, name="naive-entry", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("naive entry server did not start in 10 s")
        if self._error is not None:
            self.close_market_data()
            raise self._error
        return self.port

    async def _main(self) -> None:
        await self.serve()

    def stop(self, timeout: float = 5.0) -> None:
        """End the session (System Event E, then Z) and join the thread, within timeout."""
        if self._loop is None or self._thread is None or not self._thread.is_alive():
            return                   # never started, or already stopped
        stop = self._stop
        assert stop is not None
        self._loop.call_soon_threadsafe(stop.set)
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError(f"naive entry server did not stop in {timeout} s")


def _open_reserve() -> int:
    """The spare descriptor _shed gives back when the process has none left (-1: none)."""
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1
