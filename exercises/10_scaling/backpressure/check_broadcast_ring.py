"""Checker for 10_scaling/backpressure: a writer never laps the slowest reader, so every
reader sees every item, once, in order (the loss test), with one reader or several."""

from __future__ import annotations

import random
import threading
import time
from types import ModuleType

import pytest
from exercise_support import load_module


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "broadcast_ring.py")


def test_full_ring_refuses(mod: ModuleType) -> None:
    ring = mod.BroadcastRing(4, 2)
    assert all(ring.try_publish(i) for i in range(4))
    assert ring.try_publish(4) is False, "the ring is full: nobody has read item 0"
    assert ring.try_read(0) == (True, 0)
    assert ring.try_publish(4) is False, "reader 1 still needs item 0"
    assert ring.try_read(1) == (True, 0)
    assert ring.try_publish(4) is True


def test_the_slowest_reader_decides(mod: ModuleType) -> None:
    ring = mod.BroadcastRing(3, 3)
    for i in range(3):
        assert ring.try_publish(i)
    for _ in range(3):
        ring.try_read(0)
        ring.try_read(1)
    assert ring.try_publish(3) is False, "reader 2 has read nothing yet"


def test_loss_under_a_random_schedule(mod: ModuleType) -> None:
    """One thread plays writer and readers in a seeded random order (the slow readers are
    the ones the dice pick rarely): every reader sees every item, once, in order."""
    items, readers = 5_000, 3
    ring = mod.BroadcastRing(4, readers)
    rng = random.Random(7)
    seen: list[list[int]] = [[] for _ in range(readers)]
    weights = [8, 1, 3, 1]                  # the writer, then readers 0..2 (reader 1 slowest)
    written, steps = 0, 0
    while min(len(s) for s in seen) < items:
        steps += 1
        assert steps < 2_000_000, "no progress: do the readers move their sequences on?"
        who = rng.choices(range(readers + 1), weights)[0]
        if who == 0:
            if written < items and ring.try_publish(written):
                written += 1
        else:
            ok, item = ring.try_read(who - 1)
            if ok:
                seen[who - 1].append(item)
    for r in range(readers):
        _assert_in_order(r, seen[r], items)


def test_loss_with_threads(mod: ModuleType) -> None:
    """A fast writer and slow readers in real threads, tiny ring. Every wait shares one
    deadline, so a broken ring fails in seconds instead of hanging."""
    items, readers = 1_000, 3
    ring = mod.BroadcastRing(4, readers)
    seen: list[list[int]] = [[] for _ in range(readers)]
    deadline = time.monotonic() + 20

    def read(r: int) -> None:
        rng = random.Random(r)
        while len(seen[r]) < items and time.monotonic() < deadline:
            ok, item = ring.try_read(r)
            if ok:
                seen[r].append(item)
            if rng.random() < 0.05 or not ok:
                time.sleep(0)

    threads = [threading.Thread(target=read, args=(r,), daemon=True) for r in range(readers)]
    for t in threads:
        t.start()
    for i in range(items):
        while not ring.try_publish(i):
            if time.monotonic() > deadline:
                pytest.fail("the writer waited 20 s: do the readers move their sequences on?")
            time.sleep(0)
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    for r in range(readers):
        _assert_in_order(r, seen[r], items)


def _assert_in_order(r: int, got: list[int], items: int) -> None:
    # A plain bool, not `got == list(range(items))`: pytest would diff two long lists.
    first_wrong = next((k for k, v in enumerate(got) if v != k), len(got))
    assert len(got) == items and first_wrong == items, (
        f"reader {r} saw {len(got)} items; the first wrong one is at index {first_wrong}")
