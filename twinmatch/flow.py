"""Synthetic order flow for one symbol: a realistic stream of book operations.

The stream is generated from a seed, so every run (and every twin) sees the same
operations. Its shape follows what real order flow looks like near the touch:

* prices cluster within a few ticks of the best bid/ask (geometric distance);
* cancels outnumber fills by far (most orders are cancelled, few trade);
* a few orders are marketable (they cross the spread) and a few are market orders;
* some orders are reduced, executed by id, or replaced at a nearby price.

The generator runs the naive book as it goes, so a cancel, reduce, execute or replace
always names an order that is really resting at that moment: the stream has no
rejects unless ``bad_fraction`` asks for some.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from contract.dtypes import (
    OP_CANCEL,
    OP_EXECUTE,
    OP_LIMIT,
    OP_MARKET,
    OP_REDUCE,
    OP_REPLACE,
    OPS_DTYPE,
    records,
)
from naive.book import Book, OrderRejected, Side

# Bump when the generator changes, so cached streams are regenerated.
FLOW_VERSION = 1


@dataclass(frozen=True)
class FlowShape:
    """Probabilities of each operation and the price shape (ticks in ITCH units)."""

    limit: float = 0.47
    cancel: float = 0.40
    reduce: float = 0.04
    execute: float = 0.03
    replace: float = 0.03
    market: float = 0.03      # the rest of the probability mass
    marketable: float = 0.06  # share of limit orders priced through the touch
    tick: int = 100           # one cent
    start_price: int = 1_000_000  # $100.00
    near_touch: float = 0.35  # geometric parameter: higher = closer to the touch
    resting: int = 2_000      # the book fills up to about this many resting orders


# --8<-- [start:flow]
def order_flow(
    n: int, seed: int = 1, shape: FlowShape | None = None, bad_fraction: float = 0.0
) -> np.ndarray:
    """``n`` operations as an OPS_DTYPE array, reproducible from ``seed``."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise TypeError(f"n must be an integer, not {type(n).__name__} {n!r}")
    if n < 0:
        raise ValueError(f"n must be >= 0 operations, got {n}")  # not an empty array
    shape = shape or FlowShape()
    rng = random.Random(seed)
    book = Book()
    live: list[int] = []  # ids we added; filled or cancelled ones are pruned lazily
    rows: list[tuple[int, int, int, int, int, int]] = []
    kinds = (OP_LIMIT, OP_CANCEL, OP_REDUCE, OP_EXECUTE, OP_REPLACE, OP_MARKET)
    weights = (shape.limit, shape.cancel, shape.reduce, shape.execute, shape.replace, shape.market)
    next_id = 1
    for _ in range(n):
        if bad_fraction and rng.random() < bad_fraction:
            rows.append(_bad_op(rng, next_id))
            continue
        op = rng.choices(kinds, weights)[0]
        target = _pick_live(rng, book, live) if op in (OP_CANCEL, OP_REDUCE, OP_EXECUTE,
                                                        OP_REPLACE) else None
        if target is not None and rng.random() * shape.resting > len(book):
            target = None  # a thin book grows: add instead of removing
        if target is None and op != OP_MARKET:
            op = OP_LIMIT  # nothing resting to act on: add an order instead
        if op == OP_LIMIT:
            side = Side(rng.getrandbits(1))
            price = _limit_price(rng, book, side, shape)
            qty = _qty(rng)
            rows.append((next_id, 0, price, qty, OP_LIMIT, int(side)))
            book.add_limit(next_id, side, price, qty)
            live.append(next_id)
            next_id += 1
        elif op == OP_MARKET:
            side = Side(rng.getrandbits(1))
            qty = _qty(rng)
            rows.append((next_id, 0, 0, qty, OP_MARKET, int(side)))
            book.add_market(next_id, side, qty)
            next_id += 1
        elif op == OP_CANCEL:
            assert target is not None
            rows.append((target, 0, 0, 0, OP_CANCEL, 0))
            book.cancel(target)
        elif op in (OP_REDUCE, OP_EXECUTE):
            assert target is not None
            qty = rng.randint(1, _resting(book, target)[2])
            rows.append((target, 0, 0, qty, op, 0))
            if op == OP_REDUCE:
                book.reduce(target, qty)
            else:
                book.execute(target, qty)
        else:  # OP_REPLACE: a new id at a nearby price
            assert target is not None
            price = max(shape.tick, _resting(book, target)[1] + shape.tick * rng.randint(-2, 2))
            qty = _qty(rng)
            rows.append((target, next_id, price, qty, OP_REPLACE, 0))
            book.replace(target, next_id, price, qty)
            live.append(next_id)
            next_id += 1
    return records(rows, OPS_DTYPE)
# --8<-- [end:flow]


def _resting(book: Book, order_id: int) -> tuple[Side, int, int]:
    found = book.order(order_id)
    assert found is not None
    return found


def _pick_live(rng: random.Random, book: Book, live: list[int]) -> int | None:
    """A random resting order id, dropping ids that have traded away meanwhile."""
    while live:
        k = rng.randrange(len(live))
        order_id = live[k]
        if book.order(order_id) is not None:
            return order_id
        live[k] = live[-1]
        live.pop()
    return None


def _qty(rng: random.Random) -> int:
    """Mostly round lots of 100, sometimes odd lots."""
    if rng.random() < 0.8:
        return 100 * rng.randint(1, 10)
    return rng.randint(1, 99)


def _limit_price(rng: random.Random, book: Book, side: Side, shape: FlowShape) -> int:
    bid, ask = book.best_bid(), book.best_ask()
    bid_price = bid[0] if bid else (ask[0] - shape.tick if ask else shape.start_price)
    ask_price = ask[0] if ask else bid_price + shape.tick
    ticks_away = _geometric(rng, shape.near_touch)
    if rng.random() < shape.marketable:
        # priced through the touch: it trades on arrival
        through = shape.tick * rng.randint(0, 2)
        price = ask_price + through if side == Side.BUY else bid_price - through
    elif side == Side.BUY:
        price = min(bid_price + shape.tick, ask_price - shape.tick) - shape.tick * ticks_away
    else:
        price = max(ask_price - shape.tick, bid_price + shape.tick) + shape.tick * ticks_away
    return max(shape.tick, price)


def _geometric(rng: random.Random, p: float) -> int:
    k = 0
    while rng.random() > p and k < 200:
        k += 1
    return k


def _bad_op(rng: random.Random, next_id: int) -> tuple[int, int, int, int, int, int]:
    """A deliberately bad operation: unknown id, zero price or qty, bad side or op."""
    kind = rng.randrange(5)
    if kind == 0:
        return (10**12 + rng.randrange(1000), 0, 0, 0, OP_CANCEL, 0)
    if kind == 1:
        return (next_id + 10**9, 0, 0, 100, OP_LIMIT, 0)
    if kind == 2:
        return (next_id + 10**9, 0, 1_000_000, 0, OP_LIMIT, 1)
    if kind == 3:
        return (next_id + 10**9, 0, 1_000_000, 100, OP_LIMIT, 7)
    return (next_id + 10**9, 0, 1_000_000, 100, 42, 0)


def check_no_rejects(ops: np.ndarray) -> None:
    """Raise if the stream has rejects on a fresh naive book (used by tests)."""
    _, rejects = Book().apply(ops)
    if len(rejects):
        raise OrderRejected(int(ops[int(rejects[0]["index"])]["order_id"]), "stream")


def cached_order_flow(n: int, seed: int, cache_dir: Path | None = None) -> np.ndarray:
    """``order_flow(n, seed)``, kept as .npy in ``cache_dir`` (default out/cache)."""
    cache_dir = cache_dir or Path(__file__).resolve().parent.parent / "out" / "cache"
    path = cache_dir / f"flow-v{FLOW_VERSION}-{n}-{seed}.npy"
    if path.exists():
        cached: np.ndarray = np.load(path)
        return cached
    ops = order_flow(n, seed)
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(path, ops)
    return ops
