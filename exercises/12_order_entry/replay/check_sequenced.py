"""Checker for 12_order_entry/replay: a login from sequence n re-sends the log from n."""

from __future__ import annotations

from types import ModuleType

import pytest
from exercise_support import load_module


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "sequenced.py")


def day(mod: ModuleType, n: int) -> object:
    log = mod.SequencedLog()
    for i in range(1, n + 1):
        assert log.append(f"m{i}".encode()) == i
    return log


def test_first_login_of_the_day(mod: ModuleType) -> None:
    log = day(mod, 3)
    assert log.login(1) == (1, [b"m1", b"m2", b"m3"])


def test_reconnect_from_the_middle(mod: ModuleType) -> None:
    log = day(mod, 5)
    assert log.login(4) == (4, [b"m4", b"m5"])


def test_up_to_date(mod: ModuleType) -> None:
    log = day(mod, 5)
    assert log.login(6) == (6, [])


def test_zero_means_from_now_on(mod: ModuleType) -> None:
    log = day(mod, 5)
    assert log.login(0) == (6, [])


@pytest.mark.parametrize("n", [7, 10**9])
def test_past_the_end(mod: ModuleType, n: int) -> None:
    log = day(mod, 5)
    assert log.login(n) == (6, [])


def test_empty_log(mod: ModuleType) -> None:
    log = day(mod, 0)
    assert log.login(1) == (1, []) and log.login(0) == (1, [])
