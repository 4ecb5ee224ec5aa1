"""Chapter 3 benchmarks: decoding one generated ITCH day held in memory (group "itch").

Every benchmark decodes the same bytes-like buffer (``sample_day``: N messages with a
NASDAQ-like mix, about 31 bytes a message; N = TWINMATCH_BENCH_ITCH_N, default
10,000,000: a 310 MB day, far larger than the caches, so the sequential read below
measures memory bandwidth, not cache bandwidth) and first checks its result against the
naive twin. The day is drawn once and kept in out/cache. What each one includes:

* naive      naive.itch.decode: struct per message -> NamedTuple -> row tuple, np arrays.
* numpy      peers.itch_numpy.decode: Python framing walk + big-endian dtype views per type.
* optimized  optimized.itch.decode: C++ over the buffer in place, GIL released, plus the
             Python face (dtype view, counts dict). The loop is the AVX-512 VBMI one when the
             CPU has it (the row's note says which ran). Output blocks are recycled between
             calls (see native/itch_bind.cpp), so a steady stream of batches writes warm memory.
* optimized-portable  the same call with the portable scalar loop (itch_simd(False)): the
             code every CPU runs, and the VBMI loop's baseline.
* optimized-fresh  the same call, but the recycled blocks are freed before every round
             (itch_release_pool), so each call writes a new block and takes its page faults.
* itchfeed   itchfeed's pure-Python MessageParser.parse_stream, one object per message.
* itchcpp    itchfeed's C++ backend (itchcpp), same API: still one Python object a message.
* sum_bytes  the bandwidth ceiling: one C++ pass summing the buffer as 8-byte words into
             four independent wide accumulators (not one chain of dependent adds).

None includes file I/O or decompression: the buffer is already in memory.
``extra_info`` carries bytes and messages so scripts can compute throughput and ratios.

Group "itch-ablation" (at the end): optimized.itch.decode with its two decisions (the VBMI
loop, recycled output blocks) added one at a time, each step paired with the one before.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import naive.itch as naive_itch
import optimized.itch as optimized_itch
import peers.itch_numpy as itch_numpy
from optimized import _native
from tests.bench import valgrind
from tests.bench.conftest import SMALL
from twinmatch.itch_samples import cached_sample_day

N = int(os.environ.get("TWINMATCH_BENCH_ITCH_N", "20000" if SMALL else "10000000"))
INCLUDES = {
    "naive": "decode from memory: struct per message, NamedTuples, numpy arrays at the end",
    "numpy": "decode from memory: Python framing walk + big-endian numpy views per type",
    "optimized": "decode from memory: C++ loop (GIL released, {loop}) into recycled output"
                 " blocks + the Python face",
    "optimized-portable": "as Optimized, with the portable scalar loop (no SIMD)",
    "optimized-fresh": "as Optimized ({loop}), but every call writes a freshly allocated output"
                       " block: its page faults included",
    "itchfeed": "parse from memory: one Python object per message (pure Python)",
    "itchcpp": "parse from memory: one Python object per message (C++ backend)",
    "sum_bytes": "one C++ pass summing the buffer: the memory-bandwidth ceiling",
}
SLOW = {"naive", "numpy", "itchfeed", "itchcpp"}  # ~1 min a round at 10M: two rounds


@pytest.fixture(scope="module")
def day() -> bytes:
    return cached_sample_day(N, seed=1)


@pytest.fixture(scope="module")
def expected(day: bytes) -> tuple[np.ndarray, dict[str, int]]:
    return naive_itch.decode(day)


def itchfeed_parser(kind: str) -> Callable[[bytes], Any]:
    if kind == "itchcpp":
        itchcpp = pytest.importorskip("itchcpp")
        return itchcpp.MessageParser().parse_stream  # type: ignore[no-any-return]
    os.environ.setdefault("ITCH_NO_CPP", "1")  # effective only if itch is not imported yet
    itch = pytest.importorskip("itch")
    import itch.parser as itch_parser

    if itch.USING_CPP_BACKEND:
        pytest.skip("itch was imported with its C++ backend; run alone for pure itchfeed")
    return itch_parser.MessageParser().parse_stream  # type: ignore[no-any-return]


def check_itchfeed(messages: list[Any], expected: tuple[np.ndarray, dict[str, int]]) -> None:
    events, counts = expected
    assert len(messages) == sum(counts.values())
    adds = [m.order_reference_number for m in messages if m.message_type in (b"A", "A")]
    mask = events["type"] == ord("A")
    assert adds == events["order_ref"][mask].tolist()


def vbmi_loop() -> str:
    """Which loop optimized.itch.decode runs here by default (the switch is left on)."""
    return "AVX-512 VBMI loop" if _native.itch_simd(True) else "portable loop: no AVX-512 VBMI"


@pytest.fixture
def portable() -> Iterator[None]:
    _native.itch_simd(False)
    try:
        yield
    finally:
        _native.itch_simd(True)


@pytest.mark.benchmark(group="itch")
@pytest.mark.parametrize(
    "impl", ["naive", "numpy", "optimized", "optimized-portable", "optimized-fresh",
             "itchfeed", "itchcpp", "sum_bytes"])
def test_bench_itch_decode(
    benchmark: Any, impl: str, day: bytes, expected: tuple[np.ndarray, dict[str, int]],
    request: pytest.FixtureRequest,
) -> None:
    benchmark.extra_info.update(bytes=len(day), messages=N, impl=impl, ops=N, workload="day",
                                includes=INCLUDES[impl].format(loop=vbmi_loop()))
    if impl == "optimized-portable":
        request.getfixturevalue("portable")  # the switch goes back on after the test
    setup = _native.itch_release_pool if impl == "optimized-fresh" else None
    run: Callable[[], object]
    if impl in ("naive", "numpy") or impl.startswith("optimized"):
        mod = {"naive": naive_itch, "numpy": itch_numpy}.get(impl, optimized_itch)

        def run() -> object:
            return mod.decode(day)

        if impl != "naive":  # `expected` is the naive twin's own result
            events, counts = mod.decode(day)
            assert counts == expected[1] and events.tobytes() == expected[0].tobytes()
    elif impl in ("itchfeed", "itchcpp"):
        parse = itchfeed_parser(impl)

        def run() -> object:
            return list(parse(day))

        check_itchfeed(list(parse(day)), expected)
    else:
        whole = len(day) // 8 * 8
        want = int(np.frombuffer(day[:whole], "<u8").sum(dtype=np.uint64)) + sum(day[whole:])
        assert optimized_itch.sum_bytes(day) == want % 2**64

        def run() -> object:
            return optimized_itch.sum_bytes(day)

    if impl in SLOW:
        benchmark.pedantic(run, rounds=2, iterations=1, warmup_rounds=0)
    else:
        benchmark.pedantic(run, setup=setup, rounds=20, iterations=1, warmup_rounds=2)
    if impl in COUNTED and valgrind.available(SMALL):  # deterministic counts beside it
        benchmark.extra_info["valgrind"] = itch_counts(impl)


# Cachegrind's counts per message for the C++ decoders, on a smaller day drawn once and
# cached on disk (under valgrind, drawing it would take minutes). Valgrind's virtual CPU
# has no AVX-512, so the optimized decoder runs its portable loop there: its count is
# that loop's (the optimized-portable row), whatever the timed row ran.
COUNTED = {"optimized", "optimized-portable", "itchcpp"}
COUNT_N = 200_000


def itch_counts(impl: str) -> dict[str, float]:
    cached_sample_day(COUNT_N, seed=1)  # drawn here, read back by the counted runs
    if impl == "itchcpp":
        load, call = ("from tests.bench.test_bench_itch import itchfeed_parser\n"
                      "parse = itchfeed_parser('itchcpp')\n"), "list(parse(day))"
    else:
        load, call = "import optimized.itch as m\n", "m.decode(day)"
    setup = ("from twinmatch.itch_samples import cached_sample_day\n"
             f"day = cached_sample_day({COUNT_N}, seed=1)\n{load}"
             f"def prepare():\n    return None\ndef run(_):\n    {call}\n")
    return valgrind.counts(setup, COUNT_N, repeat=2)


# ------------------------------------------------------------------- ablation
# Chapter 3's decisions one at a time, in the style of chapter 1's steps (group
# "itch-ablation": scripts/figures.py's table of steps): every step decodes the same day
# through optimized.itch.decode, and each is paired with the step before it (paired
# records itch-step-<name>). The loop switch (itch_simd) is process-wide: each run sets it
# for itself, and it is back on after each test.
ITCH_STEPS = (
    ("portable", "the portable scalar loop, writing a freshly allocated output block"),
    ("vbmi", "the AVX-512 VBMI loop where the CPU has it (else the portable loop again)"),
    ("recycled", "output blocks recycled between calls (= optimized.itch.decode)"),
)
ITCH_ABLATION_INCLUDES = ("decode from memory through optimized.itch.decode, the Python face "
                          "included; fresh blocks: their page faults included")


def itch_step_setup(step: int) -> Callable[[], None]:
    """Before a run of ``step``: the loop it uses, and (before step 2) no recycled blocks."""
    def setup() -> None:
        _native.itch_simd(step >= 1)
        if step < 2:
            _native.itch_release_pool()
    return setup


@pytest.fixture
def simd_back_on() -> Iterator[None]:
    try:
        yield
    finally:
        _native.itch_simd(True)


def check_itch_step(step: int, day: bytes, expected: tuple[np.ndarray, dict[str, int]]) -> None:
    itch_step_setup(step)()
    events, counts = optimized_itch.decode(day)
    assert counts == expected[1] and events.tobytes() == expected[0].tobytes()


@pytest.mark.benchmark(group="itch-ablation")
@pytest.mark.parametrize("step", range(len(ITCH_STEPS)))
def test_itch_ablation(benchmark: Any, step: int, day: bytes,
                       expected: tuple[np.ndarray, dict[str, int]], simd_back_on: None) -> None:
    check_itch_step(step, day, expected)
    name, adds = ITCH_STEPS[step]
    benchmark.extra_info.update(bytes=len(day), messages=N, impl=f"step{step}", ops=N,
                                workload="day", step=step, step_name=name, adds=adds,
                                includes=f"{ITCH_ABLATION_INCLUDES}; the VBMI step here: "
                                         f"{vbmi_loop()}")
    setup = itch_step_setup(step)
    benchmark.pedantic(lambda: optimized_itch.decode(day), setup=setup, rounds=20,
                       iterations=1, warmup_rounds=2)


@pytest.mark.benchmark(group="paired")
@pytest.mark.parametrize("step", range(1, len(ITCH_STEPS)))
def test_paired_itch_step(benchmark: Any, step: int, day: bytes,
                          expected: tuple[np.ndarray, dict[str, int]], simd_back_on: None) -> None:
    """Step ``step`` of chapter 3 against the step before it, interleaved."""
    from tests.bench.paired import Side, paired

    check_itch_step(step, day, expected)
    check_itch_step(step - 1, day, expected)

    # paired() makes both sides' state before running either, so each run sets its own
    # loop and blocks first (untimed) and times only the decode.
    def side(s: int) -> Side:
        prepare = itch_step_setup(s)

        def run(_: object) -> float:
            prepare()
            start = time.perf_counter()
            optimized_itch.decode(day)
            return time.perf_counter() - start

        return Side(f"step{s}-{ITCH_STEPS[s][0]}", run, ops=N)

    paired(benchmark, f"itch-step-{ITCH_STEPS[step][0]}", side(step), side(step - 1), pairs=11,
           warmup=1, workload="day", includes=ITCH_ABLATION_INCLUDES, step=step,
           loop=vbmi_loop())
