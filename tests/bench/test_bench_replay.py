"""Chapter 5 benchmarks: replaying a generated day end to end (group "replay").

Workloads (N = TWINMATCH_BENCH_REPLAY_N messages, default 5,000,000; 50,000 when
TWINMATCH_BENCH_SCALE=small):

* book    a market-data day (``twinmatch gen market``, 500 symbols) in book mode: the
          raw ITCH file read from disk, decoded by the twin's decoder, and every message
          applied by the twin's market (feed handler: no matching).
* match   an ITCH order-flow file (``twinmatch gen flow``, 500 symbols) in match mode:
          the same, with the twin's market as a matching engine.
* adds1m  optimized only: 1,000,000 add orders (A) for one symbol, already decoded (an
          EVENT_DTYPE array in memory), through the match-mode market; no file, no decode.
          For comparison with published engines' "orders per second".

Each benchmark first checks its result against the naive twin (the generator's final
books for book/match; fill count and live orders for adds1m against naive on a prefix).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from contract.dtypes import EVENT_DTYPE
from tests.bench.conftest import SMALL
from twinmatch.gen import write_itch_flow, write_market_day
from twinmatch.replay import new_market, replay

N = int(os.environ.get("TWINMATCH_BENCH_REPLAY_N", "50000" if SMALL else "5000000"))
ADDS = 20_000 if SMALL else 1_000_000
SYMBOLS = 500
INCLUDES = {
    "book": "read raw ITCH file + decode (twin's decoder) + book-mode market (no matching)",
    "match": "read raw ITCH file + decode (twin's decoder) + match-mode market (fills kept)",
    "adds1m": "match-mode market only: decoded A events in memory, one symbol, fills array",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    out = tmp_path_factory.mktemp("replay")
    write_market_day(out, N, SYMBOLS, seed=1)
    flow_messages = N - (6 + 2 * SYMBOLS)
    write_itch_flow(out / "flow.itch", flow_messages, SYMBOLS, seed=1)
    return {
        "book": (out / "day.itch", (out / "day.books.csv").read_text()),
        "match": (out / "flow.itch", (out / "flow.books.csv").read_text()),
    }


def adds_stream(n: int, seed: int = 7) -> np.ndarray:
    """n add orders for locate 1: random sides, prices within 50 ticks of $100."""
    rng = np.random.default_rng(seed)
    ev = np.zeros(n, dtype=EVENT_DTYPE)
    ev["type"] = ord("A")
    ev["locate"] = 1
    ev["order_ref"] = np.arange(1, n + 1, dtype=np.uint64)
    buy = rng.random(n) < 0.5
    ev["side"] = np.where(buy, ord("B"), ord("S"))
    offset = rng.integers(0, 50, n) * 100
    ev["price"] = np.where(buy, 1_000_000 - offset + 200, 1_000_000 + offset - 200)
    ev["shares"] = rng.integers(1, 10, n) * 100
    return ev


@pytest.mark.benchmark(group="replay")
@pytest.mark.parametrize("workload", ["book", "match"])
@pytest.mark.parametrize("impl", ["naive", "optimized"])
def test_bench_replay(benchmark: Any, impl: str, workload: str,
                      files: dict[str, tuple[Path, str]]) -> None:
    path, books = files[workload]
    benchmark.extra_info.update(ops=N, messages=N, workload=workload, impl=impl,
                                includes=INCLUDES[workload])
    # The check: the twin rebuilds the generator's final books exactly.
    result = replay(path, impl, workload)
    assert result.market.books_csv() == books
    assert sum(result.report["anomalies"].values()) == 0
    benchmark.extra_info["fills"] = result.report["fills"]

    def run() -> object:
        return replay(path, impl, workload)

    rounds = 1 if impl == "naive" else 3
    benchmark.pedantic(run, rounds=rounds, iterations=1, warmup_rounds=0)


@pytest.mark.benchmark(group="replay")
@pytest.mark.parametrize("impl", ["optimized"])
def test_bench_replay_adds(benchmark: Any, impl: str) -> None:
    events = adds_stream(ADDS)
    benchmark.extra_info.update(ops=ADDS, messages=ADDS, workload="adds1m", impl=impl,
                                includes=INCLUDES["adds1m"])
    prefix = events[:20_000]
    naive, opt = new_market("naive", "match"), new_market(impl, "match")
    want, got = naive.run(prefix), opt.run(prefix)
    assert len(want) == len(got) > 0 and bool((want == got).all())
    assert len(naive) == len(opt)

    def run() -> object:
        return new_market(impl, "match").run(events)

    benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1)
