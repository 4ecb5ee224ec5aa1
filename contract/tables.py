"""The research tables both twins build (naive/tables.py, native/tables.hpp): names and types.

A table batch is a dict ``column name -> one-dimensional numpy array``, every array the
same length, the columns in the order :func:`columns` gives. Both twins return exactly these
columns with exactly these dtypes, so their batches compare array by array. Every table
starts with the same four columns:

* ``timestamp`` -- the message's ITCH timestamp, nanoseconds after midnight (US Eastern);
* ``seq`` -- the message's place in the feed, counting every record from 1;
* ``locate`` -- the stock locate (for an E C X D U: the locate of the order it names);
* ``symbol`` -- the 8 raw bytes the locate's R message gave (space padded; zeros if none).

The UTC session time is not a column of the batch: it is the timestamp plus one offset per
day (:func:`session_offset_ns`), added when a table is written.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from typing import Final
from zoneinfo import ZoneInfo

import numpy as np

from contract.feed_text import show_stock
from contract.itch_errors import ItchError

__all__ = [
    "DEFAULT_DEPTH", "LOBSTER_EMPTY_ASK", "LOBSTER_EMPTY_BID", "LOBSTER_END_NS",
    "LOBSTER_HALT_PRICE", "LOBSTER_START_NS", "MAX_DEPTH", "PRICE_SCALE", "TABLES",
    "check_depth", "check_symbols", "check_tables", "columns", "date_from_name",
    "empty_batch", "lobster_columns", "session_offset_ns", "symbol_text", "tail_error",
]

# --8<-- [start:columns]
TABLES: Final = ("bbo", "trades", "messages", "depth", "halts", "noii", "symbols")
DEFAULT_DEPTH: Final = 5
MAX_DEPTH: Final = 50
PRICE_SCALE: Final = 10_000  # ITCH prices are integers in 1/10,000 dollar

_COMMON: Final = [("timestamp", "<u8"), ("seq", "<u8"), ("locate", "<u2"), ("symbol", "S8")]

_COLUMNS: Final[dict[str, list[tuple[str, str]]]] = {
    # one row per change of a locate's best bid or offer (price, shares, orders; 0 = none)
    "bbo": [("bid_price", "<u4"), ("bid_size", "<u8"), ("bid_orders", "<u4"),
            ("ask_price", "<u4"), ("ask_size", "<u8"), ("ask_orders", "<u4"),
            ("trading_state", "u1")],  # the last H's state byte (0: none yet)
    # E (at the resting price), printable C (at its own price), P, Q (cross), B (break)
    "trades": [("kind", "u1"), ("order_ref", "<u8"), ("side", "u1"), ("price", "<u4"),
               ("shares", "<u8"), ("match_number", "<u8"), ("cross_type", "u1")],
    # every A F E C X D U that changed a book, self-contained: side and price filled in
    "messages": [("type", "u1"), ("order_ref", "<u8"), ("new_order_ref", "<u8"),
                 ("side", "u1"), ("price", "<u4"), ("shares", "<u4"),
                 ("prev_price", "<u4"), ("prev_shares", "<u4"), ("exec_price", "<u4"),
                 ("match_number", "<u8"), ("printable", "u1")],
    # H (trading action) and h (operational halt)
    "halts": [("kind", "u1"), ("state", "u1"), ("reason", "S4"), ("market_code", "u1")],
    # I (net order imbalance indicator)
    "noii": [("paired_shares", "<u8"), ("imbalance_shares", "<u8"), ("direction", "u1"),
             ("far_price", "<u4"), ("near_price", "<u4"), ("reference_price", "<u4"),
             ("cross_type", "u1"), ("price_variation", "u1")],
    # R (stock directory)
    "symbols": [("market_category", "u1"), ("financial_status", "u1"),
                ("round_lot_size", "<u4"), ("round_lots_only", "u1"),
                ("issue_classification", "u1"), ("issue_sub_type", "S2"),
                ("authenticity", "u1"), ("short_sale_threshold", "u1"), ("ipo_flag", "u1"),
                ("luld_tier", "u1"), ("etp_flag", "u1"), ("etp_leverage_factor", "<u4"),
                ("inverse_indicator", "u1")],
}


def columns(table: str, depth: int = DEFAULT_DEPTH) -> list[tuple[str, np.dtype]]:
    """(name, dtype) of every column of ``table``, in order. ``depth`` (top N levels, a row
    after every change within them): bid_price_1 .. bid_price_N, bid_size_*, bid_orders_*,
    then the same for the ask; an empty level is price 0, size 0, orders 0."""
    if table == "depth":
        body = [(f"{side}_{what}_{k}", fmt)
                for side in ("bid", "ask")
                for what, fmt in (("price", "<u4"), ("size", "<u8"), ("orders", "<u4"))
                for k in range(1, depth + 1)]
    else:
        body = _COLUMNS[table]
    return [(name, np.dtype(fmt)) for name, fmt in _COMMON + body]
# --8<-- [end:columns]


# --8<-- [start:lobster]
# LOBSTER's layout (lobsterdata.com): a message file (time, type, order id, size,
# price, direction) and an orderbook file (per level: ask price, ask size, bid price,
# bid size), one row each per message, for the regular session only. An empty level is
# written as LOBSTER's documentation describes: ask 9999999999, bid -9999999999, size 0.
# (UNVERIFIED against a LOBSTER file: the real sample has no empty level.)
LOBSTER_START_NS: Final = 34_200 * 10**9  # 09:30:00
LOBSTER_END_NS: Final = 57_600 * 10**9    # 16:00:00 (inclusive, as the file name's ms)
LOBSTER_EMPTY_ASK: Final = 9_999_999_999
LOBSTER_EMPTY_BID: Final = -9_999_999_999
# Type 7 rows from H messages: price -1 halted (or paused), 0 quoting again, 1 trading
# again; order id and size 0, direction -1. The prices are LOBSTER's own description of
# its halt rows (its output update of 27 Jan 2013: -1 and 1 begin and end a halt, 0 a
# resumption of quoting); the id, size and direction are UNVERIFIED against a LOBSTER
# file: the real sample has no halt.
LOBSTER_HALT_PRICE: Final = {ord("H"): -1, ord("P"): -1, ord("Q"): 0, ord("T"): 1}


def lobster_columns(levels: int) -> list[tuple[str, np.dtype]]:
    """The builder's ``lobster`` table: common columns, one message row, its book."""
    body = [("type", "u1"), ("order_id", "<u8"), ("size", "<u8"), ("price", "<i8"),
            ("direction", "i1")]
    for k in range(1, levels + 1):
        body += [(f"ask_price_{k}", "<i8"), (f"ask_size_{k}", "<u8"),
                 (f"bid_price_{k}", "<i8"), (f"bid_size_{k}", "<u8")]
    return [(name, np.dtype(fmt)) for name, fmt in _COMMON + body]
# --8<-- [end:lobster]


def empty_batch(table: str, depth: int = DEFAULT_DEPTH) -> dict[str, np.ndarray]:
    return {name: np.zeros(0, dtype=dtype) for name, dtype in columns(table, depth)}


def check_tables(tables: object) -> tuple[str, ...]:
    """A non-empty sequence of table names (or one comma-separated string), in TABLES order."""
    names = tables.split(",") if isinstance(tables, str) else tables
    if not isinstance(names, Sequence) or not all(isinstance(t, str) for t in names):
        raise TypeError("tables must be a list of table names")
    wanted = {t.strip() for t in names if t.strip()}
    unknown = sorted(wanted - set(TABLES))
    if unknown:
        raise ValueError(f"unknown table {unknown[0]!r}: choose from {', '.join(TABLES)}")
    if not wanted:
        raise ValueError("no tables asked for")
    return tuple(t for t in TABLES if t in wanted)


def check_depth(depth: object) -> int:
    if isinstance(depth, bool) or not isinstance(depth, int):
        raise TypeError(f"depth must be an int, got {type(depth).__name__}")
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be 1..{MAX_DEPTH}, got {depth}")
    return depth


# The ITCH alphabet of a symbol: capital letters and the NASDAQ Integrated Platform's
# suffix characters (nasdaqtrader.com, "Ticker Symbol Convention": BRK.A, ABR-A, AACBU=).
# A root of letters comes first. Names become file names (LOBSTER's), so nothing else
# passes: no '/', no leading '.', no space, no digit.
_SYMBOL: Final = re.compile(r"[A-Z][A-Z.\-+*#$!@%^=~]{0,7}")


def check_symbols(symbols: object) -> tuple[bytes, ...] | None:
    """None (every symbol) or the symbols as 8-byte, space-padded wire names.

    Accepts a sequence of names or one comma-separated string; a name is 1..8 printable
    of the ITCH alphabet (capital letters, NASDAQ's suffix characters)."""
    if symbols is None:
        return None
    names = symbols.split(",") if isinstance(symbols, str) else symbols
    if not isinstance(names, Sequence) or not all(isinstance(s, str) for s in names):
        raise TypeError("symbols must be a list of symbol names")
    out = []
    for name in names:
        if not _SYMBOL.fullmatch(name):
            raise ValueError(f"bad symbol {name!r}: a capital letter, then up to 7 of "
                             f"A-Z and the suffix characters .-+*#$!@%^=~")
        out.append(name.encode("ascii").ljust(8))
    if not out:
        raise ValueError("no symbols given")
    return tuple(sorted(set(out)))


def symbol_text(raw: bytes) -> str:
    """A symbol column value as text (trailing spaces cut, any odd byte as \\xNN)."""
    return show_stock(raw)


# NASDAQ's own file names carry the day as MMDDYYYY (01302019.NASDAQ_ITCH50.gz) or as
# SMMDDYY (S013019-v50.txt.gz, the years 20YY); other tools' copies often use YYYYMMDD or
# YYYY-MM-DD.
_DATES: Final = (
    (re.compile(r"(?<!\d)(\d{2})(\d{2})(\d{4})\.NASDAQ_ITCH50"), "mdy"),
    (re.compile(r"(?<![A-Za-z0-9])S(\d{2})(\d{2})(\d{2})-v50"), "mdyy"),
    (re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)"), "ymd"),
    (re.compile(r"(?<!\d)(20\d{2})(\d{2})(\d{2})(?!\d)"), "ymd"),
)


def date_from_name(name: str) -> dt.date | None:
    """The session date a feed's file name states, or None."""
    for pattern, order in _DATES:
        m = pattern.search(name)
        if m is None:
            continue
        a, b, c = (int(g) for g in m.groups())
        try:
            if order == "mdyy":
                return dt.date(2000 + c, a, b)
            return dt.date(c, a, b) if order == "mdy" else dt.date(a, b, c)
        except ValueError:
            continue
    return None


def session_offset_ns(day: dt.date) -> int:
    """Nanoseconds from the Unix epoch to midnight US Eastern time of ``day``: add it to an
    ITCH timestamp for UTC. (No US DST change falls inside a trading session.)"""
    midnight = dt.datetime(day.year, day.month, day.day, tzinfo=ZoneInfo("America/New_York"))
    return int(midnight.timestamp()) * 1_000_000_000


def tail_error(rest: bytes, base: int) -> ItchError:
    """The error for a record cut by the end of the feed, at feed offset ``base``
    (the words of both ITCH decoders)."""
    if len(rest) < 2:
        return ItchError(base, "truncated_prefix", -1, -1, f"{len(rest)} byte(s) left")
    length = int.from_bytes(rest[:2], "big")
    return ItchError(base, "truncated_body", rest[2] if len(rest) > 2 else -1, length,
                     f"{len(rest) - 2} byte(s) left")
