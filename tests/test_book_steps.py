"""Chapter 1's steps (optimized.book.book_step) against the naive twin.

Each step is native/book.hpp compiled with only its first decisions (the bitset, warm
node reuse, fingerprints, branch-free code, prefetch). tests/test_book.py runs the whole
behavioural suite over every step; here random streams, through apply() and the per-call
API, with a 64-level window so that far levels and window moves happen all the time,
and a realistic flow, must give every step the naive twin's fills, rejects and book.
"""

from __future__ import annotations

import html
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naive.book as naive
import optimized._native as native
from contract.dtypes import OPS_DTYPE
from optimized.book import BOOK_STEPS, Book, BookStep0, book_step
from tests.bench.conftest import cached_flow
from tests.test_book_differential_native import BATCH_OP, STREAMS, call, normalise, state
from tests.test_docs import load_script

STEPS = range(len(BOOK_STEPS))
ROOT = Path(__file__).resolve().parent.parent


def step_books() -> list[Any]:
    return [book_step(i)(window_levels=64, initial_orders=4) for i in STEPS]


def test_steps_are_named_in_order() -> None:
    names = [name for name, _ in BOOK_STEPS]
    assert names[0] == "flat" and names[-1] == "prefetch"
    assert len(set(names)) == len(names)
    assert all(adds for _, adds in BOOK_STEPS)
    assert book_step(len(BOOK_STEPS) - 1) is Book  # the last step is the product's Book
    assert book_step(0) is BookStep0
    for bad in (-1, len(BOOK_STEPS)):
        with pytest.raises(ValueError, match="book step must be in"):
            book_step(bad)


def test_every_step_has_the_book_api() -> None:
    public = {n for n in dir(native.MapBook) if not n.startswith("_")} | {"__len__"}
    for i in STEPS:
        assert public <= set(dir(book_step(i))), i


@settings(max_examples=200, deadline=None)
@given(st.lists(BATCH_OP, max_size=80))
def test_apply_agrees_in_every_step(stream: list[tuple[int, int, int, int, int, int]]) -> None:
    ops = np.zeros(len(stream), dtype=OPS_DTYPE)
    for k, (op, oid, new_id, price, qty, side) in enumerate(stream):
        ops[k] = (oid, new_id, price, qty, op, side)
    reference = naive.Book()
    want_fills, want_rejects = reference.apply(ops)
    for i, book in zip(STEPS, step_books(), strict=True):
        fills, rejects = book.apply(ops)
        assert fills.tolist() == want_fills.tolist(), BOOK_STEPS[i][0]
        assert rejects.tolist() == want_rejects.tolist(), BOOK_STEPS[i][0]
        assert state(book) == state(reference), BOOK_STEPS[i][0]


@settings(max_examples=150, deadline=None)
@given(STREAMS)
def test_per_call_api_agrees_in_every_step(
        stream: list[tuple[int, int, int, int, int, int]]) -> None:
    reference = naive.Book()
    books = step_books()
    for op, oid, new_id, price, qty, side in stream:
        want = normalise(call(reference, op, oid, new_id, price, qty, side))
        for i, book in zip(STEPS, books, strict=True):
            got = normalise(call(book, op, oid, new_id, price, qty, side))
            assert got == want, (BOOK_STEPS[i][0], op, oid, new_id, price, qty, side)
    for i, book in zip(STEPS, books, strict=True):
        assert state(book) == state(reference), BOOK_STEPS[i][0]


def test_realistic_flow_agrees_in_every_step() -> None:
    """The benchmark's workload shape (tests/bench: cached_flow), at a test's size, with
    the default window: every step's fills, rejects and depth equal naive's."""
    ops = cached_flow(20_000, seed=7)
    reference = naive.Book()
    want_fills, want_rejects = reference.apply(ops)
    for i in STEPS:
        book = book_step(i)()
        fills, rejects = book.apply(ops)
        assert np.array_equal(fills, want_fills), BOOK_STEPS[i][0]
        assert np.array_equal(rejects, want_rejects), BOOK_STEPS[i][0]
        for side in (naive.Side.BUY, naive.Side.SELL):
            assert book.depth(side, 10**6) == reference.depth(side, 10**6), BOOK_STEPS[i][0]
        assert len(book) == len(reference)


def test_scan_without_bitset_finds_the_next_level() -> None:
    """Step 0 finds a new best price by walking the level array: levels far apart inside
    the window, at both ends of it, emptied best first, on both sides."""
    for i in STEPS:
        book = book_step(i)(window_levels=1024)
        book.add_limit(1, 0, 5_000, 1)  # the window centres here: base 4_488
        for oid, price in ((2, 4_489), (3, 4_700), (4, 4_999)):
            book.add_limit(oid, 0, price, 1)
        for oid, price in ((12, 5_511), (13, 5_300), (14, 5_001)):
            book.add_limit(oid, 1, price, 1)
        bids, asks = [5_000, 4_999, 4_700, 4_489], [5_001, 5_300, 5_511]
        for oid in (1, 4, 3):
            assert book.best_bid() == (bids[0], 1)
            book.cancel(oid)
            bids.pop(0)
        assert book.best_bid() == (4_489, 1)
        for oid in (14, 13):
            assert book.best_ask() == (asks[0], 1)
            book.cancel(oid)
            asks.pop(0)
        assert book.best_ask() == (5_511, 1)
        book.cancel(2)
        book.cancel(12)
        assert book.best_bid() is None and book.best_ask() is None, BOOK_STEPS[i][0]


def test_figures_ablation_table(tmp_path: Path) -> None:
    """scripts/figures.py turns the ablation records into the chapter's table: steps in
    order, each against the one before (paired), the cumulative effect, the counts."""
    figures = load_script("figures")
    benches: list[dict[str, Any]] = []
    for i, (name, adds) in enumerate(BOOK_STEPS):
        info = {"ops": 1000, "step": i, "step_name": name, "adds": adds,
                "includes": "the loop", "impl": f"step{i}-cpp"}
        if i == 2:
            info["valgrind"] = {"Ir": 123.0, "D1": 0.5, "LL": 0.25}
        benches.append({"group": "book-ablation", "name": f"test_ablation[step{i}-cpp]",
                        "params": {"impl": f"step{i}-cpp"},
                        "stats": {"median": 1e-3 / (i + 1), "rounds": 3},
                        "extra_info": info})
        if i:
            benches.append({"group": "paired", "name": f"test_paired_ablation_step[{i}]",
                            "params": {"step": i}, "stats": {"median": 1.0, "rounds": 3},
                            "extra_info": {"paired": {"key": f"book-step-{name}",
                                                      "median": 1.5, "q1": 1.25, "q3": 1.75,
                                                      "pairs": 21}}})
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"benchmarks": benches}), encoding="utf-8")
    chapters = tmp_path / "chapters"
    chapters.mkdir()
    (chapters / "x.md").write_text('--8<-- "chapters/generated/book-ablation-table.md"\n'
                                   "![s](generated/book-ablation-steps.svg)\n", "utf-8")
    out = tmp_path / "generated"
    assert figures.generate(run, out, chapters) == []
    table = (out / "book-ablation-table.md").read_text(encoding="utf-8")
    rows = [line for line in table.splitlines() if line.startswith("<tr><th scope")]
    assert [r.split("</th>")[0].split(">")[-1] for r in rows] == [
        f"{i}. {name}" for i, (name, _) in enumerate(BOOK_STEPS)]
    assert "1.50× <small>(IQR 1.25×–1.75×, 21 pairs)" in rows[1]
    # Against step 0: the product of the paired ratios (1.5^5), never step 0's median over
    # the last step's (6.0x here: unpaired medians); its range the product of the quartiles
    # where a record has no per-pair ratios.
    assert "7.59× <small>(IQR 3.05×–16.41×)" in rows[-1] and "6.0" not in rows[-1]
    assert "<br><small>no measurable effect" not in table
    verdict = figures.ablation_verdict(figures.ablation_steps(json.loads(run.read_text()),
                                                              "book-ablation"))
    assert verdict.startswith("Measurably faster than the step before: step 1")
    assert verdict in html.unescape(table)
    assert "123, 0.50 / 0.25" in rows[2] and "not counted" in rows[1]
    assert (out / "book-ablation-steps.svg").read_text(encoding="utf-8").startswith("<?xml")


def test_figures_ablation_verdict_from_paired_data() -> None:
    """A step whose paired IQR contains 1.0 is "no measurable effect", never a gain; the
    cumulative column multiplies the paired ratios (and draws per-pair ratios for its
    range), so a slower median can never contradict a faster product."""
    figures = load_script("figures")

    def step(i: int, per_op: float, ratios: list[float] | None) -> Any:
        paired = None
        if ratios is not None:
            q1, med, q3 = figures._quartiles(ratios)
            paired = {"median": med, "q1": q1, "q3": q3, "pairs": len(ratios),
                      "ratios": ratios}
        return figures.Step(i, f"s{i}", "", per_op, None, paired)

    steps = [step(0, 10e-9, None),
             step(1, 30e-9, [0.95, 0.98, 1.0, 1.02, 1.05]),   # straddles 1.0
             step(2, 5e-9, [1.9, 2.0, 2.0, 2.1, 2.2])]        # a real gain
    cums = figures.cumulative(steps)
    assert cums[0] is None and cums[1] is not None and cums[2] is not None
    assert cums[1].q1 <= 1.0 <= cums[1].q3
    assert abs(cums[2].median - 2.0) < 1e-9 and cums[2].q1 > 1.0
    assert cums == figures.cumulative(steps)  # a fixed seed: the same page every time
    verdict = figures.ablation_verdict(steps)
    assert "step 2 (s2) 2.00× faster" in verdict
    assert "No measurable effect (the paired IQR contains 1.0): step 1 (s1)." in verdict
    assert "against step 0, the product of the paired ratios: 2.00×" in verdict
    # Step 1's own median is 3x slower than step 0's (timed at another moment): the table
    # says nothing of it beyond "time per op"; the paired columns decide.
    html_table = figures.ablation_html(
        figures.Group("x-ablation", []), steps, "test machine")
    assert "<br><small>no measurable effect" in html_table and "0.33×" not in html_table


STRESS = ROOT / "tests" / "native" / "book_steps_stress.cpp"


@pytest.mark.timeout(300)
def test_steps_agree_under_address_and_ub_sanitizers(tmp_path: Path) -> None:
    """Every step against Book on random streams, compiled with -fsanitize=address,undefined
    (tests/native/book_steps_stress.cpp): same results, and no undefined behaviour."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found: cannot build the sanitized steps stress")
    exe = tmp_path / "book_steps_stress"
    built = subprocess.run([gxx, "-std=c++20", "-O1", "-g", "-fsanitize=address,undefined",
                            "-fno-sanitize-recover=undefined", "-I", str(ROOT / "native"),
                            str(STRESS), "-o", str(exe)], capture_output=True, text=True,
                           timeout=180)
    if built.returncode != 0:
        pytest.skip(f"g++ cannot build with the sanitizers here: {built.stderr[-300:]}")
    run = subprocess.run([str(exe), "50000"], capture_output=True, text=True, timeout=240,
                         env={"ASAN_OPTIONS": "detect_leaks=0",
                              "UBSAN_OPTIONS": "print_stacktrace=1"})
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    assert "steps agree: 50000 ops x 3 seeds" in run.stdout
