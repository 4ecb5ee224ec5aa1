"""Sharding by symbol (chapter 10): both twins give one market's results for any number of
workers, in both designs; every reader sees every event; bad arguments and bad input get
the same errors in both twins, and nothing before a bad record is lost."""

from __future__ import annotations

import importlib
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contract.dtypes import EVENT_DTYPE
from contract.itch_errors import ItchError
from contract.shard import WORKERS_MAX, default_workers, merge_books_csv, owner, usable_cpus
from naive.itch import (
    AddOrder,
    AddOrderMpid,
    OrderCancel,
    OrderDelete,
    OrderExecuted,
    OrderExecutedWithPrice,
    OrderReplace,
    StockDirectory,
    StockTradingAction,
    SystemEvent,
    frame,
)
from optimized import _native
from twinmatch.gen import market_day_bytes, write_itch_flow
from twinmatch.itch_samples import random_stream

from . import test_market as market_suite

pytestmark = pytest.mark.timeout(120)

IMPLS = ("naive", "optimized")
DESIGNS = ("broadcast", "routed")


@pytest.fixture(scope="module")
def day() -> bytes:
    return market_day_bytes(6_000, 24, seed=4)[0]


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("shard") / "flow.itch"
    write_itch_flow(path, 6_000, symbols=24, seed=11)
    return path.read_bytes()


@pytest.fixture(scope="module")
def hostile(day: bytes) -> bytes:
    """A day with random messages of every type mixed in: unknown references, zero
    shares, zero prices, bad sides, references named under another locate."""
    rng = random.Random(7)
    head = whole(day, 20_000)
    return head + random_stream(rng, 400) + day[len(head):]


def whole(data: bytes, limit: int | None = None) -> bytes:
    """The longest prefix of data[:limit] that ends at a record boundary."""
    data = data if limit is None else data[:limit]
    off = 0
    while off + 2 <= len(data):
        end = off + 2 + int.from_bytes(data[off:off + 2], "big")
        if end > len(data):
            break
        off = end
    return data[:off]


def single(impl: str, data: bytes, mode: str) -> dict[str, Any]:
    """One market fed the whole stream (the reference every shard result must equal)."""
    itch = importlib.import_module(f"{impl}.itch")
    market = importlib.import_module(f"{impl}.market").Market(mode)
    fills = market.run(itch.decode(data)[0])
    return {"fills": fills, "books_csv": market.books_csv(), "counts": market.counts(),
            "live_orders": len(market), "volume": market.volume}


def shard(impl: str, data: bytes, mode: str, **kw: Any) -> dict[str, Any]:
    result: dict[str, Any] = importlib.import_module(f"{impl}.shard").Shard(mode, **kw).run(data)
    return result


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Equal to one market: fills (in stream order), books, counts, live orders."""
    assert np.array_equal(got["fills"], want["fills"])
    assert got["fills"].dtype == want["fills"].dtype
    assert got["books_csv"] == want["books_csv"]
    assert got["counts"] == want["counts"]
    assert got["live_orders"] == want["live_orders"]
    assert got["volume"] == want["volume"]
    assert got["fill_count"] == len(want["fills"])


def check_counts(r: dict[str, Any]) -> None:
    """Every event reaches the workers exactly once (routed) / every worker (broadcast)."""
    per = r["per_worker"]
    assert len(per) == r["workers"]
    if r["design"] == "routed":
        assert sum(p["received"] for p in per) == r["events"] == sum(r["routed"])
        assert [p["received"] for p in per] == r["routed"]
        assert all(p["applied"] == p["received"] for p in per)
    else:
        assert all(p["received"] == r["events"] for p in per)
        # each event kept once, plus once more per foreign event (see native/shard.hpp)
        assert sum(p["applied"] for p in per) - sum(p["foreign"] for p in per) == r["events"]


@pytest.mark.parametrize("design", DESIGNS)
def test_optimized_equals_one_market_for_1_to_4_workers(design: str, day: bytes, flow: bytes,
                                                       hostile: bytes) -> None:
    for mode, data in (("book", day), ("match", flow), ("book", hostile), ("match", hostile)):
        want = single("optimized", data, mode)
        for workers in (1, 2, 3, 4):
            got = shard("optimized", data, mode, workers=workers, design=design, capacity=64)
            assert_same(got, want)
            check_counts(got)
            assert got["conflicts"] == 0 or data is hostile  # a day never asks


@pytest.mark.parametrize("design", DESIGNS)
def test_naive_equals_one_market_for_1_to_4_workers(design: str, day: bytes, flow: bytes,
                                                   hostile: bytes) -> None:
    # threads here (fast to start); the processes backend below, on fewer worker counts
    for mode, data in (("book", whole(day, 60_000)), ("match", whole(flow, 60_000)),
                       ("book", whole(hostile, 60_000))):
        data = whole(data)
        want = single("naive", data, mode)
        for workers in (1, 2, 3, 4):
            got = shard("naive", data, mode, workers=workers, design=design,
                        backend="threads", capacity=1024)
            assert_same(got, want)
            check_counts(got)


def test_naive_processes_equal_one_market(day: bytes, flow: bytes) -> None:
    for mode, data in (("book", day), ("match", flow)):
        want = single("naive", data, mode)
        for design in DESIGNS:
            got = shard("naive", data, mode, workers=2, design=design, capacity=2048)
            assert_same(got, want)
            assert got["conflicts"] == 0
            check_counts(got)


def test_both_twins_agree(day: bytes, hostile: bytes) -> None:
    for data in (whole(day, 50_000), whole(hostile, 50_000)):
        data = whole(data)
        for design in DESIGNS:
            a = shard("naive", data, "book", workers=3, design=design, backend="threads")
            b = shard("optimized", data, "book", workers=3, design=design)
            for key in ("events", "records", "books_csv", "counts", "live_orders", "per_worker",
                        "routed", "conflicts", "fill_count", "volume"):
                assert a[key] == b[key], key
            assert np.array_equal(a["fills"], b["fills"])


def msgs(*records: Any) -> bytes:
    return b"".join(frame(r) for r in records)


def two_locates(n: int) -> tuple[int, int]:
    """Two locates that different workers own."""
    a = 1
    b = next(loc for loc in range(2, 1000) if owner(loc, n) != owner(a, n))
    return a, b


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("design", DESIGNS)
def test_reference_under_another_locate(impl: str, design: str) -> None:
    """E X U D naming an order under the wrong locate (Market: locate_mismatch, the order
    wins), unknown references, and bad shares: the same counts as one market."""
    a, b = two_locates(2)
    data = msgs(
        AddOrder(a, 0, 1, 100, b"B", 500, b"AAAA    ", 10_000),
        AddOrder(b, 0, 2, 200, b"S", 300, b"BBBB    ", 10_100),
        OrderExecuted(b, 0, 3, 100, 50, 1),      # order 100 lives on a
        OrderExecuted(a, 0, 4, 999, 50, 2),      # no such order
        OrderExecuted(a, 0, 5, 100, 0, 3),       # zero shares
        OrderReplace(b, 0, 6, 100, 101, 40, 10_001),
        OrderDelete(a, 0, 7, 200),               # order 200 lives on b
        OrderDelete(b, 0, 8, 200),               # gone now: unknown
        OrderReplace(a, 0, 9, 555, 556, 40, 0),  # price 0
    )
    for mode in ("book", "match"):
        want = single(impl, data, mode)
        got = shard(impl, data, mode, workers=2, design=design, capacity=2,
                    **({"backend": "threads"} if impl == "naive" else {}))
        assert_same(got, want)
        check_counts(got)
        if mode == "book":
            assert want["counts"]["anomalies"]["locate_mismatch"] == 3


def backend(impl: str) -> dict[str, Any]:
    """The naive twin's threads (quick to start); the processes backend has its own tests."""
    return {"backend": "threads"} if impl == "naive" else {}


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("design", DESIGNS)
def test_add_of_a_reference_live_on_another_worker(impl: str, design: str) -> None:
    """An add of a reference live on another worker's symbol: one market calls it a
    duplicate and ignores it; so does a shard, after the writer has asked the worker
    that may hold the reference (``conflicts`` counts the questions)."""
    a, b = two_locates(2)
    data = msgs(AddOrder(a, 0, 1, 100, b"B", 500, b"AAAA    ", 10_000),
                AddOrder(b, 0, 2, 100, b"S", 300, b"BBBB    ", 10_100),
                OrderExecuted(b, 0, 3, 100, 50, 1))
    for mode in ("book", "match"):
        got = shard(impl, data, mode, workers=2, design=design, **backend(impl))
        assert_same(got, single(impl, data, mode))
        assert got["conflicts"] == 1


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("design", DESIGNS)
def test_replace_onto_a_reference_live_on_another_worker(impl: str, design: str) -> None:
    """Issue 29 (1): a U whose new reference is live on another worker. One market
    counts a duplicate and keeps the old order; both designs used to apply it, leaving
    two live orders with one reference (and ``conflicts`` at 0)."""
    a, b = two_locates(2)
    data = msgs(
        AddOrder(a, 0, 1, 100, b"B", 500, b"AAAA    ", 10_000),
        AddOrder(b, 0, 2, 200, b"S", 300, b"BBBB    ", 10_100),
        OrderReplace(b, 0, 3, 100, 200, 40, 10_001),  # 200 lives on b: a duplicate
        OrderExecuted(a, 0, 4, 200, 10, 1),           # the only 200: b's
        OrderReplace(a, 0, 5, 200, 100, 40, 10_050),  # and 100 lives on a
        OrderDelete(b, 0, 6, 100),                    # 100 is still a's, as it was
        OrderReplace(a, 0, 7, 200, 300, 50, 10_200),  # now a fresh reference: applied
        OrderDelete(a, 0, 8, 300),
    )
    for mode in ("book", "match"):
        for workers in (2, 3):
            got = shard(impl, data, mode, workers=workers, design=design, capacity=2,
                        **backend(impl))
            want = single(impl, data, mode)
            assert_same(got, want)
            check_counts(got)
        assert want["live_orders"] == 0
        bad = want["counts"]["anomalies" if mode == "book" else "rejects"]
        assert bad["duplicate_ref" if mode == "book" else "duplicate_id"] == 2


def test_naive_processes_ask_their_workers() -> None:
    """The processes backend: the writer's question goes through the worker's queue and
    the answer comes back through another (a process's market is not readable here)."""
    data = itch_bytes(market_suite.random_stream(4, 600))
    for mode in ("book", "match"):
        want = single("naive", data, mode)
        for design in DESIGNS:
            got = shard("naive", data, mode, workers=3, design=design, capacity=64)
            assert_same(got, want)
            assert got["conflicts"] > 0


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("design", DESIGNS)
def test_rejected_replace_moves_no_reference(impl: str, design: str) -> None:
    """Issue 29 (2): a U that the market rejects on its own fields (price 0, 0 shares)
    leaves the old order where it was; the routed writer used to move the reference
    anyway, so a later D under another worker's locate went astray (never deleted)."""
    a, b = two_locates(2)
    data = msgs(
        AddOrder(a, 0, 1, 100, b"B", 500, b"AAAA    ", 10_000),
        AddOrder(a, 0, 2, 200, b"S", 500, b"AAAA    ", 10_500),
        OrderReplace(b, 0, 3, 100, 101, 40, 0),       # price 0: bad_price
        OrderReplace(b, 0, 4, 200, 201, 0, 10_400),   # 0 shares: bad_shares
        OrderDelete(b, 0, 5, 100),                    # under b: still found by reference
        OrderDelete(b, 0, 6, 200),
    )
    for mode in ("book", "match"):
        got = shard(impl, data, mode, workers=2, design=design, **backend(impl))
        want = single(impl, data, mode)
        assert_same(got, want)
        assert want["live_orders"] == 0


def itch_bytes(rows: np.ndarray) -> bytes:
    """EVENT_DTYPE rows (the market suite's streams) as framed ITCH records."""
    out = []
    for r in rows.tolist():
        ts, ref, new_ref, match, shares, price, loc, kind, side, printable, stock = r
        stock8 = (stock or b"").ljust(8)[:8]
        k = chr(kind)
        rec: Any
        if k in "AF":
            rec = (AddOrder(loc, 0, ts, ref, bytes([side]), shares, stock8, price) if k == "A"
                   else AddOrderMpid(loc, 0, ts, ref, bytes([side]), shares, stock8, price,
                                     b"MPID"))
        elif k == "E":
            rec = OrderExecuted(loc, 0, ts, ref, shares, match)
        elif k == "C":
            rec = OrderExecutedWithPrice(loc, 0, ts, ref, shares, match,
                                         bytes([printable or ord("Y")]), price)
        elif k == "X":
            rec = OrderCancel(loc, 0, ts, ref, shares)
        elif k == "D":
            rec = OrderDelete(loc, 0, ts, ref)
        elif k == "U":
            rec = OrderReplace(loc, 0, ts, ref, new_ref, shares, price)
        elif k == "R":
            rec = StockDirectory(loc, 0, ts, stock8, b"Q", b"N", 100, b"N", b"C", b"Z ",
                                 b"P", b"N", b"N", b"1", b"N", 0, b"N")
        elif k == "H":
            rec = StockTradingAction(loc, 0, ts, stock8, bytes([side]), b" ", b"    ")
        else:
            rec = SystemEvent(loc, 0, ts, b"O")
        out.append(frame(rec))
    return b"".join(out)


def same_as_one_market(data: bytes, impls: tuple[str, ...] = IMPLS,
                       workers: tuple[int, ...] = (1, 2, 3, 4)) -> None:
    """Every twin, design, mode and worker count: one market's results."""
    for impl in impls:
        for mode in ("book", "match"):
            want = single(impl, data, mode)
            for design in DESIGNS:
                for n in workers:
                    got = shard(impl, data, mode, workers=n, design=design, capacity=8,
                                **backend(impl))
                    assert_same(got, want)
                    check_counts(got)


@pytest.mark.parametrize("seed", range(3))
def test_market_suites_random_streams_sharded(seed: int) -> None:
    """The market suite's hostile streams (tests/test_market.py's random_stream:
    references reused across locates, named under other locates, bad on purpose) give
    one market's results for every worker count, both designs, both twins."""
    same_as_one_market(itch_bytes(market_suite.random_stream(seed, 1_500)))


def test_market_suites_anomaly_cases_sharded() -> None:
    for rows, _ in market_suite.ANOMALY_CASES.values():
        same_as_one_market(itch_bytes(market_suite.events(*rows)), workers=(1, 2, 3))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("RHAAAFEXDUUC"),
                          st.sampled_from(market_suite.EDGE_LOCATES), st.integers(1, 10),
                          st.sampled_from("BS"), st.integers(0, 30),
                          st.sampled_from(market_suite.MATCH_PRICES), st.integers(1, 10)),
                max_size=80))
def test_sharded_equals_one_market_on_hostile_streams(
        rows: list[tuple[str, int, int, str, int, int, int]]) -> None:
    """The market suite's hypothesis streams (its edge locates and match-mode prices, few
    references so that they collide across symbols all the time): both twins, both
    designs, 1..4 workers, one market's results."""
    stream = [(i, ref, new_ref, 0, shares, price, locate, ord(kind), ord(side), 0,
               f"S{locate}".encode().ljust(8) if kind == "R" else b"")
              for i, (kind, locate, ref, side, shares, price, new_ref) in enumerate(rows)]
    same_as_one_market(itch_bytes(np.array(stream, dtype=EVENT_DTYPE)))


@pytest.mark.parametrize("readers", [1, 2, 4])
def test_broadcast_ring_every_reader_sees_every_item_in_order(readers: int) -> None:
    for capacity in (2, 8, 1024):
        items = 5_000 if capacity == 2 else 20_000  # at 2 slots nearly every item waits
        seen, in_order = _native.broadcast_stress(items, capacity, readers)
        assert seen == [items] * readers
        assert in_order


@pytest.mark.parametrize("capacity", [2, 64, 1024, 1 << 16])
def test_broadcast_ring_slots_start_on_a_cache_line(capacity: int) -> None:
    """A ShardSlot is 64 bytes: one event per line only if the first slot starts on a
    line (a std::vector of them started 16 bytes into one, so every slot straddled two
    lines and neighbours shared one between the writer and the readers)."""
    for readers in (1, 3):
        assert _native.broadcast_slots_offset(capacity, readers) == 0


def test_shard_stress_tiny_rings_more_threads_than_cpus(day: bytes) -> None:
    """Four workers and a writer on (here) two CPUs, rings of 2 slots: every wait is
    taken many times, and the run still ends with every event counted exactly. (Not
    "spin": a thread that never gives its CPU away needs a CPU of its own.)"""
    for design in DESIGNS:
        for wait in ("yield", "auto"):
            r = shard("optimized", day, "book", workers=4, design=design, capacity=2, wait=wait)
            check_counts(r)
            assert r["events"] > 0


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("bad", [0, -1, WORKERS_MAX + 1, True, 2.0, "2"])
def test_bad_worker_counts(impl: str, bad: object) -> None:
    Shard = importlib.import_module(f"{impl}.shard").Shard
    with pytest.raises((TypeError, ValueError), match="workers") as got:
        Shard("book", workers=bad)
    other = "optimized" if impl == "naive" else "naive"
    with pytest.raises(got.type, match="workers"):
        importlib.import_module(f"{other}.shard").Shard("book", workers=bad)


@pytest.mark.parametrize("impl", IMPLS)
def test_bad_arguments(impl: str) -> None:
    Shard = importlib.import_module(f"{impl}.shard").Shard
    with pytest.raises(ValueError, match="design"):
        Shard("book", design="gossip")
    with pytest.raises(ValueError, match="mode"):
        Shard("auction")
    with pytest.raises(ValueError, match="capacity"):
        Shard("book", capacity=3)
    with pytest.raises(TypeError):
        Shard("book").run("not bytes")


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("design", DESIGNS)
def test_truncated_input_keeps_everything_before(impl: str, design: str, day: bytes) -> None:
    good = whole(day, 30_000)
    want = single(impl, good, "book")
    kw = {"backend": "threads"} if impl == "naive" else {}
    for cut in (good + day[len(good):len(good) + 5],   # a partial record
                good + b"\x00"):                          # a lone length byte
        with pytest.raises(ItchError) as err:
            shard(impl, cut, "book", workers=2, design=design, **kw)
        assert err.value.offset == len(good)
        got = err.value.result  # type: ignore[attr-defined]
        assert_same(got, want)
    with pytest.raises(ItchError, match="zero_length"):
        shard(impl, good + b"\x00\x00", "book", workers=2, design=design, **kw)


def test_empty_input_both_twins() -> None:
    for impl in IMPLS:
        kw = {"backend": "threads"} if impl == "naive" else {}
        r = shard(impl, b"", "book", workers=3, **kw)
        assert r["events"] == 0 and len(r["fills"]) == 0 and r["live_orders"] == 0


def test_owner_same_in_both_languages() -> None:
    for n in (1, 2, 3, 4, 7, 64):
        for loc in (0, 1, 2, 3, 255, 256, 40_000, 65_535):
            assert _native.shard_owner(loc, n) == owner(loc, n)
            assert 0 <= owner(loc, n) < n


def test_default_workers_follow_the_affinity_mask() -> None:
    assert 1 <= usable_cpus() <= len(os.sched_getaffinity(0))
    assert default_workers() == max(1, usable_cpus() - 1)
    for impl in IMPLS:
        assert importlib.import_module(f"{impl}.shard").Shard().workers == default_workers()


def fake_cgroups(tmp_path: Path, v2_max: str | None, v1: tuple[str, str] | None) -> None:
    """A /proc/self/cgroup and a cgroup tree under tmp_path: v2 (a quota on the parent
    of this process's cgroup) and/or v1 (cpu,cpuacct)."""
    lines = []
    if v2_max is not None:
        (tmp_path / "fs" / "a" / "b").mkdir(parents=True)
        (tmp_path / "fs" / "a" / "cpu.max").write_text(v2_max + "\n")
        (tmp_path / "fs" / "a" / "b" / "cpu.max").write_text("max 100000\n")
        lines.append("0::/a/b")
    if v1 is not None:
        d = tmp_path / "fs" / "cpu,cpuacct" / "x"
        d.mkdir(parents=True)
        (d / "cpu.cfs_quota_us").write_text(v1[0] + "\n")
        (d / "cpu.cfs_period_us").write_text(v1[1] + "\n")
        lines.insert(0, "3:cpu,cpuacct:/x")
    (tmp_path / "cgroup").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(("v2_max", "v1", "cpus"), [
    ("150000 100000", None, 2),         # 1.5 CPUs of time: 2 busy threads at most
    ("max 100000", None, 8),            # no quota: the affinity mask
    (None, ("300000", "100000"), 3),    # cgroup v1
    (None, ("-1", "100000"), 8),        # v1, no quota
    ("50000 100000", ("-1", "100000"), 1),
])
def test_default_workers_honour_the_cgroup_cpu_quota(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, v2_max: str | None,
        v1: tuple[str, str] | None, cpus: int) -> None:
    """A container's CPU quota (cgroup cpu.max, or v1's cfs quota) caps the CPUs a
    process can keep busy, whatever its affinity mask says: 8 CPUs in the mask, a
    quota of 1.5 CPUs -> 2 usable -> 1 book worker."""
    import contract.shard as cs

    fake_cgroups(tmp_path, v2_max, v1)
    monkeypatch.setattr(cs, "PROC_CGROUP", tmp_path / "cgroup")
    monkeypatch.setattr(cs, "CGROUP_ROOT", tmp_path / "fs")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    assert cs.usable_cpus() == cpus
    assert cs.default_workers() == max(1, cpus - 1)
    for impl in IMPLS:
        assert importlib.import_module(f"{impl}.shard").Shard().workers == max(1, cpus - 1)


def test_merge_books_csv_orders_by_locate() -> None:
    h = "locate,stock,side,price,priority,order_ref,shares\n"
    parts = [h + "1,A,B,5,0,9,1\n3,C,S,7,0,8,1\n", h + "2,B,B,6,0,7,1\n"]
    assert merge_books_csv(parts).splitlines()[1:] == [
        "1,A,B,5,0,9,1", "2,B,B,6,0,7,1", "3,C,S,7,0,8,1"]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_naive_dead_worker_raises_instead_of_hanging(monkeypatch: pytest.MonkeyPatch,
                                                     day: bytes) -> None:
    naive_shard = importlib.import_module("naive.shard")

    def boom(*args: Any) -> None:
        raise MemoryError("worker ran out")

    monkeypatch.setattr(naive_shard, "_worker", lambda *a: boom())
    with pytest.raises(RuntimeError, match="worker died"):
        naive_shard.Shard("book", workers=2, backend="threads", capacity=2).run(day)



