"""Checker for 03_itch/be_dtype: the same records as struct (every field at its extreme
values), the same errors at the same offsets, and at least 5x faster than the shipped
starter on 50,000 messages, paired in the same run."""

from __future__ import annotations

import random
import struct
from types import ModuleType

import numpy as np
import pytest
from exercise_support import load_baseline, load_module, paired_ratio

MIN_SPEEDUP = 5.0
N = 50_000


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "add_orders.py")


@pytest.fixture(scope="module")
def base() -> ModuleType:
    return load_baseline(__file__, "add_orders.py")


Add = tuple[int, int, int, bytes, int, int, bytes]  # locate, ts, ref, side, shares, price, stock


def frame(a: Add, length: int = 36, kind: bytes = b"A") -> bytes:
    locate, ts, ref, side, shares, price, stock = a
    return struct.pack(">HcHH", length, kind, locate, 0) + ts.to_bytes(6, "big") + \
        struct.pack(">QcI8sI", ref, side, shares, stock, price)


def adds(n: int, seed: int) -> list[Add]:
    rng = random.Random(seed)
    out = [(rng.getrandbits(16), rng.getrandbits(48), rng.getrandbits(64), rng.choice(b"BS")
            .to_bytes(1, "big"), rng.getrandbits(32), rng.getrandbits(32),
            bytes(rng.choice(b"ABCXYZ ") for _ in range(8))) for _ in range(n)]
    if n:
        out[0] = (2**16 - 1, 2**48 - 1, 2**64 - 1, b"S", 2**32 - 1, 2**32 - 1, b"ZZZZZZZZ")
    return out


def check(got: np.ndarray, want: list[Add]) -> None:
    assert got.dtype.names == ("locate", "timestamp", "order_ref", "side", "shares",
                               "price", "stock")
    assert len(got) == len(want)
    rows = [(int(r["locate"]), int(r["timestamp"]), int(r["order_ref"]), bytes(r["side"]),
             int(r["shares"]), int(r["price"]), bytes(r["stock"])) for r in got]
    for i, (g, w) in enumerate(zip(rows, want, strict=True)):
        assert g == w, f"message {i}: decoded {g}, sent {w}"


@pytest.mark.parametrize("n", [0, 1, 3, 1000])
def test_same_records(mod: ModuleType, n: int) -> None:
    want = adds(n, n)
    check(mod.decode_adds(b"".join(frame(a) for a in want)), want)


@pytest.mark.parametrize("case", ["cut", "length", "type", "bad then cut"])
def test_errors_name_the_offset(mod: ModuleType, base: ModuleType, case: str) -> None:
    a = adds(5, 7)
    good = [frame(x) for x in a]
    buf = {"cut": b"".join(good)[:-1],
           "length": b"".join(good[:3]) + frame(a[3], length=35) + good[4],
           "type": b"".join(good[:2]) + frame(a[2], kind=b"F") + b"".join(good[3:]),
           "bad then cut": good[0] + frame(a[1], kind=b"D") + good[2][:10]}[case]
    with pytest.raises(ValueError) as want:
        base.decode_adds(buf)
    with pytest.raises(ValueError) as got:
        mod.decode_adds(buf)
    offset = str(want.value).rsplit(" ", 1)[-1]
    assert str(got.value).endswith(f"offset {offset}"), (
        f"{case}: {got.value!r}; the starter says {want.value!r}")


def test_faster_than_the_starter(mod: ModuleType, base: ModuleType) -> None:
    buf = b"".join(frame(a) for a in adds(N, 3))
    assert mod.decode_adds(buf).tobytes() == base.decode_adds(buf).tobytes()
    measured = paired_ratio(lambda: mod.decode_adds(buf), lambda: base.decode_adds(buf))
    median = measured.median
    assert median >= MIN_SPEEDUP, (
        f"{N:,} Add Orders: {measured} faster than the starter; the target is "
        f"{MIN_SPEEDUP:.0f}x")
