"""Checker for 05_many_books/anomalies: the same counts and live orders as naive.market."""

from __future__ import annotations

import random
from types import ModuleType

import numpy as np
import pytest
from exercise_support import load_module

from contract.dtypes import EVENT_DTYPE
from naive.market import Market


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "feed_handler.py")


def stream(n: int, seed: int) -> list[tuple[str, int, int, int, int, int]]:
    """(kind, locate, ref, side, price, shares): adds, executions and deletes, some bad."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kind = rng.choice("AAAEDD")
        ref = rng.randint(1, n // 2)
        side = rng.randint(0, 1)
        price = 100 + rng.randint(-5, 5) + (3 if side else -3)
        out.append((kind, rng.randint(1, 3), ref, side, price, rng.randint(1, 20)))
    return out


def reference(msgs: list[tuple[str, int, int, int, int, int]]) -> Market:
    ev = np.zeros(len(msgs), dtype=EVENT_DTYPE)
    for i, (kind, locate, ref, side, price, shares) in enumerate(msgs):
        ev[i] = (0, ref, 0, 0, shares, price, locate, ord(kind), ord("BS"[side]), 0, b"")
    m = Market("book")
    m.run(ev)
    return m


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_same_as_naive_market(mod: ModuleType, seed: int) -> None:
    msgs = stream(400, seed)
    handler = mod.FeedHandler()
    for kind, locate, ref, side, price, shares in msgs:
        if kind == "A":
            handler.add(locate, ref, side, price, shares)
        elif kind == "E":
            handler.execute(ref, shares)
        else:
            handler.delete(ref)
    want = reference(msgs)
    counts = want.counts()["anomalies"]
    for kind in mod.KINDS:
        assert handler.anomalies[kind] == counts[kind], kind
    assert len(handler.orders) == len(want)


def test_delete_twice(mod: ModuleType) -> None:
    handler = mod.FeedHandler()
    handler.add(1, 7, 0, 100, 10)
    handler.delete(7)
    handler.delete(7)
    assert handler.anomalies["unknown_ref"] == 1


def test_crossing_add_rests_per_symbol(mod: ModuleType) -> None:
    handler = mod.FeedHandler()
    handler.add(1, 1, 1, 100, 10)   # sell 100 in symbol 1
    handler.add(2, 2, 0, 105, 10)   # buy 105 in symbol 2: another book
    assert handler.state(1) == "" and handler.state(2) == ""
    handler.add(1, 3, 0, 100, 10)   # buy 100 in symbol 1: locked, and it rests
    assert handler.state(1) == "locked"
    handler.add(1, 4, 0, 101, 10)   # buy 101: crossed
    assert handler.state(1) == "crossed" and handler.state(2) == ""
    assert sorted(handler.orders) == [1, 2, 3, 4]
    assert sum(handler.anomalies.values()) == 0
