"""The feed generators (twinmatch/gen.py, native/harness/gen.hpp).

The simulator is harness, not a twin, so these tests check its output against independent
Python: a small reference book builder (dict of order ref -> order, applying
A/F/E/C/X/D/U) that must find zero anomalies and end with exactly the books CSV the
simulator wrote; both twins' ITCH and PCAP decoders; the naive matching engine for the
order-flow files. Timing is not tested here (see the gen benchmark note in the docs).
"""

from __future__ import annotations

import gzip
import importlib
import re
import struct
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from twinmatch import gen
from twinmatch.cli import main

MESSAGES = 60_000
SYMBOLS = 40
SEED = 7
BOOK_TYPES = "AFECXDUP"


def _module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:  # the component is merged separately
        pytest.skip(f"{name} not available yet: {exc}")


@pytest.fixture(scope="module")
def day() -> tuple[bytes, bytes]:
    return gen.market_day_bytes(MESSAGES, SYMBOLS, SEED)


@pytest.fixture(scope="module")
def flow_day() -> tuple[bytes, bytes]:
    return gen.market_day_bytes(30_000, 20, SEED, flow=True)


# ---- an independent reading of the framed messages -------------------------------------


def frames(raw: bytes) -> Iterator[bytes]:
    """Each message body of a BinaryFILE buffer (2-byte big-endian length framing)."""
    off = 0
    while off < len(raw):
        (length,) = struct.unpack_from(">H", raw, off)
        body = raw[off + 2 : off + 2 + length]
        assert len(body) == length, f"cut message at byte {off}"
        yield body
        off += 2 + length


def header(body: bytes) -> tuple[str, int, int]:
    """(type, locate, timestamp)."""
    return chr(body[0]), struct.unpack_from(">H", body, 1)[0], int.from_bytes(body[5:11], "big")


@dataclass
class RefBook:
    """The reference: orders by ref, and FIFO queues per (locate, side, price)."""

    orders: dict[int, tuple[int, str, int, int]] = field(default_factory=dict)
    queues: dict[tuple[int, str, int], list[int]] = field(default_factory=dict)
    anomalies: Counter[str] = field(default_factory=Counter)

    def add(self, ref: int, locate: int, side: str, price: int, shares: int) -> None:
        if ref in self.orders:
            self.anomalies["duplicate_ref"] += 1
            return
        if shares == 0 or price == 0:
            self.anomalies["zero_add"] += 1
        self.orders[ref] = (locate, side, price, shares)
        self.queues.setdefault((locate, side, price), []).append(ref)
        if self.crossed(locate):
            self.anomalies["crossed"] += 1

    def remove(self, ref: int) -> None:
        locate, side, price, _ = self.orders.pop(ref)
        queue = self.queues[(locate, side, price)]
        queue.remove(ref)
        if not queue:
            del self.queues[(locate, side, price)]

    def reduce(self, ref: int, shares: int, kind: str) -> None:
        if ref not in self.orders:
            self.anomalies[f"unknown_ref_{kind}"] += 1
            return
        locate, side, price, left = self.orders[ref]
        if shares == 0 or shares > left:
            self.anomalies[f"over_{kind}"] += 1
            return
        if shares == left:
            self.remove(ref)
        else:
            self.orders[ref] = (locate, side, price, left - shares)

    def best(self, locate: int, side: str) -> int | None:
        prices = [p for (loc, s, p) in self.queues if loc == locate and s == side]
        if not prices:
            return None
        return max(prices) if side == "B" else min(prices)

    def crossed(self, locate: int) -> bool:
        bid, ask = self.best(locate, "B"), self.best(locate, "S")
        return bid is not None and ask is not None and bid >= ask

    def at_front(self, ref: int) -> bool:
        """Is this order the next to trade on its side (best price, first in queue)?"""
        locate, side, price, _ = self.orders[ref]
        return self.best(locate, side) == price and self.queues[(locate, side, price)][0] == ref

    def apply(self, body: bytes) -> None:
        kind, locate, _ = header(body)
        if kind in "AF":
            ref, side, shares, _stock, price = struct.unpack_from(">QcI8sI", body, 11)
            self.add(ref, locate, side.decode(), price, shares)
        elif kind in "EC":
            ref, shares = struct.unpack_from(">QI", body, 11)
            if ref in self.orders and not self.at_front(ref):
                self.anomalies["execution_out_of_priority"] += 1
            self.reduce(ref, shares, "execute")
        elif kind == "X":
            ref, shares = struct.unpack_from(">QI", body, 11)
            self.reduce(ref, shares, "cancel")
        elif kind == "D":
            (ref,) = struct.unpack_from(">Q", body, 11)
            if ref not in self.orders:
                self.anomalies["unknown_ref_delete"] += 1
            else:
                self.remove(ref)
        elif kind == "U":
            old, new, shares, price = struct.unpack_from(">QQII", body, 11)
            if old not in self.orders:
                self.anomalies["unknown_ref_replace"] += 1
                return
            locate, side, _, _ = self.orders[old]
            self.remove(old)
            self.add(new, locate, side, price, shares)

    def books_csv(self, stocks: dict[int, str]) -> bytes:
        rows = []
        for (locate, side, price), queue in self.queues.items():
            for priority, ref in enumerate(queue):
                rows.append((locate, side, price, priority, ref, self.orders[ref][3]))
        rows.sort()
        lines = ["locate,stock,side,price,priority,order_ref,shares"]
        lines += [f"{loc},{stocks[loc]},{s},{p},{k},{r},{q}" for loc, s, p, k, r, q in rows]
        return ("\n".join(lines) + "\n").encode()


def rebuild(raw: bytes, checkpoints: int = 8) -> tuple[RefBook, dict[int, str], list[str]]:
    """Replay a day into the reference; also checks every locate uncrossed at checkpoints."""
    ref = RefBook()
    stocks: dict[int, str] = {}
    bodies = list(frames(raw))
    every = max(1, len(bodies) // checkpoints)
    types = []
    for i, body in enumerate(bodies):
        kind = chr(body[0])
        types.append(kind)
        if kind == "R":
            stocks[header(body)[1]] = body[11:19].decode().rstrip()
        ref.apply(body)
        if i % every == 0 or i == len(bodies) - 1:
            crossed = [loc for loc in stocks if ref.crossed(loc)]
            if crossed:
                ref.anomalies["crossed_at_checkpoint"] += len(crossed)
    return ref, stocks, types


# ---- the market day ----------------------------------------------------------------------


def test_reproducible_from_seed(day: tuple[bytes, bytes]) -> None:
    again = gen.market_day_bytes(MESSAGES, SYMBOLS, SEED)
    assert again == day
    other = gen.market_day_bytes(MESSAGES, SYMBOLS, SEED + 1)
    assert other[0] != day[0]
    assert other[1] != day[1]


def test_exact_message_count_and_every_type(day: tuple[bytes, bytes]) -> None:
    types = Counter(chr(body[0]) for body in frames(day[0]))
    assert sum(types.values()) == MESSAGES
    for kind in BOOK_TYPES + "SRH":
        assert types[kind] > 0, f"no {kind} message"
    assert set(types) == set(BOOK_TYPES + "SRH")
    assert types["R"] == types["H"] == SYMBOLS


def test_system_events_bracket_the_day(day: tuple[bytes, bytes]) -> None:
    bodies = list(frames(day[0]))
    codes = [chr(b[11]) for b in bodies if b[0] == ord("S")]
    assert codes == list("OSQMEC")
    assert bodies[0][0] == ord("S") and bodies[-1][0] == ord("S")
    open_at = next(i for i, b in enumerate(bodies) if b[:1] == b"S" and b[11:12] == b"Q")
    close_at = next(i for i, b in enumerate(bodies) if b[:1] == b"S" and b[11:12] == b"M")
    day_types = {chr(b[0]) for b in bodies[open_at + 1 : close_at]}
    assert day_types == set(BOOK_TYPES), "order activity only in market hours"
    times = [header(b)[2] for b in bodies[open_at + 1 : close_at]]
    assert 34_200 * 10**9 < times[0] and times[-1] < 57_600 * 10**9  # 09:30 .. 16:00


def test_timestamps_strictly_increasing(day: tuple[bytes, bytes]) -> None:
    times = np.array([header(b)[2] for b in frames(day[0])], dtype=np.uint64)
    assert bool(np.all(np.diff(times.astype(np.int64)) > 0))


def test_refs_unique_increasing_and_match_numbers(day: tuple[bytes, bytes]) -> None:
    new_refs, matches, tracking = [], [], Counter[int]()
    for body in frames(day[0]):
        kind = chr(body[0])
        if kind in "AF":
            new_refs.append(struct.unpack_from(">Q", body, 11)[0])
        elif kind == "U":
            new_refs.append(struct.unpack_from(">Q", body, 19)[0])
        elif kind in "EC":
            matches.append(struct.unpack_from(">Q", body, 23)[0])
        elif kind == "P":
            matches.append(struct.unpack_from(">Q", body, 36)[0])
            assert struct.unpack_from(">Q", body, 11)[0] == 0, "P carries order ref 0"
        tracking[struct.unpack_from(">H", body, 3)[0]] += 1
    assert new_refs == sorted(set(new_refs)), "order refs unique and increasing"
    assert matches == list(range(1, len(matches) + 1)), "match numbers 1, 2, 3, ..."
    assert len(tracking) > 1


def test_books_csv_matches_reference_rebuild(day: tuple[bytes, bytes]) -> None:
    raw, books = day
    ref, stocks, _ = rebuild(raw)
    assert dict(ref.anomalies) == {}
    assert len(stocks) == SYMBOLS
    assert ref.books_csv(stocks) == books
    assert len(ref.orders) > 100


def test_shape_popularity_cancels_and_prices(day: tuple[bytes, bytes]) -> None:
    per_locate: Counter[int] = Counter()
    types: Counter[str] = Counter()
    for body in frames(day[0]):
        kind, locate, _ = header(body)
        types[kind] += 1
        if kind in BOOK_TYPES:
            per_locate[locate] += 1
    counts = sorted(per_locate.values(), reverse=True)
    assert counts[0] > 8 * counts[len(counts) // 2], "top symbol far busier than the median"
    cancels, executions = types["X"] + types["D"], types["E"] + types["C"]
    assert cancels > 10 * executions
    assert types["U"] > 0.02 * MESSAGES
    # prices cluster near the touch: most resting orders within 10 ticks of their best
    rows = [line.split(",") for line in day[1].decode().splitlines()[1:]]
    best: dict[tuple[str, str], int] = {}
    for loc, _, side, price, *_ in rows:
        key, p = (loc, side), int(price)
        best[key] = max(best.get(key, p), p) if side == "B" else min(best.get(key, p), p)
    near = 0
    for loc, _, side, price, *_ in rows:
        ticks = abs(int(price) - best[(loc, side)]) / (1 if best[(loc, side)] < 10_000 else 100)
        near += ticks <= 10
    assert near > 0.7 * len(rows)


def test_too_few_messages_rejected() -> None:
    with pytest.raises(ValueError, match="at least 26"):
        gen.market_day_bytes(25, 10, 1)
    with pytest.raises(ValueError, match="symbols"):
        gen.market_day_bytes(1000, 0, 1)
    minimal, books = gen.market_day_bytes(26, 10, 1)
    assert sum(1 for _ in frames(minimal)) == 26
    assert books == b"locate,stock,side,price,priority,order_ref,shares\n"


@pytest.mark.parametrize("twin", ["naive", "optimized"])
def test_decodes_cleanly(twin: str, day: tuple[bytes, bytes]) -> None:
    itch = _module(f"{twin}.itch")
    events, counts = itch.decode(day[0])
    expected = Counter(chr(body[0]) for body in frames(day[0]))
    assert counts == dict(expected)
    assert len(events) == MESSAGES
    assert bool(np.all(np.diff(events["timestamp"].astype(np.int64)) > 0))
    adds = events[np.isin(events["type"], [ord("A"), ord("F")])]
    assert bool(np.all(adds["price"] > 0)) and bool(np.all(adds["shares"] > 0))


@pytest.mark.parametrize("twin", ["naive", "optimized"])
def test_pcap_carries_the_same_messages(twin: str, day: tuple[bytes, bytes]) -> None:
    pcap = _module(f"{twin}.pcap")
    capture = gen.pcap_from_itch(day[0])
    framed, stats = pcap.scan(capture)
    assert bytes(np.asarray(framed, dtype=np.uint8)) == day[0]
    assert stats["messages"] == MESSAGES
    assert stats["gaps"] == 0 and stats["duplicate_messages"] == 0
    assert stats["heartbeats"] > 0 and stats["end_of_session"] == 1
    assert stats["nanosecond"] and stats["next_seq"] == MESSAGES + 1
    data_packets = stats["moldudp64"] - stats["heartbeats"] - stats["end_of_session"]
    assert data_packets < MESSAGES / 2, "several messages per packet"
    assert stats["session"].strip() == gen.PCAP_SESSION


def test_pcap_packets_fit_the_mtu(day: tuple[bytes, bytes]) -> None:
    capture = gen.pcap_from_itch(day[0])
    off, sizes, seqs = 24, [], []
    while off < len(capture):
        incl = struct.unpack_from("<I", capture, off + 8)[0]
        frame = capture[off + 16 : off + 16 + incl]
        sizes.append(len(frame) - 14)  # the IPv4 packet
        seq, count = struct.unpack_from(">QH", frame, 14 + 20 + 8 + 10)
        seqs.append((seq, count))
        off += 16 + incl
    assert max(sizes) <= 1500
    expected = 1
    for seq, count in seqs:  # consecutive: each packet starts where the last one ended
        assert seq == expected
        expected += 0 if count in (0, 0xFFFF) else count
    assert seqs[-1][1] == 0xFFFF


def test_written_files_agree(tmp_path: Path, day: tuple[bytes, bytes]) -> None:
    result = gen.write_market_day(tmp_path, MESSAGES, SYMBOLS, SEED, gen.FORMATS, name="d")
    names = sorted(p.name for p in result.paths)
    assert names == ["d.books.csv", "d.csv", "d.itch", "d.itch.gz", "d.pcap"]
    raw = (tmp_path / "d.itch").read_bytes()
    assert raw == day[0]
    assert (tmp_path / "d.books.csv").read_bytes() == day[1]
    assert gzip.decompress((tmp_path / "d.itch.gz").read_bytes()) == raw
    assert (tmp_path / "d.pcap").read_bytes() == gen.pcap_from_itch(raw)
    assert result.messages == MESSAGES and result.counts["R"] == SYMBOLS
    for twin in ("naive", "optimized"):  # the decoders' own file readers agree
        itch, pcap = _module(f"{twin}.itch"), _module(f"{twin}.pcap")
        for reader, path in ((itch.read_file, "d.itch.gz"), (pcap.read_file, "d.pcap")):
            total: Counter[str] = Counter()
            for _events, counts in reader(tmp_path / path):
                total.update(counts)
            assert dict(total) == result.counts, (twin, path)
    again = tmp_path / "again"
    gen.write_market_day(again, MESSAGES, SYMBOLS, SEED, ["gz"], name="d")
    assert (again / "d.itch.gz").read_bytes() == (tmp_path / "d.itch.gz").read_bytes()


def test_messages_csv(tmp_path: Path, day: tuple[bytes, bytes]) -> None:
    text = gen.messages_csv(day[0]).decode()
    lines = text.splitlines()
    assert lines[0] == gen.MESSAGES_CSV_HEADER.strip()
    assert len(lines) == MESSAGES + 1
    columns = lines[0].split(",")
    bodies = list(frames(day[0]))
    for line, body in zip(lines[1:], bodies, strict=True):
        row = dict(zip(columns, line.split(","), strict=True))
        kind, locate, ts = header(body)
        assert (row["type"], int(row["locate"]), int(row["timestamp"])) == (kind, locate, ts)
        if kind in "AF":
            ref, side, shares, stock, price = struct.unpack_from(">QcI8sI", body, 11)
            assert (int(row["order_ref"]), row["side"], int(row["shares"])) == (
                ref, side.decode(), shares)
            assert (int(row["price"]), row["stock"]) == (price, stock.decode().rstrip())
            assert row["mpid"] == (body[36:40].decode() if kind == "F" else "")
        elif kind == "U":
            old, new, shares, price = struct.unpack_from(">QQII", body, 11)
            assert (int(row["order_ref"]), int(row["new_order_ref"])) == (old, new)
            assert (int(row["shares"]), int(row["price"])) == (shares, price)
        elif kind == "D":
            assert row["shares"] == "" and row["price"] == ""


# ---- order flow -------------------------------------------------------------------------


def test_itch_flow_only_adds_deletes_replaces(flow_day: tuple[bytes, bytes]) -> None:
    types = Counter(chr(b[0]) for b in frames(flow_day[0]))
    assert set(types) == set("SRHADU")
    assert sum(types.values()) == 30_000


def test_itch_flow_replays_on_a_matching_engine(flow_day: tuple[bytes, bytes]) -> None:
    """The naive engine (matching on, one Book per locate) finds no reject and ends with
    the books the simulator wrote beside the flow."""
    from naive.book import Book, Side

    books: dict[int, Book] = {}
    stocks: dict[int, str] = {}
    side_of: dict[int, tuple[int, str]] = {}
    fills = 0
    for body in frames(flow_day[0]):
        kind, locate, _ = header(body)
        if kind == "R":
            stocks[locate] = body[11:19].decode().rstrip()
            books[locate] = Book()
        elif kind == "A":
            ref, side, shares, _stock, price = struct.unpack_from(">QcI8sI", body, 11)
            s = Side.BUY if side == b"B" else Side.SELL
            fills += len(books[locate].add_limit(ref, s, price, shares))
            side_of[ref] = (locate, side.decode())
        elif kind == "D":
            (ref,) = struct.unpack_from(">Q", body, 11)
            books[locate].cancel(ref)
        elif kind == "U":
            old, new, shares, price = struct.unpack_from(">QQII", body, 11)
            fills += len(books[locate].replace(old, new, price, shares))
            side_of[new] = side_of[old]
    assert fills > 0, "some adds cross"
    rows = [line.split(",") for line in flow_day[1].decode().splitlines()[1:]]
    assert sum(len(b) for b in books.values()) == len(rows)
    for loc, stock, side, price, _prio, ref, shares in rows:
        assert stocks[int(loc)] == stock
        found = books[int(loc)].order(int(ref))
        assert found is not None
        assert (int(found[0]), found[1], found[2]) == (
            0 if side == "B" else 1, int(price), int(shares))
    # queue order: the engine's levels hold the same number of orders as the CSV's
    for locate, book in books.items():
        for side_code, letter in ((0, "B"), (1, "S")):
            depth = sorted((p, q, n) for p, q, n in book.depth(Side(side_code), 10**9))
            mine: dict[int, list[int]] = {}
            for r in rows:
                if int(r[0]) == locate and r[2] == letter:
                    mine.setdefault(int(r[3]), []).append(int(r[6]))
            assert depth == sorted((p, sum(q), len(q)) for p, q in mine.items())


def test_write_itch_flow(tmp_path: Path, flow_day: tuple[bytes, bytes]) -> None:
    orders = 30_000 - (6 + 2 * 20)
    result = gen.write_itch_flow(tmp_path / "flow.itch", orders, 20, SEED)
    assert (tmp_path / "flow.itch").read_bytes() == flow_day[0]
    assert (tmp_path / "flow.books.csv").read_bytes() == flow_day[1]
    assert result.messages == 30_000


def test_csv_flow(tmp_path: Path) -> None:
    orders_mod: Any = _module("naive.orders")
    from twinmatch.flow import check_no_rejects

    path = tmp_path / "orders.csv"
    result = gen.write_csv_flow(path, 3_000, seed=5)
    assert path.read_text() == gen.csv_flow_text(gen.csv_flow_ops(3_000, 5))
    ops = orders_mod.read_csv(path)
    assert len(ops) == 3_000 == result.messages
    assert set(np.unique(ops["op"]).tolist()) == {0, 1, 2}  # limit, market, cancel
    check_no_rejects(ops)
    assert gen.write_csv_flow(tmp_path / "again.csv", 3_000, seed=5).messages == 3_000
    assert (tmp_path / "again.csv").read_bytes() == path.read_bytes()


def test_csv_flow_refuses_ops_without_a_csv_form() -> None:
    from twinmatch.flow import order_flow

    with pytest.raises(ValueError, match="no CSV order form"):
        gen.csv_flow_text(order_flow(500, 1))


# ---- the command line ---------------------------------------------------------------------


def test_cli_gen_market(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gen", "market", "--messages", "5000", "--symbols", "12", "--seed", "3",
                 "--out", str(tmp_path), "--format", "all"]) == 0
    out = capsys.readouterr().out
    assert "5,000 messages" in out and "day.books.csv" in out
    for suffix in (".itch", ".itch.gz", ".pcap", ".csv", ".books.csv"):
        assert (tmp_path / f"day{suffix}").stat().st_size > 0
    raw, books = gen.market_day_bytes(5000, 12, 3)
    assert (tmp_path / "day.itch").read_bytes() == raw
    assert (tmp_path / "day.books.csv").read_bytes() == books


def test_cli_gen_flow(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gen", "flow", "--orders", "500", "--seed", "2",
                 "--out", str(tmp_path / "o.csv")]) == 0
    assert main(["gen", "flow", "--orders", "500", "--seed", "2", "--format", "itch",
                 "--symbols", "5", "--out", str(tmp_path / "o.itch")]) == 0
    out = capsys.readouterr().out
    assert "o.csv" in out and "o.itch" in out and "o.books.csv" in out
    assert (tmp_path / "o.csv").read_text().startswith("order_id,price,quantity,side\n")
    assert sum(1 for _ in frames((tmp_path / "o.itch").read_bytes())) == 500 + 6 + 10


def test_converters_reject_cut_messages() -> None:
    raw, _ = gen.market_day_bytes(500, 5, 1)
    with pytest.raises(ValueError, match="cut short at byte 0"):
        gen.messages_csv(raw[:1])
    with pytest.raises(ValueError, match="cut short"):
        gen.messages_csv(raw[:-1])
    with pytest.raises(ValueError, match="cut short"):
        gen.pcap_from_itch(raw[:-3])
    with pytest.raises(ValueError, match="'A' too short"):
        gen.messages_csv(b"\x00\x0bA" + bytes(10))


def _any(value: object) -> Any:
    """A deliberately ill-typed argument, past mypy."""
    return value


@pytest.mark.parametrize("call, error, message", [
    (lambda: gen.market_day_bytes(-1, 10, 1), ValueError, "messages must be at least 26"),
    (lambda: gen.market_day_bytes(100, -1, 1), ValueError, "symbols must be 1..60,000"),
    (lambda: gen.market_day_bytes(100, 10, -1), ValueError, "seed must be 0.."),
    (lambda: gen.market_day_bytes(10**20, 10, 1), ValueError, "messages must be 26..1"),
    (lambda: gen.market_day_bytes(_any(None), 10, 1), TypeError, "messages must be an integer"),
    (lambda: gen.market_day_bytes(_any(100.0), 10, 1), TypeError, "messages must be an integer"),
    (lambda: gen.market_day_bytes(100, _any(True), 1), TypeError, "symbols must be an integer"),
    (lambda: gen.market_day_bytes(100, 10, _any("1")), TypeError, "seed must be an integer"),
    (lambda: gen.simulate(100, 10, 1, chunk_bytes=0), ValueError, "chunk_bytes must be 1.."),
    (lambda: gen.csv_flow_ops(-1), ValueError, "orders must be 0..100,000,000, not -1"),
    (lambda: gen.csv_flow_ops(10, seed=-3), ValueError, "seed must be 0.."),
    (lambda: gen.csv_flow_ops(_any(float("nan"))), TypeError, "orders must be an integer"),
])
def test_generator_api_refuses_bad_sizes(call: object, error: type[Exception],
                                         message: str) -> None:
    assert callable(call)
    with pytest.raises(error, match=re.escape(message)) as exc:
        call()
    assert "\n" not in str(exc.value)


def test_generator_api_takes_numpy_integers(tmp_path: Path) -> None:
    raw, _ = gen.market_day_bytes(_any(np.int64(40)), _any(np.uint16(10)), _any(np.uint64(3)))
    assert raw == gen.market_day_bytes(40, 10, 3)[0]


@pytest.mark.parametrize("kwargs, message", [
    ({"messages": -5}, "messages must be at least"),
    ({"messages": 100, "symbols": 0}, "symbols must be 1.."),
    ({"messages": 100, "gzip_level": 0}, "gzip_level must be 1..9"),
    ({"messages": 100, "name": "a/b"}, "name must be a file stem"),
])
def test_write_day_refuses_before_writing(tmp_path: Path, kwargs: dict[str, object],
                                          message: str) -> None:
    out = tmp_path / "day"
    args: dict[str, object] = {"symbols": 10, **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        gen.write_market_day(out, **args)  # type: ignore[arg-type]
    assert not out.exists()
    with pytest.raises(ValueError, match="orders must be 0.."):
        gen.write_itch_flow(tmp_path / "f.itch", -1, 10)
    with pytest.raises(ValueError, match="orders must be 0.."):
        gen.write_csv_flow(tmp_path / "o.csv", -1)
    assert not (tmp_path / "f.itch").exists() and not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("convert", [gen.pcap_from_itch, gen.messages_csv])
@pytest.mark.parametrize("bad", [None, "text", 12, [1, 2]])
def test_converters_refuse_non_buffers(convert: Any, bad: object) -> None:
    with pytest.raises(TypeError, match=r"^raw must be a bytes-like object, not \w+$"):
        convert(bad)


@pytest.mark.parametrize("bad, error", [(-1, ValueError), (1.5, TypeError), (None, TypeError),
                                        (True, TypeError)])
def test_order_flow_refuses_bad_sizes(bad: object, error: type[Exception]) -> None:
    from twinmatch.flow import order_flow

    with pytest.raises(error, match="^n must be"):
        order_flow(bad)  # type: ignore[arg-type]
    assert len(order_flow(0)) == 0


# ---- --all-types: the messages that change no book ----------------------------------------


@pytest.fixture(scope="module")
def all_types_day() -> tuple[bytes, bytes]:
    return gen.market_day_bytes(MESSAGES, SYMBOLS, SEED, all_types=True)


def test_default_days_are_unchanged_by_all_types() -> None:
    """all_types is opt-in: a day without it is byte for byte the day generated before
    the option existed (these digests were taken then), so every books CSV, test and
    reference run built on generated days still holds."""
    import hashlib

    raw, books = gen.market_day_bytes(2500, 10, 1)
    assert hashlib.sha256(raw).hexdigest()[:16] == "850b75a6908c6890"
    assert hashlib.sha256(books).hexdigest()[:16] == "d0ec82b9cf8ac80a"
    assert gen.market_day_bytes(2500, 10, 1, all_types=False) == (raw, books)


def test_all_types_day_has_q_b_i_h_and_c_away(all_types_day: tuple[bytes, bytes]) -> None:
    raw, books = all_types_day
    assert gen.market_day_bytes(MESSAGES, SYMBOLS, SEED, all_types=True) == all_types_day
    types = Counter(chr(body[0]) for body in frames(raw))
    assert sum(types.values()) == MESSAGES
    for kind in "QBIh" + BOOK_TYPES:
        assert types[kind] > 0, f"no {kind} message"
    # The reference rebuild (these types change no book) ends with the simulator's books.
    ref, stocks, _ = rebuild(raw)
    assert dict(ref.anomalies) == {}
    assert ref.books_csv(stocks) == books
    # Some C prints away from the resting price; match numbers still rise 1, 2, 3, ...
    resting: dict[int, int] = {}
    away = matches = 0
    broken = []
    for body in frames(raw):
        kind = chr(body[0])
        if kind in "AF":
            resting[struct.unpack_from(">Q", body, 11)[0]] = struct.unpack_from(">I", body, 32)[0]
        elif kind == "U":
            old, new, _, price = struct.unpack_from(">QQII", body, 11)
            resting[new] = price
        elif kind == "C":
            ref_, _, match = struct.unpack_from(">QIQ", body, 11)
            away += struct.unpack_from(">I", body, 32)[0] != resting[ref_]
        if kind in "ECPQ":
            offset = {"E": 23, "C": 23, "P": 36, "Q": 31}[kind]
            matches += 1
            assert struct.unpack_from(">Q", body, offset)[0] == matches
        elif kind == "B":
            broken.append(struct.unpack_from(">Q", body, 11)[0])
    assert away > 0
    assert broken and all(1 <= m <= matches for m in broken)


@pytest.mark.parametrize("twin", ["naive", "optimized"])
def test_all_types_day_replays_to_the_books_csv(twin: str,
                                                all_types_day: tuple[bytes, bytes]) -> None:
    """Both twins' market replay (book mode) of the day rebuilds the simulator's books,
    with no anomaly, and counts every message type."""
    from naive.itch import decode

    raw, books = all_types_day
    market = importlib.import_module(f"{twin}.market").Market("book")
    events, counts = decode(raw)
    market.run(events)
    assert market.books_csv() == books.decode()
    assert not any(market.counts()["anomalies"].values())
    assert {"Q", "B", "I", "h"} <= set(counts)


def test_all_types_messages_csv_keeps_q_and_b(all_types_day: tuple[bytes, bytes]) -> None:
    """The messages CSV carries a Q's shares (in order_ref, as EVENT_DTYPE does), price,
    match number and cross type, and a B's match number."""
    text = gen.messages_csv(all_types_day[0]).decode()
    rows = [line.split(",") for line in text.splitlines()[1:]]
    q = next(r for r in rows if r[0] == "Q")
    assert int(q[4]) > 0 and int(q[8]) > 0 and int(q[9]) > 0 and q[10] in list("OCHI")
    b = next(r for r in rows if r[0] == "B")
    assert int(b[9]) > 0


def test_cli_gen_market_all_types(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gen", "market", "--messages", "20000", "--symbols", "10", "--all-types",
                 "--out", str(tmp_path)]) == 0
    assert " Q=" in capsys.readouterr().out


# ---- the intraday profile (chapter 15): a busy open and close, bursts within seconds ----

OPEN_NS, CLOSE_NS = 34_200 * 10**9, 57_600 * 10**9


@pytest.fixture(scope="module")
def intraday_day() -> tuple[bytes, bytes]:
    return gen.market_day_bytes(MESSAGES, SYMBOLS, SEED, profile="intraday")


def _day_times(raw: bytes) -> np.ndarray:
    times = np.array([header(b)[2] for b in frames(raw) if b[:1] != b"S"], dtype=np.int64)
    return times[(times > OPEN_NS) & (times < CLOSE_NS)]


def test_intraday_day_is_reproducible_exact_and_rebuilds(
        intraday_day: tuple[bytes, bytes]) -> None:
    """Same seed, same bytes; exactly the messages asked for; timestamps strictly
    increasing and inside the session; the reference rebuild finds the simulator's books."""
    raw, books = intraday_day
    assert gen.market_day_bytes(MESSAGES, SYMBOLS, SEED, profile="intraday") == intraday_day
    bodies = list(frames(raw))
    assert len(bodies) == MESSAGES
    assert [chr(b[11]) for b in bodies if b[0] == ord("S")] == list("OSQMEC")
    times = np.array([header(b)[2] for b in bodies], dtype=np.int64)
    assert bool(np.all(np.diff(times) > 0))
    ref, _stocks, _ = rebuild(raw)
    assert dict(ref.anomalies) == {}
    assert ref.books_csv(_stocks) == books
    # the same events as the flat day, only at other times: the default is unchanged
    assert gen.market_day_bytes(MESSAGES, SYMBOLS, SEED)[1] != b"" and \
        gen.market_day_bytes(MESSAGES, SYMBOLS, SEED, profile="flat") == \
        gen.market_day_bytes(MESSAGES, SYMBOLS, SEED)


def test_intraday_open_and_close_busier_than_midday(
        intraday_day: tuple[bytes, bytes], day: tuple[bytes, bytes]) -> None:
    """The first and last quarter hours carry far more than midday's share (baseline
    weights 4 and 3 against 1); the flat day's do not."""
    def shares(raw: bytes) -> tuple[float, float, float]:
        t = _day_times(raw)
        q = 15 * 60 * 10**9
        first = np.count_nonzero(t < OPEN_NS + q)
        last = np.count_nonzero(t >= CLOSE_NS - q)
        mid = np.count_nonzero((t >= OPEN_NS + 3 * 3600 * 10**9)
                               & (t < OPEN_NS + 3 * 3600 * 10**9 + q))
        return first / mid, last / mid, float(len(t))
    first, last, _ = shares(intraday_day[0])
    assert first > 2.5 and last > 1.8, (first, last)
    flat_first, flat_last, _ = shares(day[0])
    assert flat_first < 1.5 and flat_last < 1.5


def test_intraday_bursts_within_seconds(intraday_day: tuple[bytes, bytes],
                                        day: tuple[bytes, bytes]) -> None:
    """Self-excitation clusters events: midday's messages per second vary far more than
    their mean (the index of dispersion, variance over mean: 1 for a Poisson process,
    below 1 for the flat day's evenly spread events, and, over windows long against the
    half-second decay, up to 1 / (1 - 0.7)^2 for this one)."""
    def dispersion(raw: bytes) -> float:
        t = _day_times(raw)
        mid = t[(t >= OPEN_NS + 3600 * 10**9) & (t < CLOSE_NS - 3600 * 10**9)]
        per_s = np.bincount((mid - mid.min()) // 10**9)
        return float(per_s.var() / per_s.mean())
    assert dispersion(intraday_day[0]) > 3 * dispersion(day[0]), \
        (dispersion(intraday_day[0]), dispersion(day[0]))


def test_intraday_profile_refused_when_unknown(tmp_path: Path) -> None:
    with pytest.raises(gen.GenArgumentError, match="profile"):
        gen.market_day_bytes(2500, 10, 1, profile="lunch")
    assert main(["gen", "market", "--messages", "20000", "--symbols", "10",
                 "--profile", "intraday", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "day.itch").stat().st_size > 0
