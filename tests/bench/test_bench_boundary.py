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
def apply_in_threads(books: list[Any], streams: tuple[np.ndarray, ...], threads: int) -> None:
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
