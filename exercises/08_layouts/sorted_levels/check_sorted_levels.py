"""Checker for 08_layouts/sorted_levels: a sorted-list level index, best at the end."""

from __future__ import annotations

import random
from types import ModuleType

import pytest
from exercise_support import load_module


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "sorted_levels.py")


@pytest.mark.parametrize("bid", [True, False])
def test_against_a_dict(mod: ModuleType, bid: bool) -> None:
    """Random inserts and erases; every answer compared with a plain dict's."""
    rng = random.Random(8)
    index = mod.SortedLevels(bid)
    ref: dict[int, object] = {}
    for _ in range(3_000):
        price = rng.randint(1, 200)
        if price in ref and rng.random() < 0.6:
            index.erase(price)
            del ref[price]
        elif price not in ref:
            level = object()
            index.insert(price, level)
            ref[price] = level
        assert index.find(price) is ref.get(price)
        want = (max(ref) if bid else min(ref)) if ref else None
        assert index.best() == want
    order = sorted(ref, reverse=bid)
    assert [(p, lv) for p, lv in index.levels_best_first()] == [(p, ref[p]) for p in order]


@pytest.mark.parametrize("bid", [True, False])
def test_best_is_the_last_element(mod: ModuleType, bid: bool) -> None:
    """The layout's point: the best level sits at the END of the list, so the levels near
    the touch, where most orders arrive, are the cheap ones to insert and erase."""
    index = mod.SortedLevels(bid)
    for price in (100, 105, 95, 102, 98):
        index.insert(price, price)
    best = 105 if bid else 95
    assert index.best() == best
    assert index.levels[-1] == best, "store the levels worst first: the best one last"


def test_prices_at_the_extremes(mod: ModuleType) -> None:
    for bid in (True, False):
        index = mod.SortedLevels(bid)
        for price in (1, 2**32 - 1, 2):
            index.insert(price, str(price))
        assert index.best() == (2**32 - 1 if bid else 1)
        index.erase(2**32 - 1)
        index.erase(1)
        assert index.best() == 2 and index.find(1) is None
        index.erase(2)
        assert index.best() is None and index.levels_best_first() == []
