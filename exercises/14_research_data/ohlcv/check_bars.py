"""Checker for 14_research_data/ohlcv: one-second OHLCV bars from the trades table, in
both functions, equal to a reference built here, on a generated day and on edge cases."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from exercise_support import load_module

from contract.tables import columns
from optimized.tables import TableBuilder
from twinmatch.gen import market_day_bytes

NS = 1_000_000_000


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "bars.py")


@pytest.fixture(scope="module")
def trades() -> dict[str, np.ndarray]:
    raw, _ = market_day_bytes(40_000, 8, 5)
    b = TableBuilder(tables=("trades",))
    b.feed(raw)
    return b.take()["trades"]


def reference(t: dict[str, np.ndarray]) -> dict[tuple[int, int], tuple[int, ...]]:
    out: dict[tuple[int, int], list[int]] = {}
    for i in np.argsort(t["seq"], kind="stable"):
        if chr(int(t["kind"][i])) not in "ECP":
            continue
        key = (int(t["locate"][i]), int(t["timestamp"][i]) // NS)
        p, s = int(t["price"][i]), int(t["shares"][i])
        if key not in out:
            out[key] = [p, p, p, p, s, 1]
        else:
            b = out[key]
            b[1], b[2], b[3], b[4], b[5] = max(b[1], p), min(b[2], p), p, b[4] + s, b[5] + 1
    return {k: tuple(v) for k, v in sorted(out.items())}


def as_dict(bars: dict[str, np.ndarray]) -> dict[tuple[int, int], tuple[int, ...]]:
    names = ("open", "high", "low", "close", "volume", "trades")
    keys = list(zip(bars["locate"].tolist(), bars["second"].tolist(), strict=True))
    assert keys == sorted(keys), "bars must be sorted by (locate, second)"
    return {k: tuple(int(bars[n][i]) for n in names) for i, k in enumerate(keys)}


def table(rows: list[tuple[int, ...]]) -> dict[str, np.ndarray]:
    """A trades table from (seq, timestamp, locate, kind, price, shares) rows."""
    cols = {name: np.zeros(len(rows), dtype=dtype) for name, dtype in columns("trades")}
    for name, k in (("seq", 0), ("timestamp", 1), ("locate", 2), ("kind", 3), ("price", 4),
                    ("shares", 5)):
        cols[name][:] = [r[k] for r in rows]
    return cols


@pytest.mark.parametrize("fn", ["bars_loop", "bars_numpy"])
def test_generated_day(mod: ModuleType, fn: str, trades: dict[str, np.ndarray]) -> None:
    want = reference(trades)
    assert len(want) > 10
    bars = getattr(mod, fn)(trades)
    assert bars["locate"].dtype == np.uint16 and bars["volume"].dtype == np.uint64
    assert as_dict(bars) == want


@pytest.mark.parametrize("fn", ["bars_loop", "bars_numpy"])
def test_edges(mod: ModuleType, fn: str) -> None:
    E, C, P, Q, B = (ord(c) for c in "ECPQB")
    rows = [(1, 5 * NS, 2, E, 100, 10), (2, 5 * NS + 1, 1, P, 90, 5),
            (3, 6 * NS - 1, 2, C, 120, 1), (4, 6 * NS - 1, 2, Q, 1, 99_999),
            (5, 6 * NS, 2, B, 0, 0), (6, 6 * NS, 2, E, 80, 2)]
    bars = getattr(mod, fn)(table(rows))
    assert as_dict(bars) == {(1, 5): (90, 90, 90, 90, 5, 1), (2, 5): (100, 120, 100, 120, 11, 2),
                             (2, 6): (80, 80, 80, 80, 2, 1)}
    empty = getattr(mod, fn)(table([]))
    assert len(empty["locate"]) == 0 and empty["open"].dtype == np.uint32
