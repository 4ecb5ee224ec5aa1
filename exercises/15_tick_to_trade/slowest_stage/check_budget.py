"""Checker for 15_tick_to_trade/slowest_stage: medians per span, stamp cost, slowest."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from exercise_support import load_module


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "budget.py")


def rows_with(gaps: list[int], n: int = 5, jitter: int = 0) -> np.ndarray:
    """n orders whose consecutive stamps (kernel .. sent) are `gaps` apart."""
    rng = np.random.default_rng(15)
    out = np.zeros((n, 9), dtype=np.int64)
    out[:, 0] = 1_700_000_000_000_000_000 + np.arange(n) * 10**6
    for i, g in enumerate(gaps):
        out[:, i + 1] = out[:, i] + g + rng.integers(0, jitter + 1, n)
    return out


def test_medians_and_stamp_cost(mod: ModuleType) -> None:
    rows = rows_with([40_000, 900, 300, 200, 0, 30_000])
    table = mod.spans(rows, 20)
    assert list(table) == ["kernel -> user", "user -> decoded", "decoded -> applied",
                           "applied -> decided", "decided -> encoded", "encoded -> sent"]
    assert table["kernel -> user"] == 40_000          # the kernel's span: no stamp cost
    assert table["user -> decoded"] == 880
    assert table["decided -> encoded"] == 0            # never below 0
    assert mod.slowest(rows, 20) == "kernel -> user"


def test_missing_stamps_are_left_out(mod: ModuleType) -> None:
    rows = rows_with([1000, 1000, 5000, 1000, 1000, 1000], n=3)
    rows[0, 3] = 0  # one order without its "applied" stamp
    rows[1:, 3] = rows[1:, 2] + 100
    table = mod.spans(rows, 0)
    assert table["decoded -> applied"] == 100
    assert mod.slowest(rows, 0) in ("applied -> decided", "kernel -> user")


def test_slowest_follows_the_data(mod: ModuleType) -> None:
    rows = rows_with([100, 100, 100, 100, 100, 90_000], n=7, jitter=50)
    assert mod.slowest(rows, 10) == "encoded -> sent"
    rows = rows_with([100, 70_000, 100, 100, 100, 100], n=7, jitter=50)
    assert mod.slowest(rows, 10) == "user -> decoded"
