"""Benchmarks of chapter 1, group "book": the order book twins and the std::map baseline.

Impls (the ``impl`` parameter), and what each timing includes:

* ``naive-call`` / ``optimized-call`` / ``baseline-call``: a Python loop calling the
  single-op methods; includes the Python loop and one Python->C++ call per operation.
* ``naive-batch`` / ``optimized-batch`` / ``baseline-batch``: one ``apply(ops)`` call over
  the numpy array; includes building the fills/rejects arrays.
* ``optimized-cpp`` / ``baseline-cpp``: the same loop as apply, timed inside C++ around the
  loop only (``apply_ns``): no Python at all. pytest-benchmark's time is the whole call;
  ``extra_info["cpp_ns_per_op"]`` holds the in-C++ figure.

Every benchmark first runs its workload once and checks fills and rejects (and the final
book) against the naive twin, then times it on fresh books.

The speed targets of chapter 1 are judged on the paired tests at the end (group
"paired", tests/bench/paired.py): the two sides interleaved in one process, the median of
the per-pair ratios.

Group "book-ablation": chapter 1's steps (``optimized.book.book_step``: native/book.hpp
compiled with only its first decisions, the last step being Book), each on the same
realistic workload, timed as ``stepN-cpp`` (the apply loop inside C++, no Python), and
each step paired against the one before it (keys ``book-step-<name>``), which is what the
chapter's table of the cumulative effect reads.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import pytest

import optimized.book
from contract.dtypes import OP_CANCEL, OP_LIMIT, OPS_DTYPE
from tests.bench import valgrind
from tests.bench.conftest import SMALL, cached_flow
from tests.bench.paired import Side, paired
from tests.conftest import load_book_impl

REALISTIC_N = 20_000 if SMALL else 1_000_000
DEPTHS = (100, 1_000, 10_000, 100_000)
DEPTH_PAIRS = 2_000 if SMALL else 50_000  # add+cancel pairs per timed round
PINGPONG_PAIRS = 1_000 if SMALL else 20_000

ALL_IMPLS = (
    "naive-call",
    "naive-batch",
    "optimized-call",
    "optimized-batch",
    "optimized-cpp",
    "baseline-call",
    "baseline-batch",
    "baseline-cpp",
)


INCLUDES = {
    "call": "matching + a Python loop with one Python->C++ call per operation",
    "batch": "matching + one apply() call: numpy in, fills/rejects arrays out",
    "cpp": "matching only: the apply loop timed inside C++, no Python",
}


def new_book(impl: str) -> Any:
    twin = impl.split("-")[0]
    if twin.startswith("step"):  # chapter 1's steps: step0 .. stepN (the last is Book)
        return optimized.book.book_step(int(twin[len("step"):]))()
    return load_book_impl(twin).new()


# --8<-- [start:per_call_loop]
def replay_per_call(book: Any, rows: list[tuple[int, int, int, int, int, int]]) -> None:
    """Replay ops through the single-op API: what a Python caller pays per operation."""
    for order_id, new_id, price, qty, op, side in rows:
        try:
            if op == 0:
                book.add_limit(order_id, side, price, qty)
            elif op == 1:
                book.add_market(order_id, side, qty)
            elif op == 2:
                book.cancel(order_id)
            elif op == 3:
                book.reduce(order_id, qty)
            elif op == 4:
                book.execute(order_id, qty)
            else:
                book.replace(order_id, new_id, price, qty)
        except ValueError:  # OrderRejected: the book is unchanged, carry on
            pass
# --8<-- [end:per_call_loop]


def run_per_call(book: Any, ops: np.ndarray) -> tuple[list[tuple[int, ...]], int]:
    """The per-call replay, collecting fills (as FILL_DTYPE tuples) and counting rejects."""
    fills: list[tuple[int, ...]] = []
    rejects = 0
    for index, (order_id, new_id, price, qty, op, side) in enumerate(ops.tolist()):
        try:
            if op == 0:
                got = book.add_limit(order_id, side, price, qty)
            elif op == 1:
                got = book.add_market(order_id, side, qty)[0]
            elif op == 2:
                book.cancel(order_id)
                continue
            elif op == 3:
                book.reduce(order_id, qty)
                continue
            elif op == 4:
                got = [book.execute(order_id, qty)]
            else:
                got = book.replace(order_id, new_id, price, qty)
        except ValueError:
            rejects += 1
            continue
        for f in got:
            fills.append((f[0], f[1], f[2], f[3], index, int(f[4])))
    return fills, rejects


def run(impl: str, book: Any, ops: np.ndarray) -> tuple[list[tuple[Any, ...]], int]:
    """Run ops through one impl; returns (fills as tuples, number of rejects)."""
    mode = impl.split("-")[1]
    if mode == "call":
        return run_per_call(book, ops)
    if mode == "cpp":
        n_fills, n_rejects, _ = book.apply_ns(ops)
        return [("count", n_fills)], n_rejects
    fills, rejects = book.apply(ops)
    return [tuple(int(x) for x in f) for f in fills.tolist()], len(rejects)


@cache
def expected(workload: str) -> tuple[list[tuple[Any, ...]], int, tuple[Any, ...]]:
    """The naive twin's result on a workload: fills, reject count, final book."""
    book = prepare_for("naive-batch", workload)()
    fills, rejects = run("naive-batch", book, WORKLOADS[workload][1]())
    return fills, rejects, summary(book)


def summary(book: Any) -> tuple[Any, ...]:
    return len(book), book.best_bid(), book.best_ask(), book.depth(0, 20), book.depth(1, 20)


def check(impl: str, workload: str) -> None:
    """Before timing: the impl must produce the naive twin's result."""
    want_fills, want_rejects, want_book = expected(workload)
    book = prepare_for(impl, workload)()
    fills, rejects = run(impl, book, WORKLOADS[workload][1]())
    if impl.endswith("cpp"):
        assert fills == [("count", len(want_fills))]
    else:
        assert fills == want_fills
    assert rejects == want_rejects
    assert summary(book) == want_book


def timed(benchmark: Any, impl: str, workload: str, rounds: int, n_ops: int) -> None:
    check(impl, workload)
    prepare = prepare_for(impl, workload)
    ops = WORKLOADS[workload][1]()
    cpp_ns: list[float] = []

    rows = ops.tolist()  # the per-call loop's input: Python ints, made before timing
    mode = impl.split("-")[1]

    def target(book: Any) -> None:
        if mode == "cpp":
            cpp_ns.append(book.apply_ns(ops)[2])
        elif mode == "batch":
            book.apply(ops)
        else:
            replay_per_call(book, rows)

    benchmark.extra_info.update(ops=n_ops, workload=workload, impl=impl,
                                includes=INCLUDES[impl.split("-")[1]])
    benchmark.pedantic(target, setup=lambda: ((prepare(),), {}), rounds=rounds, iterations=1)
    if cpp_ns:
        benchmark.extra_info["cpp_ns_per_op"] = float(np.median(cpp_ns))


# ------------------------------------------------------------------ workloads


@cache
def realistic_ops() -> np.ndarray:
    return cached_flow(REALISTIC_N, seed=2026)


@cache
def depth_prefill(depth: int) -> np.ndarray:
    """One bid and one ask at each of ``depth`` prices per side, one unit apart."""
    mid = 10_000_000
    ops = np.zeros(2 * depth, dtype=OPS_DTYPE)
    i = np.arange(depth)
    ops["op"] = OP_LIMIT
    ops["qty"] = 100
    ops["order_id"][:depth] = 1 + i
    ops["price"][:depth] = mid - 1 - i
    ops["side"][:depth] = 0
    ops["order_id"][depth:] = 1 + depth + i
    ops["price"][depth:] = mid + 1 + i
    ops["side"][depth:] = 1
    return ops


@cache
def depth_ops(depth: int) -> np.ndarray:
    """Add then cancel an order near the touch (top 10 levels) in a book ``depth`` deep."""
    rng = random.Random(depth)
    ops = np.zeros(2 * DEPTH_PAIRS, dtype=OPS_DTYPE)
    mid = 10_000_000
    for k in range(DEPTH_PAIRS):
        order_id = 10**9 + k
        side = k & 1
        away = rng.randrange(min(10, depth))
        price = mid - 1 - away if side == 0 else mid + 1 + away
        ops[2 * k] = (order_id, 0, price, 100, OP_LIMIT, side)
        ops[2 * k + 1] = (order_id, 0, 0, 0, OP_CANCEL, 0)
    return ops


@cache
def pingpong_ops() -> np.ndarray:
    """A sell rests, a buy takes it whole: the smallest complete trade, repeated."""
    ops = np.zeros(2 * PINGPONG_PAIRS, dtype=OPS_DTYPE)
    for k in range(PINGPONG_PAIRS):
        ops[2 * k] = (2 * k + 1, 0, 1_000_000, 100, OP_LIMIT, 1)
        ops[2 * k + 1] = (2 * k + 2, 0, 1_000_000, 100, OP_LIMIT, 0)
    return ops


@cache
def sweep_prefill() -> np.ndarray:
    ops = np.zeros(100, dtype=OPS_DTYPE)
    ops["op"] = OP_LIMIT
    ops["order_id"] = np.arange(1, 101)
    ops["price"] = 1_000_000
    ops["qty"] = 100
    ops["side"] = 1
    return ops


@cache
def sweep_ops() -> np.ndarray:
    """One buy that takes all 100 resting sells at one price."""
    return np.array([(1000, 0, 1_000_000, 100 * 100, OP_LIMIT, 0)], dtype=OPS_DTYPE)


def no_prefill() -> np.ndarray:
    return np.zeros(0, dtype=OPS_DTYPE)


def _depth_workload(d: int) -> tuple[Callable[[], np.ndarray], Callable[[], np.ndarray]]:
    return (lambda: depth_prefill(d)), (lambda: depth_ops(d))


# workload -> (operations that build the book before timing, operations timed)
WORKLOADS: dict[str, tuple[Callable[[], np.ndarray], Callable[[], np.ndarray]]] = {
    "realistic": (no_prefill, realistic_ops),
    "pingpong": (no_prefill, pingpong_ops),
    "sweep100": (sweep_prefill, sweep_ops),
    **{f"depth{d}": _depth_workload(d) for d in DEPTHS},
}


def prepare_for(impl: str, workload: str) -> Callable[[], Any]:
    """A function making a fresh book of ``impl`` with the workload's prefill applied."""
    prefill = WORKLOADS[workload][0]()

    def prepare() -> Any:
        book = new_book(impl)
        if len(prefill):
            book.apply(prefill)
        return book

    return prepare


# ----------------------------------------------------------------- benchmarks


@pytest.mark.benchmark(group="book")
@pytest.mark.parametrize("impl", ALL_IMPLS)
def test_realistic(benchmark: Any, impl: str) -> None:
    rounds = 3 if impl.startswith("naive") else 31  # medians over a noisy shared machine
    timed(benchmark, impl, "realistic", rounds, REALISTIC_N)


# Depth workloads are cheap to prepare per round except at 100k levels in Python.
# The depth varies fastest, so one impl's four depths are measured back to back: the
# flatness target compares depth 100 with depth 100,000, and on a shared machine the
# background load drifts over the minute the naive runs would otherwise put between
# them. A C++ round is about a millisecond, so it gets many rounds (the median is what
# the target reads; one hiccup moves a short round a lot).
@pytest.mark.benchmark(group="book-depth")
@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("impl", ["naive-call", "optimized-call", "baseline-call",
                                  "optimized-cpp", "baseline-cpp"])
def test_add_cancel_depth(benchmark: Any, impl: str, depth: int) -> None:
    benchmark.extra_info["depth"] = depth
    rounds = {"naive": 3, "call": 7, "cpp": 31}
    timed(benchmark, impl, f"depth{depth}",
          rounds["naive" if impl.startswith("naive") else impl.split("-")[1]], 2 * DEPTH_PAIRS)


@pytest.mark.benchmark(group="book-small")
@pytest.mark.parametrize("impl", ALL_IMPLS)
def test_pingpong(benchmark: Any, impl: str) -> None:
    timed(benchmark, impl, "pingpong", 7, 2 * PINGPONG_PAIRS)


@pytest.mark.benchmark(group="book-small")
@pytest.mark.parametrize("impl", ALL_IMPLS)
def test_sweep100(benchmark: Any, impl: str) -> None:
    timed(benchmark, impl, "sweep100", 200, 1)


# ------------------------------------------------------------ paired targets


def side(impl: str, workload: str) -> Side:
    """One impl on one workload as a side of a paired measurement (fresh book each run).

    ``*-cpp`` sides report the loop's own time, measured inside C++ (``apply_ns``).
    """
    prepare = prepare_for(impl, workload)
    ops = WORKLOADS[workload][1]()
    rows = ops.tolist()
    mode = impl.split("-")[1]

    def run(book: Any) -> float | None:
        if mode == "cpp":
            return float(book.apply_ns(ops)[2]) * 1e-9 * len(ops)  # it returns ns per op
        if mode == "batch":
            book.apply(ops)
        else:
            replay_per_call(book, rows)
        return None

    return Side(impl, run, ops=len(ops), setup=prepare)


def faster_naive(workload: str) -> str:
    """The faster of the naive twin's two modes on a workload (one untimed-for-the-record
    run each): a speedup is never claimed against a needlessly slow Python."""
    seconds = {}
    for impl in ("naive-call", "naive-batch"):
        s = side(impl, workload)
        state = s.setup()
        start = time.perf_counter()
        s.run(state)
        seconds[impl] = time.perf_counter() - start
    return min(seconds, key=lambda k: seconds[k])


PAIRED_BOOK = {
    # target key: (fast impl, slow impl, workload, pairs)
    "book-batch-vs-naive": ("optimized-batch", "naive-fastest", "realistic", 11),
    "book-call-vs-naive": ("optimized-call", "naive-call", "realistic", 11),
    "book-vs-map": ("optimized-batch", "baseline-batch", "realistic", 31),
    "book-depth-flat": ("optimized-cpp", "optimized-cpp", "depth100|depth100000", 31),
}


@pytest.mark.benchmark(group="paired")
@pytest.mark.parametrize("key", list(PAIRED_BOOK))
def test_paired_book(benchmark: Any, key: str) -> None:
    fast_impl, slow_impl, workload, pairs = PAIRED_BOOK[key]
    fast_load, _, slow_load = workload.partition("|")
    slow_load = slow_load or fast_load
    if slow_impl == "naive-fastest":
        slow_impl = faster_naive(slow_load)
    check(fast_impl, fast_load)
    check(slow_impl, slow_load)
    fast, slow = side(fast_impl, fast_load), side(slow_impl, slow_load)
    if key == "book-depth-flat":  # the same impl at two depths: name the sides by depth
        fast, slow = (Side(f"{fast_load}/{fast_impl}", fast.run, fast.ops, fast.setup),
                      Side(f"{slow_load}/{slow_impl}", slow.run, slow.ops, slow.setup))
    mode = {m: INCLUDES[m] for m in {fast_impl.split("-")[1], slow_impl.split("-")[1]}}
    record = paired(benchmark, key, fast, slow, pairs=pairs, warmup=1, workload=workload,
                    includes="; ".join(f"{k}: {v}" for k, v in mode.items()))
    both_cpp = not fast_impl.startswith("naive") and not slow_impl.startswith("naive")
    if both_cpp and fast_impl.endswith(("batch", "cpp")) and valgrind.available(SMALL):
        record["valgrind"] = {"fast": book_counts(fast_impl, fast_load),
                              "slow": book_counts(slow_impl, slow_load)}


def book_counts(impl: str, workload: str) -> dict[str, float]:
    """Cachegrind's per-op counts of one apply() on a prepared book (tests/bench/valgrind.py)."""
    call = "book.apply_ns(ops)" if impl.endswith("cpp") else "book.apply(ops)"
    setup = ("from tests.bench.test_bench_book import WORKLOADS, prepare_for\n"
             f"prepare = prepare_for({impl!r}, {workload!r})\n"
             f"ops = WORKLOADS[{workload!r}][1]()\n"
             f"def run(book):\n    {call}\n")
    return valgrind.counts(setup, len(WORKLOADS[workload][1]()))


# ------------------------------------------------------------------- ablation

STEPS = optimized.book.BOOK_STEPS
ABLATION_INCLUDES = ("matching only: the apply loop timed inside C++, no Python; the same "
                     "realistic stream for every step, a fresh book each round")


@pytest.mark.benchmark(group="book-ablation")
@pytest.mark.parametrize("impl", [f"step{i}-cpp" for i in range(len(STEPS))])
def test_ablation(benchmark: Any, impl: str) -> None:
    """One of chapter 1's steps on the realistic stream (results checked against naive,
    through apply() and apply_ns(), first)."""
    step = int(impl.split("-")[0][len("step"):])
    check(f"step{step}-batch", "realistic")
    benchmark.extra_info.update(step=step, step_name=STEPS[step][0], adds=STEPS[step][1])
    timed(benchmark, impl, "realistic", 31, REALISTIC_N)
    benchmark.extra_info["includes"] = ABLATION_INCLUDES
    if valgrind.available(SMALL):  # deterministic counts beside the time
        benchmark.extra_info["valgrind"] = book_counts(impl, "realistic")


@pytest.mark.benchmark(group="paired")
@pytest.mark.parametrize("step", range(1, len(STEPS)))
def test_paired_ablation_step(benchmark: Any, step: int) -> None:
    """Step ``step`` against the step before it, interleaved: what this one decision buys."""
    fast_impl, slow_impl = f"step{step}-cpp", f"step{step - 1}-cpp"
    check(f"step{step}-batch", "realistic")
    check(f"step{step - 1}-batch", "realistic")
    paired(benchmark, f"book-step-{STEPS[step][0]}", side(fast_impl, "realistic"),
           side(slow_impl, "realistic"), pairs=21, warmup=1, workload="realistic",
           includes=ABLATION_INCLUDES, step=step)
