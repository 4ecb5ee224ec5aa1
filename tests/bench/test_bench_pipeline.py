"""Chapter 6 benchmarks: the pipeline (group "pipeline").

One workload, ``match``: an ITCH order-flow file (``twinmatch gen flow``, 500 symbols,
N = TWINMATCH_BENCH_PIPELINE_N orders, default 500,000; 20,000 when
TWINMATCH_BENCH_SCALE=small), read from disk into memory and run through a match-mode
market, with the fills CSV written to a file.

* naive-pipeline            naive/pipeline.py: parser, engine, logger threads + queue.Queue
* optimized-pipeline        native/pipeline.hpp, placement chosen at run time (on 2 usable
                            cores: parser+engine fused, logger apart)
* optimized-pipeline-shared native/pipeline.hpp forced to three threads, spin-then-yield
* optimized-single          the chapter 5 replay in one thread: optimized decoder over the
                            file in chunks + market.run + fills CSV written from Python

Each first checks its fills CSV against the naive pipeline's on a 20,000-message prefix.

Group "ring-ablation" (at the end): the SPSC ring alone, its decisions taken away one at a
time, each step paired with the one before it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.bench.conftest import SMALL
from twinmatch.gen import write_itch_flow
from twinmatch.pipeline_replay import replay_pipeline
from twinmatch.replay import replay

N = int(os.environ.get("TWINMATCH_BENCH_PIPELINE_N", "20000" if SMALL else "500000"))
PREFIX = 20_000
SYMBOLS = 500
IMPLS = ("naive-pipeline", "optimized-pipeline", "optimized-pipeline-shared",
         "optimized-single")
INCLUDES = {
    "naive-pipeline": "read file into memory, then 3 Python threads: parse + match + "
                      "write fills CSV, overlapped",
    "optimized-pipeline": "read file into memory, then C++ threads (run-time placement): "
                          "parse + match + write fills CSV, overlapped",
    "optimized-pipeline-shared": "read file into memory, then 3 C++ threads, unpinned, "
                                 "spin-then-yield: parse + match + write fills CSV",
    "optimized-single": "1 thread: read file (mmap) + decode + match + write fills CSV "
                        "(chapter 5 replay)",
}


# --8<-- [start:run_impl]
def run_impl(impl: str, path: Path, fills: Path) -> int:
    """Run one impl over a file, fills CSV to ``fills``; returns the fill count."""
    if impl == "optimized-single":
        return int(replay(path, "optimized", "match", fills_path=fills).report["fills"])
    twin = "naive" if impl.startswith("naive") else "optimized"
    options: dict[str, Any] = {}
    if impl == "optimized-pipeline-shared":
        options = {"placement": "shared", "wait": "yield"}
    report = replay_pipeline(path, twin, "match", fills, **options)
    assert report["fills_logged"] == report["fills_produced"]
    return int(report["fills_logged"])
# --8<-- [end:run_impl]


@pytest.fixture(scope="module")
def feed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("pipeline")
    write_itch_flow(out / "flow.itch", N, SYMBOLS, seed=1)
    write_itch_flow(out / "prefix.itch", PREFIX, SYMBOLS, seed=1)
    run_impl("naive-pipeline", out / "prefix.itch", out / "prefix.naive.csv")
    return {"flow": out / "flow.itch", "prefix": out / "prefix.itch",
            "want": out / "prefix.naive.csv", "dir": out}


@pytest.mark.benchmark(group="pipeline")
@pytest.mark.parametrize("workload", ["match"])
@pytest.mark.parametrize("impl", IMPLS)
def test_bench_pipeline(benchmark: Any, impl: str, workload: str, feed: dict[str, Path]
                        ) -> None:
    out = feed["dir"] / f"{impl}.csv"
    run_impl(impl, feed["prefix"], out)
    assert out.read_bytes() == feed["want"].read_bytes()  # the same fills as naive
    messages = N + 6 + 2 * SYMBOLS  # the generator's header: system events + directory
    benchmark.extra_info.update(ops=messages, messages=messages, workload=workload, impl=impl,
                                includes=INCLUDES[impl], cpus=len(os.sched_getaffinity(0)))

    def run() -> int:
        return run_impl(impl, feed["flow"], out)

    rounds = 1 if impl.startswith("naive") else 3
    benchmark.pedantic(run, rounds=rounds, iterations=1, warmup_rounds=0)


# --8<-- [start:sharing]
# False sharing, measured: the same pipeline compiled twice (native/pipeline.hpp's
# BasicPipeline<kStageLines>), once with each stage's counters on its own cache line and
# once with them packed together, the parser's and the engine's per-event counters on one
# line. Three threads (pinned where there are three physical cores, else shared), so the
# counters are written from different cores at once.
SHARING = {"per-stage-lines": True, "packed-counters": False}


@pytest.mark.benchmark(group="pipeline-sharing")
@pytest.mark.parametrize("workload", ["match"])
@pytest.mark.parametrize("impl", list(SHARING))
def test_bench_stage_counters(benchmark: Any, impl: str, workload: str,
                              feed: dict[str, Path]) -> None:
    out = feed["dir"] / f"{impl}.csv"
    options = {"placement": "pinned", "stage_lines": SHARING[impl]}
    replay_pipeline(feed["prefix"], "optimized", "match", out, **options)
    assert out.read_bytes() == feed["want"].read_bytes()  # the same fills as naive
    messages = N + 6 + 2 * SYMBOLS
    benchmark.extra_info.update(
        ops=messages, messages=messages, workload=workload, impl=impl,
        cpus=len(os.sched_getaffinity(0)),
        includes="read file into memory, then 3 C++ threads (pinned, or shared on fewer "
                 "than 3 physical cores): parse + match + write fills CSV; counters "
                 + ("one line per stage" if SHARING[impl] else "packed on one line"))

    def run() -> int:
        report = replay_pipeline(feed["flow"], "optimized", "match", out, **options)
        return int(report["fills_logged"])

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1)
# --8<-- [end:sharing]


# ------------------------------------------------------------------- ablation
# The SPSC ring's decisions one at a time, in the style of chapter 1's steps (group
# "ring-ablation": scripts/figures.py's table of steps): two threads pass RING_ITEMS
# numbers through a ring of RING_CAPACITY slots (optimized._native.ring_stress_variant:
# SpscRing's template parameters), each step paired with the one before it (paired
# records ring-step-<name>). Both threads wait by yielding, as the pipeline does on a
# machine without free cores.
RING_ITEMS = 200_000 if SMALL else 5_000_000
RING_CAPACITY = 1024
RING_STEPS = (
    ("shared-line", "head, tail and both cached copies on one cache line, no copies used"),
    ("own-lines", "head and tail each on a cache line of its own"),
    ("cached-indices", "each side reads the other's index only when its copy says full "
                       "or empty (= the pipeline's ring)"),
)
RING_INCLUDES = ("two threads, one ring, items pushed and popped (yield when full or "
                 "empty); thread start and join included")


def ring_run(step: int) -> float:
    """One run of ``step``: seconds, measured inside C++; checks order and count."""
    from optimized import _native

    received, in_order, seconds = _native.ring_stress_variant(
        RING_ITEMS, RING_CAPACITY, "yield", step >= 2, step >= 1)
    assert received == RING_ITEMS and in_order
    return float(seconds)


@pytest.mark.benchmark(group="ring-ablation")
@pytest.mark.parametrize("step", range(len(RING_STEPS)))
def test_ring_ablation(benchmark: Any, step: int) -> None:
    ring_run(step)
    name, adds = RING_STEPS[step]
    benchmark.extra_info.update(ops=RING_ITEMS, impl=f"step{step}", workload="items",
                                step=step, step_name=name, adds=adds, includes=RING_INCLUDES)
    benchmark.pedantic(lambda: ring_run(step), rounds=11, iterations=1, warmup_rounds=1)


@pytest.mark.benchmark(group="paired")
@pytest.mark.parametrize("step", range(1, len(RING_STEPS)))
def test_paired_ring_step(benchmark: Any, step: int) -> None:
    """Step ``step`` of the ring against the step before it, interleaved."""
    from tests.bench.paired import Side, paired

    def side(s: int) -> Side:
        return Side(f"step{s}-{RING_STEPS[s][0]}", lambda _: ring_run(s), ops=RING_ITEMS)

    paired(benchmark, f"ring-step-{RING_STEPS[step][0]}", side(step), side(step - 1),
           pairs=21, warmup=1, workload="items", includes=RING_INCLUDES, step=step)


# ------------------------------------------------------------------- wait strategies
# How a thread that finds the ring empty (or full) waits, measured: two threads pass
# numbers through the pipeline's ring (ring_stress: cached indices, own lines), each
# waiting the same way: "spin" (pause only), "yield" (spin, then yield) or "sleep" (spin,
# yield, then 50 us sleeps: the logger's wait). Once with the two threads free to run on
# every CPU this process may use, once with both confined to one CPU (as three threads on
# two cores are, part of the time). Throughput only: the time to pass every item,
# thread start and join included; a wait's latency (how soon one item is seen) is not
# what this measures.
WAIT_ITEMS = {"all-cpus": 200_000 if SMALL else 2_000_000, "one-cpu": 5_000 if SMALL else 50_000}
WAIT_PAIRS = {  # key suffix -> (fast wait, slow wait): the ratio is slow time over fast
    "yield-vs-spin": ("yield", "spin"),
    "sleep-vs-yield": ("sleep", "yield"),
}
WAIT_INCLUDES = ("two threads, the pipeline's ring (1,024 slots), items pushed and popped, "
                 "each side waiting as named; thread start and join included")


def wait_side(wait: str, cpus: str) -> Any:
    from optimized import _native
    from tests.bench.paired import Side

    items = WAIT_ITEMS[cpus]

    def run(_: object) -> float:
        before = os.sched_getaffinity(0)
        if cpus == "one-cpu":  # the threads the call starts inherit this thread's mask
            os.sched_setaffinity(0, {min(before)})
        try:
            received, in_order, seconds = _native.ring_stress(items, 1024, wait)
        finally:
            os.sched_setaffinity(0, before)
        assert received == items and in_order
        return float(seconds)

    return Side(f"{wait}/{cpus}", run, ops=items)


@pytest.mark.benchmark(group="ring-wait")
@pytest.mark.parametrize("cpus", list(WAIT_ITEMS))
@pytest.mark.parametrize("pair", list(WAIT_PAIRS))
def test_paired_ring_wait(benchmark: Any, pair: str, cpus: str) -> None:
    from tests.bench.paired import paired

    fast, slow = WAIT_PAIRS[pair]
    paired(benchmark, f"ring-wait-{cpus}-{pair}", wait_side(fast, cpus), wait_side(slow, cpus),
           pairs=11, warmup=1, includes=WAIT_INCLUDES,
           workload=f"{WAIT_ITEMS[cpus]:,} items, "
                    + ("both threads on one CPU" if cpus == "one-cpu" else
                       f"{len(os.sched_getaffinity(0))} CPUs"))
