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


def test_loss_every_reader_sees_every_item_in_order(mod: ModuleType) -> None:
    """A fast writer and slow readers (each sleeps now and then), tiny ring."""
    items, readers = 3_000, 3
    ring = mod.BroadcastRing(4, readers)
    seen: list[list[int]] = [[] for _ in range(readers)]
    deadline = time.monotonic() + 30

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
                pytest.fail("the writer waited 30 s: do the readers move their sequences on?")
            time.sleep(0)
    for t in threads:
        t.join(timeout=30)
    for r in range(readers):
        assert seen[r] == list(range(items)), (
            f"reader {r} saw {len(seen[r])} items; first wrong one at "
            f"{next((k for k, v in enumerate(seen[r]) if v != k), len(seen[r]))}")
