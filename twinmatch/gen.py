"""Synthetic feeds, reproducible from a seed (``twinmatch gen market`` / ``twinmatch gen flow``).

Two kinds of file, as DESIGN.md's "Feeds" describes:

* a **market-data day**: the ITCH 5.0 feed a simulated exchange publishes about its own
  matching. Every book message type (A F E C X D U P) plus S, R and H; many symbols with
  Zipf popularity; prices clustered near the touch; cancels (X + D) outnumbering
  executions (E + C) about 20 to 1; some replaces. Written as raw ITCH (NASDAQ's
  BinaryFILE framing), gzip, a PCAP of MoldUDP64 packets and CSV, with the simulator's
  final books beside it (``*.books.csv``, DESIGN.md's books CSV) so that a replay that
  rebuilds the books can be checked exactly.
* an **order-flow** file: the incoming orders of a matching engine. Either CSV orders
  ``order_id,price,quantity,side`` for one symbol (from :mod:`twinmatch.flow`), or an ITCH
  file for many symbols whose A adds may cross, with D cancels and U replaces (what
  ``twinmatch replay --mode match`` feeds the engines), again with the expected books beside.

The simulator is C++ (``native/harness/gen.hpp``): generators are harness, not a twin, so there is
no naive twin of it. A per-message Python loop could not write 10 million messages in well
under a minute; Python here only moves multi-megabyte chunks between the simulator and
the files.

The day's clock (ns since midnight, ITCH timestamps strictly increasing): S 'O' at 03:00,
the R (stock directory) messages, S 'S' at 04:00, one H ('T', trading) per symbol, S 'Q'
at 09:30, then all order activity in market hours 09:30-16:00, S 'M' at 16:00, S 'E' at
20:00 and S 'C' at 20:05. Locates are assigned from 1 in alphabetical order of the stock.
Order references are unique and increase with their first appearance; match numbers
increase across E, C and P.
"""

from __future__ import annotations

import gzip
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Final, Protocol

import numpy as np

from contract.dtypes import OP_CANCEL, OP_LIMIT, OP_MARKET
from optimized import _native
from twinmatch.atomic import Outputs, write_file
from twinmatch.flow import FlowShape, order_flow
from twinmatch.replay import Progress

FORMATS: Final = ("itch", "gz", "pcap", "csv")
SUFFIX: Final = {"itch": ".itch", "gz": ".itch.gz", "pcap": ".pcap", "csv": ".csv"}
BOOKS_SUFFIX: Final = ".books.csv"
CHUNK_BYTES: Final = 8 << 20

# The PCAP: one MoldUDP64 session; a packet holds the messages of up to PCAP_WINDOW_NS
# (and at most an Ethernet MTU's worth); a heartbeat after each idle second; packet times
# are PCAP_EPOCH_S (2024-01-02 00:00:00 UTC) plus the ITCH timestamp of the packet's last
# message. A synthetic day is far sparser than a real one (10 million messages where
# NASDAQ sends hundreds of millions), so a real feed's bursts are modelled by batching a
# second's worth of messages: a 10M-message day fills packets to the MTU.
PCAP_SESSION: Final = "TWINMATCH1"
PCAP_WINDOW_NS: Final = 1_000_000_000
HEARTBEAT_NS: Final = 1_000_000_000
PCAP_EPOCH_S: Final = 1_704_153_600

# The sizes the generators accept; anything else is a one-line TypeError or ValueError
# naming the argument (the command line prints it and exits 2). The upper bounds catch
# typos, not wishes: a real NASDAQ day is a few hundred million messages, and the
# one-symbol CSV flow is built in memory by a Python loop (twinmatch.flow).
MAX_SYMBOLS: Final[int] = int(_native.GEN_MAX_SYMBOLS)
MAX_MESSAGES: Final = 10**10
MAX_CSV_ORDERS: Final = 10**8
MAX_SEED: Final = 2**64 - 1
MAX_CHUNK_BYTES: Final = 1 << 30


class GenArgumentError(ValueError):
    """A generator's argument is out of range (the message names it and the range)."""


def check_int(name: str, value: object, low: int, high: int) -> int:
    """``value`` as an ``int`` in ``low..high`` (numpy integers accepted), or an error
    naming ``name``: TypeError for a non-integer (bool, float, str, None), else
    GenArgumentError (a ValueError)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__} {value!r}")
    number = int(value)
    if not low <= number <= high:
        raise GenArgumentError(f"{name} must be {low:,}..{high:,}, not {number:,}")
    return number


def check_day(messages: object, symbols: object, seed: object) -> tuple[int, int, int]:
    """The checked (messages, symbols, seed) of a simulated day."""
    symbols = check_int("symbols", symbols, 1, MAX_SYMBOLS)
    seed = check_int("seed", seed, 0, MAX_SEED)
    least = int(_native.GenSimulator.minimum_messages(symbols))
    if isinstance(messages, int | np.integer) and not isinstance(messages, bool) \
            and int(messages) < least:
        raise GenArgumentError(f"messages must be at least {least:,} for {symbols:,} symbols "
                         f"(the S, R and H messages), not {int(messages):,}")
    return check_int("messages", messages, least, MAX_MESSAGES), symbols, seed


# When a market day's events happen (``gen market --profile``). "intraday" is the
# self-exciting clock of native/harness/gen.hpp (IntradayClock): baseline weight 4 at
# 09:30 falling to 1 by 10:00, 1 until 15:30, rising to 3 at 16:00; each event kicks the
# intensity of the next 10 ms bins by an amount decaying 0.98 per bin (about half a
# second), branching ratio 0.7. Order-flow files (gen flow) keep the flat clock.
PROFILES: Final = ("flat", "intraday")


def check_profile(profile: object) -> str:
    if profile not in PROFILES:
        raise GenArgumentError(f"profile must be one of {', '.join(PROFILES)}, not {profile!r}")
    return str(profile)


def check_buffer(name: str, value: object) -> object:
    """A bytes-like object (bytes, bytearray, memoryview, numpy array...), or a one-line
    TypeError naming ``name`` (the native call would answer with its signatures)."""
    try:
        memoryview(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be a bytes-like object, not {type(value).__name__}") \
            from None
    return value


def check_name(name: object) -> str:
    """A file stem: not empty, no directory part (the files go in the output folder)."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise GenArgumentError(f"name must be a file stem without a directory part, not {name!r}")
    return name


# CSV order flow has only three kinds of row (limit, market, cancel): the CSV convention
# has no reduce, execute or replace, so the one-symbol flow is generated without them.
CSV_FLOW_SHAPE: Final = FlowShape(reduce=0.0, execute=0.0, replace=0.0)


@dataclass
class GenResult:
    """What a generator wrote: files, message counts by type, time taken."""

    paths: list[Path]
    messages: int
    counts: dict[str, int] = field(default_factory=dict)
    live_orders: int = 0
    seconds: float = 0.0
    packets: int = 0
    heartbeats: int = 0


# --8<-- [start:chunks]
def simulate(
    messages: int, symbols: int = 500, seed: int = 1, flow: bool = False,
    chunk_bytes: int = CHUNK_BYTES, all_types: bool = False, profile: str = "flat",
) -> tuple[_native.GenSimulator, Iterator[bytes]]:
    """The simulator and an iterator over the day as chunks of whole framed messages.

    ``messages`` is the exact number of messages in the day (S R H included). After the
    iterator is exhausted, ``sim.books_csv()`` gives the final books and ``sim.counts()``
    the messages by type. ``all_types`` (market mode): also Q, B, I and h messages and C
    prints away from the resting price (none changes a book; off, the day is unchanged).
    ``profile``: ``"flat"`` (events evenly over market hours, the default) or
    ``"intraday"`` (a busy open and close and bursts within seconds: ``PROFILES``).
    """
    messages, symbols, seed = check_day(messages, symbols, seed)
    chunk_bytes = check_int("chunk_bytes", chunk_bytes, 1, MAX_CHUNK_BYTES)
    intraday = check_profile(profile) == "intraday"
    sim = _native.GenSimulator(seed=seed, messages=messages, symbols=symbols, flow=flow,
                               all_types=bool(all_types), intraday=intraday)

    def chunks() -> Iterator[bytes]:
        while chunk := sim.next_chunk(chunk_bytes):
            yield chunk

    return sim, chunks()
# --8<-- [end:chunks]


def market_day_bytes(
    messages: int, symbols: int = 500, seed: int = 1, flow: bool = False,
    all_types: bool = False, profile: str = "flat",
) -> tuple[bytes, bytes]:
    """A whole day in memory: (framed ITCH, books CSV). For tests and small days."""
    sim, chunks = simulate(messages, symbols, seed, flow, all_types=all_types,
                           profile=profile)
    raw = b"".join(chunks)
    return raw, sim.books_csv()


def pcap_from_itch(raw: bytes | memoryview) -> bytes:
    """The MoldUDP64 pcap of framed ITCH messages, in memory (see ``PcapSink``)."""
    check_buffer("raw", raw)
    writer = _native.GenPcapWriter(PCAP_SESSION, PCAP_WINDOW_NS, HEARTBEAT_NS, PCAP_EPOCH_S)
    return _native.GenPcapWriter.global_header() + writer.feed(raw) + writer.finish()


def messages_csv(raw: bytes | memoryview) -> bytes:
    """Framed ITCH messages as CSV text with its header (columns in ``MESSAGES_CSV_HEADER``)."""
    check_buffer("raw", raw)
    return MESSAGES_CSV_HEADER.encode() + _native.gen_messages_csv(raw)


# type,locate,tracking,timestamp,order_ref,new_order_ref,side,shares,price,match_number,
# printable,stock,mpid: a field the message lacks is empty; side also holds S's event code
# and H's trading state; prices in ITCH units (1/10,000 dollar).
MESSAGES_CSV_HEADER: Final[str] = _native.GEN_MESSAGES_CSV_HEADER


# ---- sinks: one per output format, each fed the same chunks -----------------------------


class Sink(Protocol):
    path: Path

    def write(self, chunk: bytes) -> None: ...
    def close(self) -> None: ...


class RawSink:
    """NASDAQ's BinaryFILE: the framed messages as they are."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed in close()

    def write(self, chunk: bytes) -> None:
        self._f.write(chunk)

    def close(self) -> None:
        self._f.close()


class GzipSink:
    """The same bytes gzip-compressed, streamed; mtime 0 so the file is reproducible."""

    def __init__(self, path: Path, level: int) -> None:
        self.path = path
        self._raw: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._gz = gzip.GzipFile(filename="", mode="wb", fileobj=self._raw,
                                 compresslevel=level, mtime=0)

    def write(self, chunk: bytes) -> None:
        self._gz.write(chunk)

    def close(self) -> None:
        self._gz.close()
        self._raw.close()


class PcapSink:
    """MoldUDP64 in Ethernet/IPv4/UDP in a nanosecond pcap, packed in C++ per chunk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writer = _native.GenPcapWriter(PCAP_SESSION, PCAP_WINDOW_NS, HEARTBEAT_NS,
                                            PCAP_EPOCH_S)
        self._f: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._f.write(_native.GenPcapWriter.global_header())

    def write(self, chunk: bytes) -> None:
        self._f.write(self.writer.feed(chunk))

    def close(self) -> None:
        self._f.write(self.writer.finish())
        self._f.close()


class CsvSink:
    """One CSV row per message (see ``MESSAGES_CSV_HEADER``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._f.write(MESSAGES_CSV_HEADER.encode())

    def write(self, chunk: bytes) -> None:
        self._f.write(_native.gen_messages_csv(chunk))

    def close(self) -> None:
        self._f.close()


class ThreadedSink:
    """Runs another sink's writes on a worker thread, so that gzip compression (which
    releases the GIL) overlaps with the simulator; a bounded queue keeps memory flat."""

    def __init__(self, inner: Sink) -> None:
        self.path = inner.path
        self._inner = inner
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=4)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"gen-{inner.path.name}",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (chunk := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self._inner.write(chunk)
                except BaseException as exc:  # re-raised in the caller's thread by close()
                    self._error = exc

    def write(self, chunk: bytes) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(chunk)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        self._inner.close()
        if self._error is not None:
            raise self._error


def make_sink(fmt: str, path: Path, gzip_level: int) -> Sink:
    if fmt == "itch":
        return RawSink(path)
    if fmt == "gz":
        return ThreadedSink(GzipSink(path, gzip_level))
    if fmt == "pcap":
        return PcapSink(path)
    if fmt == "csv":
        return ThreadedSink(CsvSink(path))
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


# --8<-- [start:write_day]
def write_market_day(
    out_dir: str | Path,
    messages: int,
    symbols: int = 500,
    seed: int = 1,
    formats: Sequence[str] = ("itch",),
    name: str = "day",
    gzip_level: int = 1,
    all_types: bool = False,
    profile: str = "flat",
    progress: bool = False,
) -> GenResult:
    """Write a market-data day in each format, plus ``<name>.books.csv`` (final books).
    ``all_types``: also Q, B, I, h and C away from the resting price (see simulate);
    ``profile``: when the events happen (``PROFILES``; see simulate).
    ``progress``: a progress line on stderr while it runs, if stderr is a terminal."""
    return _write_day(Path(out_dir), name, messages, symbols, seed, formats, gzip_level,
                      flow=False, all_types=all_types, profile=profile, progress=progress)
# --8<-- [end:write_day]


def write_itch_flow(
    path: str | Path, orders: int, symbols: int = 500, seed: int = 1
) -> GenResult:
    """Multi-symbol ITCH order flow: ``orders`` A/D/U messages after the S/R/H header.

    The A adds may cross; a matching engine executing the file ends with the books in
    ``<stem>.books.csv`` beside it (price-time priority, as DESIGN.md's book semantics).
    """
    path = Path(path)
    symbols = check_int("symbols", symbols, 1, MAX_SYMBOLS)
    least = int(_native.GenSimulator.minimum_messages(symbols))
    orders = check_int("orders", orders, 0, MAX_MESSAGES - least)
    messages = orders + least
    name = path.name.removesuffix(".itch")
    return _write_day(path.parent, name, messages, symbols, seed, ("itch",), 6, flow=True,
                      feed=path)


def _close_all(sinks: Sequence[Sink]) -> None:
    """Close every sink (ending its thread) even if one fails; then raise the first error."""
    errors: list[BaseException] = []
    for sink in sinks:
        try:
            sink.close()
        except BaseException as exc:
            errors.append(exc)
    if errors:
        raise errors[0]


def _write_day(
    out_dir: Path, name: str, messages: int, symbols: int, seed: int,
    formats: Sequence[str], gzip_level: int, flow: bool, feed: Path | None = None,
    all_types: bool = False, profile: str = "flat", progress: bool = False,
) -> GenResult:
    """The day in each format and its books CSV, all or nothing (twinmatch/atomic.py):
    each file is written under a temporary name and renamed into place once every one
    is complete; a failure (a full disk) or a signal removes them. ``feed``: the one
    ITCH file's name, if not ``<name>.itch``."""
    start = time.perf_counter()
    messages, symbols, seed = check_day(messages, symbols, seed)
    gzip_level = check_int("gzip_level", gzip_level, 1, 9)
    name = check_name(name)
    check_profile(profile)
    if isinstance(formats, str):
        formats = (formats,)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown format {unknown[0]!r}; expected one of {', '.join(FORMATS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    finals = {f: out_dir / (name + SUFFIX[f]) for f in dict.fromkeys(formats)}
    if feed is not None:
        finals = {"itch": feed}
    books = out_dir / (name + BOOKS_SUFFIX)
    sim, chunks = simulate(messages, symbols, seed, flow, all_types=all_types,
                           profile=profile)
    with Outputs("gen") as outputs:
        sinks: list[Sink] = []
        # (the bar's "bytes" are messages here: the fraction is of the day's messages)
        bar = Progress(messages, progress)
        try:
            for fmt, final in finals.items():
                sinks.append(make_sink(fmt, outputs.add(final), gzip_level))
            books_part = outputs.add(books)
            for chunk in chunks:
                for sink in sinks:
                    sink.write(chunk)
                bar.update(int(sim.emitted), int(sim.emitted))
        finally:
            bar.close()
            _close_all(sinks)
        books_part.write_bytes(sim.books_csv())
        outputs.commit()
    result = GenResult(
        paths=[*finals.values(), books],
        messages=int(sim.emitted),
        counts={str(k): int(v) for k, v in sim.counts().items()},
        live_orders=int(sim.live_orders),
    )
    for sink in sinks:
        if isinstance(sink, PcapSink):
            result.packets = int(sink.writer.packets)
            result.heartbeats = int(sink.writer.heartbeats)
    result.seconds = time.perf_counter() - start
    return result


# --8<-- [start:csv_flow]
def csv_flow_ops(orders: int, seed: int = 1) -> np.ndarray:
    """One symbol's order flow (OPS_DTYPE) with only limit, market and cancel operations."""
    orders = check_int("orders", orders, 0, MAX_CSV_ORDERS)
    seed = check_int("seed", seed, 0, MAX_SEED)
    return order_flow(orders, seed, CSV_FLOW_SHAPE)


def csv_flow_text(ops: np.ndarray) -> str:
    """CSV orders ``order_id,price,quantity,side``: quantity 0 = cancel, price 0 = market."""
    kinds = set(np.unique(ops["op"]).tolist()) - {OP_LIMIT, OP_MARKET, OP_CANCEL}
    if kinds:
        raise ValueError(f"op codes {sorted(kinds)} have no CSV order form")
    op = ops["op"]
    price = np.where(op == OP_LIMIT, ops["price"], 0)
    qty = np.where(op == OP_CANCEL, 0, ops["qty"])
    rows = np.column_stack([ops["order_id"], price, qty, ops["side"]]).astype(np.uint64)
    lines = [f"{r[0]},{r[1]},{r[2]},{r[3]}" for r in rows.tolist()]
    return "order_id,price,quantity,side\n" + "".join(line + "\n" for line in lines)
# --8<-- [end:csv_flow]


def write_csv_flow(path: str | Path, orders: int, seed: int = 1) -> GenResult:
    """Write ``orders`` CSV orders for one symbol (a cancel row keeps the order's id)."""
    start = time.perf_counter()
    path = Path(path)
    orders = check_int("orders", orders, 0, MAX_CSV_ORDERS)
    path.parent.mkdir(parents=True, exist_ok=True)
    ops = csv_flow_ops(orders, seed)
    write_file(path, csv_flow_text(ops).encode())
    counts = {"limit": int((ops["op"] == OP_LIMIT).sum()),
              "market": int((ops["op"] == OP_MARKET).sum()),
              "cancel": int((ops["op"] == OP_CANCEL).sum())}
    return GenResult(paths=[path], messages=len(ops), counts=counts,
                     seconds=time.perf_counter() - start)


# ---- the uniform file: one symbol, a price range far wider than any window -------------

UNIFORM_STOCK: Final = b"UNIFORM "
UNIFORM_PRICES: Final = (10_000, 90_000)  # ITCH units: $1.0000 .. $9.0000, every one a level
UNIFORM_QTY: Final = (1, 500)

# A framed A message (Add Order, no MPID): 2-byte length, then 36 bytes, big-endian.
_ADD_FRAMED: Final = np.dtype([
    ("length", ">u2"), ("type", "S1"), ("locate", ">u2"), ("tracking", ">u2"),
    ("timestamp", "u1", (6,)), ("order_ref", ">u8"), ("side", "S1"), ("shares", ">u4"),
    ("stock", "S8"), ("price", ">u4"),
])
assert _ADD_FRAMED.itemsize == 38


# --8<-- [start:uniform_flow]
def uniform_flow_bytes(orders: int = 1_000_000, seed: int = 1) -> bytes:
    """One symbol's order flow as framed ITCH: ``orders`` adds, the first half buys, the
    second half sells, prices uniform over 10,000..90,000 (ITCH units, every tick a level),
    quantities uniform over 1..500, order references 1, 2, 3, ... in file order.

    Every buy rests (no sell has arrived yet); the sells then trade into the bids from the
    top down and rest where they no longer cross. The file opens with S 'O' and the R
    directory message naming locate 1, and ends with S 'C'.
    """
    from naive.itch import CLASSES, StockDirectory, frame

    orders = check_int("orders", orders, 2, MAX_CSV_ORDERS)
    seed = check_int("seed", seed, 0, MAX_SEED)
    rng = np.random.default_rng(seed)
    add = np.zeros(orders, dtype=_ADD_FRAMED)
    add["length"] = 36
    add["type"] = b"A"
    add["locate"] = 1
    ts = np.uint64(34_200_000_000_000) + np.arange(orders, dtype=np.uint64) * np.uint64(1000)
    add["timestamp"] = ts.astype(">u8").view(np.uint8).reshape(orders, 8)[:, 2:]  # 48 bits
    add["order_ref"] = np.arange(1, orders + 1, dtype=np.uint64)
    add["side"] = np.where(np.arange(orders) < orders // 2, b"B", b"S")
    lo, hi = UNIFORM_PRICES
    add["price"] = rng.integers(lo, hi + 1, orders, dtype=np.uint32)
    add["shares"] = rng.integers(UNIFORM_QTY[0], UNIFORM_QTY[1] + 1, orders, dtype=np.uint32)
    add["stock"] = UNIFORM_STOCK
    head = frame(CLASSES[b"S"](0, 0, 3 * 3600 * 10**9, b"O")) + frame(StockDirectory(
        1, 0, 3 * 3600 * 10**9 + 1, UNIFORM_STOCK, b"Q", b"N", 100, b"N", b"C", b"Z", b"P",
        b"N", b"N", b"2", b"N", 0, b"N"))
    tail = frame(CLASSES[b"S"](0, 0, 20 * 3600 * 10**9, b"C"))
    return head + add.tobytes() + tail
# --8<-- [end:uniform_flow]


def write_uniform_flow(path: str | Path, orders: int = 1_000_000, seed: int = 1) -> GenResult:
    """Write :func:`uniform_flow_bytes` to ``path`` (``twinmatch gen uniform``)."""
    orders = check_int("orders", orders, 2, MAX_CSV_ORDERS)  # before anything is written
    start = time.perf_counter()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file(path, uniform_flow_bytes(orders, seed))
    return GenResult(paths=[path], messages=orders + 3,
                     counts={"S": 2, "R": 1, "A": orders},
                     seconds=time.perf_counter() - start)


def many_locates_events(locates: int = 65_536, per_book: int = 1) -> np.ndarray:
    """``per_book`` resting buy adds on each locate 0..locates-1 (EVENT_DTYPE, in memory):
    what many books cost in memory. Prices step down one cent per round; references run
    1, 2, 3, ... round by round."""
    from contract.dtypes import EVENT_DTYPE

    n = locates * per_book
    ev = np.zeros(n, dtype=EVENT_DTYPE)
    ev["type"] = ord("A")
    ev["locate"] = np.tile(np.arange(locates, dtype=np.uint16), per_book)
    ev["order_ref"] = np.arange(1, n + 1, dtype=np.uint64)
    ev["side"] = ord("B")
    ev["price"] = 1_000_000 - 100 * np.repeat(np.arange(per_book, dtype=np.uint32), locates)
    ev["shares"] = 100
    ev["timestamp"] = np.arange(n, dtype=np.uint64)
    return ev
