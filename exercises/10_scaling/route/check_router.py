"""Checker for 10_scaling/route: routed over 1..4 workers, a day whose E C X D U carry
another symbol's locate gives one market's books, fills and counts."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest
from exercise_support import load_module

from contract.shard import merge_books_csv
from naive.itch import decode
from naive.market import Market
from twinmatch.gen import market_day_bytes


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "router.py")


@pytest.fixture(scope="module")
def events() -> np.ndarray:
    """A generated day whose references name the wrong locate half of the time."""
    ev = decode(market_day_bytes(4_000, 16, seed=3)[0])[0].copy()
    by_ref = np.isin(ev["type"], [ord(c) for c in "ECXDU"])
    wrong = by_ref & (np.arange(len(ev)) % 2 == 0)
    ev["locate"][wrong] = (ev["locate"][wrong] % 16) + 1 + (ev["locate"][wrong] == 16)
    return ev


def sharded(mod: ModuleType, ev: np.ndarray, workers: int) -> dict[str, Any]:
    router = mod.Router(workers)
    dest = np.array([router.route(row) for row in ev.tolist()], dtype=np.int64)
    markets = [Market("book") for _ in range(workers)]
    fills = []
    for w, m in enumerate(markets):
        idx = np.flatnonzero(dest == w)
        f = m.run(ev[idx])
        f["op_index"] = idx[f["op_index"]]
        fills.append(f)
    merged = np.concatenate(fills)
    merged = merged[np.argsort(merged["op_index"], kind="stable")]
    anomalies: dict[str, int] = {}
    for m in markets:
        for k, v in m.counts()["anomalies"].items():
            anomalies[k] = anomalies.get(k, 0) + v
    return {"books": merge_books_csv([m.books_csv() for m in markets]),
            "fills": merged[["resting_id", "qty", "op_index"]].tolist(),
            "anomalies": anomalies, "live": sum(len(m) for m in markets)}


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_routed_equals_one_market(mod: ModuleType, events: np.ndarray, workers: int) -> None:
    one = Market("book")
    fills = one.run(events)
    got = sharded(mod, events, workers)
    assert one.counts()["anomalies"]["locate_mismatch"] > 0
    assert got["anomalies"] == one.counts()["anomalies"], (
        "unknown_ref counted: did an E C X D U reach a worker that never saw its order?")
    assert got["live"] == len(one)
    assert got["fills"] == fills[["resting_id", "qty", "op_index"]].tolist()
    assert got["books"] == one.books_csv()
