"""Benchmarks of chapter 8, group "layouts": six level indexes under one matching engine.

Workloads (``workload``), each an OPS_DTYPE stream:

* ``uniform``: the literature's: limit prices uniform over a wide band on each side of a
  fixed middle (bids below, asks above, so nothing crosses), cancels of random live orders;
* ``realistic``: twinmatch/flow.py's generated flow (most activity near the touch);
* ``itch-day``: the operations of the busiest symbol of a generated ITCH day
  (twinmatch/gen.py, decoded by optimized.itch, A/F/D/X/E/C/U mapped to ops);
* ``aapl``: the real LOBSTER AAPL capture in ../shared/data/real (its 10-level sample:
  about a thousand messages; orders resting before it starts are unknown to the book, so
  their cancels are counted rejects, the same in every layout).

Per layout x workload (``impl`` = the layout), what each record holds:

Every timed pass runs with its memory pre-touched (``pretouched``: mlockall(MCL_FUTURE),
so every mapping a fresh book makes is backed by pages when it is made, at its
construction, not at an operation's first write into it); the minor page faults that
remain are counted beside the latencies. Timing and counting cover the same operations:
the whole workload.

* the benchmark's time: one ``apply_ns(ops)`` call on a fresh book (the loop timed inside
  C++ is in ``extra_info["cpp_ns_per_op"]``; throughput ``extra_info["mops"]`` is
  1e3 / that);
* ``extra_info["latency"]``: one ``latency(ops)`` pass on a fresh book: every op timed with
  the TSC (lfence-fenced rdtsc before and after, the timer's own median cost subtracted)
  into a histogram: p50/p99/p99.9 in ns;
* ``extra_info["valgrind"]``: instructions, D1 and LL misses per op under callgrind's cache
  simulation, counted only inside the layout's exported batch loop (``run_counted``), one
  callgrind run for every layout and workload, over the same operations the timings
  cover; deterministic: no neighbour moves them.

Every layout's fills and rejects are checked against the window layout's first (the
layouts are checked against the naive twin in tests/test_layouts.py).

Paired (tests/bench/paired.py, also group "layouts": scripts/figures.py's
layouts-paired-table.md): the ratios the chapter states.
"""

from __future__ import annotations

import ctypes
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import optimized.itch
import optimized.layouts
import optimized.orders
from contract.dtypes import (
    OP_CANCEL,
    OP_EXECUTE,
    OP_LIMIT,
    OP_REDUCE,
    OP_REPLACE,
    OPS_DTYPE,
)
from tests.bench import valgrind
from tests.bench.conftest import SMALL, cached_flow
from tests.bench.paired import Side, paired
from tests.conftest import REAL_DATA
from twinmatch.gen import market_day_bytes

ROOT = Path(__file__).resolve().parents[2]
# Every workload is cut to one window of operations: the timings and the callgrind counts
# cover the same operations, and callgrind (50x slower, and the sorted vector's inserts
# grow with the book) must finish in minutes.
N_OPS = 5_000 if SMALL else 50_000
DAY_MESSAGES = 60_000 if SMALL else 600_000
DAY_SYMBOLS = 20
WORKLOADS = ("uniform", "realistic", "itch-day", "aapl")
LAYOUTS = tuple(optimized.layouts.LAYOUTS)
AAPL = "lobster-AAPL-2012-06-21-message-10.csv"
INCLUDES = ("matching only: apply_ns, the batch loop timed inside C++ on a fresh book; "
            "latency: each op alone, TSC-stamped, timer cost subtracted")


# ----------------------------------------------------------------- workloads


# --8<-- [start:workloads]
def uniform_ops(n: int, seed: int = 8, mid: int = 1_000_000, band: int = 10_000,
                resting: int = 10_000) -> np.ndarray:
    """Adds at prices uniform in (mid - band, mid) for bids and (mid, mid + band) for asks;
    once ``resting`` orders rest, adds and cancels of a random live order alternate at
    random (one each on average), so the book stays near that size."""
    rng = random.Random(seed)
    ops = np.zeros(n, dtype=OPS_DTYPE)
    live: list[int] = []
    next_id = 1
    for k in range(n):
        if live and (len(live) >= resting and rng.random() < 0.5):
            j = rng.randrange(len(live))
            live[j], live[-1] = live[-1], live[j]
            ops[k] = (live.pop(), 0, 0, 0, OP_CANCEL, 0)
            continue
        side = rng.randrange(2)
        offset = rng.randrange(1, band)
        ops[k] = (next_id, 0, mid - offset if side == 0 else mid + offset, rng.randrange(1, 500),
                  OP_LIMIT, side)
        live.append(next_id)
        next_id += 1
    return ops


def events_to_ops(ev: np.ndarray) -> np.ndarray:
    """ITCH book events of one symbol -> ops: A/F add, D delete, X cancel (reduce), E/C
    executed, U replace. Other events change no book and are dropped."""
    kind = ev["type"]
    op_of = {ord("A"): OP_LIMIT, ord("F"): OP_LIMIT, ord("D"): OP_CANCEL, ord("X"): OP_REDUCE,
             ord("E"): OP_EXECUTE, ord("C"): OP_EXECUTE, ord("U"): OP_REPLACE}
    keep = np.isin(kind, list(op_of))
    ev = ev[keep]
    ops = np.zeros(len(ev), dtype=OPS_DTYPE)
    lookup = np.zeros(256, dtype=np.uint8)
    for code, op in op_of.items():
        lookup[code] = op
    ops["op"] = lookup[ev["type"]]
    ops["order_id"] = ev["order_ref"]
    ops["new_order_id"] = ev["new_order_ref"]
    ops["price"] = ev["price"]
    ops["qty"] = ev["shares"]
    ops["side"] = np.where(ev["side"] == ord("S"), 1, 0)
    return ops


@cache
def workload(name: str) -> np.ndarray:
    """One workload's ops (made once per process)."""
    if name == "uniform":
        return uniform_ops(N_OPS)
    if name == "realistic":
        return cached_flow(N_OPS, 8)
    if name == "itch-day":
        raw, _ = market_day_bytes(DAY_MESSAGES, DAY_SYMBOLS, seed=8)
        events, _ = optimized.itch.decode(raw)
        book_events = events[np.isin(events["type"], [ord(c) for c in "AFDXECU"])]
        locates, counts = np.unique(book_events["locate"], return_counts=True)
        busiest = locates[np.argmax(counts)]
        return events_to_ops(book_events[book_events["locate"] == busiest])[:N_OPS]
    if name == "aapl":
        path = REAL_DATA / AAPL
        if not path.exists():
            pytest.skip(f"real capture {AAPL} not found in {REAL_DATA}")
        ops, _ = optimized.orders.lobster_to_ops(optimized.orders.read_lobster(path))
        return ops
    raise ValueError(f"unknown workload {name!r}")
# --8<-- [end:workloads]


def new_book(layout: str, ops: np.ndarray) -> Any:
    """A fresh book of a layout; the capped one sized to the workload's prices and ids."""
    if layout == "capped":
        ids = max(int(ops["order_id"].max()), int(ops["new_order_id"].max()))  # replaces too
        return optimized.layouts.LayoutCapped(price_cap=int(ops["price"].max()) + 1,
                                              id_cap=ids + 1)
    return optimized.layouts.LAYOUTS[layout]()


@cache
def reference(name: str) -> tuple[list[Any], list[Any]]:
    fills, rejects = new_book("window", workload(name)).apply(workload(name))
    return fills.tolist(), rejects.tolist()


def check(layout: str, name: str) -> None:
    fills, rejects = new_book(layout, workload(name)).apply(workload(name))
    assert (fills.tolist(), rejects.tolist()) == reference(name), (layout, name)


# ------------------------------------------------------------------ counting


def parse_inclusive(text: str) -> dict[tuple[str, int], dict[str, int]]:
    """callgrind_annotate --inclusive=yes output -> {(layout, slot): {event: count}}."""
    events: list[str] = []
    out: dict[tuple[str, int], dict[str, int]] = {}
    for line in text.splitlines():
        if line.startswith("Events shown:"):
            events = line.split(":", 1)[1].split()
        if "twinmatch_layout_" not in line or "_counted_" not in line:
            continue
        name, _, rest = line.split("twinmatch_layout_", 1)[1].partition("_counted_")
        slot = int(rest[:1])
        numbers = [t for t in line.split() if t.replace(",", "").isdigit() or t == "."]
        values = [0 if t == "." else int(t.replace(",", "")) for t in numbers[:len(events)]]
        out[(name, slot)] = dict(zip(events, values, strict=True))
    return out


@cache
def counted_all() -> dict[str, dict[str, dict[str, float]]]:
    """{workload: {layout: per-op Ir, D1 and LL misses}} of each layout's batch loop over
    each whole workload (the operations the timings cover): ONE callgrind run (cache
    simulation on) that counts only inside the exported loops, workload i through slot
    i's copy of them. Each layout
    first warms up on a fresh book (its code, the allocator), then is counted on another
    fresh book."""
    if not valgrind.available(SMALL) or shutil.which("callgrind_annotate") is None:
        return {}
    loads = {name: workload(name) for name in WORKLOADS}  # what the timings cover
    with tempfile.TemporaryDirectory() as tmp:
        for slot, name in enumerate(WORKLOADS):
            np.save(Path(tmp) / f"ops{slot}.npy", loads[name])
        script = (
            "import numpy as np\n"
            "from tests.bench.test_bench_layouts import new_book, LAYOUTS\n"
            f"for slot in range({len(WORKLOADS)}):\n"
            f"    ops = np.load({tmp!r} + f'/ops{{slot}}.npy')\n"
            "    for layout in LAYOUTS:\n"
            "        new_book(layout, ops).apply(ops)\n"
            "        new_book(layout, ops).run_counted(ops, slot)\n")
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, **valgrind.DETERMINISTIC}
        try:
            subprocess.run(["valgrind", "--tool=callgrind", "--cache-sim=yes",
                            "--collect-atstart=no",
                            "--toggle-collect=twinmatch_layout_*_counted_*",
                            f"--callgrind-out-file={out}", sys.executable, "-c", script],
                           cwd=ROOT, env=env, check=True, capture_output=True, timeout=1800)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            # Once, not once per test (this function's result is cached): the rows then
            # show no counts, and the reason is on stderr.
            print(f"test_bench_layouts: callgrind failed, no counts: {exc}", file=sys.stderr)
            return {}
        # --threshold=100: every function, not only those that add up to the default 99%
        # of the events (which left out whole layouts' rows on the small workloads).
        text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100",
                               str(out)],
                              check=True, capture_output=True, text=True).stdout
    per = parse_inclusive(text)
    result: dict[str, dict[str, dict[str, float]]] = {}
    for (layout, slot), c in per.items():
        n = len(loads[WORKLOADS[slot]])
        result.setdefault(WORKLOADS[slot], {})[layout] = {
            "Ir": c.get("Ir", 0) / n, "D1": (c.get("D1mr", 0) + c.get("D1mw", 0)) / n,
            "LL": (c.get("ILmr", 0) + c.get("DLmr", 0) + c.get("DLmw", 0)) / n, "ops": n}
    return result


def counted(name: str) -> dict[str, dict[str, float]]:
    """One workload's counts per layout (from counted_all's single valgrind run)."""
    return counted_all().get(name, {})


# ----------------------------------------------------------------- pre-touching
MCL_FUTURE = 2  # <sys/mman.h> on Linux: lock (and so populate) every future mapping


@contextmanager
def pretouched() -> Iterator[bool]:
    """Inside: every mapping the process makes is populated when it is made.

    A fresh book's arrays come from calloc, and the kernel backs them with pages only at
    the first write: a page fault, thousands of cycles, in whichever operation writes
    first. mlockall(MCL_FUTURE) makes the kernel populate each new mapping at once (and
    keep it resident), so those costs move to the book's construction, outside the timed
    operations. Yields whether the lock took (it needs CAP_IPC_LOCK or a large enough
    RLIMIT_MEMLOCK); without it the faults stay where they fall and are counted.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    locked = libc.mlockall(MCL_FUTURE) == 0
    try:
        yield locked
    finally:
        if locked:
            libc.munlockall()


# ----------------------------------------------------------------- benchmarks


@pytest.mark.benchmark(group="layouts")
@pytest.mark.parametrize("impl", LAYOUTS)
@pytest.mark.parametrize("workload_name", WORKLOADS, ids=list(WORKLOADS))
def test_layouts(benchmark: Any, workload_name: str, impl: str) -> None:
    ops = workload(workload_name)
    check(impl, workload_name)
    per_op: list[float] = []

    def run(book: Any) -> None:
        per_op.append(float(book.apply_ns(ops)[2]))

    rounds = 15 if len(ops) > 10_000 else 51
    with pretouched() as locked:
        benchmark.pedantic(run, setup=lambda: ((new_book(impl, ops),), {}), rounds=rounds,
                           iterations=1, warmup_rounds=1)
        # The latency pass on a fresh book, pre-touched like the rounds above; the minor
        # page faults left are counted beside the percentiles, so a tail that is a page
        # fault is not read as the layout's.
        book = new_book(impl, ops)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        latency = book.latency(ops)
        latency["minor_faults"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    ns = float(np.median(per_op))
    latency["pretouched"] = locked
    benchmark.extra_info.update(workload=workload_name, ops=len(ops), includes=INCLUDES,
                                cpp_ns_per_op=ns, mops=1e3 / ns if ns > 0 else 0.0,
                                latency=latency)
    counts = counted(workload_name).get(impl)
    if counts:
        benchmark.extra_info["valgrind"] = counts


def side(layout: str, name: str) -> Side:
    ops = workload(name)

    def run(book: Any) -> float:
        return float(book.apply_ns(ops)[2]) * 1e-9 * len(ops)

    return Side(layout, run, ops=len(ops), setup=lambda: new_book(layout, ops))


# target key: (fast layout, slow layout, workload)
PAIRED_LAYOUTS = {
    "layouts-window-vs-map-uniform": ("window", "map", "uniform"),
    "layouts-window-vs-map-realistic": ("window", "map", "realistic"),
    "layouts-capped-vs-window-realistic": ("capped", "window", "realistic"),
    "layouts-capped-vs-window-uniform": ("capped", "window", "uniform"),
}


@pytest.mark.benchmark(group="layouts")
@pytest.mark.parametrize("key", list(PAIRED_LAYOUTS))
def test_paired_layouts(benchmark: Any, key: str) -> None:
    fast, slow, name = PAIRED_LAYOUTS[key]
    check(fast, name)
    check(slow, name)
    with pretouched():
        paired(benchmark, key, side(fast, name), side(slow, name), pairs=15, warmup=1,
               workload=name, includes="matching only: apply_ns, the loop timed inside C++ "
                                       "(memory pre-touched)")
