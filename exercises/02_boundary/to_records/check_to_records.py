"""Checker for 02_boundary/to_records: the same records and tuples as the loops, Python
ints out, and at least 3x faster than the shipped starter, paired in the same run."""

from __future__ import annotations

import random
from types import ModuleType

import numpy as np
import pytest
from exercise_support import load_baseline, load_module, paired_ratio

from contract.dtypes import FILL_DTYPE, OPS_DTYPE

MIN_SPEEDUP = 3.0
N = 40_000


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "to_records.py")


@pytest.fixture(scope="module")
def base() -> ModuleType:
    return load_baseline(__file__, "to_records.py")


def rows(n: int, seed: int = 3) -> list[tuple[int, int, int, int, int]]:
    rng = random.Random(seed)
    out = [(rng.getrandbits(64), rng.randint(0, 5), rng.randint(0, 1),
            rng.randint(1, 2**32 - 1), rng.randint(1, 2**32 - 1)) for _ in range(n)]
    if n:
        out[0] = (2**64 - 1, 255, 1, 2**32 - 1, 2**32 - 1)
    return out


def fills(n: int, seed: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    f = np.zeros(n, dtype=FILL_DTYPE)
    for name in ("resting_id", "aggressor_id", "price", "qty", "op_index", "aggressor_side"):
        info = np.iinfo(f.dtype[name])
        f[name] = rng.integers(0, info.max, n, dtype=f.dtype[name], endpoint=True)
    return f


def expected_ops(rs: list[tuple[int, int, int, int, int]]) -> np.ndarray:
    ops = np.zeros(len(rs), dtype=OPS_DTYPE)
    for i, (order_id, op, side, price, qty) in enumerate(rs):
        ops["order_id"][i], ops["op"][i], ops["side"][i] = order_id, op, side
        ops["price"][i], ops["qty"][i] = price, qty
    return ops


@pytest.mark.parametrize("n", [0, 1, 2, 500])
def test_ops_from_rows(mod: ModuleType, n: int) -> None:
    rs = rows(n)
    got = mod.ops_from_rows(rs)
    assert got.dtype == OPS_DTYPE and len(got) == n
    assert got.tobytes() == expected_ops(rs).tobytes()


@pytest.mark.parametrize("n", [0, 1, 500])
def test_fills_to_tuples(mod: ModuleType, n: int) -> None:
    f = fills(n)
    got = mod.fills_to_tuples(f)
    want = [(int(r["resting_id"]), int(r["aggressor_id"]), int(r["price"]), int(r["qty"]),
             int(r["aggressor_side"])) for r in f]
    assert got == want
    assert all(type(x) is int for t in got for x in t), "give Python ints, not numpy scalars"
    assert all(type(t) is tuple for t in got)


def test_ops_from_rows_speedup(mod: ModuleType, base: ModuleType) -> None:
    rs = rows(N)
    assert mod.ops_from_rows(rs).tobytes() == base.ops_from_rows(rs).tobytes()
    result = paired_ratio(lambda: mod.ops_from_rows(rs), lambda: base.ops_from_rows(rs))
    median = result.median
    assert median >= MIN_SPEEDUP, (
        f"ops_from_rows: {result} faster than the starter; the target is {MIN_SPEEDUP:.0f}x")


def test_fills_to_tuples_speedup(mod: ModuleType, base: ModuleType) -> None:
    f = fills(N)
    result = paired_ratio(lambda: mod.fills_to_tuples(f), lambda: base.fills_to_tuples(f))
    median = result.median
    assert median >= MIN_SPEEDUP, (
        f"fills_to_tuples: {result} faster than the starter; the target is "
        f"{MIN_SPEEDUP:.0f}x")
