"""Checker for 15_tick_to_trade/kill_switch: the checks, their order, their counts."""

from __future__ import annotations

import random
from types import ModuleType

import pytest
from exercise_support import load_module

SECOND = 1_000_000_000


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "risk.py")


def test_cooldown_is_per_symbol_and_by_the_feed_clock(mod: ModuleType) -> None:
    r = mod.RiskChecks(cooldown_ns=1000, max_per_second=100, max_orders=100, max_open=100)
    assert r.check(1, 5_000, 0) == ""
    assert r.check(1, 5_999, 0) == "cooldown"
    assert r.check(2, 5_999, 0) == ""
    assert r.check(1, 6_000, 0) == ""
    assert r.stats["sent"] == 3 and r.stats["cooldown"] == 1


def test_orders_per_feed_second(mod: ModuleType) -> None:
    r = mod.RiskChecks(cooldown_ns=0, max_per_second=2, max_orders=100, max_open=100)
    assert [r.check(k, SECOND + k, 0) for k in range(3)] == ["", "", "throttled"]
    assert r.check(9, 2 * SECOND, 0) == ""  # a new second
    assert r.stats["throttled"] == 1


def test_run_cap(mod: ModuleType) -> None:
    r = mod.RiskChecks(cooldown_ns=0, max_per_second=100, max_orders=2, max_open=100)
    assert [r.check(k, k, 0) for k in range(3)] == ["", "", "capped"]


def test_open_orders_trip_the_switch_for_good(mod: ModuleType) -> None:
    r = mod.RiskChecks(cooldown_ns=0, max_per_second=100, max_orders=100, max_open=2)
    assert r.check(1, 1, 1) == ""
    assert r.check(2, 2, 2) == "kill_switch"
    assert r.tripped
    assert r.check(3, 3, 0) == "killed"  # answers came back: still off
    assert r.stats == {"sent": 1, "killed": 1, "cooldown": 0, "throttled": 0,
                       "capped": 0, "kill_switch": 1}


def test_checks_apply_in_order(mod: ModuleType) -> None:
    """An order that several checks would stop is counted under the first of them."""
    r = mod.RiskChecks(cooldown_ns=SECOND, max_per_second=1, max_orders=1, max_open=1)
    assert r.check(1, 0, 0) == ""
    assert r.check(1, 1, 5) == "cooldown"   # also throttled, capped, too many open
    assert r.check(2, 2, 5) == "throttled"  # also capped, too many open
    assert r.check(2, SECOND, 5) == "capped"


def test_agrees_with_the_twins_on_a_random_stream(mod: ModuleType) -> None:
    """The same decisions as naive.trade.Strategy's checks (the book's twin)."""
    from contract.trade import StrategyConfig
    from naive.trade import Strategy

    rng = random.Random(15)
    cfg = StrategyConfig(cooldown_ns=30_000_000, max_per_second=5, max_orders=60,
                         max_open=8)
    twin = Strategy(cfg)
    r = mod.RiskChecks(cfg.cooldown_ns, cfg.max_per_second, cfg.max_orders, cfg.max_open)
    for step in range(3000):
        locate, ts, open_orders = rng.randint(1, 4), step * 3_000_000, rng.randint(0, 7)
        want = twin.check(locate, b"X".ljust(8), ts, 1, (100, 10), (101, 10), open_orders)
        assert (r.check(locate, ts, open_orders) == "") == bool(want), step
    assert r.stats["sent"] == twin.stats["sent"] > 10
