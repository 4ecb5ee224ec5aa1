"""Checker for 14_research_data/replay_bbo: the messages table replayed by the documented
rules gives the bbo table the C++ builder wrote, row for row (a day with replaces,
partial executions and cancels in it)."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from exercise_support import load_module

from optimized.tables import TableBuilder
from twinmatch.gen import market_day_bytes

BBO = ("timestamp", "seq", "locate", "bid_price", "bid_size", "bid_orders", "ask_price",
       "ask_size", "ask_orders")


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "replay.py")


@pytest.mark.parametrize("seed", [3, 8])
def test_replay_gives_bbo(mod: ModuleType, seed: int) -> None:
    raw, _ = market_day_bytes(20_000, 6, seed)
    b = TableBuilder(tables=("messages", "bbo"))
    b.feed(raw)
    t = b.take()
    kinds = set(np.unique(t["messages"]["type"]).tolist())
    assert {ord("U"), ord("E"), ord("D")} <= kinds  # the day exercises every rule
    want = list(zip(*(t["bbo"][c].tolist() for c in BBO), strict=True))
    got = mod.replay_bbo(t["messages"])
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert tuple(g) == w, f"bbo row {k} (seq {w[1]}): got {g}, want {w}"
