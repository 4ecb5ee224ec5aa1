"""`twinmatch tables` and `twinmatch lobster`: an ITCH day (raw, gzip or PCAP) to research files.

The harness around the twins' :class:`TableBuilder` (naive/tables.py, optimized/tables.py):
it streams the feed in chunks (memory bounded by a chunk and its rows, whatever the day's
size), writes each batch as it comes (Parquet: one row group per batch; or CSV), and
renames the files into place only when the whole run succeeded, so a failed run leaves no
half file. The Parquet footer carries key-value metadata a later reader can check the
file against (:func:`metadata`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import hashlib
import io
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

import numpy as np

from contract.feed_text import show_bytes
from contract.itch_files import (
    CAPTURE_MAGICS,
    GZIP_MAGIC,
    check_chunk_size,
    file_chunks,
    read_full,
)
from contract.pcap_files import decode_stream
from contract.tables import (
    DEFAULT_DEPTH,
    PRICE_SCALE,
    TABLES,
    check_depth,
    check_symbols,
    check_tables,
    columns,
    date_from_name,
    lobster_columns,
    session_offset_ns,
    symbol_text,
    tail_error,
)
from twinmatch.atomic import Outputs, remove_stale_parts

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["convert", "tables_cmd"]

TABLE_CHUNK: Final = 16 << 20  # feed bytes per batch at most (a batch is a row group)
MIN_CHUNK: Final = 4 << 20  # ... and at least, unless the caller asks for less
RISING: Final = ("timestamp", "session_time", "seq")  # Parquet columns stored as deltas
FILTER_KEYS: Final = (*RISING, "locate", "symbol")  # Parquet columns with min/max statistics
FIRST_CHUNK: Final = 1 << 20
HASH_THREAD_FROM: Final = 256 << 20  # file bytes from which the SHA-256 has a thread
MAX_RECORD: Final = 2 + 0xFFFF  # the longest framed record: its length prefix and body
TOOL: Final = "twinmatch 0.1.0"
U32_MAX: Final = 2**32 - 1


class HashingReader(io.RawIOBase):
    """A binary file read through once: every byte read also goes into a SHA-256 and a
    byte count (the source hash of the metadata, the progress bar's position)."""

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f
        self.sha = hashlib.sha256()
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._f.read(len(b))
        n = len(data)
        memoryview(b).cast("B")[:n] = data
        self.sha.update(data)
        self.read_bytes += n
        return n


class Progress:
    """Bytes and messages, rate and ETA on one terminal line; nothing when not a TTY."""

    def __init__(self, total: int | None, enabled: bool) -> None:
        self.total, self.enabled = total, enabled
        self.start = time.monotonic()

    def update(self, done: int, messages: int) -> None:
        if not self.enabled:
            return
        spent = max(time.monotonic() - self.start, 1e-9)
        text = f"\r{done / 1e6:,.1f} MB  {messages:,} messages  {messages / spent:,.0f} msg/s"
        if self.total:
            left = (self.total - done) / max(done / spent, 1.0)
            text += f"  {100 * done / self.total:.0f}%  ETA {left:,.0f} s"
        sys.stderr.write(text + "   ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def batch_bytes(size: int) -> int:
    """Feed bytes per batch for a file of ``size`` bytes: a 32nd of it, within
    MIN_CHUNK..TABLE_CHUNK. Each batch is a row group and each of its columns is compressed
    on its own (zstd sets up a context for each), so bigger batches pay those fixed costs
    less often; but the last batch's conversion and writing overlap nothing (the builder
    is done), so a batch stays a small part of the file."""
    return min(max(size // 32, MIN_CHUNK), TABLE_CHUNK)


def _builder(impl: str, tables: Sequence[str], symbols: object, depth: int,
             lobster: int = 0) -> Any:
    if impl == "naive":
        from naive.tables import TableBuilder as Naive
        return Naive(tables, symbols, depth, lobster)  # type: ignore[arg-type]
    if impl == "optimized":
        from optimized.tables import TableBuilder as Optimized
        return Optimized(tables, symbols, depth, lobster)  # type: ignore[arg-type]
    raise ValueError(f"impl must be 'naive' or 'optimized', got {impl!r}")


def _pcap_blocks(f: IO[bytes], impl: str, chunk: int) -> Iterator[bytes]:
    """The framed ITCH messages a capture carries, one block per chunk of the file."""
    if impl == "naive":
        from naive.pcap import Scanner as NaiveScanner
        scanner: Any = NaiveScanner()
    else:
        from optimized.pcap import Scanner as OptimizedScanner
        scanner = OptimizedScanner()
    for framed in decode_stream(f, chunk, scanner, lambda blocks: blocks):
        yield np.asarray(framed, dtype=np.uint8).tobytes()


# --8<-- [start:stream]
def stream_tables(source: Path, impl: str, tables: Sequence[str], symbols: object,
                  depth: int, chunk: int = TABLE_CHUNK,
                  on_batch: Callable[[dict[str, dict[str, np.ndarray]]], None] | None = None,
                  progress: bool = False, lobster: int = 0) -> tuple[dict[str, int], str]:
    """Feed a whole file through one twin's TableBuilder, batch by batch (each batch to
    ``on_batch``). Returns (the builder's counters, the file's SHA-256)."""
    chunk = check_chunk_size(chunk)  # 0 would read nothing: an empty day, silently
    builder = _builder(impl, tables, symbols, depth, lobster)
    with open(source, "rb", buffering=0) as raw:
        head = raw.read(4)
        raw.seek(0)
        bar = Progress(os.fstat(raw.fileno()).st_size, progress)
        try:
            if head[:2] == GZIP_MAGIC or head in CAPTURE_MAGICS:
                sha = _stream_general(raw, head, builder, impl, chunk, on_batch, bar)
            else:
                sha = _stream_plain(raw, builder, chunk, on_batch, bar)
        finally:
            bar.close()
    return builder.counters(), sha


class _Hasher:
    """The SHA-256 of a file's chunks, in order: on a thread of its own (hashlib releases
    the GIL) for a big file, where it would be a tenth of the reading thread's work, or
    inline for a small one, where start-up and the writer thread decide the time and a
    third thread would only compete with the writer for two cores (the benchmark group
    "tables" times both sizes). update() returns an event set once the bytes are hashed:
    until then the caller must not overwrite them."""

    def __init__(self, threaded: bool) -> None:
        self.sha = hashlib.sha256()
        self._queue: queue.Queue[tuple[memoryview, threading.Event] | None] | None = None
        if threaded:
            self._queue = queue.Queue()
            self._thread = threading.Thread(target=self._run, name="tables-hash", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        assert self._queue is not None
        while (item := self._queue.get()) is not None:
            self.sha.update(item[0])
            item[1].set()

    def update(self, data: memoryview) -> threading.Event:
        done = threading.Event()
        if self._queue is None:
            self.sha.update(data)
            done.set()
        else:
            self._queue.put((data, done))
        return done

    def hexdigest(self) -> str:
        if self._queue is not None:
            self._queue.put(None)
            self._thread.join()
            self._queue = None
        return self.sha.hexdigest()


def _stream_plain(raw: IO[bytes], builder: Any, chunk: int,
                  on_batch: Callable[[dict[str, dict[str, np.ndarray]]], None] | None,
                  bar: Progress) -> str:
    """A raw ITCH file: each chunk is read into a buffer behind the partial record the
    last one left and fed where it lies (no copy of the chunk in Python). Two buffers take
    turns, so that one can be hashed while the builder reads the other."""
    size = os.fstat(raw.fileno()).st_size
    hasher = _Hasher(threaded=size >= HASH_THREAD_FROM)
    bufs = [bytearray(chunk + MAX_RECORD) for _ in range(2)]  # a partial record is shorter
    hashed = [threading.Event(), threading.Event()]
    for event in hashed:
        event.set()
    carry = done = turn = 0
    want = min(chunk, FIRST_CHUNK)  # a short first batch: the writer thread starts sooner
    try:
        while True:
            view = memoryview(bufs[turn])
            n = raw.readinto(view[carry:carry + want])  # type: ignore[attr-defined]
            if not n:
                break
            want = chunk
            hashed[turn] = hasher.update(view[carry:carry + n])
            done += n
            have = carry + n
            used = builder.feed(view[:have])
            carry = have - used
            turn ^= 1
            hashed[turn].wait()  # the other buffer's last bytes are hashed: reuse it
            bufs[turn][:carry] = view[used:have]  # the partial record to its front
            if on_batch is not None:
                on_batch(builder.take())
            bar.update(done, builder.messages)
    finally:
        digest = hasher.hexdigest()
    if carry:
        raise tail_error(bytes(memoryview(bufs[turn])[:carry]), builder.offset)
    return digest


def _stream_general(raw: IO[bytes], head: bytes, builder: Any, impl: str, chunk: int,
                    on_batch: Callable[[dict[str, dict[str, np.ndarray]]], None] | None,
                    bar: Progress) -> str:
    """Gzip or a capture: through the shared readers (a hashing stream under them)."""
    reader = HashingReader(raw)
    f = io.BufferedReader(reader, buffer_size=1 << 16)
    blocks = (_pcap_blocks(f, impl, chunk) if head in CAPTURE_MAGICS
              else file_chunks(f, chunk))
    carry = b""
    for block in blocks:
        buf = carry + block if carry else block
        used = builder.feed(buf)
        carry = buf[used:]
        if on_batch is not None:
            on_batch(builder.take())
        bar.update(reader.read_bytes, builder.messages)
    if carry:
        raise tail_error(carry, builder.offset)
    while read_full(f, 1 << 20):  # hash what the reader left (a pcap's trailing bytes)
        pass
    return reader.sha.hexdigest()
# --8<-- [end:stream]


# ------------------------------------------------------------------ writing

@functools.cache
def _char_names() -> pa.Array:
    import pyarrow as pa
    return pa.array(["" if b == 0 else show_bytes(bytes([b])) for b in range(256)])


def _chars(values: np.ndarray) -> pa.Array:
    """A column of ASCII codes (u1) as one-character strings (0 -> ""), dictionary coded:
    no Python object per row."""
    import pyarrow as pa
    return pa.DictionaryArray.from_arrays(pa.array(values.astype(np.int16)), _char_names())


def _text(values: np.ndarray) -> pa.Array:
    """A fixed-width text column (symbol, reason, ...) as strings, dictionary coded."""
    import pyarrow as pa
    unique, index = np.unique(values, return_inverse=True)
    names = pa.array([symbol_text(bytes(u)) for u in unique], type=pa.string())
    return pa.DictionaryArray.from_arrays(pa.array(index.astype(np.int32)), names)


class SymbolNames:
    """The symbol column's strings by locate, remembered across batches: a locate names
    one symbol all day, so each name is made once (a batch of a 4,000-symbol day would
    otherwise make 4,000 strings again). Only a locate whose 8 bytes changed is named
    again."""

    def __init__(self) -> None:
        self.raw = np.zeros(1 << 16, dtype="S8")
        self.names = np.full(1 << 16, "", dtype=object)
        self.known = np.zeros(1 << 16, dtype=bool)

    def of(self, locates: np.ndarray, raw: np.ndarray) -> list[str]:
        """The names of `locates` (distinct), whose 8 bytes are `raw`."""
        stale = ~self.known[locates] | (self.raw[locates] != raw)
        for loc, value in zip(locates[stale].tolist(), raw[stale].tolist(), strict=True):
            self.raw[loc], self.names[loc], self.known[loc] = value, symbol_text(value), True
        names: list[str] = self.names[locates].tolist()
        return names


def _symbols(values: np.ndarray, locates: np.ndarray,
             cache: SymbolNames | None = None) -> pa.Array:
    """The symbol column, dictionary coded by locate: a locate names one symbol all day,
    so the dictionary comes from the locates present (a count, no sort of strings) and its
    strings from `cache`. A batch where that does not hold (a hostile file renames a
    locate, or gives two the same name) takes the general way, _text."""
    import pyarrow as pa
    seen = np.zeros(1 << 16, dtype=bool)
    seen[locates] = True
    present = np.flatnonzero(seen)
    code = np.zeros(1 << 16, dtype=np.int32)
    code[present] = np.arange(len(present), dtype=np.int32)
    index = code[locates]
    raw = np.zeros(len(present), dtype=values.dtype)
    raw[index] = values
    names = (cache or SymbolNames()).of(present, raw)
    if not np.array_equal(raw[index], values) or len(set(names)) != len(names):
        return _text(values)
    return pa.DictionaryArray.from_arrays(pa.array(index), pa.array(names, type=pa.string()))


def arrow_table(table: str, batch: dict[str, np.ndarray], depth: int,
                offset_ns: int | None, symbols: SymbolNames | None = None) -> pa.Table:
    """One batch as an Arrow table: numbers keep their unsigned types, chars and text
    become strings, and ``session_time`` (UTC) follows ``timestamp`` if the day is known.
    Every field is required (not nullable): no row lacks a value, and Parquet then writes
    no definition levels."""
    import pyarrow as pa
    arrays: list[pa.Array] = []
    names: list[str] = []
    for name, dtype in columns(table, depth):
        values = batch[name]
        if dtype.kind == "S":
            arrays.append(_symbols(values, batch["locate"], symbols) if name == "symbol"
                          else _text(values))
        elif dtype == np.uint8:
            arrays.append(_chars(values))
        else:
            arrays.append(pa.array(values))
        names.append(name)
        if name == "timestamp" and offset_ns is not None:
            utc = values.astype(np.int64) + np.int64(offset_ns)
            arrays.append(pa.array(utc, type=pa.timestamp("ns", tz="UTC")))
            names.append("session_time")
    schema = pa.schema([pa.field(n, a.type, nullable=False)
                        for n, a in zip(names, arrays, strict=True)])
    return pa.Table.from_arrays(arrays, schema=schema)


class Queued:
    """Batches converted and written on a thread of their own behind a queue of two, while
    the next chunk is read and built (the builder and pyarrow's writers release the GIL);
    the queue bounds the memory. Subclasses define write_now()."""

    def __init__(self) -> None:
        self._queue: queue.Queue[dict[str, dict[str, np.ndarray]] | None] = queue.Queue(2)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="tables-writer", daemon=True)
        self._thread.start()

    def write_now(self, batches: dict[str, dict[str, np.ndarray]]) -> None:
        raise NotImplementedError

    def _drain(self) -> None:
        while (batches := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self.write_now(batches)
                except BaseException as exc:  # noqa: BLE001 - handed to the reading thread
                    self._error = exc

    def write(self, batches: dict[str, dict[str, np.ndarray]]) -> None:
        """Queue a batch (waits while two are queued); raises a writing error seen so far."""
        if self._error is not None:
            raise self._error
        self._queue.put(batches)

    def finish(self) -> None:
        """Wait for every queued batch to be written; raises the first writing error."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """After a failure: drop what is queued, wait for the thread, ignore its errors."""
        self._error = self._error or RuntimeError("aborted")
        try:
            self.finish()
        except BaseException:  # noqa: BLE001 - cleaning up after the real error
            pass


class Writers(Queued):
    """One output file per table and metadata.json, each written under a temporary name
    (twinmatch/atomic.py); commit() renames them all into place, abort() removes them."""

    def __init__(self, out: Path, tables: Sequence[str], fmt: str, depth: int,
                 offset_ns: int | None, source: Path) -> None:
        self.out, self.fmt, self.depth, self.offset_ns = out, fmt, depth, offset_ns
        self.outputs = Outputs("tables", [source])
        self.final = {t: out / f"{t}.{fmt}" for t in tables}
        self.meta_path = out / "metadata.json"
        self.writers: dict[str, Any] = {}
        self.rows = dict.fromkeys(tables, 0)
        self.symbols = SymbolNames()
        try:  # a failure (or a signal) from here on removes the parts made so far
            self.temp = {t: self.outputs.add(self.final[t]) for t in tables}
            self.meta_temp = self.outputs.add(self.meta_path)
            super().__init__()
        except BaseException:
            self.outputs.abort()
            raise

    def write_now(self, batches: dict[str, dict[str, np.ndarray]]) -> None:
        for table, batch in batches.items():
            n = len(batch["seq"])
            if n == 0 and table in self.writers:
                continue
            self.rows[table] += n
            t = arrow_table(table, batch, self.depth, self.offset_ns, self.symbols)
            if table not in self.writers:
                self.writers[table] = self._open(table, t.schema)
            if n:
                if self.fmt == "parquet":
                    self.writers[table].write_table(t, row_group_size=max(n, 1))
                else:
                    self.writers[table].write_table(_decoded(t))

    def _open(self, table: str, schema: pa.Schema) -> Any:
        if self.fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq
            # Dictionary pages only for the text columns (already dictionary arrays): on a
            # timestamp or a sequence number the writer would try one and give it up.
            text = [f.name for f in schema if pa.types.is_dictionary(f.type)]
            # The clocks (timestamp, session_time, seq) rise row by row: stored as deltas
            # (DELTA_BINARY_PACKED) they shrink before zstd sees them. Min/max statistics
            # only where a reader can skip a row group by them: the clocks and the locate
            # and symbol (a batch holds every symbol's rows, so its price or size range
            # says nothing a filter can use); fewer statistics, less writing.
            names = set(schema.names)
            rising = {c: "DELTA_BINARY_PACKED" for c in RISING if c in names}
            return pq.ParquetWriter(str(self.temp[table]), schema, compression="zstd",
                                    use_dictionary=text, column_encoding=rising,
                                    write_statistics=[c for c in FILTER_KEYS if c in names])
        import pyarrow.csv as pcsv
        return pcsv.CSVWriter(str(self.temp[table]), _decoded(schema.empty_table()).schema)

    # --8<-- [start:commit]
    def commit(self, meta: dict[str, str]) -> None:
        """Every file complete first (tables closed, metadata written); then, all at
        once: the old metadata.json and every table file this run does not write (an
        older run's, which would sit beside the new metadata) removed, the tables renamed
        into place, metadata.json last. metadata.json is there only beside a whole set."""
        self.finish()
        for table, w in self.writers.items():
            if self.fmt == "parquet":
                w.add_key_value_metadata(meta | {"twinmatch.table": table,
                                                 "twinmatch.rows": str(self.rows[table])})
            w.close()
        self.writers.clear()
        self.meta_temp.write_text(json.dumps(meta | {"rows": json.dumps(self.rows)},
                                             indent=1) + "\n")
        stale = [self.meta_path] + [self.out / f"{t}.{fmt}" for t in TABLES
                                    for fmt in ("parquet", "csv")]
        self.outputs.commit(remove=[p for p in stale if p not in self.final.values()],
                            last=self.meta_path)
    # --8<-- [end:commit]

    def abort(self) -> None:
        self.stop()
        for w in self.writers.values():
            try:
                w.close()
            except Exception:  # noqa: BLE001 - cleaning up after the real error
                pass
        self.outputs.abort()


def _decoded(t: pa.Table) -> pa.Table:
    """Dictionary columns as plain strings (the CSV writer wants those)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    cols = [pc.cast(c, pa.string()) if pa.types.is_dictionary(c.type) else c
            for c in t.columns]
    return pa.Table.from_arrays(cols, names=t.column_names)


# --8<-- [start:metadata]
def metadata(source: Path, sha256: str, day: dt.date | None, tables: Sequence[str],
             symbols: tuple[bytes, ...] | None, depth: int, impl: str,
             counters: dict[str, int]) -> dict[str, str]:
    """What a later reader needs to trust a file: which bytes it came from (name and
    SHA-256), which day (the UTC column's offset), the price scale, what was asked for,
    which tool made it, and what the replay met (unknown references, crossed books, live
    orders at the end: a file from a day that started mid-way shows it here)."""
    return {
        "twinmatch.source": source.name,
        "twinmatch.source_sha256": sha256,
        "twinmatch.session_date": "" if day is None else day.isoformat(),
        "twinmatch.price_scale": str(PRICE_SCALE),
        "twinmatch.tables": ",".join(tables),
        "twinmatch.symbols": "" if symbols is None else ",".join(
            s.decode("ascii").rstrip() for s in symbols),
        "twinmatch.depth": str(depth),
        "twinmatch.tool": TOOL,
        "twinmatch.impl": impl,
        "twinmatch.counters": json.dumps(counters, sort_keys=True),
    }
# --8<-- [end:metadata]


def session_day(source: Path, date: str | None) -> dt.date | None:
    if date:
        try:
            return dt.date.fromisoformat(date)
        except ValueError:
            raise ValueError(f"--date must be YYYY-MM-DD, got {date!r}") from None
    return date_from_name(source.name)


def convert(source: Path, out: Path, *, impl: str = "optimized",
            tables: Sequence[str] | str = ("bbo", "trades"),
            symbols: Sequence[str] | str | None = None, depth: int | None = None,
            fmt: str = "parquet", date: str | None = None, chunk: int | None = None,
            progress: bool = False) -> dict[str, Any]:
    """Write the tables of one feed into directory ``out`` (``<table>.<fmt>`` each, plus
    metadata.json); returns the metadata and row counts. ``chunk``: feed bytes per batch
    (default: batch_bytes of the file's size)."""
    names = check_tables(tables)
    wanted = check_symbols(symbols)
    depth = check_depth(DEFAULT_DEPTH if depth is None else depth)
    if fmt not in ("parquet", "csv"):
        raise ValueError(f"format must be 'parquet' or 'csv', got {fmt!r}")
    day = session_day(source, date)
    if not source.is_file():
        raise FileNotFoundError(f"no such file: {source}")
    chunk = batch_bytes(source.stat().st_size) if chunk is None else check_chunk_size(chunk)
    out.mkdir(parents=True, exist_ok=True)
    if "depth" in names and depth > DEFAULT_DEPTH:  # a depth row grows with N: so a batch
        chunk = max(chunk * DEFAULT_DEPTH // depth, 1 << 16)  # holds about as many bytes
    offset = None if day is None else session_offset_ns(day)
    writers: Writers | None = None
    try:
        writers = Writers(out, names, fmt, depth, offset, source)
        counters, sha = stream_tables(source, impl, names, symbols, depth, chunk,
                                      writers.write, progress)
        writers.finish()
        if not writers.writers:  # an empty feed still gets its (empty) files
            writers.write_now({t: _empty(t, depth) for t in names})
        meta = metadata(source, sha, day, names, wanted, depth, impl, counters)
        writers.commit(meta)
    except BaseException:
        if writers is not None:
            writers.abort()
        raise
    assert writers is not None
    return {"metadata": meta, "rows": writers.rows,
            "removed": [p.name for p in writers.outputs.removed]}


def _empty(table: str, depth: int) -> dict[str, np.ndarray]:
    return {name: np.zeros(0, dtype=dtype) for name, dtype in columns(table, depth)}


# ------------------------------------------------------------------ command line

def feed_or_argument_error(command: str, exc: Exception, path: Path) -> int:
    """One line on stderr. A bad feed (ITCH, PCAP: the error names the byte offset) or a
    failed read or write (a full disk) is exit status 1, with the file named; a refused
    argument (a missing file, a bad option) is 2."""
    from contract.itch_errors import ItchError
    from naive.pcap import PcapError
    from optimized.pcap import PcapError as NativePcapError

    text = " ".join(str(exc).split()) or type(exc).__name__
    named = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)
    feed = isinstance(exc, ItchError | PcapError | NativePcapError) or (
        isinstance(exc, OSError) and not isinstance(exc, named))  # a read or write failed
    if feed and str(path) not in text:
        text = f"{path}: {text}"
    print(f"twinmatch {command}: error: {text}", file=sys.stderr)
    return 1 if feed else 2


def tables_cmd(args: argparse.Namespace) -> int:
    try:
        result = convert(args.file, args.out, impl=args.impl, tables=args.tables,
                         symbols=args.symbols, depth=args.depth, fmt=args.format,
                         date=args.date, progress=sys.stderr.isatty())
    except (ValueError, OSError) as exc:
        return feed_or_argument_error("tables", exc, args.file)
    for table, n in result["rows"].items():
        print(f"{table}: {n:,} rows -> {args.out / f'{table}.{args.format}'}")
    for name in result["removed"]:
        print(f"removed {args.out / name} (an earlier run's table, not written by this one)")
    return 0


# ------------------------------------------------------------------ LOBSTER

# --8<-- [start:lobster_text]
def lobster_time(ns: np.ndarray) -> np.ndarray:
    """ITCH nanoseconds as LOBSTER writes time: seconds after midnight, up to 9 decimals,
    trailing zeros dropped (34200.00426064 in the real sample is ...004260640 ns)."""
    whole = (ns // 1_000_000_000).astype(str)
    frac = np.char.rstrip(np.char.zfill((ns % 1_000_000_000).astype(str), 9), "0")
    dotted = np.char.add(np.char.add(whole, "."), frac)
    return np.where(np.char.str_len(frac) == 0, whole, dotted)
# --8<-- [end:lobster_text]


class LobsterFiles(Queued):
    """The message and orderbook CSV pair per symbol, LOBSTER's names, written under a
    temporary name (twinmatch/atomic.py) and renamed, every symbol's together, by
    commit(). A cross (Q) of more shares than LOBSTER's size field holds (2^32-1, the
    width its reader takes) makes no row; ``skipped`` counts such rows."""

    def __init__(self, out: Path, day: dt.date, levels: int, source: Path) -> None:
        self.out, self.day, self.levels = out, day, levels
        self.outputs = Outputs("lobster", [source])
        self.files: dict[str, tuple[IO[bytes], IO[bytes], Path, Path]] = {}
        self.rows: dict[str, int] = {}
        self.skipped = 0
        super().__init__()

    def names(self, symbol: str) -> tuple[Path, Path]:
        stem = f"{symbol}_{self.day.isoformat()}_34200000_57600000"
        return (self.out / f"{stem}_message_{self.levels}.csv",
                self.out / f"{stem}_orderbook_{self.levels}.csv")

    def _open(self, symbol: str) -> tuple[IO[bytes], IO[bytes], Path, Path]:
        if symbol not in self.files:
            msg, book = self.names(symbol)
            tmp_msg, tmp_book = self.outputs.add(msg), self.outputs.add(book)
            self.files[symbol] = (open(tmp_msg, "wb"), open(tmp_book, "wb"), tmp_msg, tmp_book)
            self.rows[symbol] = 0
        return self.files[symbol]

    def write_now(self, batches: dict[str, dict[str, np.ndarray]]) -> None:
        import pyarrow as pa
        import pyarrow.csv as pcsv
        batch = batches["lobster"]
        fits = batch["size"] <= U32_MAX  # LOBSTER's size, as its reader reads it
        if not fits.all():
            self.skipped += int((~fits).sum())
            batch = {name: values[fits] for name, values in batch.items()}
        if len(batch["seq"]) == 0:
            return
        plain = pcsv.WriteOptions(include_header=False, quoting_style="none")
        for raw in np.unique(batch["symbol"]):
            pick = batch["symbol"] == raw
            msg_f, book_f, _, _ = self._open(symbol_text(bytes(raw)))
            msg = pa.table({
                "time": pa.array(lobster_time(batch["timestamp"][pick])),
                "type": batch["type"][pick], "order_id": batch["order_id"][pick],
                "size": batch["size"][pick], "price": batch["price"][pick],
                "direction": batch["direction"][pick]})
            pcsv.write_csv(msg, msg_f, plain)
            cols = {name: batch[name][pick] for name, _ in lobster_columns(self.levels)
                    if name.startswith(("ask_", "bid_"))}
            pcsv.write_csv(pa.table(cols), book_f, plain)
            self.rows[symbol_text(bytes(raw))] += int(pick.sum())

    def commit(self, symbols: Sequence[str]) -> None:
        self.finish()
        for symbol in symbols:  # a symbol with no row in the session still gets its pair
            self._open(symbol)
        for msg_f, book_f, _, _ in self.files.values():
            msg_f.close()
            book_f.close()
        self.outputs.commit()  # every pair complete before the first is renamed

    def abort(self) -> None:
        self.stop()
        for msg_f, book_f, _, _ in self.files.values():
            for f in (msg_f, book_f):
                try:
                    f.close()
                except OSError:  # cleaning up after the real error
                    pass
        self.outputs.abort()


def lobster(source: Path, out: Path, *, symbols: Sequence[str] | str, levels: int = 10,
            impl: str = "optimized", date: str | None = None,
            chunk: int | None = None, progress: bool = False) -> dict[str, Any]:
    """Write LOBSTER's message and orderbook files for each of ``symbols`` into ``out``
    (``chunk``: as for convert)."""
    wanted = check_symbols(symbols)
    if wanted is None:
        raise ValueError("lobster needs --symbols (LOBSTER files hold one symbol each)")
    levels = check_depth(levels)
    day = session_day(source, date)
    if day is None:
        raise ValueError("LOBSTER file names carry the day: give --date YYYY-MM-DD "
                         "(the file name does not say it)")
    if not source.is_file():
        raise FileNotFoundError(f"no such file: {source}")
    chunk = batch_bytes(source.stat().st_size) if chunk is None else check_chunk_size(chunk)
    out.mkdir(parents=True, exist_ok=True)
    remove_stale_parts(out)  # what a killed run left (its lock is free)
    names = [s.decode("ascii").rstrip() for s in wanted]
    files: LobsterFiles | None = None
    try:
        files = LobsterFiles(out, day, levels, source)
        for name in names:  # refused before anything is read: an output that is the input
            for path in files.names(name):
                files.outputs.check(path)
        counters, sha = stream_tables(source, impl, ("symbols",), symbols, 1, chunk,
                                      files.write, progress, lobster=levels)
        files.commit(names)
    except BaseException:
        if files is not None:
            files.abort()
        raise
    assert files is not None
    return {"rows": files.rows, "counters": counters, "source_sha256": sha,
            "skipped_rows": files.skipped,
            "files": [str(p) for s in names for p in files.names(s)]}


def lobster_cmd(args: argparse.Namespace) -> int:
    try:
        result = lobster(args.file, args.out, symbols=args.symbols, levels=args.levels,
                         impl=args.impl, date=args.date, progress=sys.stderr.isatty())
    except (ValueError, OSError) as exc:
        return feed_or_argument_error("lobster", exc, args.file)
    for path in result["files"]:
        print(path)
    if result["skipped_rows"]:
        print(f"twinmatch lobster: {result['skipped_rows']:,} cross rows (Q) skipped: more "
              f"shares than LOBSTER's size field holds (at most {U32_MAX:,})", file=sys.stderr)
    return 0
