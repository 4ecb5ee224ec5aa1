"""Checker for 11_determinism/unordered: the same commands give the same trades in every
process (whatever PYTHONHASHSEED is), symbols uncrossed in the order first touched."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from types import ModuleType

import pytest
from exercise_support import impl_dir, load_module

SYMBOLS = ["MSFT", "AAPL", "ZVZZT", "NVDA", "AMZN", "GOOG", "QQQ", "SPY", "IBM", "TSLA",
           "META", "INTC", "AMD", "ORCL", "CSCO", "ADBE"]


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_module(__file__, "auction.py")


def commands(seed: int = 7, n: int = 3_000) -> list[tuple[int, str, int, str, int, int]]:
    """Random crossing orders, a few symbols per batch, reproducible from ``seed``."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        time = k // 12  # 12 orders per batch
        side = rng.choice("BS")
        price = 100 + rng.randint(-3, 3)
        out.append((time, rng.choice(SYMBOLS), k + 1, side, price, rng.randint(1, 9)))
    return out


SCRIPT = """
import hashlib, importlib.util, sys
sys.path[:0] = [{checker_dir!r}, {exercises_dir!r}]
spec = importlib.util.spec_from_file_location("auction", {path!r})
mod = importlib.util.module_from_spec(spec)
sys.modules["auction"] = mod
spec.loader.exec_module(mod)
from check_auction import commands
print(hashlib.sha256(repr(mod.Auction().run(commands())).encode()).hexdigest())
"""


def digest_in_a_new_process(hash_seed: int) -> str:
    path = str(impl_dir(__file__) / "auction.py")
    here = os.path.dirname(os.path.abspath(__file__))
    code = SCRIPT.format(checker_dir=here, exercises_dir=os.path.dirname(os.path.dirname(here)),
                         path=path)
    env = dict(os.environ, PYTHONHASHSEED=str(hash_seed))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_same_trades_in_every_process() -> None:
    digests = {seed: digest_in_a_new_process(seed) for seed in (1, 2, 3, 4)}
    assert len(set(digests.values())) == 1, (
        f"the trades differ from one process to another (PYTHONHASHSEED -> digest): {digests}")


def test_symbols_uncrossed_in_the_order_first_touched(mod: ModuleType) -> None:
    order = ["TSLA", "AAPL", "QQQ", "MSFT", "IBM", "AMD", "GOOG"]
    batch = []
    for k, symbol in enumerate(order):  # each symbol: a buy then a sell that crosses it
        batch.append((1, symbol, 2 * k + 1, "B", 101, 5))
        batch.append((1, symbol, 2 * k + 2, "S", 100, 5))
    trades = mod.Auction().run(batch)
    assert [t[1] for t in trades] == order, "uncross the symbols in the order first touched"
    assert [t[0] for t in trades] == list(range(1, len(order) + 1))


def test_the_trades_themselves(mod: ModuleType) -> None:
    trades = mod.Auction().run([
        (1, "AAPL", 1, "B", 100, 5),
        (1, "AAPL", 2, "B", 101, 3),
        (1, "AAPL", 3, "S", 100, 6),
        (2, "AAPL", 4, "S", 99, 4),   # the next batch: trades with what rests
    ])
    assert trades == [(1, "AAPL", 2, 3, 100, 3), (2, "AAPL", 1, 3, 100, 3),
                      (3, "AAPL", 1, 4, 99, 2)]


def test_in_one_process_twice(mod: ModuleType) -> None:
    a = hashlib.sha256(repr(mod.Auction().run(commands())).encode()).hexdigest()
    b = hashlib.sha256(repr(mod.Auction().run(commands())).encode()).hexdigest()
    assert a == b
