"""Replaying a day: any supported feed -> decoded events -> one twin's many-books market.

``twinmatch replay FILE`` and ``twinmatch compare FILE`` (twinmatch/cli.py) are thin
layers over :func:`replay`. What is timed is the whole run, end to end: reading the file,
decoding it with the chosen twin's decoder, and the chosen twin's market
(``naive.market`` / ``optimized.market``); writing the fills/books files is included
when asked for (their fsync and rename into place, after the clock stops, are not).
The optimized twin reads an ITCH file in one pass (``Market.run_file``:
the C++ decoder's per-message decode applied to the market message by message, with no
events array in between); every other twin and format decodes a batch, then applies it.

Formats are recognised by content, never by name alone:

* gzip magic -> gzip-compressed ITCH (``itch.read_file`` streams it);
* a pcap magic -> PCAP of MoldUDP64 (``pcap.read_file``);
* first byte 0 -> raw ITCH (every record starts with a 2-byte length below 256);
* text: a ``type,locate,...`` header -> the message CSV ``twinmatch gen --format csv``
  writes; 4 fields a line -> CSV orders ``order_id,price,quantity,side``; 6 fields ->
  a LOBSTER message file. CSV orders and LOBSTER files hold one symbol: they become
  locate 1, named by an R event first (LOBSTER: the ticker in the file name).
"""

from __future__ import annotations

import csv
import importlib
import io
import re
import resource
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

import numpy as np

from contract.dtypes import (
    EVENT_DTYPE,
    FILL_DTYPE,
    OP_CANCEL,
    OP_LIMIT,
    OP_MARKET,
    OPS_DTYPE,
    concat_records,
)
from contract.feed_text import show_bytes  # the one text rule (C++: native/feed_text.hpp)
from contract.itch_files import CAPTURE_MAGICS, GZIP_MAGIC, opened, peek, read_full, regular_size
from twinmatch.atomic import Outputs

IMPLS: Final = ("naive", "optimized")
MODES: Final = ("book", "match")
TOP_SYMBOLS: Final = 10
LOBSTER_TYPES: Final = {1: "A", 2: "X", 3: "D", 4: "E", 5: "P", 6: "Q", 7: "H"}
FILLS_HEADER: Final = "resting_id,aggressor_id,price,qty,aggressor_side\n"

Batch = tuple[np.ndarray, dict[str, int]]


class ReplayError(ValueError):
    """A file replay cannot read (unknown format)."""


SNIFF_BYTES: Final = 4096


def sniff(path: str | Path) -> str:
    """The feed format of a regular file, from its first bytes (see sniff_head).

    A pipe or FIFO would lose the bytes looked at: replay() opens a stream once and sniffs
    what it peeked; this refuses one.
    """
    with open(path, "rb") as f:
        if regular_size(f) is None:
            raise ReplayError(f"{path}: not a regular file (a pipe or device can be read once:"
                              " use twinmatch replay, or replay - for standard input)")
        return sniff_head(read_full(f, SNIFF_BYTES), path)


# --8<-- [start:sniff]
def sniff_head(head: bytes, path: str | Path) -> str:
    """The feed format from a feed's first bytes: itch, pcap, messages, csv, lobster."""
    if head[:2] == GZIP_MAGIC:
        return "itch"
    if head[:4] in CAPTURE_MAGICS:
        return "pcap"
    if not head or head[0] == 0:
        return "itch"
    text = head.decode("latin-1").lstrip("\ufeff\xef\xbb\xbf")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise ReplayError(f"{path}: empty text file, not a feed")
    if lines[0].replace(" ", "").startswith("type,locate,"):
        return "messages"
    first = lines[0] if lines[0].lstrip()[:1].isdigit() or len(lines) == 1 else lines[1]
    fields = len(first.split(","))
    if fields == 4:
        return "csv"
    if fields == 6:
        return "lobster"
    raise ReplayError(f"{path}: not ITCH, PCAP or a known CSV ({fields} fields a line)")
# --8<-- [end:sniff]


def _with_directory(n: int, stock: str) -> tuple[np.ndarray, np.ndarray]:
    """An events array of n + 1: first an R (stock directory) naming locate 1, then
    n events for the caller to fill (returned as the view ``all[1:]``)."""
    out = np.zeros(n + 1, dtype=EVENT_DTYPE)
    out["locate"] = 1
    out[0]["type"] = ord("R")
    out[0]["stock"] = stock.encode()[:8].ljust(8)
    return out, out[1:]


def ops_events(ops: np.ndarray, stock: str = "ORDERS") -> np.ndarray:
    """CSV orders (OPS_DTYPE: limit, market, cancel) -> events for locate 1.

    limit -> A, market -> A with price 0 (a market order in match mode), cancel -> D.
    """
    if ops.dtype != OPS_DTYPE:
        raise TypeError(f"expected OPS_DTYPE, got {ops.dtype}")
    out, ev = _with_directory(len(ops), stock)
    op = ops["op"]
    if not np.isin(op, (OP_LIMIT, OP_MARKET, OP_CANCEL)).all():
        raise ReplayError("CSV orders hold only limit, market and cancel operations")
    ev["type"] = np.where(op == OP_CANCEL, ord("D"), ord("A"))
    ev["order_ref"] = ops["order_id"]
    ev["side"] = np.where(ops["side"] == 0, ord("B"), ord("S"))
    ev["shares"] = np.where(op == OP_CANCEL, 0, ops["qty"])
    ev["price"] = np.where(op == OP_LIMIT, ops["price"], 0)
    ev["timestamp"] = np.arange(len(ops), dtype=np.uint64)
    return out


# --8<-- [start:lobster_events]
def lobster_events(messages: np.ndarray, stock: str = "LOBSTER") -> np.ndarray:
    """LOBSTER messages -> ITCH-like events for locate 1.

    1 submission -> A, 2 partial cancel -> X, 3 deletion -> D, 4 visible execution -> E,
    5 hidden execution -> P, 6 cross -> Q, 7 halt -> H (the last three change no book).
    Direction 1 is a buy ('B'), -1 a sell ('S').
    """
    out, ev = _with_directory(len(messages), stock)
    kinds = np.zeros(256, dtype=np.uint8)
    for code, letter in LOBSTER_TYPES.items():
        kinds[code] = ord(letter)
    ev["type"] = kinds[messages["type"]]
    ev["timestamp"] = messages["time"].clip(0).astype(np.uint64)
    ev["order_ref"] = messages["order_id"]
    ev["shares"] = messages["size"]
    ev["price"] = messages["price"].clip(0, 2**32 - 1).astype(np.uint32)
    ev["side"] = np.where(messages["direction"] == 1, ord("B"), ord("S"))
    return out
# --8<-- [end:lobster_events]


def lobster_stock(path: str | Path) -> str:
    """The ticker in a LOBSTER file name (``AAPL_2012-06-21_...``), else ``LOBSTER``."""
    for token in re.split(r"[-_.]", Path(path).name):
        if re.fullmatch(r"[A-Z]{1,8}", token):
            return token
    return "LOBSTER"


def _messages_csv_events(source: IO[bytes], chunk: int = 1 << 20) -> Iterator[np.ndarray]:
    """The generator's message CSV -> events, ``chunk`` rows at a time (harness, not a twin)."""
    path = getattr(source, "name", "<stream>")
    f = io.TextIOWrapper(source, newline="", encoding="latin-1")
    try:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return
        col = {name.strip(): i for i, name in enumerate(header)}
        rows: list[list[str]] = []
        for line, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise ReplayError(f"{path}: line {line}: expected {len(header)} fields")
            rows.append(row)
            if len(rows) >= chunk:
                yield _rows_to_events(rows, col)
                rows = []
        if rows:
            yield _rows_to_events(rows, col)
    finally:
        f.detach()  # the caller closes the stream


def _messages_csv_file(path: str | Path) -> Iterator[np.ndarray]:
    with open(path, "rb") as f:
        yield from _messages_csv_events(f)


def _rows_to_events(rows: list[list[str]], col: dict[str, int]) -> np.ndarray:
    ev = np.zeros(len(rows), dtype=EVENT_DTYPE)

    def ints(name: str) -> list[int]:
        i = col[name]
        return [int(r[i]) if r[i] else 0 for r in rows]

    def chars(name: str) -> list[int]:
        i = col[name]
        return [ord(r[i][0]) if r[i] else 0 for r in rows]

    for name in ("locate", "timestamp", "order_ref", "new_order_ref", "shares", "price",
                 "match_number"):
        ev[name] = ints(name)
    ev["type"] = chars("type")
    ev["side"] = chars("side")
    ev["printable"] = chars("printable")
    i = col["stock"]
    ev["stock"] = [r[i].encode("latin-1")[:8].ljust(8) if r[i] else b"" for r in rows]
    return ev


def _counted(events: np.ndarray) -> Batch:
    types, n = np.unique(events["type"], return_counts=True)
    return events, {chr(int(t)): int(c) for t, c in zip(types, n, strict=True)}


# --8<-- [start:batches]
def batches(path: str | Path | IO[bytes], fmt: str, impl: str,
            name: str | Path | None = None) -> tuple[Iterator[Batch], Any]:
    """(events, counts by message type) batches of a feed, decoded by ``impl``'s twin.

    ``path``: a file or a stream opened once (a pipe, standard input); ``name`` names it.
    The second value is the PCAP reader (for its gap statistics) or None.
    """
    name = name if name is not None else path if isinstance(path, str | Path) else "-"
    if fmt == "itch":
        itch = importlib.import_module(f"{impl}.itch")
        return itch.read_file(path), None
    if fmt == "pcap":
        reader = importlib.import_module(f"{impl}.pcap").read_file(path)
        return iter(reader), reader
    if fmt == "csv":
        ops = importlib.import_module(f"{impl}.orders").read_csv(path)
        return iter([_counted(ops_events(ops))]), None
    if fmt == "lobster":
        messages = importlib.import_module(f"{impl}.orders").read_lobster(path)
        return iter([_counted(lobster_events(messages, lobster_stock(name)))]), None
    if fmt == "messages":
        if isinstance(path, str | Path):
            return (_counted(ev) for ev in _messages_csv_file(path)), None
        return (_counted(ev) for ev in _messages_csv_events(path)), None
    raise ReplayError(f"unknown format {fmt!r}")
# --8<-- [end:batches]


# --8<-- [start:applied_batches]
def applied_batches(market: Any, path: str | Path | IO[bytes], fmt: str, impl: str,
                    name: str | Path | None = None) -> tuple[Iterator[Batch], Any]:
    """(fills, counts by message type) of each batch of a file, applied to ``market``.

    The optimized twin replays an ITCH file in one pass (``Market.run_file``: each
    message applied as it is decoded, no events array); everything else is decoded into
    events by ``batches`` and then applied with ``market.run``.
    """
    if impl == "optimized" and fmt == "itch":
        return market.run_file(path), None
    it, reader = batches(path, fmt, impl, name)
    return ((market.run(events), counts) for events, counts in it), reader
# --8<-- [end:applied_batches]


def new_market(impl: str, mode: str) -> Any:
    """A many-books market of one twin."""
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
    return importlib.import_module(f"{impl}.market").Market(mode)


class Progress:
    """A one-line progress report on stderr, only on a terminal and after the first second."""

    def __init__(self, total_bytes: int | None, enabled: bool) -> None:
        self.total = total_bytes
        self.enabled = enabled and sys.stderr.isatty()
        self.start = time.perf_counter()
        self.last = 0.0
        self.shown = False

    def update(self, messages: int, done_bytes: int | None) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.start < 1.0 or now - self.last < 0.2:
            return
        self.last = now
        rate = messages / (now - self.start)
        line = f"{messages:>14,} messages  {rate:>12,.0f}/s"
        if self.total and done_bytes is not None:
            frac = min(1.0, done_bytes / self.total)
            bar = "#" * int(30 * frac)
            line = f"[{bar:<30}] {100 * frac:5.1f}% " + line
        sys.stderr.write("\r" + line)
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _itch_bytes(counts: dict[str, int]) -> int:
    """Bytes of framed ITCH the counted messages took (2-byte length + message)."""
    from naive.itch import LENGTHS  # the spec's table; both twins agree on it

    return sum(n * (LENGTHS.get(ord(t), 0) + 2) for t, n in counts.items() if len(t) == 1)


def write_fills(out: IO[str], fills: np.ndarray) -> None:
    if len(fills) == 0:
        return
    cols = [fills[name].astype(np.uint64).tolist()
            for name in ("resting_id", "aggressor_id", "price", "qty", "aggressor_side")]
    out.write("".join(f"{a},{b},{c},{d},{e}\n" for a, b, c, d, e in zip(*cols, strict=True)))


def peak_rss_mb() -> float:
    """This process's peak resident memory in MiB: Linux's VmHWM (/proc/self/status).

    getrusage's ru_maxrss is the fallback only: Linux carries it across exec, so a replay
    started by a large parent (pytest, a notebook) would report the parent's peak.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass
class ReplayResult:
    report: dict[str, Any]
    fills: np.ndarray | None = None
    books_csv: str = ""
    market: Any = field(default=None, repr=False)


# --8<-- [start:replay]
def replay(
    path: str | Path, impl: str = "optimized", mode: str = "book",
    fills_path: str | Path | None = None, books_path: str | Path | None = None,
    keep_fills: bool = False, progress: bool = False,
) -> ReplayResult:
    """Replay a whole feed through one twin; returns the report (and fills if kept).

    ``path`` may be a pipe or FIFO, or "-" for standard input: it is opened once and its
    first bytes are looked at without being lost.
    """
    path = Path(path)
    # The fills and books are written under temporary names and renamed into place only
    # when the whole replay succeeded (twinmatch/atomic.py); an output that is the feed
    # itself (the same inode) is refused before anything is opened.
    with Outputs("replay", [0 if str(path) == "-" else path]) as outputs:
        fills_part = None if fills_path is None else outputs.add(Path(fills_path))
        books_part = None if books_path is None else outputs.add(Path(books_path))
        with opened(path) as raw:
            head, stream = peek(raw, SNIFF_BYTES)
            result = _replay(path, stream, head, impl, mode, fills_part, books_part,
                             keep_fills, progress)
        outputs.commit()
    return result


def _replay(
    path: Path, stream: IO[bytes], head: bytes, impl: str, mode: str,
    fills_path: str | Path | None, books_path: str | Path | None, keep_fills: bool,
    progress: bool,
) -> ReplayResult:
    fmt = sniff_head(head, path)
    market = new_market(impl, mode)
    start = time.perf_counter()
    applied, pcap_reader = applied_batches(market, stream, fmt, impl, path)
    by_type: dict[str, int] = {}
    kept: list[np.ndarray] = []
    size = regular_size(stream)
    total_bytes = size if fmt == "itch" and head[:2] != GZIP_MAGIC else None
    bar = Progress(total_bytes, progress)
    fills_out = open(fills_path, "w") if fills_path else None  # noqa: SIM115
    try:
        if fills_out:
            fills_out.write(FILLS_HEADER)
        for fills, counts in applied:
            for t, n in counts.items():
                by_type[t] = by_type.get(t, 0) + n
            if fills_out:
                write_fills(fills_out, fills)
            if keep_fills:
                kept.append(fills)
            bar.update(sum(by_type.values()), _itch_bytes(by_type) if total_bytes else None)
    finally:
        bar.close()
        if fills_out:
            fills_out.close()
    books = ""
    if books_path is not None:
        books = market.books_csv()
        Path(books_path).write_text(books)
    seconds = time.perf_counter() - start
    report = make_report(path, fmt, impl, mode, market, by_type, seconds)
    if pcap_reader is not None:
        report["pcap"] = {k: v for k, v in pcap_reader.stats.items()}
    all_fills = concat_records(kept, FILL_DTYPE) if kept else None
    return ReplayResult(report, all_fills, books, market)
# --8<-- [end:replay]


def top_of_book(market: Any, n: int = TOP_SYMBOLS) -> list[dict[str, Any]]:
    """The ``n`` locates with the most book messages, with their best bid and ask."""
    active = sorted(market.activity(), key=lambda la: (-la[1], la[0]))[:n]
    rows = []
    for locate, messages in active:
        bid, ask = market.top(locate)
        rows.append({
            "locate": locate, "stock": market.stock(locate), "messages": messages,
            "bid": bid[0] if bid else None, "bid_qty": bid[1] if bid else None,
            "ask": ask[0] if ask else None, "ask_qty": ask[1] if ask else None,
        })
    return rows


def type_key(key: str) -> str:
    """A message-type key as the report shows it: a type byte outside 0x20..0x7e (a
    decoder's ``chr(code)``) becomes ``\\xNN``, like every other byte from the feed."""
    if len(key) == 1 and ord(key) < 256:
        return show_bytes(bytes([ord(key)]))
    return key


def make_report(path: Path, fmt: str, impl: str, mode: str, market: Any,
                by_type: dict[str, int], seconds: float) -> dict[str, Any]:
    counts = market.counts()
    messages = sum(by_type.values())
    shown: dict[str, int] = {}
    for t, n in by_type.items():
        shown[type_key(t)] = shown.get(type_key(t), 0) + n
    return {
        "file": str(path), "format": fmt, "impl": impl, "mode": mode,
        "messages": messages,
        "by_type": dict(sorted(shown.items())),
        "fills": int(market.fills), "volume": int(market.volume),
        "anomalies": counts["anomalies"], "rejects": counts["rejects"],
        "book_states": market.book_states(), "trading_states": market.trading_states(),
        "live_orders": len(market), "books": int(market.books),
        "seconds": seconds,
        "messages_per_s": messages / seconds if seconds > 0 else 0.0,
        "ns_per_message": 1e9 * seconds / messages if messages else 0.0,
        "peak_rss_mb": peak_rss_mb(),
        "top": top_of_book(market),
    }


def format_report(r: dict[str, Any]) -> str:
    """The report as text for a terminal."""
    out = io.StringIO()
    w = out.write
    w(f"twinmatch replay {r['file']} ({r['format']}) impl={r['impl']} mode={r['mode']}\n")
    w(f"messages: {r['messages']:,} in {r['seconds']:.2f} s = {r['messages_per_s']:,.0f} "
      f"messages/s ({r['ns_per_message']:.0f} ns/message: read + decode + books), "
      f"peak memory {r['peak_rss_mb']:.0f} MB\n")
    w("by type: " + " ".join(f"{t}={n:,}" for t, n in r["by_type"].items()) + "\n")
    w(f"fills: {r['fills']:,}, volume {r['volume']:,} shares; live orders {r['live_orders']:,} "
      f"in {r['books']:,} books\n")
    nonzero = {k: v for k, v in r["anomalies"].items() if v}
    w("anomalies: " + (" ".join(f"{k}={v:,}" for k, v in nonzero.items()) or "none") + "\n")
    rejects = {k: v for k, v in r["rejects"].items() if v}
    w("rejects: " + (" ".join(f"{k}={v:,}" for k, v in rejects.items()) or "none") + "\n")
    st = r["book_states"]
    w(f"locked books: {st['locked']:,} times, {st['locked_ns'] / 1e9:.6f} s in all "
      f"({st['locked_now']:,} now); crossed: {st['crossed']:,} times, "
      f"{st['crossed_ns'] / 1e9:.6f} s ({st['crossed_now']:,} now)\n")
    if r["trading_states"]:
        w("trading states (last H per symbol): "
          + " ".join(f"{k}={v:,}" for k, v in r["trading_states"].items()) + "\n")
    if "pcap" in r:
        s = r["pcap"]
        w(f"pcap: {s.get('packets', 0):,} packets, {s.get('gaps', 0):,} gaps "
          f"({s.get('gap_messages', 0):,} messages missing)\n")
    if r["top"]:
        w("most active symbols (top of book, prices in $):\n")
        w(f"  {'locate':>6} {'stock':<8} {'messages':>10} {'bid':>12} {'qty':>8} "
          f"{'ask':>12} {'qty':>8}\n")
        for t in r["top"]:
            bid = f"{t['bid'] / 1e4:.4f}" if t["bid"] is not None else "-"
            ask = f"{t['ask'] / 1e4:.4f}" if t["ask"] is not None else "-"
            w(f"  {t['locate']:>6} {t['stock']:<8} {t['messages']:>10,} {bid:>12} "
              f"{t['bid_qty'] or 0:>8,} {ask:>12} {t['ask_qty'] or 0:>8,}\n")
    return out.getvalue()
