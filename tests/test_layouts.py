"""Chapter 8's layouts (optimized.layouts): every one is a real, tested book.

* The whole behavioural suite of tests/test_book.py runs over every layout (its tests
  are imported here, and this module's ``impl`` fixture gives them the layouts); the
  capped layout skips the few that need a price or an id beyond its caps, and its own
  tests below check what it does there instead.
* Differential property tests: random streams through the per-call API and apply(),
  every layout against the naive twin; the capped layout against a model of its rules
  (the naive twin behind the cap checks), with streams that cross the caps.
* Hostile inputs: prices 1 and 2**32 - 1, ids 0 and 2**64 - 1, values at and beyond
  the caps, sorted and reversed level sequences (the treap's and the vector's worst
  orders).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naive.book as naive
import optimized.book
import optimized.layouts
from contract.dtypes import (
    OP_CANCEL,
    OP_EXECUTE,
    OP_LIMIT,
    OP_MARKET,
    OP_REDUCE,
    OP_REPLACE,
    OPS_DTYPE,
    REASON_CODE,
    REJECT_DTYPE,
    records,
)
from tests import test_book as suite
from tests.conftest import ROOT, BookImpl
from tests.test_book_differential_native import call, normalise

MAX_ID = 2**64 - 1
MAX_PRICE = 2**32 - 1
BUY, SELL = 0, 1

# The capped layout in the suite: caps above every price and id the suite uses inside
# them (the suite's prices reach 1,002,500; its ids 100,000).
SUITE_PRICE_CAP = 2**21
SUITE_ID_CAP = 2**20
# The suite's tests that need a price or id beyond those caps (checked below instead).
CAPPED_SKIPS = {
    "test_extreme_values": "prices 2**32-1 and ids 2**64-1 are beyond the caps",
    "test_prices_far_apart": "prices of 4e9 are beyond the price cap",
    "test_emptied_and_refilled": "prices of 2e7 are beyond the price cap",
    "test_argument_types": "its ids and prices reach 2**64-1 and 2**32-1",
    "test_argument_types_are_the_same_in_every_twin": "its ids reach 2**64-1",
    "test_reject_unknown_id": "compares rejects of ids beyond the id cap",
    "test_validation_order": "its ids reach beyond the id cap",
    "test_market_sweep_with_unfilled_remainder": "a price of 4e9 is beyond the price cap",
}


def layout_impl(name: str) -> BookImpl:
    cls: Any = optimized.layouts.LAYOUTS[name]
    if name == "capped":
        cls = functools.partial(cls, price_cap=SUITE_PRICE_CAP, id_cap=SUITE_ID_CAP)
    return BookImpl(f"layout-{name}", optimized.book, cls)


@pytest.fixture(params=list(optimized.layouts.LAYOUTS))
def impl(request: pytest.FixtureRequest) -> BookImpl:
    """Each layout in turn, for the imported suite (overrides tests/conftest.py's)."""
    name = str(request.param)
    test_name = request.node.originalname
    if name == "capped" and test_name in CAPPED_SKIPS:
        pytest.skip(f"capped layout: {CAPPED_SKIPS[test_name]}")
    return layout_impl(name)


# The suite itself: every test function of tests/test_book.py, collected here again with
# this module's impl fixture.
for _name in dir(suite):
    if _name.startswith("test_"):
        globals()[_name] = getattr(suite, _name)


def test_skips_name_real_tests() -> None:
    """A renamed suite test must not silently stop being skipped (or run)."""
    assert set(CAPPED_SKIPS) <= {n for n in dir(suite) if n.startswith("test_")}


def test_every_layout_is_listed() -> None:
    assert list(optimized.layouts.LAYOUTS) == ["map", "vector", "window", "bitmap3", "treap",
                                               "capped"]


# ------------------------------------------------------------- differential

# Prices: a cluster near the start, one past the windows' 2**18 levels, one far beyond,
# and the extremes, so that the window layouts use their far maps and move.
PRICES = st.one_of(
    st.integers(95, 105),
    st.integers(300_000, 300_004),
    st.integers(50_000_000, 50_000_002),
    st.sampled_from([0, 1, 2, MAX_PRICE - 1, MAX_PRICE, 2**32]),
)
IDS = st.one_of(st.integers(0, 12), st.sampled_from([MAX_ID, MAX_ID - 1, 2**32, 2**63]))
QTYS = st.one_of(st.integers(0, 6), st.sampled_from([2**32 - 1, 2**32]))
OP = st.tuples(st.integers(0, 6), IDS, IDS, PRICES, QTYS, st.sampled_from([0, 0, 1, 1, 2]))
UNCAPPED = [n for n in optimized.layouts.LAYOUTS if n != "capped"]


def uncapped(name: str) -> Any:
    """An uncapped layout's class (they take initial_orders; the capped one takes caps)."""
    assert name != "capped"
    return optimized.layouts.LAYOUTS[name]


def state(book: Any, ids: list[int]) -> tuple[Any, ...]:
    return (len(book), book.best_bid(), book.best_ask(), book.depth(0, 10**9),
            book.depth(1, 10**9), [book.order(i) for i in ids])


STATE_IDS = [*range(13), MAX_ID, MAX_ID - 1, 2**32, 2**63]


@pytest.mark.parametrize("name", UNCAPPED)
@settings(max_examples=80, deadline=None)
@given(stream=st.lists(OP, max_size=50))
def test_per_call_agrees_with_naive(name: str, stream: list[tuple[int, ...]]) -> None:
    ref, book = naive.Book(), uncapped(name)(initial_orders=4)
    for op, oid, new_id, price, qty, side in stream:
        expected = normalise(call(ref, op, oid, new_id, price, qty, side))
        assert normalise(call(book, op, oid, new_id, price, qty, side)) == expected
        assert state(book, STATE_IDS) == state(ref, STATE_IDS)


BATCH_OP = st.tuples(st.integers(0, 8), IDS, IDS,
                     st.one_of(st.integers(95, 105), st.integers(300_000, 300_004),
                               st.sampled_from([0, 1, MAX_PRICE])),
                     st.one_of(st.integers(0, 6), st.just(2**32 - 1)), st.integers(0, 3))


def ops_of(stream: list[tuple[int, ...]]) -> np.ndarray:
    ops = np.zeros(len(stream), dtype=OPS_DTYPE)
    for k, (op, oid, new_id, price, qty, side) in enumerate(stream):
        ops[k] = (oid, new_id, price, qty, op, side)
    return ops


@pytest.mark.parametrize("name", UNCAPPED)
@settings(max_examples=80, deadline=None)
@given(stream=st.lists(BATCH_OP, max_size=80))
def test_apply_agrees_with_naive(name: str, stream: list[tuple[int, ...]]) -> None:
    ops = ops_of(stream)
    ref, book = naive.Book(), uncapped(name)(initial_orders=4)
    expected, got = ref.apply(ops), book.apply(ops)
    assert got[0].tolist() == expected[0].tolist()
    assert got[1].tolist() == expected[1].tolist()
    assert state(book, STATE_IDS) == state(ref, STATE_IDS)


def drifting_stream(n: int, seed: int, mid: int = 50_000, step: int = 40) -> np.ndarray:
    """A longer stream whose price drifts: levels come and go at both ends of each side."""
    rng = np.random.default_rng(seed)
    ops = np.zeros(n, dtype=OPS_DTYPE)
    for k in range(n):
        mid = max(40, mid + int(rng.integers(-step, step + 1)))
        ops[k] = (int(rng.integers(0, 400)), int(rng.integers(0, 400)),
                  max(1, mid + int(rng.integers(-30, 31))), int(rng.integers(1, 50)),
                  int(rng.choice([0, 0, 0, 1, 2, 2, 3, 4, 5])), int(rng.integers(0, 2)))
    return ops


@pytest.mark.parametrize("name", list(optimized.layouts.LAYOUTS))
def test_long_drifting_stream_agrees(name: str) -> None:
    ops = drifting_stream(20_000, 2024, step=400)  # drifts across several 2**18 windows
    ref = naive.Book()
    book = optimized.layouts.LAYOUTS[name]()
    if name == "capped":
        book = optimized.layouts.LayoutCapped(price_cap=2**22, id_cap=512)
        assert int(ops["price"].max()) < 2**22
    expected, got = ref.apply(ops), book.apply(ops)
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
    assert state(book, list(range(400))) == state(ref, list(range(400)))


# ------------------------------------------------------------ capped layout


class CappedModel:
    """The capped layout's rules in Python: the naive twin behind the cap checks.

    A price >= price_cap is bad_price (where a price of 0 would be); an id >= id_cap is
    unknown_id in every operation, after the checks on price and qty and, in a replace,
    after the old id's own check."""

    def __init__(self, price_cap: int, id_cap: int) -> None:
        self.book = naive.Book()
        self.price_cap, self.id_cap = price_cap, id_cap

    def refusal(self, row: tuple[int, ...]) -> str | None:
        order_id, new_id, price, qty, op, side = row
        qty_ok = 1 <= qty <= 2**32 - 1
        price_ok = 1 <= price <= MAX_PRICE
        if op in (OP_LIMIT, OP_MARKET) and side > 1:
            return None  # bad_side, the naive twin's
        if op == OP_LIMIT:
            if price_ok and price >= self.price_cap:
                return "bad_price"
            if price_ok and qty_ok and order_id >= self.id_cap:
                return "unknown_id"
        elif op == OP_MARKET:
            if qty_ok and order_id >= self.id_cap:
                return "unknown_id"
        elif op == OP_CANCEL:
            if order_id >= self.id_cap:
                return "unknown_id"
        elif op in (OP_REDUCE, OP_EXECUTE):
            if qty_ok and order_id >= self.id_cap:
                return "unknown_id"
        elif op == OP_REPLACE:
            if price_ok and price >= self.price_cap:
                return "bad_price"
            if price_ok and qty_ok:
                if order_id >= self.id_cap:
                    return "unknown_id"
                if self.book.order(order_id) is not None and new_id >= self.id_cap:
                    return "unknown_id"
        return None

    def apply(self, ops: np.ndarray) -> tuple[list[Any], list[Any]]:
        fills: list[Any] = []
        rejects: list[Any] = []
        for k, row in enumerate(ops.tolist()):
            why = self.refusal(tuple(row))
            if why is not None:
                rejects.append((k, REASON_CODE[why]))
                continue
            f, r = self.book.apply(ops[k:k + 1])
            fills += [(*x[:4], k, x[5]) for x in f.tolist()]
            rejects += [(k, x[1]) for x in r.tolist()]
        return fills, rejects


CAP_PRICE, CAP_ID = 200, 10
CAPPED_OP = st.tuples(
    st.integers(0, 6),
    st.one_of(st.integers(0, 12), st.sampled_from([MAX_ID, 2**32])),
    st.one_of(st.integers(0, 12), st.sampled_from([MAX_ID])),
    st.one_of(st.integers(95, 105), st.integers(197, 203), st.sampled_from([0, 1, MAX_PRICE])),
    st.one_of(st.integers(0, 6), st.just(2**32 - 1)),
    st.integers(0, 2),
)


@settings(max_examples=300, deadline=None)
@given(stream=st.lists(CAPPED_OP, max_size=80))
def test_capped_refusals_follow_its_rules(stream: list[tuple[int, ...]]) -> None:
    """Streams across both caps: the capped layout does what its model says."""
    ops = ops_of(stream)
    model = CappedModel(CAP_PRICE, CAP_ID)
    book = optimized.layouts.LayoutCapped(price_cap=CAP_PRICE, id_cap=CAP_ID)
    fills, rejects = book.apply(ops)
    want_fills, want_rejects = model.apply(ops)
    assert fills.tolist() == want_fills
    assert rejects.tolist() == records(want_rejects, REJECT_DTYPE).tolist()
    assert state(book, list(range(13))) == state(model.book, list(range(13)))


def test_capped_inside_its_caps_is_the_naive_book() -> None:
    """Inside the caps the model refuses nothing: a plain comparison with naive."""
    ops = drifting_stream(5_000, 7)
    book = optimized.layouts.LayoutCapped(price_cap=int(ops["price"].max()) + 1, id_cap=400)
    ref = naive.Book()
    assert [a.tolist() for a in book.apply(ops)] == [a.tolist() for a in ref.apply(ops)]


def test_capped_edges_per_call() -> None:
    """The last price and id inside the caps are accepted; the first beyond is refused,
    the book unchanged, through every operation of the per-call API."""
    book = optimized.layouts.LayoutCapped(price_cap=1000, id_cap=100)
    rejected = optimized.book.OrderRejected
    assert book.price_cap == 1000 and book.id_cap == 100
    assert book.add_limit(99, BUY, 999, 10) == []  # the last price, the last id
    assert book.add_limit(0, SELL, 999, 5)[0].qty == 5  # the first id: trades at 999
    assert book.add_limit(0, SELL, 1, 1)[0].resting_id == 99
    before = (len(book), book.depth(0, 10), book.depth(1, 10))
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: book.add_limit(1, BUY, 1000, 5), "bad_price"),
        (lambda: book.add_limit(100, BUY, 10, 5), "unknown_id"),
        (lambda: book.add_limit(MAX_ID, BUY, 10, 5), "unknown_id"),
        (lambda: book.add_limit(100, BUY, MAX_PRICE, 5), "bad_price"),  # price first
        (lambda: book.add_market(100, SELL, 5), "unknown_id"),
        (lambda: book.cancel(100), "unknown_id"),
        (lambda: book.reduce(MAX_ID, 1), "unknown_id"),
        (lambda: book.execute(100, 1), "unknown_id"),
        (lambda: book.replace(99, 100, 10, 1), "unknown_id"),
        (lambda: book.replace(99, 1, 1000, 1), "bad_price"),
    ]
    for action, reason in cases:
        with pytest.raises(rejected) as caught:
            action()
        assert getattr(caught.value, "reason", None) == reason
        assert (len(book), book.depth(0, 10), book.depth(1, 10)) == before
    assert book.order(100) is None and book.order(MAX_ID) is None
    assert book.order(99) == (BUY, 999, 4)


@pytest.mark.parametrize("kwargs", [{"price_cap": 1}, {"price_cap": 2**28 + 1}, {"id_cap": 0},
                                    {"id_cap": 2**28 + 1}])
def test_capped_refuses_bad_caps(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="cap"):
        optimized.layouts.LayoutCapped(**kwargs)


# ------------------------------------------------------------------ hostile


@pytest.mark.parametrize("name", UNCAPPED)
def test_any_price_any_id(name: str) -> None:
    """The uncapped layouts take the extremes together: prices 1 and 2**32-1, ids 0 and
    2**64-1, levels at both ends of the price range at once."""
    book = optimized.layouts.LAYOUTS[name]()
    book.add_limit(0, BUY, 1, 1)
    book.add_limit(MAX_ID, SELL, MAX_PRICE, 2)
    book.add_limit(1, BUY, 2, 3)
    book.add_limit(2, SELL, MAX_PRICE - 1, 4)
    assert book.depth(BUY, 5) == [(2, 3, 1), (1, 1, 1)]
    assert book.depth(SELL, 5) == [(MAX_PRICE - 1, 4, 1), (MAX_PRICE, 2, 1)]
    fills, left = book.add_market(3, BUY, 10)
    assert [(f.resting_id, f.price) for f in fills] == [(2, MAX_PRICE - 1), (MAX_ID, MAX_PRICE)]
    assert left == 4
    assert [f.resting_id for f in book.add_limit(4, SELL, 1, 4)] == [1, 0]
    assert len(book) == 0 and book.best_bid() is None and book.best_ask() is None


@pytest.mark.parametrize("name", list(optimized.layouts.LAYOUTS))
@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_sorted_level_sequences(name: str, order: str) -> None:
    """20,000 levels arriving in sorted order (a plain BST's worst case, and for the
    vector each insert at one end), then drained from the best end: the same as naive."""
    n = 20_000
    prices = np.arange(1_000, 1_000 + n)
    if order == "descending":
        prices = prices[::-1]
    ops = np.zeros(2 * n + 1, dtype=OPS_DTYPE)
    ops["order_id"][:n] = np.arange(n)
    ops["price"][:n] = prices
    ops["qty"][:n] = 1
    ops["side"][:n] = SELL
    ops["op"][:n] = OP_LIMIT
    ops["order_id"][n:2 * n] = np.arange(n)[::-1]
    ops["op"][n:2 * n] = OP_CANCEL  # cancels, youngest first
    ops[2 * n] = (n, 0, 0, 1, OP_MARKET, BUY)
    book = optimized.layouts.LAYOUTS[name]()
    fills, rejects = book.apply(ops[:n])
    assert len(fills) == 0 and len(rejects) == 0
    assert book.best_ask() == (1_000, 1)
    assert [p for p, _, _ in book.depth(SELL, 3)] == [1_000, 1_001, 1_002]
    fills, rejects = book.apply(ops[n:])
    assert len(fills) == 0 and len(rejects) == 0 and len(book) == 0


@pytest.mark.parametrize("name", list(optimized.layouts.LAYOUTS))
def test_latency_histogram(name: str) -> None:
    """latency() applies the ops (the book ends as apply() leaves it) and reports ordered
    percentiles; no timing is asserted."""
    ops = drifting_stream(2_000, 3)
    book = optimized.layouts.LAYOUTS[name]()
    if name == "capped":
        book = optimized.layouts.LayoutCapped(price_cap=2**20, id_cap=512)
    ref = naive.Book()
    ref.apply(ops)
    stats = book.latency(ops)
    assert stats["count"] == len(ops)
    assert 0 <= stats["p50_ns"] <= stats["p99_ns"] <= stats["p999_ns"] <= stats["max_ns"]
    assert stats["timer_overhead_ns"] >= 0
    assert state(book, list(range(400))) == state(ref, list(range(400)))


def test_latency_on_a_full_book_raises_and_frees_the_book() -> None:
    """latency() releases the GIL and marks the book busy meanwhile: an op that finds the
    book full raises MemoryError, and the book is usable again afterwards."""
    book = optimized.layouts.LayoutWindow(max_orders=2)
    ops = ops_of([(OP_LIMIT, k, 0, 100 + k, 1, BUY) for k in range(3)])
    with pytest.raises(MemoryError):
        book.latency(ops)
    assert len(book) == 2
    assert book.cancel(0) == 1  # not left busy


@pytest.mark.parametrize("name", list(optimized.layouts.LAYOUTS))
def test_run_counted_is_apply(name: str) -> None:
    """The loop valgrind counts is the batch loop: the same fills and rejects."""
    ops = drifting_stream(2_000, 5)
    book = optimized.layouts.LAYOUTS[name]()
    if name == "capped":
        book = optimized.layouts.LayoutCapped(price_cap=2**20, id_cap=512)
    fills, rejects = naive.Book().apply(ops)
    assert book.run_counted(ops, 2) == (len(fills), len(rejects))
    for slot in (-1, 4):
        with pytest.raises(ValueError, match="slot"):
            book.run_counted(ops, slot)


STRESS = ROOT / "tests" / "native" / "layouts_stress.cpp"


@pytest.mark.timeout(300)
def test_layouts_agree_under_address_and_ub_sanitizers(tmp_path: Any) -> None:
    """Every layout against the map layout on random streams, compiled with
    -fsanitize=address,undefined (tests/native/layouts_stress.cpp): the same results, the
    capped one inside its caps too, no fill beyond what was counted, no undefined
    behaviour (the capped one also across its caps)."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found: cannot build the sanitized layouts stress")
    exe = tmp_path / "layouts_stress"
    built = subprocess.run([gxx, "-std=c++20", "-O1", "-g", "-fsanitize=address,undefined",
                            "-fno-sanitize-recover=undefined", "-I", str(ROOT / "native"),
                            str(STRESS), "-o", str(exe)], capture_output=True, text=True,
                           timeout=240, check=False)
    if built.returncode != 0:
        pytest.skip(f"g++ cannot build with the sanitizers here: {built.stderr[-300:]}")
    run = subprocess.run([str(exe), "30000"], capture_output=True, text=True, timeout=240,
                         env={"ASAN_OPTIONS": "detect_leaks=0",
                              "UBSAN_OPTIONS": "print_stacktrace=1"}, check=False)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    assert "layouts agree: 30000 ops x 3 seeds" in run.stdout


def fixed_seed_priorities(n: int) -> list[int]:
    """The first n priorities of the treap's old fixed seed (xorshift32 from 0x9E3779B9)."""
    x, out = 0x9E3779B9, []
    for _ in range(n):
        x ^= (x << 13) & 0xFFFF_FFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFF_FFFF
        out.append(x)
    return out


TREAP_ADVERSARY = """
import sys
import numpy as np
import optimized.layouts
from contract.dtypes import OP_LIMIT, OPS_DTYPE
prices = np.load(sys.argv[1])
ops = np.zeros(len(prices), dtype=OPS_DTYPE)
ops["order_id"] = np.arange(len(prices))
ops["price"] = prices
ops["qty"] = 1
ops["side"] = 1
ops["op"] = OP_LIMIT
book = optimized.layouts.LayoutTreap()
fills, rejects = book.apply(ops)
assert len(fills) == 0 and len(rejects) == 0
print(book.depth(1, 1), len(book))
"""


def test_treap_adversarial_price_order(tmp_path: Any) -> None:
    """Prices ranked as the treap's priorities would be under a fixed seed (each price's
    rank = its priority's rank) make that treap a path: every insert walks it, and its
    recursive split/merge/walk went as deep as the book has levels, which killed a
    process with a 1 MiB stack (SIGSEGV) at 40,000 levels. With a priority seed of its
    own per book and iterative split, merge and walk, the same process builds them."""
    n = 40_000
    prios = np.array(fixed_seed_priorities(n), dtype=np.uint64)
    prices = np.empty(n, dtype=np.uint32)
    prices[np.argsort(prios, kind="stable")] = 1_000 + np.arange(n, dtype=np.uint32)
    np.save(tmp_path / "prices.npy", prices)

    def small_stack() -> None:
        import resource
        resource.setrlimit(resource.RLIMIT_STACK, (1 << 20, 1 << 20))

    run = subprocess.run([sys.executable, "-c", TREAP_ADVERSARY, str(tmp_path / "prices.npy")],
                         capture_output=True, text=True, timeout=60, check=False,
                         preexec_fn=small_stack, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-1000:]
    assert run.stdout.split() == ["[(1000,", "1,", "1)]", str(n)]
