"""Checker for 02_boundary/batch_sum: right answers, exact big sums, and a 20x speedup over
a Python loop, paired in the same run."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from exercise_support import load_module, paired_ratio

from contract.dtypes import OP_CANCEL, OP_LIMIT, OPS_DTYPE

MIN_SPEEDUP = 20.0


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "batch_sum.py")


def make_ops(n: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ops = np.zeros(n, dtype=OPS_DTYPE)
    ops["order_id"] = np.arange(n)
    ops["qty"] = rng.integers(1, 10_000, n)
    ops["op"] = rng.choice([OP_LIMIT, OP_CANCEL], n)
    ops["side"] = rng.integers(0, 2, n)
    return ops


def loop_total(ops: np.ndarray) -> int:
    """The baseline: one record at a time, from Python."""
    return sum(int(ops[i]["qty"]) for i in range(len(ops)))


def loop_buy_limit(ops: np.ndarray) -> int:
    return sum(int(r["qty"]) for r in ops if r["op"] == OP_LIMIT and r["side"] == 0)


@pytest.mark.parametrize("n", [0, 1, 2, 1000])
def test_right_answer(mod: ModuleType, n: int) -> None:
    ops = make_ops(n)
    assert mod.total_qty(ops) == loop_total(ops)
    assert mod.buy_limit_qty(ops) == loop_buy_limit(ops)


def test_returns_python_int(mod: ModuleType) -> None:
    ops = make_ops(10)
    assert type(mod.total_qty(ops)) is int
    assert type(mod.buy_limit_qty(ops)) is int


def test_sum_wider_than_32_bits(mod: ModuleType) -> None:
    ops = make_ops(3)
    ops["qty"] = 2**32 - 1
    ops["op"] = OP_LIMIT
    ops["side"] = 0
    assert mod.total_qty(ops) == 3 * (2**32 - 1)
    assert mod.buy_limit_qty(ops) == 3 * (2**32 - 1)


@pytest.mark.parametrize("name, baseline", [("total_qty", loop_total),
                                            ("buy_limit_qty", loop_buy_limit)])
def test_speedup_over_the_loop(mod: ModuleType, name: str, baseline: object) -> None:
    ops = make_ops(200_000)
    fn = getattr(mod, name)
    assert callable(baseline)
    assert fn(ops) == baseline(ops)
    # The book's paired protocol: a warm-up, then 11 interleaved pairs (yours, the loop),
    # and the median of the per-pair ratios.
    measured = paired_ratio(lambda: fn(ops), lambda: baseline(ops))
    ratio = measured.median
    assert ratio >= MIN_SPEEDUP, (
        f"{name}: {measured} faster than the loop; the target is {MIN_SPEEDUP:.0f}x")
