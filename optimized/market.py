"""Many books in C++ (``native/market.hpp``): the same API as ``naive/market.py``.

One ``twinmatch::Book`` per stock locate, created at the locate's first order with a small
price window (4,096 levels, calloc'd: untouched pages cost nothing) and a small pool, so
memory follows the live orders, not the symbols or the price range; far prices use the
Book's ``std::map`` slow path. A flat open-addressing map resolves every live order
reference to its locate. ``run(events)`` reads the decoders' ``EVENT_DTYPE`` array in
place and applies it with the GIL released. The rules (modes, anomalies, rejects) are
written out in naive/market.py's docstring; both twins count everything alike.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from optimized import _native
from twinmatch.dtypes import ANOMALIES, EVENT_DTYPE, REASONS, as_records

__all__ = ["ANOMALIES", "MODES", "Market"]

MODES: Final = ("book", "match")
assert _native.MARKET_ANOMALY_KINDS == len(ANOMALIES), "native/market.hpp != dtypes.py"


class Market:
    """One book per stock locate, in ``book`` (feed handler) or ``match`` (engine) mode."""

    def __init__(self, mode: str = "book", window_levels: int = 4096,
                 initial_orders: int = 64) -> None:
        self._m = _native.Market(mode, window_levels, initial_orders)
        self.mode: str = self._m.mode

    def run(self, events: np.ndarray) -> np.ndarray:
        """Apply EVENT_DTYPE events in order; returns their fills (FILL_DTYPE)."""
        raw = as_records(events, EVENT_DTYPE, "events").view(np.uint8)
        fills: np.ndarray = self._m.run_bytes(raw)
        return fills

    def __len__(self) -> int:
        return len(self._m)

    @property
    def books(self) -> int:
        return int(self._m.books)

    @property
    def fills(self) -> int:
        return int(self._m.raw_counts()[3])

    @property
    def volume(self) -> int:
        return int(self._m.raw_counts()[4])

    def counts(self) -> dict[str, dict[str, int]]:
        """Events by type, anomalies by kind, rejects by reason."""
        events, anomalies, rejects, _, _ = self._m.raw_counts()
        return {
            "events": {chr(t): int(n) for t, n in enumerate(events) if n},
            "anomalies": dict(zip(ANOMALIES, (int(n) for n in anomalies), strict=True)),
            "rejects": {REASONS[r]: int(rejects[r]) for r in range(1, len(REASONS))},
        }

    def activity(self) -> list[tuple[int, int]]:
        return [(int(loc), int(n)) for loc, n in self._m.activity()]

    def stock(self, locate: int) -> str:
        return str(self._m.stock(locate))

    def top(self, locate: int) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        bid, ask = self._m.top(locate)
        return bid, ask

    def depth(self, locate: int, side: int, levels: int) -> list[tuple[int, int, int]]:
        rows: list[tuple[int, int, int]] = self._m.depth(locate, side, levels)
        return rows

    def order(self, order_ref: int) -> tuple[int, int, int, int] | None:
        found: tuple[int, int, int, int] | None = self._m.order(order_ref)
        return found

    def books_csv(self) -> str:
        return str(self._m.books_csv())
