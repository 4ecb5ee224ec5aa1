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
