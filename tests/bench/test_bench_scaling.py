"""Benchmarks of chapter 10, group "scaling": sharding a day over book workers.

The workload is a generated market-data day (``market_day_bytes``, book mode: the feed
handler rebuilding NASDAQ's books), held in memory as framed ITCH. What each includes:

* ``shard`` (optimized; ``design`` broadcast / routed, ``workers`` 1 / 2): the whole
  ``Shard.run``: the writer thread decoding every record, keeping its reference ->
  locate map (broadcast: A F U D only) and handing each event over (broadcast: one ring
  all workers read; routed: the hash, one SPSC ring per worker), the workers applying
  theirs to their Markets, the join;
  then (outside the native run, still timed) the merge of the fills and books CSVs.
  Threads are started and joined inside each timed run.
* ``writer`` (optimized; broadcast / routed): the writer alone, no ring and no worker:
  decode every record and keep the map (routed: of every event by reference, and
  hash the locate; broadcast: of A F U D). Its
  messages per second is the ceiling of the sharded market for any number of workers.
* ``one-market`` (optimized): ``Market.run_itch`` over the buffer in the calling thread:
  decode and apply in one pass, no threads (chapter 5's replay without the file).
* ``one-market-same-outputs`` (paired with ``routed``/1 only): ``Market.run_itch`` and
  then the same outputs the sharded run returns (its fills, books CSV and counts), so
  the pair has one scope: what the sharded run adds is the threads' start and join, the
  hand-off, and decoding apart from applying (the writer decodes; the one market decodes
  and applies in one fused pass).
* the scaling model (``test_scaling_model``): the writer's time per message (its
  ceiling), a worker's service time per message (``Market.run`` over decoded events: the
  apply alone) and the share of the day's events the busiest worker gets for 1 to 16
  workers (this day's routing), from which figures.py predicts the time per message for
  worker counts this machine does not have.
* ``naive-shard`` (naive; ``backend`` processes / threads, 2 workers, routed): the naive
  twin on a smaller day: the writer decodes with ``naive.itch.decode``, routes, and puts
  batches on queues; processes pickle each batch, threads share the GIL. Worker start
  (forkserver) and join are included.

Every benchmark first checks its result against one market fed the whole day (fills,
books, counts). The ratios the chapter quotes come from the paired tests at the end.
"""

from __future__ import annotations

import statistics
import time
from functools import cache
from typing import Any

import pytest

import naive.shard
import optimized.shard
from optimized.itch import decode
from optimized.market import Market
from tests.bench.conftest import SMALL
from tests.bench.paired import Side, paired
from twinmatch.gen import market_day_bytes

MESSAGES = 20_000 if SMALL else 1_000_000
NAIVE_MESSAGES = 4_000 if SMALL else 40_000
SYMBOLS = 500
ROUNDS = 3 if SMALL else 5

INCLUDES = {
    "shard": "writer thread decoding + hand-off (ring(s)) + workers' Markets + join + merge",
    "writer": "the writer alone: decode every record (routed: + reference map + hash); "
              "no ring, no worker",
    "one-market": "Market.run_itch in the calling thread: decode + apply, no threads",
    "one-market-same-outputs": "Market.run_itch in the calling thread (decode + apply, "
                               "fused) + fills, books CSV and counts, as the shard returns",
    "naive-shard": "naive decode + routing + queue hand-off (pickled between processes) "
                   "+ workers' Markets + start/join + merge",
}


@cache
def day(n: int) -> bytes:
    return market_day_bytes(n, SYMBOLS, seed=8)[0]


@cache
def reference(n: int) -> tuple[bytes, str, dict[str, Any]]:
    m = Market("book")
    fills = m.run(decode(day(n))[0])
    return fills.tobytes(), m.books_csv(), m.counts()


def check(result: dict[str, Any], n: int) -> None:
    fills, books, counts = reference(n)
    assert result["fills"].tobytes() == fills
    assert result["books_csv"] == books
    assert result["counts"] == counts
    assert result["conflicts"] == 0


def shard_side(design: str, workers: int) -> Side:
    data = day(MESSAGES)

    def run(_: Any) -> None:
        optimized.shard.Shard("book", workers=workers, design=design).run(data)

    return Side(f"optimized/{design}/{workers}", run, ops=MESSAGES)


def one_market_side() -> Side:
    data = day(MESSAGES)

    def run(_: Any) -> None:
        m = Market("book")
        m.run_itch(data)
        m.books_csv()
        m.counts()

    return Side("optimized/one-market-same-outputs", run, ops=MESSAGES)


def writer_side(design: str) -> Side:
    data = day(MESSAGES)

    def run(_: Any) -> None:
        optimized.shard.writer_only(data, design=design, workers=2)

    return Side(f"optimized/writer/{design}", run, ops=MESSAGES)


def naive_side(backend: str) -> Side:
    data = day(NAIVE_MESSAGES)

    def run(_: Any) -> None:
        naive.shard.Shard("book", workers=2, design="routed", backend=backend).run(data)

    return Side(f"naive/{backend}/2", run, ops=NAIVE_MESSAGES)


@pytest.mark.benchmark(group="scaling")
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("design", ["broadcast", "routed"])
@pytest.mark.parametrize("impl", ["optimized"])
def test_shard(benchmark: Any, impl: str, design: str, workers: int) -> None:
    check(optimized.shard.Shard("book", workers=workers, design=design).run(day(MESSAGES)),
          MESSAGES)
    side = shard_side(design, workers)
    benchmark.extra_info.update({"ops": MESSAGES, "includes": INCLUDES["shard"]})
    benchmark.pedantic(side.run, args=(None,), rounds=ROUNDS, iterations=1)


@pytest.mark.benchmark(group="scaling")
@pytest.mark.parametrize("design", ["broadcast", "routed"])
@pytest.mark.parametrize("impl", ["optimized"])
def test_writer(benchmark: Any, impl: str, design: str) -> None:
    r = optimized.shard.writer_only(day(MESSAGES), design=design, workers=2)
    assert r["records"] == MESSAGES
    assert design == "broadcast" or sum(r["routed"]) == r["events"]
    benchmark.extra_info.update({"ops": MESSAGES, "includes": INCLUDES["writer"]})
    benchmark.pedantic(writer_side(design).run, args=(None,), rounds=ROUNDS, iterations=1)


@pytest.mark.benchmark(group="scaling")
@pytest.mark.parametrize("impl", ["optimized"])
def test_one_market(benchmark: Any, impl: str) -> None:
    data = day(MESSAGES)

    def run() -> None:
        Market("book").run_itch(data)

    benchmark.extra_info.update({"ops": MESSAGES, "includes": INCLUDES["one-market"]})
    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)


@pytest.mark.benchmark(group="scaling")
@pytest.mark.parametrize("backend", ["processes", "threads"])
@pytest.mark.parametrize("impl", ["naive"])
def test_naive_shard(benchmark: Any, impl: str, backend: str) -> None:
    result = naive.shard.Shard("book", workers=2, design="routed", backend=backend).run(
        day(NAIVE_MESSAGES))
    fills, books, counts = reference(NAIVE_MESSAGES)
    assert result["fills"].tobytes() == fills and result["books_csv"] == books
    assert result["counts"] == counts
    benchmark.extra_info.update({"ops": NAIVE_MESSAGES, "includes": INCLUDES["naive-shard"]})
    benchmark.pedantic(naive_side(backend).run, args=(None,), rounds=ROUNDS, iterations=1)


# Paired: each key's (fast, slow) sides, interleaved in one process. A ratio above 1 says
# the first side is faster; on a 2-CPU machine 2 workers + the writer are 3 threads.


def paired_sides(key: str) -> tuple[Side, Side]:
    return {
        "scaling-broadcast-2v1": lambda: (shard_side("broadcast", 2), shard_side("broadcast", 1)),
        "scaling-routed-2v1": lambda: (shard_side("routed", 2), shard_side("routed", 1)),
        "scaling-routed-vs-broadcast": lambda: (shard_side("routed", 2),
                                                shard_side("broadcast", 2)),
        "scaling-writer-vs-routed": lambda: (writer_side("routed"), shard_side("routed", 2)),
        "scaling-one-market-vs-routed1": lambda: (one_market_side(), shard_side("routed", 1)),
        "scaling-naive-processes-vs-threads": lambda: (naive_side("processes"),
                                                       naive_side("threads")),
    }[key]()


PAIRED_KEYS = ("scaling-broadcast-2v1", "scaling-routed-2v1", "scaling-routed-vs-broadcast",
               "scaling-writer-vs-routed", "scaling-one-market-vs-routed1",
               "scaling-naive-processes-vs-threads")


def side_scope(name: str) -> str:
    return ("writer" if "writer" in name else
            "one-market-same-outputs" if "one-market" in name else "shard")


@pytest.mark.benchmark(group="scaling")
@pytest.mark.parametrize("key", PAIRED_KEYS)
def test_paired_scaling(benchmark: Any, key: str) -> None:
    fast, slow = paired_sides(key)
    naive_pair = key.startswith("scaling-naive")
    paired(benchmark, key, fast, slow, pairs=11, warmup=1,
           includes=INCLUDES["naive-shard"] if naive_pair else
           " / ".join(INCLUDES[side_scope(s.name)] for s in (fast, slow)),
           workload=f"generated market day, book mode, "
                    f"{NAIVE_MESSAGES if naive_pair else MESSAGES} messages, {SYMBOLS} symbols")





# ------------------------------------------------------------------ the scaling model
MODEL_WORKERS = (1, 2, 4, 8, 16)


def _median_seconds(call: Any, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


@pytest.mark.benchmark(group="scaling")
@pytest.mark.parametrize("impl", ["optimized"])
def test_scaling_model(benchmark: Any, impl: str) -> None:
    """The inputs of chapter 10's model: the writer's and a worker's time per message
    (medians of interleaved rounds, one thread each), and the busiest worker's share of
    the events for each worker count (this day's routing, counted by the writer)."""
    data = day(MESSAGES)
    events = decode(data)[0]
    writer_s: list[float] = []
    apply_s: list[float] = []

    def one_round() -> None:
        writer_s.append(_median_seconds(
            lambda: optimized.shard.writer_only(data, design="routed", workers=2), 1))
        apply_s.append(_median_seconds(lambda: Market("book").run(events), 1))

    benchmark.pedantic(one_round, rounds=3 if SMALL else 11, iterations=1)
    shares = {}
    for n in MODEL_WORKERS:
        routed = optimized.shard.writer_only(data, design="routed", workers=n)["routed"]
        assert sum(routed) == len(events)
        shares[str(n)] = max(routed) / sum(routed)
    benchmark.extra_info.update({
        "ops": MESSAGES,
        "includes": "writer: decode + reference map + hash of every record, no ring; "
                    "worker: Market.run over the decoded events (apply only, no decode, "
                    "no ring); shares: the busiest worker's fraction of the events",
        "scaling_model": {"writer_s_per_msg": statistics.median(writer_s) / MESSAGES,
                          "worker_s_per_msg": statistics.median(apply_s) / len(events),
                          "events_per_msg": len(events) / MESSAGES,
                          "busiest_share": shares},
    })
