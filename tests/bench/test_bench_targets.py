"""The speed targets of chapters 3, 5 and 6, measured paired (group "paired").

Each test measures one target of scripts/targets.py with tests/bench/paired.py: the two
sides interleaved in one process after a warm-up, the median of the per-pair ratios. The
group benchmarks (test_bench_itch.py, test_bench_replay.py, test_bench_pipeline.py) give the
tables; these give the ratios. Where a side is the naive twin and a paired round of the
group's full size would take minutes, the pairs run on a smaller input, said in the target's
claim and in ``workload``:

* itch-vs-naive, itch-vs-itchcpp: a TWINMATCH_BENCH_PAIRED_ITCH_N-message day (default
  1,000,000; the group's day is 10M), decoded from memory;
* itch-vs-read: the group's own day (both sides are C++);
* replay-book-vs-naive, replay-match-vs-naive: a TWINMATCH_BENCH_PAIRED_REPLAY_N-message
  day / flow (default 1,000,000; the group's is 5M), end to end from the file;
* pipeline-vs-naive, pipeline-vs-single: the group's flow (500,000 orders).

Every test first checks both sides' results against the naive twin.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import naive.itch as naive_itch
import optimized.itch as optimized_itch
from tests.bench.conftest import SMALL
from tests.bench.paired import Side, paired
from tests.bench.test_bench_itch import check_itchfeed, itchfeed_parser
from tests.bench.test_bench_pipeline import INCLUDES as PIPELINE_INCLUDES
from tests.bench.test_bench_pipeline import N as PIPELINE_N
from tests.bench.test_bench_pipeline import run_impl
from tests.bench.test_bench_replay import INCLUDES as REPLAY_INCLUDES
from twinmatch.gen import write_itch_flow, write_market_day
from twinmatch.itch_samples import cached_sample_day
from twinmatch.replay import replay

ITCH_N = int(os.environ.get("TWINMATCH_BENCH_PAIRED_ITCH_N", "20000" if SMALL else "1000000"))
ITCH_FULL_N = int(os.environ.get("TWINMATCH_BENCH_ITCH_N", "20000" if SMALL else "10000000"))
REPLAY_N = int(os.environ.get("TWINMATCH_BENCH_PAIRED_REPLAY_N",
                              "50000" if SMALL else "1000000"))
SYMBOLS = 500


# ---------------------------------------------------------------------------- itch


def wall(fn: Callable[[], object]) -> Callable[[Any], None]:
    """A side's run that calls ``fn`` and lets the helper take the wall time."""

    def run(_: Any) -> None:
        fn()

    return run


def decode_side(name: str, day: bytes, n: int) -> Side:
    """One decoder over the day; ops = messages (the same for every side of a pair)."""
    if name == "sum_bytes":
        return Side(name, wall(lambda: optimized_itch.sum_bytes(day)), ops=n)
    if name == "itchcpp":
        parse = itchfeed_parser(name)
        return Side(name, wall(lambda: list(parse(day))), ops=n)
    mod = naive_itch if name == "naive" else optimized_itch
    return Side(name, wall(lambda: mod.decode(day)), ops=n)


@cache
def naive_decoded(n: int) -> tuple[np.ndarray, dict[str, int]]:
    """The naive twin's decode of the n-message day (once per size: ~5 s per 1M)."""
    decoded: tuple[np.ndarray, dict[str, int]] = naive_itch.decode(cached_sample_day(n, seed=1))
    return decoded


PAIRED_ITCH = {
    # key: (fast, slow, which day, pairs)
    "itch-vs-naive": ("optimized", "naive", "paired", 11),
    "itch-vs-itchcpp": ("optimized", "itchcpp", "paired", 11),
    # a share of the bandwidth ceiling: sum_bytes' time over the decoder's (fast = decoder)
    "itch-vs-read": ("optimized", "sum_bytes", "full", 21),
}


@pytest.mark.benchmark(group="paired")
@pytest.mark.parametrize("key", list(PAIRED_ITCH))
def test_paired_itch(benchmark: Any, key: str) -> None:
    fast_name, slow_name, which, pairs = PAIRED_ITCH[key]
    n = ITCH_N if which == "paired" else ITCH_FULL_N
    day = cached_sample_day(n, seed=1)
    events, counts = naive_decoded(n)  # the naive twin's result: the check
    got_events, got_counts = optimized_itch.decode(day)
    assert got_counts == counts and got_events.tobytes() == events.tobytes()
    if "itchcpp" in (fast_name, slow_name):
        check_itchfeed(list(itchfeed_parser("itchcpp")(day)), (events, counts))
    fast, slow = decode_side(fast_name, day, n), decode_side(slow_name, day, n)
    record = paired(benchmark, key, fast, slow, pairs=pairs, warmup=1,
                    workload=f"{n:,}-message day in memory", messages=n, bytes=len(day),
                    includes="decode from memory, no file I/O (see test_bench_itch.py)")
    assert record["median"] > 0


# ---------------------------------------------------------------------------- replay


@pytest.fixture(scope="module")
def replay_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    out = tmp_path_factory.mktemp("paired-replay")
    write_market_day(out, REPLAY_N, SYMBOLS, seed=1)
    write_itch_flow(out / "flow.itch", REPLAY_N - (6 + 2 * SYMBOLS), SYMBOLS, seed=1)
    return {"book": (out / "day.itch", (out / "day.books.csv").read_text()),
            "match": (out / "flow.itch", (out / "flow.books.csv").read_text())}


@pytest.mark.benchmark(group="paired")
@pytest.mark.parametrize("mode", ["book", "match"])
def test_paired_replay(benchmark: Any, mode: str,
                       replay_files: dict[str, tuple[Path, str]]) -> None:
    path, books = replay_files[mode]
    for impl in ("naive", "optimized"):  # both twins rebuild the generator's final books
        result = replay(path, impl, mode)
        assert result.market.books_csv() == books
        assert sum(result.report["anomalies"].values()) == 0

    def side(impl: str) -> Side:
        return Side(f"{mode}/{impl}", wall(lambda: replay(path, impl, mode)), ops=REPLAY_N)

    paired(benchmark, f"replay-{mode}-vs-naive", side("optimized"), side("naive"), pairs=11,
           warmup=1, workload=f"{REPLAY_N:,}-message {'day' if mode == 'book' else 'flow'}",
           messages=REPLAY_N, includes=REPLAY_INCLUDES[mode])


# ---------------------------------------------------------------------------- pipeline


@pytest.fixture(scope="module")
def pipeline_feed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("paired-pipeline")
    write_itch_flow(out / "flow.itch", PIPELINE_N, SYMBOLS, seed=1)
    run_impl("naive-pipeline", out / "flow.itch", out / "want.csv")
    return {"flow": out / "flow.itch", "want": out / "want.csv", "dir": out}


PAIRED_PIPELINE = {
    "pipeline-vs-naive": ("optimized-pipeline", "naive-pipeline"),
    "pipeline-vs-single": ("optimized-pipeline", "optimized-single"),
}


@pytest.mark.benchmark(group="paired")
@pytest.mark.parametrize("key", list(PAIRED_PIPELINE))
def test_paired_pipeline(benchmark: Any, key: str, pipeline_feed: dict[str, Path]) -> None:
    flow, want = pipeline_feed["flow"], pipeline_feed["want"].read_bytes()
    messages = PIPELINE_N + 6 + 2 * SYMBOLS

    def side(impl: str) -> Side:
        out = pipeline_feed["dir"] / f"{key}-{impl}.csv"
        run_impl(impl, flow, out)
        assert out.read_bytes() == want  # the naive pipeline's fills, byte for byte
        return Side(impl, wall(lambda: run_impl(impl, flow, out)), ops=messages)

    fast_impl, slow_impl = PAIRED_PIPELINE[key]
    fast, slow = side(fast_impl), side(slow_impl)
    paired(benchmark, key, fast, slow, pairs=11, warmup=1, workload="match",
           messages=messages, cpus=len(os.sched_getaffinity(0)),
           includes=f"{fast_impl}: {PIPELINE_INCLUDES[fast_impl]}; "
                    f"{slow_impl}: {PIPELINE_INCLUDES[slow_impl]}")


def test_quartiles_match_numpy() -> None:
    """The helper's quartiles are numpy's (linear interpolation)."""
    from tests.bench.paired import quartiles

    values = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0]
    want = np.percentile(values, [25, 50, 75])
    assert quartiles(values) == pytest.approx(tuple(want))


def test_targets_judge_the_median_of_per_pair_ratios() -> None:
    """targets.py reads the paired record: the median ratio and its IQR, not two medians."""
    import importlib.util

    from tests.bench.paired import summarize

    spec = importlib.util.spec_from_file_location(
        "tm_targets", Path(__file__).resolve().parents[2] / "scripts" / "targets.py")
    assert spec is not None and spec.loader is not None
    targets = importlib.util.module_from_spec(spec)
    sys.modules["tm_targets"] = targets  # dataclasses look their module up there
    spec.loader.exec_module(targets)
    fast, slow = Side("a", lambda _: None, ops=10), Side("b", lambda _: None, ops=10)
    # Per-pair ratios 120, 90, 110, 95, 105, ...: median 105 even though one pair drifted.
    fast_s = [1.0] * 11
    slow_s = [120.0, 90.0, 110.0, 95.0, 105.0, 130.0, 100.0, 108.0, 99.0, 101.0, 500.0]
    record = summarize("book-batch-vs-naive", fast, slow, fast_s, slow_s, warmup=1)
    run = {"benchmarks": [{"extra_info": {"paired": record}},
                          {"extra_info": {"measure": {"key": "engine-65536-books-rss",
                                                      "value": 250.0, "unit": "MB"}}}]}
    results = {r["key"]: r for r in targets.evaluate(run)}
    batch = results["book-batch-vs-naive"]
    assert batch["ratio"] == pytest.approx(105.0) and batch["status"] == "pass"
    assert batch["q1"] < 105.0 < batch["q3"] and batch["pairs"] == 11
    assert results["engine-65536-books-rss"]["status"] == "FAIL"  # 250 MB > 200 MB
    assert results["book-vs-map"]["status"] == "not measured"
    table = targets.markdown(list(results.values()), run)
    assert "105.00x (IQR" in table and "250 MB" in table


def test_cachegrind_summary_parsed() -> None:
    from tests.bench.valgrind import parse_summary

    text = "desc: I1 cache\ncmd: python\nevents: Ir I1mr ILmr Dr\nfl=x\nsummary: 10 2 1 7\n"
    assert parse_summary(text) == {"Ir": 10, "I1mr": 2, "ILmr": 1, "Dr": 7}
    with pytest.raises(ValueError):
        parse_summary("events: Ir\n")
