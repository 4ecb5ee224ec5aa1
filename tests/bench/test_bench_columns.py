"""Chapter 9 benchmarks, group "simd": one filter and one aggregate over a decoded day,
in every layout (naive/columns.py, optimized/columns.py).

The workload: a generated market day of N messages over 500 symbols
(``twinmatch.gen.market_day_bytes``), decoded once (``optimized.itch.decode``; decoding is
never timed). The filter asks for the add orders of the day's busiest symbol above the
median price of its adds. What each implementation's time includes:

* naive          the record loop of naive/columns.py (``events.tolist()`` and a Python loop).
* numpy-columns  ``naive.columns.Columns.adds_above``: three numpy passes over three columns
                 and ``flatnonzero``. The columns are built before timing (row ``build``).
* cpp-aos        C++ over the EVENT_DTYPE records in place (56 bytes a row), one Python call.
* cpp-soa        C++ scalar loop over the C++ columns (13 bytes a row: type, stock, price).
* cpp-avx2 / cpp-avx512   the SIMD kernels over the same columns (each only where the CPU
                 has it).
* ceiling-aos / ceiling-soa   the bandwidth ceiling: one C++ sequential read (summing
                 8-byte words into four independent wide accumulators,
                 ``optimized.itch.sum_bytes``) of as many bytes as the AoS
                 filter reads (the whole array) or the SoA filter reads (its three columns).

A C++ call over N rows takes well under a millisecond at full scale, so the C++ sides call
it REPEAT times per timed run (ops counts rows times calls): the timer's and the Python
call's costs are then noise. The aggregate (``vwap``) has no SIMD kernel (its join is a
hash lookup per row): naive, numpy-columns, cpp-aos and cpp-soa.

Paired records (tests/bench/paired.py) give the chapter's ratios and scripts/targets.py's;
cachegrind's instructions and misses per row (tests/bench/valgrind.py) of the C++ filter
loops are attached to the ``simd-vs-aos`` record. Valgrind does not emulate
AVX-512, so under it the widest kernel is AVX2 and AVX-512 has no counts.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import naive.columns
import optimized.columns
import optimized.itch
from tests.bench import valgrind
from tests.bench.conftest import SMALL
from tests.bench.paired import Side, paired
from twinmatch.gen import market_day_bytes

N = 20_000 if SMALL else 500_000
SYMBOLS = 500
CPP_REPEAT = 2 if SMALL else 20
NUMPY_REPEAT = 1 if SMALL else 4
LEVEL = optimized.columns.cpu_level()
SIMD_IMPLS = [f"cpp-{lv}" for lv in optimized.columns.LEVELS[1:]
              if optimized.columns.LEVELS.index(lv) <= optimized.columns.LEVELS.index(LEVEL)]
FILTER_IMPLS = ["naive", "numpy-columns", "cpp-aos", "cpp-soa", *SIMD_IMPLS,
                "ceiling-aos", "ceiling-soa"]
VWAP_IMPLS = ["naive", "numpy-columns", "cpp-aos", "cpp-soa"]

INCLUDES = {
    "filter": "the filter only (adds of the busiest symbol above its median add price), "
              "indices returned as numpy int64; the day decoded and the columns built "
              "before timing; C++ sides repeat the call (ops = rows x calls)",
    "vwap": "the aggregate only (E executions priced by a join on order_ref, summed per "
            "locate), VWAP_DTYPE rows returned; columns built before timing",
    "build": "the struct-of-arrays copy of the decoded events (every field, one column each)",
}


@lru_cache(maxsize=1)
def day() -> np.ndarray:
    raw, _ = market_day_bytes(N, SYMBOLS, seed=1)
    events, _ = optimized.itch.decode(raw)
    return events


@lru_cache(maxsize=1)
def query() -> tuple[bytes, int]:
    """The busiest symbol's stock field and the median price of its adds."""
    ev = day()
    adds = ev[np.isin(ev["type"], [ord("A"), ord("F")])]
    stocks, counts = np.unique(adds["stock"], return_counts=True)
    stock = bytes(stocks[np.argmax(counts)])
    return stock, int(np.median(adds["price"][adds["stock"] == stock]))


@lru_cache(maxsize=1)
def numpy_columns() -> naive.columns.Columns:
    return naive.columns.Columns(day())


@lru_cache(maxsize=1)
def cpp_columns() -> optimized.columns.Columns:
    return optimized.columns.Columns(day())


@lru_cache(maxsize=1)
def soa_bytes() -> np.ndarray:
    """As many bytes as the SoA filter reads (type, stock, price columns), in one buffer."""
    c = cpp_columns()
    return np.concatenate([c.column(name).view(np.uint8) for name in ("type", "stock", "price")])


@lru_cache(maxsize=1)
def spec() -> tuple[np.ndarray, bytes]:
    """The naive twin's answers: the filter's indices and the aggregate's bytes."""
    stock, price = query()
    return naive.columns.adds_above(day(), stock, price), naive.columns.vwap(day()).tobytes()


def filter_call(impl: str) -> tuple[Callable[[], Any], int]:
    """(one call, repeats per timed run) of the filter in ``impl``."""
    stock, price = query()
    ev = day()
    if impl == "naive":
        return (lambda: naive.columns.adds_above(ev, stock, price)), 1
    if impl == "numpy-columns":
        cols = numpy_columns()
        return (lambda: cols.adds_above(stock, price)), NUMPY_REPEAT
    if impl == "cpp-aos":
        return (lambda: optimized.columns.adds_above(ev, stock, price)), CPP_REPEAT
    if impl.startswith("cpp-"):
        level = "scalar" if impl == "cpp-soa" else impl.removeprefix("cpp-")
        ccols = cpp_columns()
        return (lambda: ccols.adds_above(stock, price, simd=level)), CPP_REPEAT
    if impl == "ceiling-aos":
        raw = ev.view(np.uint8)
        return (lambda: optimized.itch.sum_bytes(raw)), CPP_REPEAT
    if impl == "ceiling-soa":
        buf = soa_bytes()
        return (lambda: optimized.itch.sum_bytes(buf)), CPP_REPEAT
    raise ValueError(impl)


def vwap_call(impl: str) -> tuple[Callable[[], Any], int]:
    ev = day()
    if impl == "naive":
        return (lambda: naive.columns.vwap(ev)), 1
    if impl == "numpy-columns":
        cols = numpy_columns()
        return cols.vwap, 1
    if impl == "cpp-aos":
        return (lambda: optimized.columns.vwap(ev)), 4 if not SMALL else 1
    if impl == "cpp-soa":
        ccols = cpp_columns()
        return ccols.vwap, 4 if not SMALL else 1
    raise ValueError(impl)


def check(workload: str, impl: str) -> None:
    """The impl's answer equals the naive twin's (a ceiling only reads)."""
    if impl.startswith("ceiling"):
        return
    want_filter, want_vwap = spec()
    if workload == "filter":
        got = filter_call(impl)[0]()
        assert got.dtype == np.int64 and np.array_equal(got, want_filter)
    else:
        assert vwap_call(impl)[0]().tobytes() == want_vwap


def side(workload: str, impl: str) -> Side:
    call, repeat = (filter_call if workload == "filter" else vwap_call)(impl)

    def run(_: object) -> None:
        for _ in range(repeat):
            call()

    return Side(f"{workload}/{impl}", run, ops=len(day()) * repeat)


def bytes_per_row(impl: str) -> int:
    return day().dtype.itemsize if impl in ("naive", "cpp-aos", "ceiling-aos") else 13


@pytest.mark.benchmark(group="simd")
@pytest.mark.parametrize("impl", FILTER_IMPLS)
def test_columns_filter(benchmark: Any, impl: str) -> None:
    check("filter", impl)
    s = side("filter", impl)
    matches = len(spec()[0])
    benchmark.extra_info.update(ops=s.ops, includes=INCLUDES["filter"], rows=len(day()),
                                matches=matches, bytes_per_row=bytes_per_row(impl),
                                cpu_level=LEVEL)
    benchmark.pedantic(s.run, args=(None,), rounds=3 if SMALL or impl == "naive" else 11,
                       iterations=1)


@pytest.mark.benchmark(group="simd")
@pytest.mark.parametrize("impl", VWAP_IMPLS)
def test_columns_vwap(benchmark: Any, impl: str) -> None:
    check("vwap", impl)
    s = side("vwap", impl)
    benchmark.extra_info.update(ops=s.ops, includes=INCLUDES["vwap"], rows=len(day()))
    benchmark.pedantic(s.run, args=(None,), rounds=3 if SMALL or impl == "naive" else 7,
                       iterations=1)


@pytest.mark.benchmark(group="simd")
@pytest.mark.parametrize("impl", ["numpy-columns", "cpp-soa"])
def test_columns_build(benchmark: Any, impl: str) -> None:
    make: Callable[[np.ndarray], object] = (
        naive.columns.Columns if impl == "numpy-columns" else optimized.columns.Columns)
    ev = day()
    built = make(ev)
    assert np.array_equal(built.column("price"), ev["price"])  # type: ignore[attr-defined]
    benchmark.extra_info.update(ops=len(ev), includes=INCLUDES["build"])
    benchmark.pedantic(make, args=(ev,), rounds=3 if SMALL else 11, iterations=1)


# Paired: key -> (workload, fast impl, slow impl). The ratio is slow time per row over fast.
BEST = SIMD_IMPLS[-1] if SIMD_IMPLS else "cpp-soa"
PAIRED_COLUMNS = {
    "simd-numpy-vs-naive": ("filter", "numpy-columns", "naive"),
    "simd-vs-aos": ("filter", BEST, "cpp-aos"),
    "simd-soa-vs-aos": ("filter", "cpp-soa", "cpp-aos"),
    "simd-vs-soa": ("filter", BEST, "cpp-soa"),
    # a share of the bandwidth ceiling: the read's time over the filter's, same bytes
    "simd-vs-read": ("filter", BEST, "ceiling-soa"),
    "simd-aos-vs-read": ("filter", "cpp-aos", "ceiling-aos"),
    "simd-vwap-numpy-vs-naive": ("vwap", "numpy-columns", "naive"),
    "simd-vwap-soa-vs-aos": ("vwap", "cpp-soa", "cpp-aos"),
}
if "cpp-avx512" in SIMD_IMPLS:
    PAIRED_COLUMNS["simd-avx512-vs-avx2"] = ("filter", "cpp-avx512", "cpp-avx2")


@pytest.mark.benchmark(group="simd")
@pytest.mark.parametrize("key", list(PAIRED_COLUMNS))
def test_paired_columns(benchmark: Any, key: str) -> None:
    workload, fast_impl, slow_impl = PAIRED_COLUMNS[key]
    check(workload, fast_impl)
    check(workload, slow_impl)
    record = paired(benchmark, key, side(workload, fast_impl), side(workload, slow_impl),
                    pairs=11, warmup=1, includes=INCLUDES[workload],
                    workload=f"generated day, {len(day()):,} events, {SYMBOLS} symbols")
    if key == "simd-vs-aos" and valgrind.available(SMALL):
        record["valgrind_loops"] = filter_counts()  # per loop, not fast/slow


# -------------------------------------------------------------- cachegrind counts

COUNTED = ("cpp-aos", "cpp-soa", "cpp-avx2")  # valgrind runs no AVX-512 instruction


def filter_counts() -> dict[str, dict[str, float]]:
    """Cachegrind's instructions, D1 and LL misses per row of each C++ filter loop.

    One base run calls every loop once; one run per loop calls it REPEAT more times; the
    difference over REPEAT x rows is a warm call's cost per row (Python call included).
    """
    repeat = 3
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.npy"
        np.save(path, day())
        stock, price = query()
        setup = (
            "import gc\nimport numpy as np\nimport optimized.columns as oc\n"
            "gc.disable()\n"  # a collection in one run and not the other would be counted
            f"ev = np.load({str(path)!r})\ncols = oc.Columns(ev)\n"
            f"run = {{'cpp-aos': lambda: oc.adds_above(ev, {stock!r}, {price}),\n"
            f"       'cpp-soa': lambda: cols.adds_above({stock!r}, {price}, simd='scalar'),\n"
            f"       'cpp-avx2': lambda: cols.adds_above({stock!r}, {price}, simd='avx2')}}\n"
            "for f in run.values():\n    f()\n")
        base = valgrind.cachegrind(setup)
        out: dict[str, dict[str, float]] = {}
        for impl in COUNTED:
            full = valgrind.cachegrind(setup + f"for _ in range({repeat}):\n    run[{impl!r}]()\n")
            d = {k: full.get(k, 0) - base.get(k, 0) for k in valgrind.EVENTS}
            rows = repeat * len(day())
            out[impl] = {"Ir": d["Ir"] / rows, "D1": (d["D1mr"] + d["D1mw"]) / rows,
                         "LL": (d["ILmr"] + d["DLmr"] + d["DLmw"]) / rows}
    return out


# ------------------------------------------------------ the layouts at two input sizes
#
# Whether the columns' fewer bytes matter depends on where the bytes come from. At an
# input that fits the core's L2 cache the record loop is not starved of bytes, so the
# layout is worth little; at an input far larger than the last-level cache every byte
# comes from DRAM and the record loop reads 56 bytes a row where the column loop reads 13.
# The two inputs are cut from (or tiled out of) the same decoded day, so the query and the
# rows are the same; only the amount changes.
L2_ROWS = 12_000            # 672 KB of records (and 156 KB of columns): inside a 1 MiB L2
DRAM_ROWS = 2 * N if SMALL else 4_000_000  # 224 MB of records, 52 MB of columns (> L3)
SIZES = {"l2": L2_ROWS, "dram": DRAM_ROWS}


@lru_cache(maxsize=2)
def sized_day(rows: int) -> np.ndarray:
    """``rows`` rows of the day: every k-th row (so the mix of the whole day, not its first
    minutes), or the whole day repeated until it has that many (a copy either way)."""
    ev = day()
    if rows <= len(ev):
        return np.ascontiguousarray(ev[:: len(ev) // rows][:rows])
    reps = -(-rows // len(ev))
    return np.ascontiguousarray(np.tile(ev, reps)[:rows])


@lru_cache(maxsize=2)
def sized_columns(rows: int) -> optimized.columns.Columns:
    return optimized.columns.Columns(sized_day(rows))


@lru_cache(maxsize=2)
def sized_soa_bytes(rows: int) -> np.ndarray:
    c = sized_columns(rows)
    return np.concatenate([c.column(name).view(np.uint8) for name in ("type", "stock", "price")])


def sized_side(impl: str, rows: int) -> Side:
    """One filter (or ceiling) side over ``rows`` rows, repeated to about 4M rows a run."""
    stock, price = query()
    ev = sized_day(rows)
    cols = sized_columns(rows)
    repeat = max(1, 4_000_000 // rows) if not SMALL else 2
    call: Callable[[], Any]
    if impl == "cpp-aos":
        def call() -> Any:
            return optimized.columns.adds_above(ev, stock, price)
    elif impl.startswith("cpp-"):
        level = "scalar" if impl == "cpp-soa" else impl.removeprefix("cpp-")

        def call() -> Any:
            return cols.adds_above(stock, price, simd=level)
    elif impl == "ceiling-aos":
        raw = ev.view(np.uint8)

        def call() -> Any:
            return optimized.itch.sum_bytes(raw)
    elif impl == "ceiling-soa":
        buf = sized_soa_bytes(rows)

        def call() -> Any:
            return optimized.itch.sum_bytes(buf)
    else:
        raise ValueError(impl)

    def run(_: object) -> None:
        for _ in range(repeat):
            call()

    return Side(f"filter/{impl}", run, ops=rows * repeat)


# key suffix -> (fast impl, slow impl): the layout alone (scalar loop, and the ceilings:
# a read of the bytes each layout needs), the instruction set, both, each vs its read
SIZED_PAIRS = {
    "soa-vs-aos": ("cpp-soa", "cpp-aos"),
    "read-soa-vs-aos": ("ceiling-soa", "ceiling-aos"),
    "vs-soa": (BEST, "cpp-soa"),
    "vs-aos": (BEST, "cpp-aos"),
    "vs-read": (BEST, "ceiling-soa"),
    "aos-vs-read": ("cpp-aos", "ceiling-aos"),
}


@pytest.mark.benchmark(group="simd")
@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("pair", list(SIZED_PAIRS))
def test_paired_columns_sized(benchmark: Any, pair: str, size: str) -> None:
    rows = SIZES[size]
    stock, price = query()
    want = optimized.columns.adds_above(sized_day(rows), stock, price)
    got = sized_columns(rows).adds_above(stock, price, simd="scalar")
    assert np.array_equal(got, want)  # the layouts agree (the naive twin: tests above)
    fast_impl, slow_impl = SIZED_PAIRS[pair]
    paired(benchmark, f"simd-{size}-{pair}", sized_side(fast_impl, rows),
           sized_side(slow_impl, rows), pairs=11, warmup=1,
           includes=INCLUDES["filter"] + f"; {rows:,} rows ({size}: "
           f"{rows * day().dtype.itemsize / 1e6:,.1f} MB of records, "
           f"{rows * 13 / 1e6:,.1f} MB of columns)",
           workload=f"generated day cut or tiled to {rows:,} events")
