"""Checker for 03_itch/struct_parse: C and U messages parsed with struct, against naive.itch."""

from __future__ import annotations

import random
from types import ModuleType

import pytest
from exercise_support import load_module

import naive.itch as itch


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "itch_parse.py")


def executed(rng: random.Random) -> itch.OrderExecutedWithPrice:
    return itch.OrderExecutedWithPrice(
        rng.getrandbits(16), rng.getrandbits(16), rng.getrandbits(48), rng.getrandbits(64),
        rng.getrandbits(32), rng.getrandbits(64), rng.choice([b"Y", b"N"]), rng.getrandbits(32))


def replace(rng: random.Random) -> itch.OrderReplace:
    return itch.OrderReplace(
        rng.getrandbits(16), rng.getrandbits(16), rng.getrandbits(48), rng.getrandbits(64),
        rng.getrandbits(64), rng.getrandbits(32), rng.getrandbits(32))


def test_layout_sizes(mod: ModuleType) -> None:
    assert mod.EXECUTED_WITH_PRICE.size == 36, (
        f"an Order Executed With Price message is 36 bytes; your format "
        f"{mod.EXECUTED_WITH_PRICE.format!r} is {mod.EXECUTED_WITH_PRICE.size}")
    assert mod.REPLACE.size == 35, (
        f"an Order Replace message is 35 bytes; your format {mod.REPLACE.format!r} "
        f"is {mod.REPLACE.size}")


@pytest.mark.parametrize("seed", range(5))
def test_executed_with_price(mod: ModuleType, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(200):
        rec = executed(rng)
        raw = itch.encode(rec)
        want = tuple(itch.parse_message(raw))
        got = mod.parse_executed_with_price(raw)
        assert tuple(got) == want, (
            f"message {raw.hex()}:\n yours   {tuple(got)}\n naive.itch {want}\n"
            f" fields: {itch.OrderExecutedWithPrice._fields}")


@pytest.mark.parametrize("seed", range(5))
def test_replace(mod: ModuleType, seed: int) -> None:
    rng = random.Random(100 + seed)
    for _ in range(200):
        rec = replace(rng)
        raw = itch.encode(rec)
        want = tuple(itch.parse_message(raw))
        got = mod.parse_replace(raw)
        assert tuple(got) == want, (
            f"message {raw.hex()}:\n yours   {tuple(got)}\n naive.itch {want}\n"
            f" fields: {itch.OrderReplace._fields}")


def test_extreme_values(mod: ModuleType) -> None:
    top = itch.OrderReplace(2**16 - 1, 2**16 - 1, 2**48 - 1, 2**64 - 1, 2**64 - 1,
                            2**32 - 1, 2**32 - 1)
    assert tuple(mod.parse_replace(itch.encode(top))) == tuple(top)
    zero = itch.OrderExecutedWithPrice(0, 0, 0, 0, 0, 0, b"N", 0)
    assert tuple(mod.parse_executed_with_price(itch.encode(zero))) == tuple(zero)


@pytest.mark.parametrize("cut", [0, 1, 11, 34])
def test_short_message_is_refused(mod: ModuleType, cut: int) -> None:
    raw = itch.encode(replace(random.Random(cut)))[:cut]
    with pytest.raises(ValueError):
        mod.parse_replace(raw)


def test_long_or_wrong_type_is_refused(mod: ModuleType) -> None:
    raw = itch.encode(executed(random.Random(9)))
    with pytest.raises(ValueError):
        mod.parse_executed_with_price(raw + b"\x00")
    with pytest.raises(ValueError):
        mod.parse_replace(raw[:35])  # 35 bytes, but a 'C' message
