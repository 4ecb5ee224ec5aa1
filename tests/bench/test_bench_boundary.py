"""Benchmarks of chapter 2, group "boundary": what crossing from Python into C++ costs.

* ``test_call_cost``: one tiny query (``book.order(id)`` for an id that is not there),
  repeated in a Python loop; includes the loop, the call and argument conversion. A plain
  Python function doing nothing gives the floor of any call.
* ``test_threads``: two books, each applying its own stream; ``threads=1`` one after the
  other, ``threads=2`` in two Python threads at once. The C++ ``apply`` releases the GIL,
  so its two threads can use both cores; the naive twin holds the GIL throughout.
"""

from __future__ import annotations

import threading
from functools import cache
from typing import Any

import numpy as np
import pytest

from tests.bench.conftest import SMALL, cached_flow
from tests.conftest import load_book_impl

CALLS = 2_000 if SMALL else 100_000
THREAD_OPS = 20_000 if SMALL else 300_000


def nothing(order_id: int) -> None:
    """The cheapest Python call there is: the floor under every per-call figure."""
    return None


# --8<-- [start:call_cost]
def call_loop(fn: Any, calls: int) -> None:
    for i in range(calls):
        fn(i)
# --8<-- [end:call_cost]


@pytest.mark.benchmark(group="boundary")
@pytest.mark.parametrize("impl", ["python-function", "naive", "optimized"])
def test_call_cost(benchmark: Any, impl: str) -> None:
    if impl == "python-function":
        fn = nothing
    else:
        book = load_book_impl(impl).new()
        book.add_limit(10**12, 0, 100, 1)
        fn = book.order
        assert fn(10**12) is not None and fn(5) is None  # the result check
    benchmark.extra_info.update(ops=CALLS, workload="order(id) lookup", impl=impl,
                                includes="Python loop + one call per op")
    benchmark.pedantic(call_loop, args=(fn, CALLS), rounds=7, iterations=1)


@cache
def thread_streams() -> tuple[np.ndarray, np.ndarray]:
    return cached_flow(THREAD_OPS, seed=11), cached_flow(THREAD_OPS, seed=12)


# --8<-- [start:threads]
def apply_in_threads(
    books: list[Any], streams: tuple[np.ndarray, ...], threads: int
) -> None:
    """Each book applies its own stream; in one thread after another, or all at once."""
    if threads == 1:
        for book, ops in zip(books, streams, strict=True):
            book.apply(ops)
        return
    workers = [threading.Thread(target=book.apply, args=(ops,))
               for book, ops in zip(books, streams, strict=True)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=600)
# --8<-- [end:threads]


@pytest.mark.benchmark(group="boundary-threads")
@pytest.mark.parametrize("impl", ["naive", "optimized"])
@pytest.mark.parametrize("threads", [1, 2])
def test_threads(benchmark: Any, impl: str, threads: int) -> None:
    streams = thread_streams()
    twin = load_book_impl(impl)
    # Result check: each stream gives the naive twin's fills, whatever the threading.
    books = [twin.new(), twin.new()]
    apply_in_threads(books, streams, threads)
    for book, ops in zip(books, streams, strict=True):
        reference = load_book_impl("naive").new()
        reference.apply(ops)
        assert book.depth(0, 50) == reference.depth(0, 50) and len(book) == len(reference)
    benchmark.extra_info.update(ops=2 * THREAD_OPS, workload=f"{threads} thread(s)", impl=impl,
                                threads=threads, includes="two apply() calls; GIL released in C++")
    benchmark.pedantic(apply_in_threads,
                       setup=lambda: (([twin.new(), twin.new()], streams, threads), {}),
                       rounds=1 if impl == "naive" else 7, iterations=1)


# ------------------------------------------------------------------- ablation
# Chapter 2 told as steps, each one decision about the boundary, on chapter 1's realistic
# stream and the same C++ Book: a Python call per operation; one call for the whole
# batch, given an array in another layout (the one copy that converts it); the batch in
# OPS_DTYPE, read in place; and the same loop timed inside C++ (no Python at all). Each
# step is paired with the one before it (record ``boundary-step-<name>``) and counted
# under cachegrind.

BOUNDARY_STEPS = (
    ("per-call", "a Python loop, one Python->C++ call per operation (book.add_limit, ...)"),
    ("batch-converted", "one apply() call for the whole stream, given the fields packed "
                        "without padding (np.concatenate's layout): one converting copy"),
    ("batch-in-place", "the stream as OPS_DTYPE: apply() reads the numpy buffer in place"),
    ("inside-c++", "the same apply loop timed inside C++: no call, no result arrays"),
)
BOUNDARY_ABLATION_INCLUDES = ("matching + what each step says about the boundary; the "
                              "realistic stream of chapter 1, a fresh C++ Book each round")


def packed(ops: np.ndarray) -> np.ndarray:
    """The same records without the padding: what ``np.concatenate`` of OPS_DTYPE arrays
    and most hand-made arrays look like."""
    fields = ops.dtype.fields
    assert ops.dtype.names is not None and fields is not None
    out = np.empty(len(ops), dtype=[(n, fields[n][0]) for n in ops.dtype.names])
    for name in ops.dtype.names:
        out[name] = ops[name]
    return out


def boundary_side(step: int) -> Any:
    from tests.bench.paired import Side
    from tests.bench.test_bench_book import WORKLOADS, prepare_for, side

    name = BOUNDARY_STEPS[step][0]
    if name == "per-call":
        s = side("optimized-call", "realistic")
    elif name == "batch-in-place":
        s = side("optimized-batch", "realistic")
    elif name == "inside-c++":
        s = side("optimized-cpp", "realistic")
    else:
        ops = packed(WORKLOADS["realistic"][1]())

        def run(book: Any) -> None:
            book.apply(ops)

        s = Side("optimized-batch-converted", run, ops=len(ops),
                 setup=prepare_for("optimized-batch", "realistic"))
    return Side(f"step{step}-{name}", s.run, s.ops, s.setup)


def boundary_counts(step: int) -> dict[str, float]:
    """Cachegrind's per-op counts of one step's run (tests/bench/valgrind.py)."""
    from tests.bench import valgrind
    from tests.bench.test_bench_book import WORKLOADS

    setup = ("from tests.bench.test_bench_boundary import boundary_side\n"
             f"s = boundary_side({step})\nprepare = s.setup\nrun = s.run\n")
    # the per-call step runs a Python loop: one repeat keeps it to seconds under valgrind
    repeat = 1 if BOUNDARY_STEPS[step][0] == "per-call" else 3
    return valgrind.counts(setup, len(WORKLOADS["realistic"][1]()), repeat=repeat)


@pytest.mark.benchmark(group="boundary-ablation")
@pytest.mark.parametrize("step", range(len(BOUNDARY_STEPS)))
def test_boundary_ablation(benchmark: Any, step: int) -> None:
    """One step of chapter 2 on the realistic stream; results checked against naive
    (the converted batch against the in-place one) first. Time: the whole call (for the
    inside-C++ step, apply_ns: its result arrays are not built)."""
    from tests.bench import valgrind
    from tests.bench.test_bench_book import WORKLOADS, check, prepare_for

    for impl in ("optimized-call", "optimized-batch", "optimized-cpp"):
        check(impl, "realistic")
    ops = WORKLOADS["realistic"][1]()
    book = prepare_for("optimized-batch", "realistic")
    got, want = book().apply(packed(ops)), book().apply(ops)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want, strict=True))
    s = boundary_side(step)
    name, adds = BOUNDARY_STEPS[step]
    benchmark.extra_info.update(ops=s.ops, impl=f"step{step}", workload="realistic",
                                step=step, step_name=name, adds=adds,
                                includes=BOUNDARY_ABLATION_INCLUDES)
    benchmark.pedantic(s.run, setup=lambda: ((s.setup(),), {}),
                       rounds=5 if name == "per-call" else 21, iterations=1)
    if valgrind.available(SMALL):
        benchmark.extra_info["valgrind"] = boundary_counts(step)


@pytest.mark.benchmark(group="paired")
@pytest.mark.parametrize("step", range(1, len(BOUNDARY_STEPS)))
def test_paired_boundary_step(benchmark: Any, step: int) -> None:
    """Step ``step`` against the step before it, interleaved: what this decision buys."""
    from tests.bench.paired import paired

    paired(benchmark, f"boundary-step-{BOUNDARY_STEPS[step][0]}", boundary_side(step),
           boundary_side(step - 1), pairs=11, warmup=1, workload="realistic",
           includes=BOUNDARY_ABLATION_INCLUDES, step=step)
