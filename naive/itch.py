"""Reading NASDAQ TotalView-ITCH 5.0, the readable way: one ``struct`` format per message.

A file (or MoldUDP64 packet) is a sequence of records ``[u16 big-endian length][message]``.
Every message starts with a one-byte type, then the same 10-byte header (stock locate,
tracking number, 6-byte timestamp). :func:`parse_message` turns one message into a typed
record (a ``NamedTuple`` per type), :func:`encode` and :func:`frame` turn records back into
bytes, and :func:`decode` / :func:`read_file` produce the batch arrays (``EVENT_DTYPE``) that
the rest of twinmatch replays. ``optimized.itch`` has the same API, in C++.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Final, NamedTuple

import numpy as np

from contract.dtypes import EVENT_DTYPE
from contract.itch_errors import ItchError, byte_view
from contract.itch_files import CHUNK_SIZE, Source, file_chunks

__all__ = [
    "CHUNK_SIZE", "EVENT_DTYPE", "ItchError", "LENGTHS", "Record", "decode", "encode",
    "frame", "parse_message", "read_file", "scan",
]

# --8<-- [start:records]
# One NamedTuple per message type. The type byte is implied by the class; every record
# starts with the common header: stock locate, tracking number, timestamp (ns since
# midnight). Char fields are 1-byte ``bytes`` (b"B"), alpha fields raw space-padded bytes.


class SystemEvent(NamedTuple):  # S
    locate: int
    tracking: int
    timestamp: int
    event_code: bytes


class StockDirectory(NamedTuple):  # R
    locate: int
    tracking: int
    timestamp: int
    stock: bytes
    market_category: bytes
    financial_status: bytes
    round_lot_size: int
    round_lots_only: bytes
    issue_classification: bytes
    issue_sub_type: bytes
    authenticity: bytes
    short_sale_threshold: bytes
    ipo_flag: bytes
    luld_tier: bytes
    etp_flag: bytes
    etp_leverage_factor: int
    inverse_indicator: bytes


class StockTradingAction(NamedTuple):  # H
    locate: int
    tracking: int
    timestamp: int
    stock: bytes
    trading_state: bytes
    reserved: bytes
    reason: bytes


class RegSho(NamedTuple):  # Y
    locate: int
    tracking: int
    timestamp: int
    stock: bytes
    reg_sho_action: bytes


class MarketParticipantPosition(NamedTuple):  # L
    locate: int
    tracking: int
    timestamp: int
    mpid: bytes
    stock: bytes
    primary_market_maker: bytes
    market_maker_mode: bytes
    participant_state: bytes


class MwcbDeclineLevel(NamedTuple):  # V (prices with 8 implied decimals)
    locate: int
    tracking: int
    timestamp: int
    level1: int
    level2: int
    level3: int


class MwcbStatus(NamedTuple):  # W
    locate: int
    tracking: int
    timestamp: int
    breached_level: bytes


class IpoQuotingPeriod(NamedTuple):  # K
    locate: int
    tracking: int
    timestamp: int
    stock: bytes
    release_time: int
    release_qualifier: bytes
    ipo_price: int


class LuldAuctionCollar(NamedTuple):  # J
    locate: int
    tracking: int
    timestamp: int
    stock: bytes
    reference_price: int
    upper_price: int
    lower_price: int
    extension: int


class OperationalHalt(NamedTuple):  # h
    locate: int
    tracking: int
    timestamp: int
    stock: bytes
    market_code: bytes
    halt_action: bytes


class AddOrder(NamedTuple):  # A
    locate: int
    tracking: int
    timestamp: int
    order_ref: int
    side: bytes
    shares: int
    stock: bytes
    price: int


class AddOrderMpid(NamedTuple):  # F
    locate: int
    tracking: int
    timestamp: int
    order_ref: int
    side: bytes
    shares: int
    stock: bytes
    price: int
    mpid: bytes


class OrderExecuted(NamedTuple):  # E
    locate: int
    tracking: int
    timestamp: int
    order_ref: int
    shares: int
    match_number: int


class OrderExecutedWithPrice(NamedTuple):  # C
    locate: int
    tracking: int
    timestamp: int
    order_ref: int
    shares: int
    match_number: int
    printable: bytes
    price: int


class OrderCancel(NamedTuple):  # X
    locate: int
    tracking: int
    timestamp: int
    order_ref: int
    shares: int


class OrderDelete(NamedTuple):  # D
    locate: int
    tracking: int
    timestamp: int
    order_ref: int


class OrderReplace(NamedTuple):  # U
    locate: int
    tracking: int
    timestamp: int
    order_ref: int
    new_order_ref: int
    shares: int
    price: int


class Trade(NamedTuple):  # P
    locate: int
    tracking: int
    timestamp: int
    order_ref: int
    side: bytes
    shares: int
    stock: bytes
    price: int
    match_number: int


class CrossTrade(NamedTuple):  # Q (shares are u64 here)
    locate: int
    tracking: int
    timestamp: int
    shares: int
    stock: bytes
    price: int
    match_number: int
    cross_type: bytes


class BrokenTrade(NamedTuple):  # B
    locate: int
    tracking: int
    timestamp: int
    match_number: int


class Noii(NamedTuple):  # I
    locate: int
    tracking: int
    timestamp: int
    paired_shares: int
    imbalance_shares: int
    imbalance_direction: bytes
    stock: bytes
    far_price: int
    near_price: int
    reference_price: int
    cross_type: bytes
    price_variation: bytes


class Rpii(NamedTuple):  # N
    locate: int
    tracking: int
    timestamp: int
    stock: bytes
    interest_flag: bytes


class Dlcr(NamedTuple):  # O
    locate: int
    tracking: int
    timestamp: int
    stock: bytes
    open_eligibility: bytes
    min_price: int
    max_price: int
    near_price: int
    near_time: int
    lower_collar: int
    upper_collar: int


Record = (
    SystemEvent | StockDirectory | StockTradingAction | RegSho | MarketParticipantPosition
    | MwcbDeclineLevel | MwcbStatus | IpoQuotingPeriod | LuldAuctionCollar | OperationalHalt
    | AddOrder | AddOrderMpid | OrderExecuted | OrderExecutedWithPrice | OrderCancel
    | OrderDelete | OrderReplace | Trade | CrossTrade | BrokenTrade | Noii | Rpii | Dlcr
)
# --8<-- [end:records]

# --8<-- [start:formats]
# The wire layout of each type as a big-endian (">") struct format, from the spec's
# table. Python's struct has no 6-byte integer, so the timestamp is read as "6s" and
# converted with int.from_bytes. struct.calcsize(fmt) is the message's fixed length.
FORMATS: Final[dict[bytes, tuple[str, type[Record]]]] = {
    b"S": (">cHH6sc", SystemEvent),
    b"R": (">cHH6s8sccIcc2scccccIc", StockDirectory),
    b"H": (">cHH6s8scc4s", StockTradingAction),
    b"Y": (">cHH6s8sc", RegSho),
    b"L": (">cHH6s4s8sccc", MarketParticipantPosition),
    b"V": (">cHH6sQQQ", MwcbDeclineLevel),
    b"W": (">cHH6sc", MwcbStatus),
    b"K": (">cHH6s8sIcI", IpoQuotingPeriod),
    b"J": (">cHH6s8sIIII", LuldAuctionCollar),
    b"h": (">cHH6s8scc", OperationalHalt),
    b"A": (">cHH6sQcI8sI", AddOrder),
    b"F": (">cHH6sQcI8sI4s", AddOrderMpid),
    b"E": (">cHH6sQIQ", OrderExecuted),
    b"C": (">cHH6sQIQcI", OrderExecutedWithPrice),
    b"X": (">cHH6sQI", OrderCancel),
    b"D": (">cHH6sQ", OrderDelete),
    b"U": (">cHH6sQQII", OrderReplace),
    b"P": (">cHH6sQcI8sIQ", Trade),
    b"Q": (">cHH6sQ8sIQc", CrossTrade),
    b"B": (">cHH6sQ", BrokenTrade),
    b"I": (">cHH6sQQc8sIIIcc", Noii),
    b"N": (">cHH6s8sc", Rpii),
    b"O": (">cHH6s8scIIIQII", Dlcr),
}
STRUCTS: Final = {code: struct.Struct(fmt) for code, (fmt, _) in FORMATS.items()}
# Record class by type byte string (a Callable: each class takes its own field types).
CLASSES: Final[dict[bytes, Callable[..., Record]]] = {
    code: cls for code, (_, cls) in FORMATS.items()
}
TYPE_OF: Final[dict[type, bytes]] = {cls: code for code, (_, cls) in FORMATS.items()}
# Message length by type byte (the number, as decode sees it): S -> 12, A -> 36, ...
LENGTHS: Final[dict[int, int]] = {code[0]: s.size for code, s in STRUCTS.items()}
# --8<-- [end:formats]

# --8<-- [start:parse]


def parse_message(message: bytes | memoryview) -> Record:
    """One message (type byte first, no length prefix) as its typed record."""
    code = bytes(message[:1])
    if code not in STRUCTS:
        raise ItchError(0, "unknown_type", code[0] if code else -1, len(message))
    layout = STRUCTS[code]
    if len(message) != layout.size:
        raise ItchError(0, "bad_length", code[0], len(message),
                        f"type needs {layout.size}")
    _, locate, tracking, ts, *body = layout.unpack(message)
    return CLASSES[code](locate, tracking, int.from_bytes(ts, "big"), *body)


def encode(record: Record) -> bytes:
    """A record's message bytes (no length prefix): the inverse of parse_message."""
    code = TYPE_OF[type(record)]
    locate, tracking, ts, *body = record
    return STRUCTS[code].pack(code, locate, tracking, ts.to_bytes(6, "big"), *body)


def frame(message: Record | bytes) -> bytes:
    """A record (or raw message bytes) behind its 2-byte big-endian length prefix."""
    raw = message if isinstance(message, bytes) else encode(message)
    return len(raw).to_bytes(2, "big") + raw
# --8<-- [end:parse]


# --8<-- [start:event_row]
EventRow = tuple[int, int, int, int, int, int, int, int, int, int, bytes]


def event_row(rec: Record) -> EventRow | None:
    """The EVENT_DTYPE row of a record, in field order, or None if it makes no event.

    Fields: timestamp, order_ref, new_order_ref, match_number, shares, price, locate,
    type, side, printable, stock (see EVENT_DTYPE's docstring for the table).
    """
    t, loc = rec.timestamp, rec.locate
    match rec:
        case AddOrder() | AddOrderMpid():
            kind = b"A" if isinstance(rec, AddOrder) else b"F"
            return (t, rec.order_ref, 0, 0, rec.shares, rec.price, loc, kind[0],
                    rec.side[0], 0, rec.stock)
        case OrderExecuted():
            return (t, rec.order_ref, 0, rec.match_number, rec.shares, 0, loc, 69, 0, 0, b"")
        case OrderExecutedWithPrice():
            return (t, rec.order_ref, 0, rec.match_number, rec.shares, rec.price, loc, 67,
                    0, rec.printable[0], b"")
        case OrderCancel():
            return (t, rec.order_ref, 0, 0, rec.shares, 0, loc, 88, 0, 0, b"")
        case OrderDelete():
            return (t, rec.order_ref, 0, 0, 0, 0, loc, 68, 0, 0, b"")
        case OrderReplace():
            return (t, rec.order_ref, rec.new_order_ref, 0, rec.shares, rec.price, loc, 85,
                    0, 0, b"")
        case Trade():
            return (t, rec.order_ref, 0, rec.match_number, rec.shares, rec.price, loc, 80,
                    rec.side[0], 0, rec.stock)
        case CrossTrade():  # u64 cross shares travel in order_ref
            return (t, rec.shares, 0, rec.match_number, 0, rec.price, loc, 81, 0,
                    rec.cross_type[0], rec.stock)
        case BrokenTrade():
            return (t, 0, 0, rec.match_number, 0, 0, loc, 66, 0, 0, b"")
        case SystemEvent():
            return (t, 0, 0, 0, 0, 0, loc, 83, rec.event_code[0], 0, b"")
        case StockDirectory():
            return (t, 0, 0, 0, 0, 0, loc, 82, 0, 0, rec.stock)
        case StockTradingAction():
            return (t, 0, 0, 0, 0, 0, loc, 72, rec.trading_state[0], 0, rec.stock)
    return None
# --8<-- [end:event_row]


# --8<-- [start:decode_loop]
def scan(buffer: bytes | memoryview, base: int = 0) -> tuple[
    np.ndarray, dict[str, int], int, ItchError | None
]:
    """Decode the whole records at the start of ``buffer``; stop at a partial one.

    Returns (events, counts, consumed bytes, error or None). A partial record at the
    end is not an error here (read_file carries it into the next chunk); decode() makes
    it one.
    ``base`` is the buffer's offset in the file, so errors name absolute offsets.
    """
    mv = byte_view(buffer).cast("B")
    end = len(mv)
    rows: list[EventRow] = []
    counts: dict[int, int] = {}
    off = 0
    error: ItchError | None = None
    while off + 2 <= end:
        length = int.from_bytes(mv[off:off + 2], "big")
        if length == 0:
            error = ItchError(base + off, "zero_length", -1, 0)
            break
        if off + 2 + length > end:
            break  # partial record: the caller decides whether more bytes are coming
        code = mv[off + 2]
        if code in LENGTHS and LENGTHS[code] != length:
            error = ItchError(base + off, "bad_length", code, length,
                              f"type needs {LENGTHS[code]}")
            break
        counts[code] = counts.get(code, 0) + 1
        if code in LENGTHS:  # unknown types are counted and skipped
            row = event_row(parse_message(mv[off + 2:off + 2 + length]))
            if row is not None:
                rows.append(row)
        off += 2 + length
    events = np.zeros(len(rows), dtype=EVENT_DTYPE)  # zeros: padding too, like C++
    events[:] = rows
    by_char = {chr(code): counts[code] for code in sorted(counts)}
    if error is not None:
        error.events, error.counts = events, by_char
    return events, by_char, off, error
# --8<-- [end:decode_loop]


def tail_error(buffer: bytes | memoryview, off: int, base: int) -> ItchError:
    """The error for a partial record starting at ``off`` (it runs past the end)."""
    mv = memoryview(buffer).cast("B")
    if len(mv) - off < 2:
        return ItchError(base + off, "truncated_prefix", -1, -1,
                         f"{len(mv) - off} byte(s) left")
    length = int.from_bytes(mv[off:off + 2], "big")
    return ItchError(base + off, "truncated_body", mv[off + 2] if len(mv) - off > 2 else -1,
                     length, f"{len(mv) - off - 2} byte(s) left")


def decode(buffer: bytes | memoryview) -> tuple[np.ndarray, dict[str, int]]:
    """All the framed messages in ``buffer`` -> (EVENT_DTYPE array, {type char: count}).

    The buffer must hold whole records: a partial one at the end raises ItchError, as does
    a zero or wrong length prefix; the error's ``events``/``counts`` hold what came before.
    """
    events, counts, consumed, error = scan(buffer)
    if error is not None:
        raise error
    if consumed != len(byte_view(buffer)):
        err = tail_error(buffer, consumed, 0)
        err.events, err.counts = events, counts
        raise err
    return events, counts


# --8<-- [start:read_file]
def read_file(
    path: Source, chunk_size: int = CHUNK_SIZE
) -> Iterator[tuple[np.ndarray, dict[str, int]]]:
    """Stream an ITCH feed (plain or gzip) as (events, counts) batches, one per chunk.

    ``path`` is a file, a pipe or FIFO, ``"-"`` for standard input, or an open binary
    stream. A record cut by a chunk boundary is carried into the next chunk, so the feed
    never has to fit in memory. A bad or truncated record raises ItchError naming its
    offset in the (decompressed) feed, after every batch before it has been yielded. An
    empty feed yields nothing. Batches with no whole record are not yielded.
    """
    carry = b""
    base = 0  # file offset of carry[0]
    for chunk in file_chunks(path, chunk_size):
        buf = carry + chunk
        events, counts, consumed, error = scan(buf, base)
        if len(events) or counts:
            yield events, counts
        if error is not None:
            error.events, error.counts = events[:0], {}  # already yielded above
            raise error
        carry = buf[consumed:]
        base += consumed
    if carry:
        raise tail_error(carry, 0, base)
# --8<-- [end:read_file]
