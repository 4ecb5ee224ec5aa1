"""The optimized market's price windows (chapter 5): sized from what the prices do, moved
and grown between events, and never visible in a result.

The naive twin has no windows: every test here compares the C++ market, with windows of
every size and under failed window allocations, against the naive twin's results.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import naive.market
import optimized.market
from contract.dtypes import EVENT_DTYPE

WINDOW_CAPS = (32, 1024, 131_072)


def drifting_stream(seed: int, n: int) -> np.ndarray:
    """Two locates whose prices drift and jump: locate 1 in cents from $1 up (with a few
    prices off the cent grid), locate 2 in 1/10,000 $ below $1. Adds near each side's
    touch, some far away (both ends of the price range included), executions, partial
    cancels, deletes and replaces of live orders; a few bad messages."""
    rng = np.random.default_rng(seed)
    mid = {1: 500_000, 2: 5_000}  # $50.00 and $0.50
    tick = {1: 100, 2: 1}
    live: list[tuple[int, int]] = []  # (ref, locate)
    rows: list[tuple[Any, ...]] = []
    ref = 1
    for _ in range(n):
        locate = int(rng.integers(1, 3))
        if rng.random() < 0.01:  # a jump: the market moves far from the window
            mid[locate] = max(50 * tick[locate],
                              mid[locate] + int(rng.integers(-3000, 3000)) * tick[locate])
        mid[locate] = max(10 * tick[locate], mid[locate] + int(rng.integers(-2, 3)) * tick[locate])
        r = rng.random()
        if r < 0.45 or not live:
            side = int(rng.integers(2))
            away = int(rng.geometric(0.25)) * tick[locate]
            price = mid[locate] - away if side == 0 else mid[locate] + away
            q = rng.random()
            if q < 0.03:
                price = int(rng.choice([1, 2**32 - 1, int(rng.integers(1, 2**32))]))
            elif q < 0.08 and locate == 1:
                price += int(rng.integers(1, 100))  # off the cent grid
            rows.append((0, ref, 0, 0, int(rng.integers(1, 500)), max(price, 1), locate,
                         ord("AF"[int(rng.integers(2))]), ord("BS"[side]), 0, b""))
            live.append((ref, locate))
            ref += 1
            continue
        k = int(rng.integers(len(live)))
        old, loc = live[k]
        kind = "EXDUUC"[int(rng.integers(6))]
        shares = int(rng.integers(0, 400))
        price = mid[loc] + int(rng.integers(-20, 21)) * tick[loc]
        new_ref = old
        if kind == "U":
            new_ref = ref
            ref += 1
            live[k] = (new_ref, loc)
        elif kind == "D":
            live[k] = live[-1]
            live.pop()
        rows.append((0, old, new_ref, 0, shares, max(price, 0), loc, ord(kind), ord("B"), 0,
                     b""))
    return np.array(rows, dtype=EVENT_DTYPE)


def snapshot(m: Any) -> tuple[Any, ...]:
    return (m.top(1), m.top(2), m.depth(1, 0, 40), m.depth(1, 1, 40), m.depth(2, 0, 40),
            m.depth(2, 1, 40), len(m), m.counts())


@pytest.mark.parametrize("cap", WINDOW_CAPS)
@pytest.mark.parametrize("mode", ["book", "match"])
@pytest.mark.parametrize("seed", range(4))
def test_windows_never_change_a_result(mode: str, seed: int, cap: int) -> None:
    """Drifting, jumping prices on both tick grids, checked against the naive twin every
    250 events (best prices, 40 levels of depth, counts) and at the end (fills, books)."""
    stream = drifting_stream(seed, 6_000)
    fast = optimized.market.Market(mode, window_levels=cap)
    slow = naive.market.Market(mode)
    for start in range(0, len(stream), 250):
        part = stream[start:start + 250]
        assert fast.run(part).tobytes() == slow.run(part).tobytes(), f"fills at {start}"
        assert snapshot(fast) == snapshot(slow), f"after event {start + len(part)}"
    assert fast.books_csv() == slow.books_csv()
    stats = fast.window_stats()
    assert stats["largest"] <= cap
    if cap == 32:
        assert stats["far_levels"] > 0  # the small cap keeps the far map in use


def bids(prices: np.ndarray) -> np.ndarray:
    """Add orders of 100 shares, locate 1, buys, references 1..n, at these prices."""
    n = len(prices)
    ev = np.zeros(n, dtype=EVENT_DTYPE)
    ev["type"] = ord("A")
    ev["locate"] = 1
    ev["order_ref"] = np.arange(1, n + 1)
    ev["side"] = ord("B")
    ev["shares"] = 100
    ev["price"] = prices
    return ev


def test_windows_move_and_grow_with_the_prices() -> None:
    """A side that trades over a wide range gets a window that covers it (no far level
    left), within the cap and within 16 levels per resting order."""
    rng = np.random.default_rng(7)
    n = 20_000
    ev = bids(10_000 + rng.integers(0, 20_000, n))  # 1/10,000 $ grid, a $2 range
    m = optimized.market.Market("book")
    m.run(ev)
    stats = m.window_stats()
    assert stats["windows"] == 1 and stats["moves"] > 0
    assert 20_000 <= stats["largest"] <= min(131_072, 16 * n)
    assert stats["far_levels"] == 0
    want = naive.market.Market("book")
    want.run(ev)
    assert m.books_csv() == want.books_csv()


def uniform_flow(n: int, seed: int) -> np.ndarray:
    """The benchmark's shape (chapter 5, ``uniform``): n/2 buys, then n/2 sells, prices
    uniform over 10,000..90,000 in 1/10,000 $, 1..500 shares, references 1..n."""
    rng = np.random.default_rng(seed)
    ev = np.zeros(n, dtype=EVENT_DTYPE)
    ev["type"] = ord("A")
    ev["locate"] = 1
    ev["order_ref"] = np.arange(1, n + 1)
    ev["side"] = np.where(np.arange(n) < n // 2, ord("B"), ord("S"))
    ev["shares"] = rng.integers(1, 501, n)
    ev["price"] = rng.integers(10_000, 90_001, n)
    return ev


@pytest.mark.parametrize("cap", WINDOW_CAPS)
def test_sells_that_trade_in_full_at_far_prices(cap: int) -> None:
    """Sells far below the ask window that fill completely never rest, so they make no
    far level (and no window around their price); those that do not fill rest. Fills and
    books equal the naive twin's at every window cap."""
    ev = uniform_flow(20_000, seed=3)
    fast = optimized.market.Market("match", window_levels=cap)
    slow = naive.market.Market("match")
    for start in range(0, len(ev), 2_500):
        part = ev[start:start + 2_500]
        assert fast.run(part).tobytes() == slow.run(part).tobytes(), f"fills at {start}"
        assert snapshot(fast) == snapshot(slow), f"after event {start + len(part)}"
    assert fast.books_csv() == slow.books_csv()
    if cap == 131_072:   # one symbol: its windows cover the whole 8-dollar range
        assert fast.window_stats()["far_levels"] == 0


def test_a_few_orders_get_a_wide_window_while_levels_are_free() -> None:
    """A market's windows may hold 2**20 levels in all whatever their orders: 50 bids
    spread over a $3 range on the 1/10,000 grid are all in one window (16 levels per
    order would allow 800)."""
    n = 50
    ev = bids(10_000 + 613 * np.arange(n))               # 30,000 ticks apart in all
    m = optimized.market.Market("book")
    m.run(ev)                                            # the window grows as they come
    again = ev.copy()
    again["order_ref"] += n
    m.run(again)                                         # the same prices: all in it now
    stats = m.window_stats()
    assert stats["far_levels"] == 0 and stats["largest"] >= 32_768


def test_window_memory_follows_the_orders() -> None:
    """When a side's last order leaves, a grown window goes back to the allocator."""
    n = 4_000
    ev = np.zeros(2 * n, dtype=EVENT_DTYPE)
    ev["locate"] = 3
    ev["order_ref"] = np.concatenate([np.arange(1, n + 1)] * 2)
    ev["type"][:n] = ord("A")
    ev["type"][n:] = ord("D")
    ev["side"] = ord("S")
    ev["shares"] = 5
    ev["price"][:n] = 1_000_000 + 100 * np.arange(n)  # 4,000 cent levels
    m = optimized.market.Market("book")
    m.run(ev[:n])
    assert m.window_stats()["largest"] >= 4_096
    m.run(ev[n:])
    assert len(m) == 0 and m.window_stats()["levels"] == 0


def test_failed_window_moves_are_invisible() -> None:
    """A window move that cannot get memory is skipped: whatever growth step fails, an
    event either fails whole (MemoryError naming it, nothing changed) or the market goes
    on and ends exactly as the naive twin does."""
    stream = drifting_stream(11, 3_000)
    want = naive.market.Market("book")
    want.run(stream)
    for budget in range(0, 400, 7):
        m = optimized.market.Market("book", window_levels=1024)
        m.set_growth_budget(budget)
        done = 0
        while done < len(stream):
            try:
                m.run(stream[done:])
                done = len(stream)
            except MemoryError as e:
                done += int(str(e).split("at event ")[1].split(":")[0])
                m.set_growth_budget(-1)
        assert m.books_csv() == want.books_csv(), f"budget {budget}"
        assert m.counts() == want.counts()


def test_window_levels_must_be_a_power_of_two_in_range() -> None:
    for bad in (0, 16, 33, 1000, 262_144):
        with pytest.raises(ValueError, match="window_levels"):
            optimized.market.Market("book", window_levels=bad)


# ---------------------------------------------------------------- look-ahead stages
# Prefetches are hints: every number of stages, and the default rule (stages only while
# the working set outgrows half the last-level cache), must give the same books, fills
# and counts.


def _replay(path: Any, mode: str, stages: int | None) -> tuple[str, list[Any]]:
    m = optimized.market.Market(mode)
    if stages is not None:
        m.set_lookahead_stages(stages)
    fills = [f.tobytes() for f, _ in m.run_file(path)]
    return m.books_csv(), fills


@pytest.mark.parametrize("mode", ["book", "match"])
def test_lookahead_stages_change_nothing(tmp_path: Any, mode: str) -> None:
    from twinmatch.gen import write_market_day

    write_market_day(tmp_path, 200_000, 20, seed=7, name="day")
    path = tmp_path / "day.itch"
    want = _replay(path, mode, 0)
    for stages in (1, 2, 3, None):
        assert _replay(path, mode, stages) == want, stages


def test_lookahead_stages_checked() -> None:
    m = optimized.market.Market("book")
    for bad in (-1, 4, 255):
        with pytest.raises(ValueError, match="stages"):
            m.set_lookahead_stages(bad)


def _last_level_cache() -> int:
    """The cache size native/market.hpp counts: cpu0's largest in sysfs, else sysconf,
    never more than 16 MiB (a virtual machine may report its host's whole L3)."""
    from pathlib import Path

    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index[0-7]/size"):
        text = f.read_text().strip()
        scale = {"K": 1024, "M": 1 << 20}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KM")) * scale)
    cap = 16 << 20
    if sizes:
        return min(max(sizes), cap)
    import os
    for name in ("SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
        if name in os.sysconf_names and os.sysconf(name) > 0:
            return min(os.sysconf(name), cap)
    return 1 << 20


def test_lookahead_rule_follows_the_live_orders() -> None:
    """The default: no stages while the working set (64 bytes a live order, 16 a window
    level) fits in half the last-level cache, all three once it does not; a fixed count
    stays fixed."""
    from twinmatch.gen import many_locates_events

    half = _last_level_cache() // 2
    m = optimized.market.Market("book")
    assert m.lookahead_stages() == 0
    few = many_locates_events(4, 8)  # a few orders, a few small windows
    m.run(few)
    assert len(m) * 64 + m.window_stats()["levels"] * 16 <= half
    assert m.lookahead_stages() == 0
    events = many_locates_events(65_536, 1 + (half // 64) // 65_536)  # past the threshold
    m.run(events)
    assert len(m) * 64 > half and m.lookahead_stages() == 3
    m.set_lookahead_stages(2)
    assert m.lookahead_stages() == 2
    m.set_lookahead(False)
    assert m.lookahead_stages() == 0
    m.set_lookahead(True)
    assert m.lookahead_stages() == 3
