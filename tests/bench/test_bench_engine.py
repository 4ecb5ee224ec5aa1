"""Chapter 5 benchmarks at full scale: the engine (group "engine", ``make bench``).

What each figure includes (all single-threaded on our side; itch-book reads its file on a
Python thread of its own while its C++ core parses and applies, as its README describes):

* ``day`` (book mode, ``twinmatch gen market`` days of 5M messages / 500 symbols and 20M /
  4,000 symbols, the same file for every impl, in one run):
  optimized / naive: ``twinmatch.replay.replay(file, impl, "book")``: read the raw ITCH file
  in chunks, decode with the twin's decoder, apply to the twin's market, start-up
  (imports excluded) and the Python boundary included.
  itch-book: ``itch_book.Feed(file).batches(tables=("system_events",))`` iterated to the
  end, exactly what its ``itch2parquet verify`` runs (parse + full book apply, no table).
  Naive runs one round on the 5M day only (about a minute a round); on the 20M day it is
  not run. The optimized result is checked against the generator's final books (which the
  naive twin rebuilds exactly on the 5M day and in the test suite); itch-book's counters
  against the same books (live orders, no unknown reference, no crossed book).
* ``uniform`` (match mode, ``twinmatch gen uniform``: 500k buys then 500k sells, prices
  uniform over 10,000..90,000, quantities 1..500): the file is decoded once (optimized
  decoder) and every impl receives the same EVENT_DTYPE array: matching + one Python call +
  the fills array out + a fresh book per round (a new Market; the reference's arrays).
  No parse, no file I/O. ``capped-ref`` is native/capped_ref.hpp: arrays of 100,001 levels
  indexed by raw price, the order table indexed by raw reference, no checks in its loop
  (its input is checked once, at construction, outside the timing).
* ``match-ablation`` (chapter 5's match-mode decisions): the uniform events through the
  general path and through the batch engine, each step paired with the one before it
  (record ``match-step-batch``).
* ``growth`` (book mode): ns/message of the optimized replay on days of the same length
  (GROWTH_N messages) at 1, 500, 4,000 and 8,000 symbols; what ``day`` includes.
* ``locates`` (memory): 65,536 locates (every u16 value) with 1 or 4 orders each, applied in
  book mode in a fresh process; its peak RSS (the whole process: Python, numpy and the
  books) is recorded as a measured value, the time as the row.
* ``market-ablation`` (chapter 5's prefetching, in the style of chapter 1's steps): the
  20M-message day replayed through ``Market.run_file`` without and with the look-ahead
  prefetches (``set_lookahead``), paired (record ``market-step-prefetch``).
* ``full-day`` (``make bench-day`` only): a 270M-message day (a real NASDAQ day's size),
  generated, then replayed (``twinmatch.replay.replay``, what ``twinmatch replay`` runs) in
  a fresh process: its wall time and peak RSS (VmHWM).

The speed targets are the paired tests here (``paired`` group, tests/bench/paired.py).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import optimized.itch as optimized_itch
from optimized import _native
from tests.bench import valgrind
from tests.bench.conftest import SMALL
from tests.bench.paired import Side, paired
from twinmatch.gen import many_locates_events, uniform_flow_bytes, write_market_day
from twinmatch.replay import new_market, replay

ROOT = Path(__file__).resolve().parents[2]
# (name, messages, symbols): the two generated days of the book-mode comparison.
DAYS = {
    "day5m-500": (50_000 if SMALL else 5_000_000, 500),
    "day20m-4000": (100_000 if SMALL else 20_000_000, 4_000),
}
NAIVE_DAYS = {"day5m-500"}  # naive on the 20M day would take minutes a round: not run
UNIFORM_N = 20_000 if SMALL else 1_000_000
GROWTH_N = 50_000 if SMALL else 5_000_000
GROWTH_SYMBOLS = (1, 500, 4_000, 8_000)
LOCATES = 4_096 if SMALL else 65_536  # every u16 locate at full size
FULL_DAY_N = int(os.environ.get("TWINMATCH_BENCH_DAY_N", "200000" if SMALL else "270000000"))
FULL_DAY_SYMBOLS = 8_000
RUN_FULL_DAY = SMALL or os.environ.get("TWINMATCH_BENCH_DAY") == "1"
ITCH_BOOK_DATE = dt.date(2024, 1, 2)  # itch-book wants a session date; any date will do

INCLUDES = {
    "day": "book mode, the same raw ITCH file: read + decode + apply to every book "
           "(itch-book: its Feed.batches with no table, as `itch2parquet verify`)",
    "uniform": "match mode, the same decoded events in memory: matching + one call + fills "
               "array + a fresh book per round (the reference: its arrays made again, the same "
               "56-byte records read in its loop); no parse",
    "growth": "book mode, optimized replay of days of equal length at each symbol count",
    "locates": "book mode, 65,536 locates: time to apply their adds (peak RSS recorded)",
    "full-day": "replay of a generated 270M-message day in a fresh process (what twinmatch "
                "replay runs): wall time (interpreter start-up included) and peak RSS",
}


def wall(fn: Callable[[], object]) -> Callable[[Any], None]:
    def run(_: Any) -> None:
        fn()

    return run


# ------------------------------------------------------------------------ files


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Every book-mode day of the group, generated once: name -> (file, books CSV)."""
    out = tmp_path_factory.mktemp("engine")
    wanted = {name: spec for name, spec in DAYS.items()}
    for s in GROWTH_SYMBOLS:
        wanted.setdefault(f"growth-{s}", (GROWTH_N, s))
    made: dict[str, tuple[Path, str]] = {}
    for name, (messages, symbols) in wanted.items():
        same = next((made[k] for k, spec in wanted.items()
                     if k in made and spec == (messages, symbols)), None)
        if same is not None:  # the 5M/500 day is also the growth row at 500 symbols
            made[name] = same
            continue
        write_market_day(out, messages, symbols, seed=1, name=name)
        made[name] = (out / f"{name}.itch", (out / f"{name}.books.csv").read_text())
    return made


def itch_book_replay(path: Path) -> dict[str, Any]:
    """itch-book's replay of a file as its README's `verify` runs it; returns its stats."""
    itch_book = pytest.importorskip("itch_book", reason="pip install -e '.[bench]'")
    feed = itch_book.Feed(str(path), date=ITCH_BOOK_DATE)
    for _ in feed.batches(tables=("system_events",), rows=1 << 30):
        pass
    stats: dict[str, Any] = feed.stats
    return stats


def check_itch_book(path: Path, books: str, messages: int) -> None:
    stats = itch_book_replay(path)
    live = books.count("\n") - 1  # books CSV: header + one row per resting order
    assert stats["messages"] == messages and stats["missing_ref"] == 0
    assert stats["live_orders"] == live and stats["crossed_books"] == 0
    assert stats["rejected"] == 0 and stats["dup_ref"] == 0


def check_twin(impl: str, path: Path, books: str) -> None:
    result = replay(path, impl, "book")
    assert result.market.books_csv() == books
    assert sum(result.report["anomalies"].values()) == 0


# ----------------------------------------------------------- 1. generated days


@pytest.mark.benchmark(group="engine")
@pytest.mark.parametrize("workload", list(DAYS))
@pytest.mark.parametrize("impl", ["naive", "optimized", "itch-book"])
def test_engine_day(benchmark: Any, impl: str, workload: str,
                    days: dict[str, tuple[Path, str]]) -> None:
    path, books = days[workload]
    messages, symbols = DAYS[workload]
    benchmark.extra_info.update(ops=messages, messages=messages, symbols=symbols,
                                workload=workload, impl=impl, includes=INCLUDES["day"])
    if impl == "naive":
        if workload not in NAIVE_DAYS and not SMALL:
            pytest.skip("naive on the 20M-message day: minutes a round (run on the 5M day)")
        result: list[Any] = []
        # One round, checked after it: a second naive run only to check would double it.
        benchmark.pedantic(lambda: result.append(replay(path, "naive", "book")), rounds=1,
                           iterations=1)
        assert result[0].market.books_csv() == books
        return
    if impl == "itch-book":
        check_itch_book(path, books, messages)
        benchmark.pedantic(itch_book_replay, args=(path,), rounds=5, iterations=1)
        return
    check_twin("optimized", path, books)
    benchmark.pedantic(replay, args=(path, "optimized", "book"), rounds=5, iterations=1)


@pytest.mark.benchmark(group="paired")
@pytest.mark.parametrize("workload", list(DAYS))
def test_paired_engine_day(benchmark: Any, workload: str,
                           days: dict[str, tuple[Path, str]]) -> None:
    path, books = days[workload]
    messages, symbols = DAYS[workload]
    check_twin("optimized", path, books)
    check_itch_book(path, books, messages)
    fast = Side("optimized", wall(lambda: replay(path, "optimized", "book")), ops=messages)
    slow = Side("itch-book", wall(lambda: itch_book_replay(path)), ops=messages)
    key = {"day5m-500": "engine-day5m-vs-itchbook",
           "day20m-4000": "engine-day20m-vs-itchbook"}[workload]
    paired(benchmark, key, fast, slow, pairs=11, warmup=1, workload=workload,
           messages=messages, symbols=symbols, includes=INCLUDES["day"])


# ------------------------------------------------------- 2. match mode, uniform


def uniform_events() -> np.ndarray:
    events, _ = optimized_itch.decode(uniform_flow_bytes(UNIFORM_N, seed=1))
    return events


def run_market(events: np.ndarray) -> np.ndarray:
    fills: np.ndarray = new_market("optimized", "match").run(events)
    return fills


@pytest.fixture(scope="module")
def uniform() -> tuple[np.ndarray, np.ndarray, Any]:
    """(events, the naive twin's fills, a checked CappedRef)."""
    events = uniform_events()
    naive = new_market("naive", "match")
    want = naive.run(events)
    got = run_market(events)
    assert len(got) == len(want) > 0 and bool((got == want).all())
    ref = _native.CappedRef(events.view(np.uint8), UNIFORM_N)
    ref_fills = ref.run()
    assert len(ref_fills) == len(want) and bool((ref_fills == want).all())
    assert ref.resting() == len(naive)
    return events, want, ref


@pytest.mark.benchmark(group="engine")
@pytest.mark.parametrize("impl", ["naive", "optimized", "capped-ref"])
def test_engine_uniform(benchmark: Any, impl: str,
                        uniform: tuple[np.ndarray, np.ndarray, Any]) -> None:
    events, _, ref = uniform
    benchmark.extra_info.update(ops=UNIFORM_N, messages=UNIFORM_N, workload="uniform",
                                impl=impl, includes=INCLUDES["uniform"])
    if impl == "naive":  # checked by the fixture (it is the reference of the check)
        benchmark.pedantic(lambda: new_market("naive", "match").run(events), rounds=1,
                           iterations=1)
    elif impl == "optimized":
        benchmark.pedantic(run_market, args=(events,), rounds=11, iterations=1)
    else:
        benchmark.pedantic(ref.run, rounds=11, iterations=1)


@pytest.mark.benchmark(group="paired")
def test_paired_engine_uniform(benchmark: Any,
                               uniform: tuple[np.ndarray, np.ndarray, Any]) -> None:
    events, _, ref = uniform
    # The reference is the fast side: the ratio is the market's time over the ceiling's.
    fast = Side("capped-ref", wall(ref.run), ops=UNIFORM_N)
    slow = Side("optimized", wall(lambda: run_market(events)), ops=UNIFORM_N)
    record = paired(benchmark, "engine-match-vs-capped", fast, slow, pairs=21, warmup=1,
                    workload="uniform", messages=UNIFORM_N, includes=INCLUDES["uniform"])
    if valgrind.available(SMALL):  # deterministic counts of the same two calls
        record["valgrind"] = {
            side: valgrind.counts(UNIFORM_SETUP.format(n=UNIFORM_N, run=call), UNIFORM_N)
            for side, call in (("fast", "ref.run()"),
                               ("slow", 'new_market("optimized", "match").run(events)'))}


# The uniform file's events and a checked reference, as a child process builds them for
# cachegrind (tests/bench/valgrind.py): the same calls as the timed rounds.
UNIFORM_SETUP = """
import numpy as np
from optimized import _native
import optimized.itch as optimized_itch
from twinmatch.gen import uniform_flow_bytes
from twinmatch.replay import new_market
events, _ = optimized_itch.decode(uniform_flow_bytes({n}, seed=1))
ref = _native.CappedRef(events.view(np.uint8), {n})
def prepare():
    return None
def run(state):
    {run}
"""


# ------------------------------------- 2a. match mode, the whole run, pipelined

PIPELINE_INCLUDES = ("match mode, the uniform file from disk to the fills CSV, whole run: "
                     "twinmatch replay --pipeline (C++ stages; on 2 cores parser + engine "
                     "fused, the fill logger on the other) against twinmatch replay "
                     "(one thread: read, decode + match, fills written by Python)")


@pytest.mark.benchmark(group="paired")
def test_paired_engine_pipeline(benchmark: Any, tmp_path: Path) -> None:
    """replay --pipeline --mode match against the single-threaded replay, same file, both
    writing the fills CSV (checked equal first)."""
    from twinmatch.pipeline_replay import replay_pipeline

    path = tmp_path / "uniform.itch"
    path.write_bytes(uniform_flow_bytes(UNIFORM_N, seed=1))
    piped, single = tmp_path / "piped.csv", tmp_path / "single.csv"
    replay_pipeline(path, "optimized", "match", piped)
    replay(path, "optimized", "match", fills_path=single)
    assert piped.read_bytes() == single.read_bytes()
    fast = Side("replay --pipeline",
                wall(lambda: replay_pipeline(path, "optimized", "match", piped)), ops=UNIFORM_N)
    slow = Side("replay", wall(lambda: replay(path, "optimized", "match", fills_path=single)),
                ops=UNIFORM_N)
    paired(benchmark, "engine-pipeline-vs-replay", fast, slow, pairs=11, warmup=1,
           workload="uniform", messages=UNIFORM_N, includes=PIPELINE_INCLUDES)


# ------------------------------------------------- 2b. match mode, ablated

# Chapter 5's match-mode decisions, one step each (in the style of market-ablation): the
# uniform file's events through the general path (every event checked and applied to the
# market's own structures) and through the batch engine (native/market.hpp run_batch:
# flat arrays sized from the batch, then the hand-over of what rests).
MATCH_STEPS = (
    ("general", "every event through match(): the order table by reference, the windows "
                "of levels, the checks and the strong guarantee per event"),
    ("batch", "the batch engine: a level per price and a 16-byte slot per reference, "
              "sized from the batch; what rests handed to the general structures at the end"),
)
MATCH_ABLATION_INCLUDES = ("match mode, the uniform file's decoded events in memory: "
                           "matching + one call + fills array + a fresh market per round; "
                           "the batch step includes its plan pass and its hand-over")


def match_step_run(step: int, events: np.ndarray) -> Callable[[], object]:
    def run() -> object:
        m = new_market("optimized", "match")
        if step == 0:
            m.set_match_batch(0)
        return m.run(events)
    return run


@pytest.mark.benchmark(group="match-ablation")
@pytest.mark.parametrize("step", range(len(MATCH_STEPS)))
def test_match_ablation(benchmark: Any, step: int,
                        uniform: tuple[np.ndarray, np.ndarray, Any]) -> None:
    events, want, _ = uniform
    got: Any = match_step_run(step, events)()
    assert len(got) == len(want) and bool((got == want).all())
    name, adds = MATCH_STEPS[step]
    benchmark.extra_info.update(ops=UNIFORM_N, messages=UNIFORM_N, impl=f"step{step}",
                                workload="uniform", step=step, step_name=name, adds=adds,
                                includes=MATCH_ABLATION_INCLUDES)
    if valgrind.available(SMALL):
        call = ('m = new_market("optimized", "match"); '
                + ("m.set_match_batch(0); " if step == 0 else "") + "m.run(events)")
        benchmark.extra_info["valgrind"] = valgrind.counts(
            UNIFORM_SETUP.format(n=UNIFORM_N, run=call), UNIFORM_N)
    benchmark.pedantic(match_step_run(step, events), rounds=11, iterations=1)


@pytest.mark.benchmark(group="paired")
@pytest.mark.parametrize("step", range(1, len(MATCH_STEPS)))
def test_paired_match_step(benchmark: Any, step: int,
                           uniform: tuple[np.ndarray, np.ndarray, Any]) -> None:
    """Each match-mode step against the one before it, interleaved."""
    events = uniform[0]
    name = MATCH_STEPS[step][0]
    fast = Side(f"step{step}-{name}", wall(match_step_run(step, events)), ops=UNIFORM_N)
    slow = Side(f"step{step - 1}-{MATCH_STEPS[step - 1][0]}",
                wall(match_step_run(step - 1, events)), ops=UNIFORM_N)
    paired(benchmark, f"match-step-{name}", fast, slow, pairs=11, warmup=1, step=step,
           workload="uniform", includes=MATCH_ABLATION_INCLUDES)


# --------------------------------------------------------------- 3. cost growth


@pytest.mark.benchmark(group="engine")
@pytest.mark.parametrize("symbols", GROWTH_SYMBOLS)
@pytest.mark.parametrize("impl", ["optimized"])
def test_engine_growth(benchmark: Any, impl: str, symbols: int,
                       days: dict[str, tuple[Path, str]]) -> None:
    path, books = days[f"growth-{symbols}"]
    check_twin(impl, path, books)
    benchmark.extra_info.update(ops=GROWTH_N, messages=GROWTH_N, workload="growth",
                                impl=impl, includes=INCLUDES["growth"])
    benchmark.pedantic(replay, args=(path, impl, "book"), rounds=5, iterations=1)


@pytest.mark.benchmark(group="paired")
def test_paired_engine_growth(benchmark: Any, days: dict[str, tuple[Path, str]]) -> None:
    small, large = days["growth-500"], days["growth-4000"]
    check_twin("optimized", *small)
    check_twin("optimized", *large)
    fast = Side("500 symbols", wall(lambda: replay(small[0], "optimized", "book")),
                ops=GROWTH_N)
    slow = Side("4,000 symbols", wall(lambda: replay(large[0], "optimized", "book")),
                ops=GROWTH_N)
    paired(benchmark, "engine-growth", fast, slow, pairs=11, warmup=1, workload="growth",
           messages=GROWTH_N, includes=INCLUDES["growth"])


# ------------------------------------------------------- 3b. prefetching, ablated

MARKET_STEPS = (
    ("no-prefetch", "the market's loop without look-ahead (set_lookahead_stages(0))"),
    ("prefetch", "each message asks for the reference slot 4 records ahead and the order "
                 "node 2 ahead (an add: its locate's lines, then its level)"),
    ("prefetch-level", "and, 1 record ahead, what the node leads to: its level, its bitset "
                       "word, its queue neighbours (an add: the level's youngest order); the "
                       "locate's three lines from the message's own locate, 4 ahead"),
)
# The default (= twinmatch replay) runs the three stages only while the working set (a
# line per live order plus the window levels) outgrows half the last-level cache; the
# paired records below show what that rule saves on the one- and 500-symbol days, whose
# working sets fit (on the 20M-message, 4,000-symbol day it is on for most of the day).
MARKET_ABLATION_INCLUDES = ("book mode, Market.run_file over the 20M-message, 4,000-symbol "
                            "day: read + decode + apply; a fresh market per round")


def market_step_run(step: int | None, path: Path) -> Callable[[], object]:
    """Step 0..2 of MARKET_STEPS (a fixed number of look-ahead stages), or None: the
    default rule."""
    def run() -> object:
        from optimized.market import Market

        m = Market("book")
        if step is not None:
            m.set_lookahead_stages(step + 1 if step > 0 else 0)
        for _ in m.run_file(path):
            pass
        return m
    return run


@pytest.mark.benchmark(group="market-ablation")
@pytest.mark.parametrize("step", range(len(MARKET_STEPS)))
def test_market_ablation(benchmark: Any, step: int, days: dict[str, tuple[Path, str]]) -> None:
    path, books = days["day20m-4000"]
    messages = DAYS["day20m-4000"][0]
    market: Any = market_step_run(step, path)()
    assert market.books_csv() == books
    name, adds = MARKET_STEPS[step]
    benchmark.extra_info.update(ops=messages, messages=messages, impl=f"step{step}",
                                workload="day20m-4000", step=step, step_name=name, adds=adds,
                                includes=MARKET_ABLATION_INCLUDES)
    benchmark.pedantic(market_step_run(step, path), rounds=5, iterations=1)


@pytest.mark.benchmark(group="paired")
@pytest.mark.parametrize("step", range(1, len(MARKET_STEPS)))
def test_paired_market_step(benchmark: Any, step: int,
                            days: dict[str, tuple[Path, str]]) -> None:
    """Chapter 5's prefetching: each stage against the loop without it, interleaved."""
    path, _ = days["day20m-4000"]
    messages = DAYS["day20m-4000"][0]
    name = MARKET_STEPS[step][0]
    fast = Side(f"step{step}-{name}", wall(market_step_run(step, path)), ops=messages)
    slow = Side(f"step{step - 1}-{MARKET_STEPS[step - 1][0]}",
                wall(market_step_run(step - 1, path)), ops=messages)
    paired(benchmark, f"market-step-{name}", fast, slow, pairs=11, warmup=1, step=step,
           workload="day20m-4000", includes=MARKET_ABLATION_INCLUDES)


@pytest.mark.benchmark(group="paired")
@pytest.mark.parametrize("symbols", [1, 500])
def test_paired_market_lookahead_rule(benchmark: Any, symbols: int,
                                      days: dict[str, tuple[Path, str]]) -> None:
    """The default rule (look-ahead only while the working set outgrows half the
    last-level cache) against always prefetching, on the growth days of 1 and 500
    symbols, whose working sets fit the cache."""
    path, books = days[f"growth-{symbols}"]
    market: Any = market_step_run(None, path)()
    assert market.books_csv() == books
    fast = Side("by-working-set", wall(market_step_run(None, path)), ops=GROWTH_N)
    slow = Side("always", wall(market_step_run(len(MARKET_STEPS) - 1, path)), ops=GROWTH_N)
    key = "market-lookahead-rule" + ("" if symbols == 1 else f"-{symbols}")
    paired(benchmark, key, fast, slow, pairs=11, warmup=1,
           workload=f"growth-{symbols}", messages=GROWTH_N, includes=INCLUDES["growth"])


# ------------------------------------------------------------ 4. 65,536 locates


def locate_events(per_book: int) -> np.ndarray:
    return many_locates_events(LOCATES, per_book)


# Peak RSS in a child process is read from /proc/self/status (VmHWM: this process's own
# high-water mark). getrusage's ru_maxrss would not do: Linux carries it across exec, so a
# child started from a large pytest process reports the parent's peak.
HWM = """
def hwm_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")
"""

LOCATES_CHILD = HWM + """
import json, sys
from twinmatch.gen import many_locates_events
from twinmatch.replay import new_market
locates, per_book, apply = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
events = many_locates_events(locates, per_book)
market = new_market("optimized", "book")
if apply:
    market.run(events)
print(json.dumps({"peak_mb": hwm_mb(), "live": len(market), "books": int(market.books)}))
"""

DAY_CHILD = HWM + """
import json, sys
from twinmatch.replay import replay
report = replay(sys.argv[1], "optimized", "book").report
del report["top"]
print(json.dumps({**report, "peak_mb": hwm_mb()}))
"""


def child(script: str, *args: object) -> dict[str, Any]:
    """Run a script in a fresh interpreter (in the repository); its JSON line back."""
    out = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True,
                         text=True, check=True, cwd=ROOT, timeout=3600)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def child_rss(per_book: int, apply: bool) -> dict[str, Any]:
    """Peak RSS of a fresh process that builds the locates' events (and applies them)."""
    return child(LOCATES_CHILD, LOCATES, per_book, 1 if apply else 0)


@pytest.mark.benchmark(group="engine")
@pytest.mark.parametrize("per_book", [1, 4])
@pytest.mark.parametrize("impl", ["optimized"])
def test_engine_locates(benchmark: Any, impl: str, per_book: int) -> None:
    events = locate_events(per_book)
    naive, opt = new_market("naive", "book"), new_market(impl, "book")
    naive.run(events)
    opt.run(events)
    assert len(opt) == len(naive) == len(events) and opt.books == naive.books == LOCATES
    assert opt.books_csv() == naive.books_csv()
    rss = child_rss(per_book, apply=True)
    base = child_rss(per_book, apply=False)
    assert rss["live"] == len(events) and rss["books"] == LOCATES
    # The targets read the 65,536-locate records only (the smoke run's smaller ones differ).
    key = f"engine-{LOCATES}-books-rss" if per_book == 1 else (
        f"engine-{LOCATES}-books-{per_book}-rss")
    benchmark.extra_info.update(
        ops=len(events), messages=len(events), workload=f"{LOCATES:,} locates x {per_book}",
        impl=impl, includes=INCLUDES["locates"], peak_rss_mb=rss["peak_mb"],
        measure={"key": key, "value": rss["peak_mb"], "unit": "MB",
                 "detail": f"whole process; {base['peak_mb']:.0f} MB before any book "
                           f"(Python, numpy, the events)"})
    benchmark.pedantic(lambda: new_market(impl, "book").run(events), rounds=3, iterations=1)


# ------------------------------------------------------------ 5. a full-size day


@pytest.mark.benchmark(group="engine-day")
@pytest.mark.skipif(not RUN_FULL_DAY, reason="make bench-day (TWINMATCH_BENCH_DAY=1)")
def test_engine_full_day(benchmark: Any, tmp_path: Path) -> None:
    out = Path(os.environ.get("TWINMATCH_BENCH_DAY_DIR", str(tmp_path)))
    start = time.perf_counter()
    gen = write_market_day(out, FULL_DAY_N, FULL_DAY_SYMBOLS, seed=1, name="full-day")
    gen_s = time.perf_counter() - start
    path = out / "full-day.itch"
    reports: list[dict[str, Any]] = []

    def run() -> None:  # the replay (twinmatch replay's function) in a process of its own
        reports.append(child(DAY_CHILD, path))

    try:
        benchmark.pedantic(run, rounds=1, iterations=1)
    finally:
        for p in gen.paths:  # about 8 GB at full size: not kept
            p.unlink(missing_ok=True)
    report = reports[0]
    # The check: the simulator's own count of resting orders, no anomaly. (The books CSV
    # of a day this size is checked line by line only at the smaller sizes above.)
    assert report["messages"] == FULL_DAY_N and report["live_orders"] == gen.live_orders
    assert sum(report["anomalies"].values()) == 0
    # The target reads the full-size record only (not the smoke run's small day).
    key = "engine-full-day-rss" if FULL_DAY_N == 270_000_000 else f"engine-day-{FULL_DAY_N}-rss"
    benchmark.extra_info.update(
        ops=FULL_DAY_N, messages=FULL_DAY_N, workload=f"{FULL_DAY_N:,} messages",
        impl="optimized", includes=INCLUDES["full-day"], gen_seconds=gen_s,
        replay_seconds=report["seconds"], peak_rss_mb=report["peak_mb"],
        measure={"key": key, "value": report["peak_mb"], "unit": "MB",
                 "detail": f"replay {report['seconds']:.0f} s in the process "
                           f"({report['ns_per_message']:.0f} ns/message); generation "
                           f"{gen_s:.0f} s"})


# ------------------------------------------- plain tests (run in the normal suite)


def test_uniform_file_shape() -> None:
    """Half buys then half sells, prices 10,000..90,000, quantities 1..500, refs 1..n."""
    n = 2_000
    events, counts = optimized_itch.decode(uniform_flow_bytes(n, seed=3))
    assert counts == {"S": 2, "R": 1, "A": n}
    adds = events[events["type"] == ord("A")]
    assert adds["order_ref"].tolist() == list(range(1, n + 1))
    assert set(adds["side"][: n // 2].tolist()) == {ord("B")}
    assert set(adds["side"][n // 2:].tolist()) == {ord("S")}
    assert adds["price"].min() >= 10_000 and adds["price"].max() <= 90_000
    assert adds["shares"].min() >= 1 and adds["shares"].max() <= 500
    assert len(np.unique(adds["price"])) > n // 2  # spread wide: most prices distinct


def test_capped_ref_matches_naive_and_refuses_what_it_cannot_hold() -> None:
    events, _ = optimized_itch.decode(uniform_flow_bytes(3_000, seed=5))
    naive = new_market("naive", "match")
    want = naive.run(events)
    ref = _native.CappedRef(events.view(np.uint8), 3_000)
    got = ref.run()
    assert len(got) == len(want) > 0 and bool((got == want).all())
    assert ref.resting() == len(naive)
    assert bool((ref.run() == want).all())  # a second run starts from an empty book again
    adds = np.flatnonzero(events["type"] == ord("A"))
    for field, value, words in (("price", 100_001, "price"), ("locate", 2, "locate 1"),
                                ("order_ref", 3_001, "reference"), ("shares", 0, "shares"),
                                ("side", ord("X"), "side")):
        bad = events.copy()
        bad[field][adds[7]] = value
        with pytest.raises(ValueError, match=f"event {adds[7]}: .*{words}"):
            _native.CappedRef(bad.view(np.uint8), 3_000)
    twice = events.copy()
    twice["order_ref"][adds[8]] = twice["order_ref"][adds[7]]
    with pytest.raises(ValueError, match="reused"):
        _native.CappedRef(twice.view(np.uint8), 3_000)


def test_many_locates_events_cover_every_locate() -> None:
    ev = many_locates_events(65_536, 2)
    assert len(ev) == 131_072 and len(np.unique(ev["locate"])) == 65_536
    assert len(np.unique(ev["order_ref"])) == len(ev)
    market = new_market("optimized", "book")
    market.run(ev[:4_096 * 2])
    assert len(market) == 8_192


def test_twinmatch_gen_uniform_writes_the_file(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from twinmatch.cli import main

    out = tmp_path / "uniform.itch"
    assert main(["gen", "uniform", "--orders", "100", "--seed", "2", "--out", str(out)]) == 0
    assert out.read_bytes() == uniform_flow_bytes(100, seed=2)
    assert "A=100" in capsys.readouterr().out
    report = replay(out, "optimized", "match").report
    assert report["by_type"] == {"A": 100, "R": 1, "S": 2} and report["fills"] > 0
