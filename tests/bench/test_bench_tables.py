"""Chapter 14 benchmarks, group "tables": an ITCH day to research files, against itch-book.

What each figure includes (every side is the command line the tool ships, run as a fresh
process on the same raw ITCH file, so interpreter start-up, imports, reading, hashing the
source for the metadata, the replay, Arrow conversion and the zstd Parquet / CSV writing
are all inside; the generated day, in the page cache, is read by both):

* ``convert`` -- bbo + trades to Parquet: ``twinmatch tables FILE OUT --impl {naive,
  optimized}`` against ``itch2parquet convert FILE OUT`` (itch-book's converter, its
  ``[cli]`` extra; it hashes with md5, twinmatch with SHA-256). Before timing, the files
  are checked against each other: the same bbo and trades rows, column for column. The
  group's table has the twins on a smaller day (NAIVE_DAY; naive: one round); the
  itch-book comparison is the paired record (the group's paired table).
* ``lobster`` -- LOBSTER's message + orderbook files of the day's three busiest symbols at
  10 levels: ``twinmatch lobster`` against ``itch2parquet lobster``, checked first: the
  message files byte for byte, the orderbook files row for row except the one documented
  convention they differ in (the book on a replace's deletion row, chapter 14).
* peak memory -- each converter's peak RSS (the child process's own VmHWM), recorded
  as measured values (scripts/targets.py reports them).

The paired records (tests/bench/paired.py) are the claims: ``tables-day-vs-itchbook``
(target: optimized >= 1.5x itch-book) and ``tables-lobster-vs-itchbook`` (reported). The
issue's 20M-message day is opt-in (``make bench-tables-day``, several minutes):
``tables-day20m-vs-itchbook``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.bench.conftest import SMALL
from tests.bench.paired import Side, paired
from twinmatch.gen import write_market_day

DATE = "2024-01-02"  # the generated day's session date (any date will do)
# 1M messages keeps the group within ~3 minutes of `make bench-run` (most of it the
# 11 + 11 pairs of full conversions by two tools).
DAY = (20_000 if SMALL else 1_000_000, 50 if SMALL else 500)
NAIVE_DAY = (5_000 if SMALL else 100_000, 50 if SMALL else 500)
BIG_DAY = (20_000_000, 4_000)
RUN_BIG = os.environ.get("TWINMATCH_BENCH_TABLES_DAY") == "1"
LEVELS = 10
BIN = Path(sys.executable).parent
INCLUDES = {
    "convert": "bbo + trades to Parquet, the same raw ITCH file, each tool's command line in a "
               "fresh process: start-up, read, source hash, replay, Arrow + zstd write",
    "lobster": "LOBSTER message + orderbook CSV of the 3 busiest symbols at 10 levels, each "
               "tool's command line in a fresh process",
}


def itch2parquet() -> str:
    exe = shutil.which("itch2parquet", path=str(BIN)) or shutil.which("itch2parquet")
    if exe is None:
        pytest.skip("itch-book's converter is absent: pip install -e '.[bench]'")
    return exe


def _hwm_mb(pid: int) -> float | None:
    """The process's own peak RSS so far (VmHWM of /proc/PID/status), or None once gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def run_child(cmd: list[str], watch: bool = False) -> tuple[float, float]:
    """Run a command; (its wall time in seconds, its peak RSS in MB if ``watch``, else 0).

    Timed runs do not watch (the readings would cost the other core some work). The peak
    is the child's own VmHWM, read every 2 ms while it runs (the last reading
    before it exits): not ru_maxrss, which Linux carries across exec, so that a child
    started from this large pytest process would report the parent's peak. A peak in the
    child's last 2 ms can be missed; memory grows over the whole run here, not at its end.
    """
    import time
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0.0
    if not watch:
        proc.wait()
    while proc.poll() is None:
        hwm = _hwm_mb(proc.pid)
        if hwm is not None:
            peak = max(peak, hwm)
        time.sleep(0.002)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({proc.returncode}): {err[-2000:]}")
    return wall, peak


def ours(kind: str, path: Path, out: Path, impl: str, symbols: str = "") -> list[str]:
    cmd = [sys.executable, "-m", "twinmatch", kind, str(path), str(out), "--impl", impl,
           "--date", DATE]
    return cmd + (["--symbols", symbols, "--levels", str(LEVELS)] if kind == "lobster" else [])


def theirs(kind: str, path: Path, out: Path, symbols: str = "") -> list[str]:
    cmd = [itch2parquet(), "convert" if kind == "tables" else "lobster", str(path), str(out),
           "--date", DATE]
    return cmd + (["--symbols", symbols, "--levels", str(LEVELS)] if kind == "lobster" else [])


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("tables")
    wanted = {"day": DAY, "naive-day": NAIVE_DAY} | ({"day20m": BIG_DAY} if RUN_BIG else {})
    for name, (messages, symbols) in wanted.items():
        write_market_day(out, messages, symbols, seed=3, name=name)
    return {name: out / f"{name}.itch" for name in wanted}


def busiest(path: Path, n: int = 3) -> str:
    """The n symbols with the most book messages (the optimized twin's messages table)."""
    from optimized.tables import TableBuilder
    b = TableBuilder(tables=("messages", "symbols"))
    b.feed(path.read_bytes())
    t = b.take()
    loc, count = np.unique(t["messages"]["locate"], return_counts=True)
    names = {int(lc): bytes(s).decode().rstrip()
             for lc, s in zip(t["symbols"]["locate"], t["symbols"]["symbol"], strict=True)}
    return ",".join(names[int(lc)] for lc in loc[np.argsort(-count, kind="stable")[:n]])


def check_same_tables(path: Path) -> None:
    """Our bbo and trades against itch-book's, row for row, before anything is timed."""
    pq = pytest.importorskip("pyarrow.parquet")
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        run_child(ours("tables", path, a, "optimized"))
        run_child(theirs("tables", path, b))
        for table, pairs in (("bbo", [("seq", "seq"), ("bid_price", "bid_px"),
                                      ("bid_size", "bid_sz"), ("bid_orders", "bid_ct"),
                                      ("ask_size", "ask_sz"), ("ask_orders", "ask_ct")]),
                             ("trades", [("seq", "seq"), ("shares", "size"),
                                         ("match_number", "match_number")])):
            ta, tb = pq.read_table(a / f"{table}.parquet"), pq.read_table(b / f"{table}.parquet")
            assert ta.num_rows == tb.num_rows > 0, table
            for mine, their in pairs:
                x = ta.column(mine).to_numpy()
                y = tb.column(their).to_numpy()
                if their.endswith("_px"):  # float dollars
                    y = np.rint(y * 10_000)
                assert np.array_equal(x.astype(np.float64), np.nan_to_num(y).astype(np.float64)), (
                    table, mine)
        sa = pq.read_table(a / "bbo.parquet").column("session_time").cast("int64").to_numpy()
        sb = pq.read_table(b / "bbo.parquet").column("ts_event").cast("int64").to_numpy()
        assert np.array_equal(sa, sb)


def check_same_lobster(path: Path, symbols: str) -> None:
    """Our LOBSTER files against itch-book's: the message files byte for byte, and the
    orderbook rows equal except on a replace's deletion row, where itch-book writes the book
    after the whole replace (our next row) and we the book between the two."""
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        run_child(ours("lobster", path, a, "optimized", symbols))
        run_child(theirs("lobster", path, b, symbols))
        for sym in symbols.split(","):
            stem = f"{sym}_{DATE}_34200000_57600000"
            msg = (a / f"{stem}_message_{LEVELS}.csv").read_bytes()
            assert msg == (b / f"{stem}_message_{LEVELS}.csv").read_bytes(), sym
            mine = (a / f"{stem}_orderbook_{LEVELS}.csv").read_text().splitlines()
            their = (b / f"{stem}_orderbook_{LEVELS}.csv").read_text().splitlines()
            rows = [line.split(",") for line in msg.decode().splitlines()]
            assert len(mine) == len(their) == len(rows) > 0
            for i, (x, y) in enumerate(zip(mine, their, strict=True)):
                if x != y:  # a deletion (3) followed by its submission (1), same time
                    assert rows[i][1] == "3" and rows[i + 1][1] == "1", (sym, i)
                    assert rows[i][0] == rows[i + 1][0] and y == mine[i + 1], (sym, i)


def timed(cmd_for: Any) -> Any:
    """A paired side's run(): a fresh output directory each time, the child's wall time."""
    def run(_: Any) -> float:
        with tempfile.TemporaryDirectory() as tmp:
            return run_child(cmd_for(Path(tmp) / "out"))[0]
    return run


# ------------------------------------------------------------------ rows of the table

@pytest.mark.benchmark(group="tables")
@pytest.mark.parametrize(("impl", "workload"), [("optimized", "naive-day"),
                                                ("naive", "naive-day")])
def test_tables_convert(benchmark: Any, impl: str, workload: str,
                        days: dict[str, Path], tmp_path: Path) -> None:
    path = days[workload]
    messages = NAIVE_DAY[0]
    benchmark.extra_info.update(ops=messages, messages=messages, workload=workload, impl=impl,
                                includes=INCLUDES["convert"])
    if impl == "optimized":
        benchmark.pedantic(timed(lambda out: ours("tables", path, out, impl)), args=(None,),
                           rounds=3, iterations=1)
        return
    # naive: one round, into a directory kept for the check against the optimized twin
    benchmark.pedantic(run_child, args=(ours("tables", path, tmp_path / "naive", impl),),
                       rounds=1, iterations=1)
    run_child(ours("tables", path, tmp_path / "optimized", "optimized"))
    pq = pytest.importorskip("pyarrow.parquet")
    for table in ("bbo", "trades"):
        a = pq.read_table(tmp_path / "naive" / f"{table}.parquet")
        b = pq.read_table(tmp_path / "optimized" / f"{table}.parquet")
        assert a.num_rows == b.num_rows > 0 and a.equals(b), table


@pytest.mark.benchmark(group="tables")
@pytest.mark.parametrize("impl", ["optimized", "itch-book"])
def test_tables_peak_memory(benchmark: Any, impl: str, days: dict[str, Path]) -> None:
    """Peak RSS of one conversion (bbo + trades) of the day, recorded as a measured value."""
    path = days["day"]
    rss: list[float] = []

    def run() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = (theirs("tables", path, Path(tmp) / "o") if impl == "itch-book"
                   else ours("tables", path, Path(tmp) / "o", impl))
            rss.append(run_child(cmd, watch=True)[1])

    if impl == "itch-book":
        itch2parquet()
    benchmark.pedantic(run, rounds=1, iterations=1)
    key = {"optimized": "tables-day-rss", "itch-book": "tables-day-rss-itchbook"}[impl]
    benchmark.extra_info.update(ops=DAY[0], messages=DAY[0], workload="peak-rss", impl=impl,
                                includes="peak RSS of the converter process, bbo + trades")
    benchmark.extra_info["measure"] = {"key": key, "value": rss[0], "unit": "MB",
                                       "detail": f"{DAY[0]:,} messages, {DAY[1]} symbols"}


# ------------------------------------------------------------------ paired claims

@pytest.mark.benchmark(group="tables")
@pytest.mark.parametrize("workload", ["day", "day20m"])
def test_paired_tables_convert(benchmark: Any, workload: str, days: dict[str, Path]) -> None:
    if workload == "day20m" and not RUN_BIG:
        pytest.skip("the 20M-message day is opt-in: TWINMATCH_BENCH_TABLES_DAY=1")
    path = days[workload]
    messages = (DAY if workload == "day" else BIG_DAY)[0]
    check_same_tables(path)
    fast = Side("optimized", timed(lambda out: ours("tables", path, out, "optimized")),
                ops=messages)
    slow = Side("itch-book", timed(lambda out: theirs("tables", path, out)), ops=messages)
    key = {"day": "tables-day-vs-itchbook", "day20m": "tables-day20m-vs-itchbook"}[workload]
    paired(benchmark, key, fast, slow, pairs=11, warmup=1, workload=workload,
           messages=messages, includes=INCLUDES["convert"])


@pytest.mark.benchmark(group="tables")
def test_paired_tables_lobster(benchmark: Any, days: dict[str, Path]) -> None:
    path = days["day"]
    symbols = busiest(path)
    check_same_lobster(path, symbols)
    fast = Side("optimized", timed(lambda out: ours("lobster", path, out, "optimized",
                                                   symbols)), ops=DAY[0])
    slow = Side("itch-book", timed(lambda out: theirs("lobster", path, out, symbols)),
                ops=DAY[0])
    paired(benchmark, "tables-lobster-vs-itchbook", fast, slow, pairs=11, warmup=1,
           workload="lobster", messages=DAY[0], symbols=symbols,
           includes=INCLUDES["lobster"])


def builder_pass(data: bytes, lookahead: bool) -> float:
    """The C++ builder alone over a day in memory: bbo + trades, fed 4 MiB at a time (as
    the command line reads), the rows taken as numpy columns after each piece; timed in
    Python around the loop (no reading from disk, hashing, Arrow or Parquet)."""
    import time

    from optimized.tables import TableBuilder
    b = TableBuilder(tables=("bbo", "trades"))
    b.set_lookahead(lookahead)
    view = memoryview(data)
    start = time.perf_counter()
    at = 0
    while at < len(data):
        used = b.feed(view[at:at + (4 << 20)])
        b.take()
        if used == 0:
            break
        at += used
    return time.perf_counter() - start


@pytest.mark.benchmark(group="tables")
def test_paired_tables_builder_lookahead(benchmark: Any, days: dict[str, Path]) -> None:
    """What the builder's look-ahead (the market's three prefetch stages plus its own
    lines: the locate's, the level's order count) buys on the 20M-message day."""
    if not RUN_BIG:
        pytest.skip("the 20M-message day is opt-in: TWINMATCH_BENCH_TABLES_DAY=1")
    data = days["day20m"].read_bytes()
    messages = BIG_DAY[0]
    fast = Side("lookahead", lambda _: builder_pass(data, True), ops=messages)
    slow = Side("no-lookahead", lambda _: builder_pass(data, False), ops=messages)
    paired(benchmark, "tables-builder-lookahead", fast, slow, pairs=11, warmup=1,
           workload="day20m", messages=messages,
           includes="the C++ table builder alone (bbo + trades), the day in memory fed "
                    "4 MiB at a time, rows taken as numpy after each piece")
