"""Match mode's batch engine (native/market.hpp, run_batch): a whole batch matched in flat
arrays sized from the batch, then handed to the general structures. It is a shortcut of
the optimized twin only, so every test here compares it with the naive twin (the
specification) and with the optimized twin's own general path (set_match_batch(0)),
and checks that the batch engine did run (batch_runs) where it should and did not where
the batch does not qualify."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contract.dtypes import EVENT_DTYPE
from twinmatch.gen import uniform_flow_bytes

naive_market = importlib.import_module("naive.market")
optimized_market = importlib.import_module("optimized.market")
optimized_itch = importlib.import_module("optimized.itch")


def row(kind: str, ref: int = 0, side: str = "B", shares: int = 0, price: int = 0,
        locate: int = 1, new_ref: int = 0, ts: int = 0, stock: str = "") -> tuple[Any, ...]:
    return (ts, ref, new_ref, 0, shares, price, locate, ord(kind), ord(side), 0,
            stock.encode().ljust(8) if stock else b"")


def state(m: Any, fills: np.ndarray) -> tuple[Any, ...]:
    """Everything a caller can see of a match-mode market after a run."""
    refs = range(0, 80)
    return (fills.tobytes(), m.books_csv(), m.counts(), m.books, len(m), m.fills, m.volume,
            m.activity(), m.trading_states(), m.book_states(), [m.stock(i) for i in range(4)],
            [m.order(r) for r in refs], [m.depth(1, s, 50) for s in (0, 1)],
            [m.top(i) for i in range(4)])


def run_three(stream: np.ndarray) -> tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...],
                                           int]:
    """(naive, optimized batch engine, optimized general path) states, and how many runs
    the batch engine took."""
    nv = naive_market.Market("match")
    fast = optimized_market.Market("match")
    fast.set_match_batch(1)
    slow = optimized_market.Market("match")
    slow.set_match_batch(0)
    return (state(nv, nv.run(stream)), state(fast, fast.run(stream)),
            state(slow, slow.run(stream)), fast.batch_runs())


# Prices in a small range (the batch engine's levels) and 0 (a market order); sides with a
# bad one; shares 0 (rejected); references reused (duplicates, and adds after a fill).
KINDS = "AAAAAAFXXDDECRHSP"


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(KINDS), st.integers(1, 40), st.sampled_from("BBSSX"),
                          st.integers(0, 30), st.sampled_from((0, 99, 100, 101, 102, 105, 140)),
                          st.integers(0, 5)),
                min_size=1, max_size=150))
def test_batch_engine_agrees_with_both_paths(rows: list[tuple[str, int, str, int, int, int]]
                                             ) -> None:
    stream = np.array([row(kind, ref, side, shares, price, ts=ts * 7 % 11, stock="AB" if
                           kind == "R" else "")
                       for kind, ref, side, shares, price, ts in rows], dtype=EVENT_DTYPE)
    nv, fast, slow, runs = run_three(stream)
    assert fast == nv
    assert slow == nv
    has_adds = bool(np.isin(stream["type"], [ord("A"), ord("F")]).any())
    assert runs == (1 if has_adds else 0)


def test_batch_engine_queue_order_with_falling_references() -> None:
    """References that fall through the batch: a queue's order is not its references'
    order, and the hand-over goes level by level instead (same books either way)."""
    rows = [row("A", ref=60 - i, side="BS"[i % 2], shares=5 + i % 7, price=100 + i % 4)
            for i in range(40)]
    rows += [row("X", ref=50, shares=1), row("D", ref=44), row("A", ref=70, side="S",
                                                               shares=40, price=100)]
    nv, fast, slow, runs = run_three(np.array(rows, dtype=EVENT_DTYPE))
    assert fast == nv == slow and runs == 1


@pytest.mark.parametrize("why", ["replace", "two locates", "wide prices", "sparse refs",
                                 "live orders"])
def test_batches_that_do_not_qualify_take_the_general_path(why: str) -> None:
    rows = [row("A", ref=i + 1, side="BS"[i % 2], shares=10, price=100 + i % 5)
            for i in range(30)]
    if why == "replace":
        rows.append(row("U", ref=3, new_ref=99, shares=4, price=102))
    elif why == "two locates":
        rows.append(row("A", ref=40, shares=4, price=102, locate=2))
    elif why == "wide prices":
        rows.append(row("A", ref=40, shares=4, price=2**32 - 1))
    elif why == "sparse refs":
        rows.append(row("A", ref=2**63, shares=4, price=101))
    stream = np.array(rows, dtype=EVENT_DTYPE)
    m = optimized_market.Market("match")
    m.set_match_batch(1)
    nv = naive_market.Market("match")
    if why == "live orders":  # the market is not empty: the batch engine needs it empty
        first = np.array([row("A", ref=77, shares=3, price=90)], dtype=EVENT_DTYPE)
        m.set_match_batch(0)
        assert state(m, m.run(first)) == state(nv, nv.run(first))
        m.set_match_batch(1)
    assert state(m, m.run(stream)) == state(nv, nv.run(stream))
    assert m.batch_runs() == 0


def test_batches_one_after_another() -> None:
    """A batch into an empty market takes the batch engine; the next (orders resting)
    the general path; the result is one run's."""
    raw = uniform_flow_bytes(6_000, seed=4)
    stream = optimized_itch.decode(raw)[0]
    whole = naive_market.Market("match")
    want = whole.run(stream)
    m = optimized_market.Market("match")
    m.set_match_batch(1)
    got = np.concatenate([m.run(stream[:4_000]), m.run(stream[4_000:])])
    assert m.batch_runs() == 1 and len(got) == len(want)
    # op_index restarts at each call: compare everything else, then the books
    for name in ("resting_id", "aggressor_id", "price", "qty", "aggressor_side"):
        assert (got[name] == want[name]).all()
    assert m.books_csv() == whole.books_csv() and m.counts() == whole.counts()


def test_uniform_file_batch_engine_by_default() -> None:
    """The uniform file (buys then sells): the default threshold takes the batch engine,
    with the naive twin's fills, books and counts."""
    stream = optimized_itch.decode(uniform_flow_bytes(20_000, seed=1))[0]
    nv = naive_market.Market("match")
    m = optimized_market.Market("match")
    assert m.match_batch() > 0
    assert state(m, m.run(stream)) == state(nv, nv.run(stream))
    assert m.batch_runs() == 1


def test_batch_engine_out_of_memory_undoes_the_batch() -> None:
    """A growth that fails in the hand-over: the batch is undone whole (the error names
    event 0, nothing is applied), and running it again gives the whole run's state."""
    stream = optimized_itch.decode(uniform_flow_bytes(8_000, seed=2))[0]
    whole = optimized_market.Market("match")
    whole.set_match_batch(1)
    want = state(whole, whole.run(stream))
    fresh = optimized_market.Market("match")
    empty = state(fresh, fresh.run(stream[:0]))
    failures = 0
    for budget in range(0, 12, 1):
        m = optimized_market.Market("match")
        m.set_match_batch(1)
        m.set_growth_budget(budget)
        try:
            fills = m.run(stream)
        except MemoryError as e:
            failures += 1
            assert "at event 0:" in str(e)
            assert state(m, fresh.run(stream[:0]))[1:] == empty[1:]
            m.set_growth_budget(-1)
            assert state(m, m.run(stream)) == want
            continue
        assert state(m, fills) == want
    assert failures > 2
