"""Checker for 08_layouts/vector_tail: what a sorted vector's insert shifts, and the
stream that makes every insert shift everything."""

from __future__ import annotations

import bisect
import random
from types import ModuleType

import pytest
from exercise_support import load_module


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "tail.py")


def shifts(prices: list[int]) -> list[int]:
    """What each insert of a stream of bid prices shifts, by brute force: the entries of the
    sorted list that are greater than the new price."""
    keys: list[int] = []
    out = []
    for p in prices:
        out.append(sum(1 for k in keys if k > p))
        bisect.insort(keys, p)
    return out


def test_moved(mod: ModuleType) -> None:
    rng = random.Random(8)
    keys: list[int] = []
    for _ in range(500):
        key = rng.randint(1, 10_000)
        if key in keys:
            continue
        assert mod.moved(keys, key) == sum(1 for k in keys if k > key)
        bisect.insort(keys, key)
    assert mod.moved([], 5) == 0
    assert mod.moved([1, 2, 3], 4) == 0, "a new best level goes at the end: nothing moves"
    assert mod.moved([1, 2, 3], 0) == 3, "a new worst level goes first: everything moves"


def test_adversarial_adds(mod: ModuleType) -> None:
    n, touch = 2_000, 1_000_000
    prices = mod.adversarial_adds(n, touch)
    assert len(prices) == n and len(set(prices)) == n, "n distinct prices"
    assert all(1 <= p < touch for p in prices), "bids below the touch (none crosses)"
    total = sum(shifts(prices))
    assert total == n * (n - 1) // 2, (
        f"these inserts shift {total} entries in all; the most possible is {n * (n - 1) // 2}")


def test_near_the_touch_is_cheap(mod: ModuleType) -> None:
    """The other end: prices arriving at (or just behind) the touch shift almost nothing,
    which is why the median stays low while the tail explodes."""
    keys = list(range(1, 10_001))
    assert mod.moved(keys, 10_001) == 0
    assert mod.moved(keys[:-1] + [10_002], 10_001) == 1
