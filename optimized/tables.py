"""From an ITCH day to research tables in C++ (native/tables.hpp): same API as naive.tables.

The rules live in naive/tables.py (read its docstring). Here C++ reads the records in
place with the GIL released and appends every row straight into per-column byte
vectors; :meth:`TableBuilder.take` hands those to numpy without a copy and only attaches
each column's dtype from ``contract.tables``. No Python object is made per row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from contract.dtypes import ANOMALIES
from contract.itch_errors import byte_view
from contract.tables import (
    DEFAULT_DEPTH,
    TABLES,
    check_depth,
    check_symbols,
    check_tables,
    columns,
    lobster_columns,
)
from optimized import _native
from optimized.itch import record_error

__all__ = ["TableBuilder"]


class TableBuilder:
    """Rows of the asked-for tables from successive pieces of one feed (C++)."""

    def __init__(self, tables: Sequence[str] | str = TABLES,
                 symbols: Sequence[str] | str | None = None,
                 depth: int = DEFAULT_DEPTH, lobster: int = 0) -> None:
        self.tables = check_tables(tables)
        self.depth = check_depth(depth)
        self.lobster = 0 if lobster == 0 else check_depth(lobster)  # its levels; 0: off
        wanted = check_symbols(symbols)
        self._native = _native.TableBuilder([t in self.tables for t in TABLES],
                                            list(wanted or ()), self.depth, self.lobster)
        self.offset = 0  # feed bytes consumed

    @property
    def messages(self) -> int:
        """Records read so far (the last row's seq)."""
        return int(self._native.messages)

    def feed(self, buffer: bytes | memoryview) -> int:
        """Read the whole records at the start of ``buffer``; see naive.tables."""
        with byte_view(buffer) as view:
            consumed, code, msg_type, length = self._native.feed(view)
        self.offset += consumed
        if code != 0:
            raise record_error(code, msg_type, length, self.offset)
        return int(consumed)

    def take(self) -> dict[str, dict[str, np.ndarray]]:
        """The rows since the last take(), table -> column -> array (see contract.tables)."""
        raw = self._native.take()
        out = {}
        for table, cols in zip((*TABLES, "lobster"), raw, strict=True):
            if table not in self.tables and (table != "lobster" or not self.lobster):
                continue
            want = (lobster_columns(self.lobster) if table == "lobster"
                    else columns(table, self.depth))
            assert [name for name, _ in want] == [name for name, _ in cols], table
            out[table] = {name: data.view(dtype)
                          for (name, dtype), (_, data) in zip(want, cols, strict=True)}
        return out

    def set_lookahead_stages(self, stages: int) -> None:
        """Test hook: always run the first ``stages`` (0..3) look-ahead stages (prefetch
        hints for the records ahead; see optimized.market.Market)."""
        if not 0 <= stages <= 3:
            raise ValueError(f"stages must be 0..3, got {stages}")
        self._native.set_lookahead_stages(int(stages))

    def set_lookahead(self, on: bool) -> None:
        """Benchmark hook: look ahead while the working set outgrows half the last-level
        cache (the default), or never."""
        self._native.set_lookahead(bool(on))

    def counters(self) -> dict[str, int]:
        """Records read, anomalies by kind, books locked/crossed (episodes), live orders."""
        anomalies, locked, crossed, live = self._native.counters()
        out = {"messages": self.messages}
        out.update({name: int(n) for name, n in zip(ANOMALIES, anomalies, strict=True)})
        out["locked"], out["crossed"], out["live_orders"] = int(locked), int(crossed), int(live)
        return out


