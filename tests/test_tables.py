"""Research tables (chapter 14): both twins identical, table by table; the rules; the files.

Small generated days only: the naive twin spends a few hundred microseconds a message.
"""

from __future__ import annotations

import gzip
import io
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import naive.tables
import optimized.tables
from contract.itch_errors import ItchError
from contract.tables import (
    LOBSTER_EMPTY_ASK,
    LOBSTER_EMPTY_BID,
    TABLES,
    columns,
    date_from_name,
    lobster_columns,
    session_offset_ns,
)
from naive.itch import (
    AddOrder,
    OperationalHalt,
    OrderCancel,
    OrderDelete,
    OrderExecuted,
    OrderExecutedWithPrice,
    OrderReplace,
    Record,
    StockDirectory,
    StockTradingAction,
    frame,
)
from naive.orders import read_lobster
from optimized.orders import read_lobster as read_lobster_native
from tests.conftest import real_file
from twinmatch.cli import main
from twinmatch.gen import market_day_bytes
from twinmatch.tables_cli import (
    MIN_CHUNK,
    TABLE_CHUNK,
    batch_bytes,
    convert,
    lobster,
    lobster_time,
    stream_tables,
)

TWINS: dict[str, Any] = {"naive": naive.tables.TableBuilder,
                         "optimized": optimized.tables.TableBuilder}
Batches = dict[str, dict[str, np.ndarray]]


@pytest.fixture(scope="module")
def day() -> bytes:
    raw, _ = market_day_bytes(3000, 12, 7)
    return raw


def build(impl: str, data: bytes, pieces: Iterator[int] | None = None,
          stages: int | None = None, **kw: Any) -> Batches:
    """Every table of ``data`` from one twin, fed whole or in pieces of the given sizes
    (``stages``: the optimized builder's look-ahead stages, forced)."""
    b = TWINS[impl](**({"tables": TABLES} | kw))
    if stages is not None:
        b.set_lookahead_stages(stages)
    parts: list[Batches] = []
    carry, at = b"", 0
    for size in pieces or iter([len(data)]):
        buf = carry + data[at:at + size]
        at += size
        used = b.feed(buf)
        carry = buf[used:]
        if used or at >= len(data):
            parts.append(b.take())
        if at >= len(data):
            break
    assert carry == b""
    return {t: {c: np.concatenate([p[t][c] for p in parts]) for c in parts[0][t]}
            for t in parts[0]}


def assert_same(a: Batches, b: Batches) -> None:
    assert a.keys() == b.keys()
    for table in a:
        assert list(a[table]) == list(b[table]), table
        for col in a[table]:
            x, y = a[table][col], b[table][col]
            assert x.dtype == y.dtype, (table, col)
            assert np.array_equal(x, y), (table, col)


# ------------------------------------------------------------------ twins

@pytest.mark.parametrize("seed", [1, 2])
def test_twins_identical_on_generated_days(seed: int) -> None:
    raw, _ = market_day_bytes(2500, 10, seed)
    a = build("naive", raw, lobster=5, depth=3)
    b = build("optimized", raw, lobster=5, depth=3)
    assert_same(a, b)
    for table in TABLES:  # the contract's columns, in order, with its dtypes
        assert [(n, a[table][n].dtype) for n in a[table]] == columns(table, 3)
    assert [(n, a["lobster"][n].dtype) for n in a["lobster"]] == lobster_columns(5)
    assert len(a["bbo"]["seq"]) and len(a["trades"]["seq"]) and len(a["depth"]["seq"])


def test_twins_identical_with_a_symbol_filter(day: bytes) -> None:
    names = {bytes(s).rstrip() for s in build("optimized", day)["symbols"]["symbol"]}
    pick = sorted(names)[:2]
    a = build("naive", day, symbols=[p.decode() for p in pick])
    b = build("optimized", day, symbols=[p.decode() for p in pick])
    assert_same(a, b)
    for table in a:
        assert {bytes(s).rstrip() for s in a[table]["symbol"]} <= set(pick)
    assert len(a["bbo"]["seq"]) > 0


def test_chunk_boundaries_at_every_byte(day: bytes) -> None:
    """Fed one byte at a time, every record is cut at every one of its byte positions."""
    small = day[:4000]
    cut = small[:_whole(small)]
    whole = build("optimized", cut)
    assert_same(build("optimized", cut, iter(lambda: 1, 0)), whole)
    assert_same(build("naive", cut, iter(lambda: 1, 0)), whole)
    assert_same(build("naive", cut, iter([7, 13, 1, 300, 2] * 1000)), whole)


def test_lookahead_stages_change_nothing(day: bytes) -> None:
    """The builder's prefetch hints (the market's three stages and its own) are hints:
    every number of stages gives the naive twin's rows, fed whole or cut at every byte."""
    raw, _ = market_day_bytes(2500, 10, 3)
    want = build("naive", raw, lobster=5, depth=3)
    cut = day[:_whole(day[:4000])]
    small = build("naive", cut)
    for stages in (0, 1, 2, 3):
        assert_same(build("optimized", raw, stages=stages, lobster=5, depth=3), want)
        assert_same(build("optimized", cut, iter(lambda: 1, 0), stages=stages), small)
    with pytest.raises(ValueError, match="stages"):
        optimized.tables.TableBuilder().set_lookahead_stages(4)


def _whole(data: bytes) -> int:
    """The length of the whole records at the start of ``data``."""
    off = 0
    while off + 2 <= len(data) and off + 2 + int.from_bytes(data[off:off + 2], "big") <= len(data):
        off += 2 + int.from_bytes(data[off:off + 2], "big")
    return off


def _collect(path: Path, impl: str, **kw: Any) -> tuple[Batches, dict[str, int]]:
    parts: list[Batches] = []
    counters, _ = stream_tables(path, impl, TABLES, None, 5, on_batch=parts.append, **kw)
    merged = {t: {c: np.concatenate([p[t][c] for p in parts]) for c in parts[0][t]}
              for t in parts[0]} if parts else {}
    return merged, counters


@pytest.mark.parametrize("name", ["stock-directory-sample.itch", "moldudp64-multiple-packets.pcap",
                                  "moldudp64-add-order.pcap",
                                  "moldudp64-20230822-order-executed-sanitized.pcap"])
def test_twins_identical_on_real_captures(name: str) -> None:
    path = real_file(name)
    a, ca = _collect(path, "naive")
    b, cb = _collect(path, "optimized")
    assert_same(a, b)
    assert ca == cb
    if name.endswith(".itch"):  # 993 R messages, 3 H
        assert len(a["symbols"]["seq"]) == 993 and len(a["halts"]["seq"]) == 3
        aapl = a["symbols"]["symbol"][a["symbols"]["locate"] == 13]
        assert bytes(aapl[0]) == b"AAPL    "
    if name == "moldudp64-multiple-packets.pcap":  # 1 D of an unknown order, 38 A/F
        assert ca["unknown_ref"] == 1
        assert len(a["messages"]["seq"]) == 38


# ------------------------------------------------------------------ the rules

def _replay_bbo(messages: dict[str, np.ndarray]) -> list[tuple[int, ...]]:
    """The documented rules: a level book per locate from the messages table alone."""
    orders: dict[int, tuple[int, int, int, int]] = {}  # ref -> locate, side, price, shares
    levels: dict[tuple[int, int], dict[int, list[int]]] = {}  # (locate, side) -> price -> [size, n]
    last: dict[int, tuple[int, ...]] = {}
    out = []

    def rest(ref: int, loc: int, side: int, price: int, shares: int) -> None:
        orders[ref] = (loc, side, price, shares)
        lv = levels.setdefault((loc, side), {}).setdefault(price, [0, 0])
        lv[0] += shares
        lv[1] += 1

    def take(ref: int, shares: int) -> None:
        loc, side, price, left = orders[ref]
        lv = levels[(loc, side)][price]
        lv[0] -= shares
        if left == shares:
            del orders[ref]
            lv[1] -= 1
            if lv[1] == 0:
                del levels[(loc, side)][price]
        else:
            orders[ref] = (loc, side, price, left - shares)

    cols = [messages[c].tolist() for c in ("timestamp", "seq", "locate", "symbol", "type",
                                           "order_ref", "new_order_ref", "side", "price",
                                           "shares", "prev_shares")]
    for ts, seq, loc, sym, kind, ref, new_ref, side_b, price, shares, prev in zip(
            *cols, strict=True):
        side = 0 if side_b == ord("B") else 1
        if chr(kind) in "AF":
            rest(ref, loc, side, price, shares)
        elif chr(kind) in "ECX":
            take(ref, shares)
        elif chr(kind) == "D":
            take(ref, prev)
        else:  # U
            take(ref, prev)
            rest(new_ref, loc, side, price, shares)
        top: list[int] = []
        for s, pick in ((0, max), (1, min)):
            book = levels.get((loc, s), {})
            best = pick(book) if book else 0
            top += [best, *book[best]] if book else [0, 0, 0]
        if last.get(loc, (0,) * 6) != tuple(top):
            last[loc] = tuple(top)
            out.append((ts, seq, loc, sym, *top))
    return out


def test_messages_replayed_reproduce_bbo(day: bytes) -> None:
    t = build("optimized", day)
    bbo = t["bbo"]
    names = ["timestamp", "seq", "locate", "symbol", "bid_price", "bid_size", "bid_orders",
             "ask_price", "ask_size", "ask_orders"]
    expected = list(zip(*(bbo[c].tolist() for c in names), strict=True))
    assert _replay_bbo(t["messages"]) == expected


def _feed(*records: Record) -> bytes:
    return b"".join(frame(r) for r in records)


AAPL = b"AAPL    "


def _directory(locate: int = 1, stock: bytes = AAPL) -> StockDirectory:
    return StockDirectory(locate, 0, 1, stock, b"Q", b"N", 100, b"N", b"C", b"Z ", b"P",
                          b"N", b"N", b"1", b"N", 0, b"N")


@pytest.mark.parametrize("impl", TWINS)
def test_halt_never_gates_the_book(impl: str) -> None:
    data = _feed(_directory(), StockTradingAction(1, 0, 2, AAPL, b"H", b" ", b"T1  "),
                 AddOrder(1, 0, 3, 10, b"B", 100, AAPL, 1000),
                 OperationalHalt(1, 0, 4, AAPL, b"Q", b"H"),
                 AddOrder(1, 0, 5, 11, b"S", 50, AAPL, 1001),
                 StockTradingAction(1, 0, 6, AAPL, b"T", b" ", b"    "),
                 OrderExecuted(1, 0, 7, 11, 20, 99))
    t = build(impl, data)
    assert t["bbo"]["bid_price"].tolist() == [1000, 1000, 1000]
    assert t["bbo"]["ask_size"].tolist() == [0, 50, 30]
    assert t["bbo"]["trading_state"].tolist() == [ord("H"), ord("H"), ord("T")]
    assert [chr(k) for k in t["halts"]["kind"]] == ["H", "h", "H"]
    assert t["halts"]["reason"].tolist() == [b"T1  ", b"", b"    "]  # raw bytes
    assert t["halts"]["market_code"].tolist() == [0, ord("Q"), 0]
    # E prints at the resting order's price
    assert t["trades"]["price"].tolist() == [1001]
    assert t["trades"]["side"].tolist() == [ord("S")]


@pytest.mark.parametrize("impl", TWINS)
def test_self_contained_messages_and_trades(impl: str) -> None:
    data = _feed(_directory(),
                 AddOrder(1, 0, 3, 10, b"B", 100, AAPL, 1000),
                 OrderExecutedWithPrice(1, 0, 4, 10, 10, 5, b"Y", 990),
                 OrderExecutedWithPrice(1, 0, 5, 10, 10, 6, b"N", 980),
                 OrderCancel(1, 0, 6, 10, 30),
                 OrderReplace(1, 0, 7, 10, 12, 40, 1005),
                 OrderDelete(1, 0, 8, 12))
    t = build(impl, data, lobster=2)
    m = t["messages"]
    assert [chr(k) for k in m["type"]] == list("ACCXUD")
    assert m["side"].tolist() == [ord("B")] * 6
    assert m["price"].tolist() == [1000, 1000, 1000, 1000, 1005, 1005]
    assert m["prev_shares"].tolist() == [0, 100, 90, 80, 50, 40]
    assert m["exec_price"].tolist() == [0, 990, 980, 0, 0, 0]
    # printable C only, at its own price
    assert t["trades"]["price"].tolist() == [990]
    # a replace in LOBSTER: a deletion (book without the new order), then a submission
    lob = t["lobster"]
    assert lob["type"].tolist() == []  # before 09:30: outside LOBSTER's session
    late = _feed(*(r._replace(timestamp=r.timestamp + 34_200 * 10**9) for r in (
        _directory(), AddOrder(1, 0, 3, 10, b"B", 100, AAPL, 1000),
        OrderReplace(1, 0, 7, 10, 12, 40, 1005))))
    lob = build(impl, late, lobster=2)["lobster"]
    assert lob["type"].tolist() == [1, 3, 1]
    assert lob["order_id"].tolist() == [10, 10, 12]
    assert lob["size"].tolist() == [100, 100, 40]
    assert lob["bid_price_1"].tolist() == [1000, LOBSTER_EMPTY_BID, 1005]
    assert lob["ask_price_1"].tolist() == [LOBSTER_EMPTY_ASK] * 3
    assert lob["ask_size_1"].tolist() == [0, 0, 0]


@pytest.mark.parametrize("impl", TWINS)
def test_unknown_refs_are_counted_and_make_no_row(impl: str) -> None:
    data = _feed(_directory(), OrderExecuted(1, 0, 3, 77, 5, 1), OrderDelete(1, 0, 4, 78),
                 AddOrder(1, 0, 5, 10, b"B", 100, AAPL, 1000),
                 AddOrder(1, 0, 6, 10, b"S", 100, AAPL, 1002),  # duplicate reference
                 OrderCancel(1, 0, 7, 10, 500))                  # over-cancel
    b = TWINS[impl](tables=TABLES)
    b.feed(data)
    t = b.take()
    assert len(t["messages"]["seq"]) == 1 and len(t["trades"]["seq"]) == 0
    c = b.counters()
    assert (c["unknown_ref"], c["duplicate_ref"], c["over_cancel"]) == (2, 1, 1)
    assert c["messages"] == 6 and c["live_orders"] == 1


@pytest.mark.parametrize("impl", TWINS)
def test_best_order_counts_through_replaces_at_the_top(impl: str) -> None:
    """The C++ twin reuses a side's order count while its best price and size are
    unchanged; a replace at the top that keeps price and shares, one that moves an order
    to the top, one out of it, and a message naming another locate, against the naive
    twin (the rule) and by hand."""
    data = _feed(_directory(), _directory(2, b"MSFT    "),
                 AddOrder(1, 0, 3, 10, b"B", 100, AAPL, 1000),
                 AddOrder(1, 0, 4, 11, b"B", 100, AAPL, 1000),
                 OrderReplace(1, 0, 5, 10, 12, 100, 1000),   # same price and shares
                 OrderReplace(1, 0, 6, 11, 13, 60, 1000),    # same price, fewer shares
                 AddOrder(1, 0, 7, 14, b"B", 40, AAPL, 990),
                 OrderReplace(1, 0, 8, 14, 15, 40, 1000),    # joins the top: 3 orders
                 OrderReplace(2, 0, 9, 15, 16, 40, 990),     # names locate 2: leaves it
                 OrderDelete(1, 0, 10, 12))
    t = build(impl, data)
    assert_same(t, build("naive", data))
    bbo = t["bbo"]
    assert bbo["bid_size"].tolist() == [100, 200, 160, 200, 160, 60]
    assert bbo["bid_orders"].tolist() == [1, 2, 2, 3, 2, 1]


# ------------------------------------------------------------------ hostile input

@pytest.mark.parametrize("impl", TWINS)
@pytest.mark.parametrize("damage", ["zero_length", "bad_length"])
def test_bad_record_names_its_offset(impl: str, damage: str, day: bytes) -> None:
    at = _whole(day[:1000])
    bad = b"\x00\x00" if damage == "zero_length" else b"\x00\x05A\x00\x00\x00\x00"
    b = TWINS[impl](tables=TABLES)
    with pytest.raises(ItchError) as err:
        b.feed(day[:at] + bad + day[at:])
    assert err.value.offset == at and err.value.reason == damage
    assert len(b.take()["symbols"]["seq"]) > 0  # what came before is kept


@pytest.mark.parametrize("value", ["TOOLONGSYM", "A B", "", ",", "AAPL,é"])
def test_bad_symbols_refused_alike(value: str) -> None:
    errors = []
    for twin in TWINS.values():
        with pytest.raises(ValueError) as err:
            twin(symbols=value)
        errors.append(str(err.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("depth", [0, -1, 51, True, 2.5])
def test_bad_depth_refused_alike(depth: object) -> None:
    errors = []
    for twin in TWINS.values():
        with pytest.raises((ValueError, TypeError)) as err:
            twin(depth=depth)
        errors.append((type(err.value), str(err.value)))
    assert errors[0] == errors[1]


def test_tables_dates() -> None:
    assert str(date_from_name("01302019.NASDAQ_ITCH50.gz")) == "2019-01-30"
    assert str(date_from_name("S20190130-v50.pcap")) == "2019-01-30"
    assert date_from_name("day.itch") is None
    # EST in January (UTC-5), EDT in June (UTC-4)
    import datetime as dt
    assert session_offset_ns(dt.date(2019, 1, 30)) % 86_400_000_000_000 == 5 * 3600 * 10**9
    assert session_offset_ns(dt.date(2012, 6, 21)) % 86_400_000_000_000 == 4 * 3600 * 10**9


# ------------------------------------------------------------------ files

def test_batch_bytes_follow_the_file() -> None:
    """A 32nd of the file, within MIN_CHUNK..TABLE_CHUNK (an empty file still gets a size)."""
    assert batch_bytes(0) == MIN_CHUNK
    assert batch_bytes(30 << 20) == MIN_CHUNK
    assert batch_bytes(32 * (8 << 20)) == 8 << 20
    assert batch_bytes(600 << 20) == TABLE_CHUNK
    assert batch_bytes(1 << 40) == TABLE_CHUNK


def test_parquet_file(tmp_path: Path, day: bytes) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    src = tmp_path / "01302019.NASDAQ_ITCH50.gz"
    src.write_bytes(gzip.compress(day, 1))
    out = tmp_path / "out"
    result = convert(src, out, tables="bbo,trades,halts", chunk=16_384)
    assert sorted(p.name for p in out.iterdir()) == ["bbo.parquet", "halts.parquet",
                                                     "metadata.json", "trades.parquet"]
    f = pq.ParquetFile(out / "bbo.parquet")
    assert f.metadata.num_row_groups > 1  # one row group per batch
    meta = {k.decode(): v.decode() for k, v in f.metadata.metadata.items()}
    assert meta["twinmatch.session_date"] == "2019-01-30"
    assert meta["twinmatch.price_scale"] == "10000"
    import hashlib
    assert meta["twinmatch.source_sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert json.loads(meta["twinmatch.counters"])["messages"] == 3000
    t = f.read()
    assert str(t.schema.field("bid_size").type) == "uint64"
    assert str(t.schema.field("bid_price").type) == "uint32"
    assert str(t.schema.field("session_time").type) == "timestamp[ns, tz=UTC]"
    ref = build("optimized", day)["bbo"]
    assert t.column("seq").to_pylist() == ref["seq"].tolist()
    assert t.column("bid_size").to_pylist() == ref["bid_size"].tolist()
    assert result["rows"]["bbo"] == len(ref["seq"])
    utc = t.column("session_time").cast("int64").to_numpy()
    session = date_from_name(src.name)
    assert session is not None
    assert (utc - ref["timestamp"].astype(np.int64) == session_offset_ns(session)).all()


@pytest.mark.parametrize("threaded", [False, True])
def test_raw_file_read_in_place_same_as_gzip(tmp_path: Path, day: bytes, threaded: bool,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The raw file's own reader (two buffers, the hash inline or on its thread) gives
    the rows and the SHA-256 of the shared readers' (the same day gzipped), at a chunk
    smaller than a record as well as a normal one; the clocks are stored as deltas and
    only the filter keys carry statistics."""
    pq = pytest.importorskip("pyarrow.parquet")
    import hashlib

    import twinmatch.tables_cli as tc
    monkeypatch.setattr(tc, "HASH_THREAD_FROM", 0 if threaded else 1 << 62)
    raw, gz = tmp_path / "day.itch", tmp_path / "day.itch.gz"
    raw.write_bytes(day)
    gz.write_bytes(gzip.compress(day, 1))
    want = build("optimized", day)
    assert_same(_collect(gz, "optimized", chunk=5_000)[0], want)
    for impl in ("naive", "optimized"):  # the harness feeds both twins the same way
        for chunk in (31, 5_000, 1 << 20):  # 31: most records cut by a chunk's end
            parts: list[Batches] = []
            _, sha = stream_tables(raw, impl, ("bbo",), None, 5, chunk=chunk,
                                   on_batch=parts.append)
            assert sha == hashlib.sha256(day).hexdigest()
            for name, values in want["bbo"].items():
                assert np.array_equal(np.concatenate([b["bbo"][name] for b in parts]), values)
    assert_same(_collect(raw, "optimized", chunk=5_000)[0], want)
    convert(raw, tmp_path / "out", tables="bbo", date="2019-01-30", chunk=16_384)
    col = pq.ParquetFile(tmp_path / "out" / "bbo.parquet").metadata.row_group(0).column
    names = pq.ParquetFile(tmp_path / "out" / "bbo.parquet").schema_arrow.names
    chunks = {names[i]: col(i) for i in range(len(names))}
    for name in ("timestamp", "session_time", "seq"):
        assert "DELTA_BINARY_PACKED" in chunks[name].encodings, name
    assert {n for n, c in chunks.items() if c.is_stats_set} == set(tc.FILTER_KEYS)
    # Every field is required: no row lacks a value, so no definition levels are written.
    assert not any(f.nullable for f in pq.read_schema(tmp_path / "out" / "bbo.parquet"))


@pytest.mark.parametrize("chunk", [0, -1, 2**40, 1.5, True])
def test_bad_chunk_is_refused_before_anything(tmp_path: Path, day: bytes, chunk: Any) -> None:
    """A batch size of 0 would read nothing and write an empty day without a word: every
    entry point refuses a chunk outside 1..2^30 bytes (the readers' rule), before it makes
    the output directory."""
    src = tmp_path / "day.itch"
    src.write_bytes(day)
    for call in (lambda: convert(src, tmp_path / "t", tables="bbo", chunk=chunk),
                 lambda: lobster(src, tmp_path / "l", symbols="AAPL", date="2019-01-30",
                                 chunk=chunk),
                 lambda: stream_tables(src, "naive", ("bbo",), None, 5, chunk=chunk),
                 lambda: stream_tables(src, "optimized", ("bbo",), None, 5, chunk=chunk)):
        with pytest.raises((ValueError, TypeError), match="^chunk_size must be"):
            call()
    assert not (tmp_path / "t").exists() and not (tmp_path / "l").exists()


def test_failed_run_leaves_no_file(tmp_path: Path, day: bytes) -> None:
    src = tmp_path / "cut.itch"
    src.write_bytes(day[:-3])  # the last record cut short
    out = tmp_path / "out"
    with pytest.raises(ItchError, match="truncated_body"):
        convert(src, out, tables="bbo,trades", chunk=8192)
    assert list(out.iterdir()) == []
    assert main(["tables", str(src), str(out)]) == 1  # a bad feed (README: exit status)
    assert list(out.iterdir()) == []
    with pytest.raises(ItchError):
        lobster(src, out, symbols="AAPL", date="2019-01-30", chunk=8192)
    assert list(out.iterdir()) == []


def test_cli_csv_and_bad_arguments(tmp_path: Path, day: bytes,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "day.itch"
    src.write_bytes(day)
    out = tmp_path / "out"
    assert main(["tables", str(src), str(out), "--tables", "bbo,noii", "--format", "csv",
                 "--impl", "naive"]) == 0
    captured = capsys.readouterr()
    assert "bbo:" in captured.out and captured.err == ""  # no progress bar when piped
    header = (out / "bbo.csv").read_text().splitlines()[0]
    assert header.startswith('"timestamp","seq","locate","symbol","bid_price"')  # no date
    for bad in (["--depth", "0"], ["--symbols", "TOOLONGSYM"], ["--tables", "nope"],
                ["--date", "30/01/2019"]):
        assert main(["tables", str(src), str(tmp_path / "x"), *bad]) == 2
        assert "twinmatch tables:" in capsys.readouterr().err
    assert main(["lobster", str(src), str(tmp_path / "y"), "--symbols", "AAPL"]) == 2
    assert "--date" in capsys.readouterr().err


# ------------------------------------------------------------------ LOBSTER

def test_lobster_time_text_as_the_real_sample() -> None:
    path = real_file("lobster-AAPL-2012-06-21-message-10.csv")
    text = [line.split(",")[0] for line in path.read_text().splitlines()]
    ns = read_lobster(path)["time"]
    assert lobster_time(ns.astype(np.int64)).tolist() == text


def test_lobster_real_sample_layout() -> None:
    """The orderbook file: per level ask price, ask size, bid price, bid size."""
    book = np.loadtxt(real_file("lobster-AAPL-2012-06-21-orderbook-10.csv"), delimiter=",",
                      dtype=np.int64)
    assert book.shape[1] == 40
    asks, bids = book[:, 0::4], book[:, 2::4]
    assert (asks[:, 0] > bids[:, 0]).all()
    assert (np.diff(asks, axis=1) > 0).all() and (np.diff(bids, axis=1) < 0).all()


def _replay_lobster(messages: np.ndarray, levels: int) -> list[list[int]]:
    """LOBSTER's rules from an empty book: 1 adds, 2 and 4 take shares, 3 deletes."""
    orders: dict[int, tuple[int, int, int]] = {}
    rows = []
    for m in messages.tolist():
        _, ref, price, size, kind, direction = m
        if kind == 1:
            orders[ref] = (direction, price, size)
        elif kind in (2, 3, 4):
            d, p, left = orders[ref]
            orders[ref] = (d, p, left - size)
            if left == size:
                del orders[ref]
        row: list[int] = []
        sides: dict[int, dict[int, int]] = {1: {}, -1: {}}
        for d, p, s in orders.values():
            sides[d][p] = sides[d].get(p, 0) + s
        asks = sorted(sides[-1].items())
        bids = sorted(sides[1].items(), reverse=True)
        for k in range(levels):
            row += list(asks[k]) if k < len(asks) else [LOBSTER_EMPTY_ASK, 0]
            row += list(bids[k]) if k < len(bids) else [LOBSTER_EMPTY_BID, 0]
        rows.append(row)
    return rows


@pytest.mark.parametrize("impl", TWINS)
def test_lobster_round_trip(tmp_path: Path, impl: str) -> None:
    raw, _ = market_day_bytes(2500, 4, 11)
    src = tmp_path / "day.itch"
    src.write_bytes(raw)
    names = sorted({bytes(s).decode().rstrip()
                    for s in build("optimized", raw)["symbols"]["symbol"]})[:2]
    result = lobster(src, tmp_path / "lob", symbols=",".join(names), levels=3, impl=impl,
                     date="2019-01-30")
    assert [Path(p).name for p in result["files"]][:2] == [
        f"{names[0]}_2019-01-30_34200000_57600000_message_3.csv",
        f"{names[0]}_2019-01-30_34200000_57600000_orderbook_3.csv"]
    msg_path, book_path = result["files"][:2]
    messages = read_lobster(msg_path)
    assert np.array_equal(messages, read_lobster_native(msg_path))  # the reader reads it back
    book = np.loadtxt(book_path, delimiter=",", dtype=np.int64, ndmin=2)
    assert len(messages) == len(book) == result["rows"][names[0]] > 0
    # the generated day rests nothing before 09:30, so the messages alone rebuild the book
    assert _replay_lobster(messages, 3) == book.tolist()


def test_lobster_twins_write_the_same_files(tmp_path: Path, day: bytes) -> None:
    src = tmp_path / "day.itch"
    src.write_bytes(day)
    sym = bytes(build("optimized", day)["symbols"]["symbol"][0]).decode().rstrip()
    files: dict[str, list[bytes]] = {}
    for impl in TWINS:
        r = lobster(src, tmp_path / impl, symbols=sym, levels=10, impl=impl, date="2019-01-30")
        files[impl] = [Path(p).read_bytes() for p in r["files"]]
    assert files["naive"] == files["optimized"]




def test_cli_reads_a_pcap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = real_file("moldudp64-multiple-packets.pcap")
    out = tmp_path / "out"
    assert main(["tables", str(src), str(out), "--tables", "messages,bbo", "--format", "csv",
                 "--date", "2023-08-22"]) == 0
    lines = (out / "messages.csv").read_text().splitlines()
    assert len(lines) == 1 + 38  # the 38 A/F (the D names an order added before the capture)
    meta = json.loads((out / "metadata.json").read_text())
    assert json.loads(meta["twinmatch.counters"])["unknown_ref"] == 1
    assert meta["twinmatch.session_date"] == "2023-08-22"
    assert "2023-08-22 13:30:38" in lines[1]  # 09:30:38 New York (EDT) in UTC


def _outcome(impl: str, data: bytes, stages: int | None = None) -> tuple[Any, ...]:
    b = TWINS[impl](tables=TABLES, lobster=3)
    if stages is not None:
        b.set_lookahead_stages(stages)
    try:
        used = b.feed(data)
        error: tuple[Any, ...] = ("ok", used)
    except ItchError as exc:
        error = (exc.reason, exc.offset, str(exc))
    return error, b.take(), b.counters()


def test_damaged_days_same_in_both_twins(day: bytes) -> None:
    """Random byte flips (types, lengths, references, sides, prices): the same rows, the
    same counters and the same error from both twins (the optimized one also with every
    look-ahead stage on), and never a crash."""
    import random
    rng = random.Random(18)
    base = bytearray(day[:6000])
    for _ in range(60):
        data = bytearray(base)
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        a = _outcome("naive", bytes(data))
        for b in (_outcome("optimized", bytes(data)), _outcome("optimized", bytes(data), 3)):
            assert a[0] == b[0] and a[2] == b[2]
            assert_same(a[1], b[1])


def test_symbol_column_by_locate_equals_the_general_coding() -> None:
    """The writer codes the symbol column by locate (no sort of strings); a batch where a
    locate is renamed, or two locates share a name (hostile files), takes the general
    way. Either way the column reads back as the same strings."""
    from twinmatch.tables_cli import _symbols, _text

    names = np.array([b"AAPL    ", b"MSFT    ", b"AAPL    ", b"ZVZZT   "], dtype="S8")
    cases = {
        "plain": (names, np.array([1, 2, 1, 7], dtype=np.uint16)),
        "renamed": (names, np.array([1, 2, 2, 7], dtype=np.uint16)),
        "shared": (names, np.array([1, 2, 3, 7], dtype=np.uint16)),
        "empty": (names[:0], np.array([], dtype=np.uint16)),
    }
    for case, (values, locates) in cases.items():
        got = _symbols(values, locates).to_pylist()
        assert got == _text(values).to_pylist(), case
    # One cache for a whole file: a locate renamed between batches is named again.
    from twinmatch.tables_cli import SymbolNames
    cache = SymbolNames()
    for case in ("plain", "renamed", "plain", "shared", "empty", "plain"):
        values, locates = cases[case]
        got = _symbols(values, locates, cache).to_pylist()
        assert got == _text(values).to_pylist(), case
    later = np.array([b"MSFT    ", b"AAPL    "], dtype="S8")  # locates 1 and 2 swap names
    got = _symbols(later, np.array([1, 2], dtype=np.uint16), cache).to_pylist()
    assert got == ["MSFT", "AAPL"]


# ------------------------------------------------------------------ output files (issue 29)

def _day_file(tmp_path: Path, day: bytes, name: str = "day.itch") -> Path:
    src = tmp_path / name
    src.write_bytes(day)
    return src


def test_tables_and_lobster_refuse_their_input_as_output(
        tmp_path: Path, day: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    """A feed that sits where an output goes (out/bbo.csv) was replaced by the table."""
    out = tmp_path / "out"
    out.mkdir()
    src = _day_file(out, day, "bbo.csv")
    assert main(["tables", str(src), str(out), "--tables", "bbo", "--format", "csv"]) == 2
    assert "is an input of this run" in capsys.readouterr().err
    lob = _day_file(out, day, "AAPL_2019-01-30_34200000_57600000_message_3.csv")
    assert main(["lobster", str(lob), str(out), "--symbols", "AAPL", "--levels", "3",
                 "--date", "2019-01-30"]) == 2
    assert "is an input of this run" in capsys.readouterr().err
    assert src.read_bytes() == lob.read_bytes() == day
    assert sorted(p.name for p in out.iterdir()) == sorted([src.name, lob.name])


def test_tables_metadata_failure_leaves_nothing(tmp_path: Path, day: bytes,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """metadata.json was written after the tables were renamed into place: a failure
    there left tables without their metadata. Now nothing is renamed until all is written."""
    src = _day_file(tmp_path, day)
    out = tmp_path / "out"

    def full(self: Path, *args: Any, **kw: Any) -> int:
        raise OSError(28, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError, match="No space"):
        convert(src, out, tables="bbo,trades", chunk=8192)
    assert list(out.iterdir()) == []


def test_lobster_commits_every_symbol_or_none(tmp_path: Path, day: bytes,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """lobster renamed symbol by symbol: a failure closing the second symbol's files
    left the first committed. Now every pair is complete before the first is renamed."""
    import builtins

    import twinmatch.tables_cli as tc

    src = _day_file(tmp_path, day)
    names = sorted({bytes(s).decode().rstrip()
                    for s in build("optimized", day)["symbols"]["symbol"]})[:2]
    opened: list[Any] = []

    class Failing(io.BufferedWriter):
        """A file whose first close fails, as a flush to a full disk does."""

        def close(self) -> None:
            failing = not self.closed and self is opened[2]  # the 2nd symbol's messages
            super().close()
            if failing:
                raise OSError(28, "No space left on device")

    def fake_open(path: Path, mode: str = "r", *args: Any, **kw: Any) -> Any:
        if mode != "wb":
            return builtins.open(path, mode, *args, **kw)
        opened.append(Failing(io.FileIO(path, "wb")))
        return opened[-1]

    monkeypatch.setattr(tc, "open", fake_open, raising=False)
    out = tmp_path / "lob"
    with pytest.raises(OSError, match="No space"):
        lobster(src, out, symbols=",".join(names), levels=2, date="2019-01-30")
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("command", ["tables", "lobster"])
def test_tables_on_a_full_disk(command: str, tmp_path: Path, day: bytes,
                               capsys: pytest.CaptureFixture[str]) -> None:
    from tests.fs_faults import full_disk, listing

    src = _day_file(tmp_path, market_day_bytes(40_000, 3, 5)[0])
    with full_disk(tmp_path / "disk", "32k") as disk:
        extra = (["--format", "csv", "--tables", "messages,bbo,trades"] if command == "tables"
                 else ["--symbols", ",".join(_names(src)), "--date", "2019-01-30"])
        assert main([command, str(src), str(disk), *extra]) == 1  # an I/O error
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "No space left on device" in err[0], err
        assert listing(disk) == []


def _names(src: Path) -> list[str]:
    return sorted({bytes(s).decode().rstrip()
                   for s in build("optimized", src.read_bytes())["symbols"]["symbol"]})


def test_rerun_with_fewer_tables_removes_the_old_ones(tmp_path: Path, day: bytes,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A second run writing fewer tables left the first run's beside the new metadata."""
    src = _day_file(tmp_path, day)
    out = tmp_path / "out"
    assert main(["tables", str(src), str(out), "--tables", "bbo,trades,messages",
                 "--format", "csv"]) == 0
    assert main(["tables", str(src), str(out), "--tables", "bbo"]) == 0
    assert "removed" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["bbo.parquet", "metadata.json"]
    feed = _day_file(out, day, "trades.csv")  # an input is never removed, whatever its name
    assert main(["tables", str(feed), str(out), "--tables", "bbo", "--format", "csv"]) == 0
    assert feed.read_bytes() == day
    assert sorted(p.name for p in out.iterdir()) == ["bbo.csv", "metadata.json", "trades.csv"]


def _slow_tables(src: Path, out: Path) -> Any:
    """`tables` on the naive twin (a few hundred microseconds a message): still running
    when the signal comes, once its parts exist."""
    from tests.fs_faults import parts, start, wait_for

    proc = start("tables", str(src), str(out), "--impl", "naive", "--tables",
                 "bbo,trades,messages", "--format", "csv")
    wait_for(lambda: out.is_dir() and len(parts(out)) == 4, proc=proc)
    return proc


@pytest.fixture(scope="module")
def big_day(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("big") / "day.itch"
    src.write_bytes(market_day_bytes(400_000, 20, 3)[0])
    return src


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_tables_stopped_by_a_signal_leaves_nothing(sig: int, tmp_path: Path,
                                                   big_day: Path) -> None:
    """SIGTERM did not run the cleanup at all (the parts stayed)."""
    from tests.fs_faults import stop

    out = tmp_path / "out"
    rc, err = stop(_slow_tables(big_day, out), sig)
    assert rc == 128 + sig, err
    assert list(out.iterdir()) == []


@pytest.mark.timeout(120)
def test_parts_of_a_killed_run_are_removed_by_the_next(tmp_path: Path, big_day: Path,
                                                       day: bytes) -> None:
    """SIGKILL leaves .<name>.part-<pid> files (nothing runs); the next run into the same
    directory (tables or lobster) removes those whose writer is gone, and only those."""
    import fcntl

    from tests.fs_faults import parts

    out = tmp_path / "out"
    proc = _slow_tables(big_day, out)
    proc.kill()
    proc.communicate(timeout=30)
    left = parts(out)
    assert len(left) == 4  # three tables and metadata.json
    live = out / ".x.csv.part-1"  # a part whose writer still holds its lock: kept
    live.write_bytes(b"")
    with open(live, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        src = _day_file(tmp_path, day)
        assert main(["lobster", str(src), str(out), "--symbols", _names(src)[0],
                     "--date", "2019-01-30"]) == 0
        assert parts(out) == [live.name]
    assert main(["tables", str(src), str(out), "--tables", "bbo"]) == 0
    assert parts(out) == []  # its lock is free now


@pytest.mark.parametrize("impl", TWINS)
@pytest.mark.parametrize("symbol", ["../../X", "A/B", "..", "aapl", "AB C", "A1"])
def test_lobster_symbols_are_the_itch_alphabet(impl: str, symbol: str, tmp_path: Path,
                                               day: bytes,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Symbols become file names: `--symbols ../../X` wrote outside the directory."""
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    feed = _day_file(deep, day)
    assert main(["lobster", str(feed), str(deep / "out"), "--symbols", symbol,
                 "--impl", impl, "--date", "2019-01-30"]) == 2
    assert "bad symbol" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b", "day.itch"]
    assert main(["lobster", str(feed), str(deep / "out"), "--symbols", "BRK.A,ABR-A,AACBU=",
                 "--impl", impl, "--date", "2019-01-30"]) == 0  # NASDAQ's suffixes pass


# ------------------------------------------------------------------ content (issue 29)

@pytest.mark.parametrize("impl", TWINS)
def test_over_execution_keeps_its_print(impl: str) -> None:
    """The book refuses an execution of more shares than rest (counted), but the exchange
    printed it: the trade stays in `trades` (E at the resting price, printable C at its
    own); a non-printable C stays out, as always."""
    data = _feed(_directory(),
                 AddOrder(1, 0, 3, 10, b"B", 100, AAPL, 1000),
                 OrderExecuted(1, 0, 4, 10, 150, 7),
                 OrderExecutedWithPrice(1, 0, 5, 10, 120, 8, b"Y", 990),
                 OrderExecutedWithPrice(1, 0, 6, 10, 130, 9, b"N", 980),
                 OrderExecuted(1, 0, 7, 10, 0, 10))  # no shares: no print
    b = TWINS[impl](tables=TABLES)
    b.feed(data)
    t = b.take()
    assert [chr(k) for k in t["trades"]["kind"]] == ["E", "C"]
    assert t["trades"]["price"].tolist() == [1000, 990]
    assert t["trades"]["shares"].tolist() == [150, 120]
    assert t["trades"]["match_number"].tolist() == [7, 8]
    assert t["trades"]["side"].tolist() == [ord("B")] * 2
    assert len(t["messages"]["seq"]) == 1  # the book changed once (the add)
    assert b.counters()["over_execution"] == 3


def test_lobster_cross_sizes_read_back(tmp_path: Path) -> None:
    """A cross (Q) of more shares than LOBSTER's size field holds made a row the reader
    refuses (sizes are u32 both ways now): the row is skipped and counted."""
    from naive.itch import CrossTrade

    at = 34_200 * 10**9 + 5
    data = _feed(_directory(), AddOrder(1, 0, at, 10, b"B", 100, AAPL, 1000),
                 CrossTrade(1, 0, at + 1, 2**33, AAPL, 1000, 5, b"O"),
                 CrossTrade(1, 0, at + 2, 2**32 - 1, AAPL, 1000, 6, b"C"))
    src = tmp_path / "day.itch"
    src.write_bytes(data)
    got = {}
    for impl in TWINS:
        r = lobster(src, tmp_path / impl, symbols="AAPL", levels=1, impl=impl,
                    date="2019-01-30")
        assert r["skipped_rows"] == 1
        messages = read_lobster(r["files"][0])
        assert np.array_equal(messages, read_lobster_native(r["files"][0]))
        assert messages["type"].tolist() == [1, 6] and messages["size"].tolist() == [
            100, 2**32 - 1]
        got[impl] = [Path(p).read_bytes() for p in r["files"]]
    assert got["naive"] == got["optimized"]


def test_nasdaq_short_file_names_give_the_date() -> None:
    assert str(date_from_name("S013019-v50.txt.gz")) == "2019-01-30"
    assert str(date_from_name("S081321-v50-bx.txt.gz")) == "2021-08-13"
    assert date_from_name("S133019-v50.txt.gz") is None  # month 13


def test_a_failed_commit_leaves_no_metadata_beside_a_mixed_set(
        tmp_path: Path, day: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """The renames are one system call each: if one fails half-way, some new tables sit
    beside some old ones. metadata.json, removed first and renamed last, is then absent:
    its presence marks a whole set."""
    import os

    src = _day_file(tmp_path, day)
    out = tmp_path / "out"
    convert(src, out, tables="bbo,trades", fmt="csv", chunk=8192)
    real, calls = os.replace, []

    def second_fails(a: Any, b: Any) -> None:
        calls.append(b)
        if len(calls) == 2:
            raise OSError(5, "Input/output error")
        real(a, b)

    monkeypatch.setattr(os, "replace", second_fails)
    with pytest.raises(OSError, match="Input/output"):
        convert(src, out, tables="bbo,trades", fmt="csv", chunk=8192)
    monkeypatch.undo()
    assert sorted(p.name for p in out.iterdir()) == ["bbo.csv", "trades.csv"]


def test_tables_on_a_day_with_every_type() -> None:
    """`gen market --all-types`: Q crosses, B breaks, I imbalances, h halts and C prints
    away from the resting price. Both twins make the same rows, and the rows are there."""
    raw, _ = market_day_bytes(8_000, 10, 4, all_types=True)
    a = build("naive", raw, lobster=3, depth=3)
    assert_same(a, build("optimized", raw, lobster=3, depth=3))
    kinds = {chr(k) for k in a["trades"]["kind"]}
    assert {"E", "C", "P", "Q", "B"} <= kinds
    assert {chr(k) for k in a["halts"]["kind"]} == {"H", "h"}
    assert len(a["noii"]["seq"]) > 0
    m = a["messages"]
    c = m["type"] == ord("C")
    assert (m["exec_price"][c] != m["price"][c]).any()  # printed away from the book
    t = a["trades"]
    printed = {int(x) for x in t["match_number"][t["kind"] == ord("C")]}
    want = {int(x) for x in m["match_number"][c & (m["printable"] == ord("Y"))]}
    assert printed == want  # every printable C, at its own price
    assert 6 in a["lobster"]["type"].tolist()  # the crosses in LOBSTER
