"""Checker for 05_many_books/replay_profile: the same books as the shipped starter, and
at least 3x faster on a day of 1,500 symbols, measured against it with the paired
protocol in the same run."""

from __future__ import annotations

import random
from types import ModuleType

import pytest
from exercise_support import load_baseline, load_module, paired_ratio

MIN_SPEEDUP = 3.0
SYMBOLS = 1_500
MESSAGES = 12_000


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "replay.py")


@pytest.fixture(scope="module")
def base() -> ModuleType:
    return load_baseline(__file__, "replay.py")


def day(symbols: int, messages: int, seed: int) -> list[tuple[object, ...]]:
    """Adds, then executions and deletes of live orders, over many symbols."""
    rng = random.Random(seed)
    live: list[int] = []
    shares: dict[int, int] = {}
    out: list[tuple[object, ...]] = []
    ref = 0
    for _ in range(messages):
        r = rng.random()
        if r < 0.5 or not live:
            ref += 1
            qty = rng.randint(1, 500)
            out.append(("A", rng.randint(1, symbols), ref, rng.randint(0, 1),
                        rng.randint(9_900, 10_100), qty))
            live.append(ref)
            shares[ref] = qty
            continue
        i = rng.randrange(len(live))
        target = live[i]
        if r < 0.75 and shares[target] > 1:
            done = rng.randint(1, shares[target] - 1)
            shares[target] -= done
            out.append(("E", target, done))
        else:
            live[i] = live[-1]
            live.pop()
            out.append(("D", target))
    return out


def result(market: object) -> tuple[object, ...]:
    return (market.top_of_books(), market.orders, market.messages)  # type: ignore[attr-defined]


@pytest.mark.parametrize("symbols, messages, seed", [(1, 0, 1), (1, 300, 2), (40, 3000, 3)])
def test_same_books_as_the_starter(mod: ModuleType, base: ModuleType, symbols: int,
                                   messages: int, seed: int) -> None:
    msgs = day(symbols, messages, seed)
    assert result(mod.replay(msgs)) == result(base.replay(msgs))


def test_executed_to_zero_leaves(mod: ModuleType) -> None:
    market = mod.replay([("A", 7, 1, 0, 100, 5), ("E", 1, 5), ("A", 7, 2, 1, 101, 3)])
    assert market.orders == {2: [7, 1, 101, 3]}
    assert market.top_of_books() == {7: (None, 101)}


def test_faster_than_the_starter(mod: ModuleType, base: ModuleType) -> None:
    msgs = day(SYMBOLS, MESSAGES, 9)
    assert result(mod.replay(msgs)) == result(base.replay(msgs))
    measured = paired_ratio(lambda: mod.replay(msgs), lambda: base.replay(msgs))
    median = measured.median
    assert median >= MIN_SPEEDUP, (
        f"your replay of {MESSAGES:,} messages over {SYMBOLS:,} symbols is {measured} "
        f"faster than the starter's; the target is {MIN_SPEEDUP:.0f}x. What does the "
        "profiler's top line say?")
