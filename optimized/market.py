"""Many books in C++ (``native/market.hpp``): the same API as ``naive/market.py``.

Both modes share one storage (the chapter 5 design): every order of every symbol in one
pool of 32-byte nodes that never moves, one order table indexed directly by the reference
(pages allocated on demand) below 2^34 and a keyed hash table above, and per locate and
side a window of price levels indexed by tick (one cent from $1 up, else $0.0001), which
starts at 32 levels and doubles up to ``window_levels`` while the symbol trades outside
it (never more than 4 levels per resting order on that side); prices outside it live in
an ordered map. Book mode never matches: an add rests even through the other side, and
the market reports locked and crossed books. Match mode matches incoming orders by price
and time, as the one-symbol ``Book`` of chapter 1 does.
``run(events)`` reads the decoders' ``EVENT_DTYPE`` array in place and applies it with
the GIL released; ``run_itch(buffer)`` / ``run_file(path)`` decode framed ITCH and apply
each message as it is decoded, with no events array between the two (what ``twinmatch
replay`` runs for an ITCH file). The rules (modes, anomalies, rejects, text) are written out in
naive/market.py's docstring; both twins count everything alike.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator

import numpy as np

from contract.dtypes import ANOMALIES, EVENT_DTYPE, REASONS, as_records
from contract.itch_errors import ItchError, byte_view, counts_dict
from contract.itch_files import CHUNK_SIZE, Source, check_chunk_size, open_feed
from contract.market import BOOK_STATES, MODES, check_locate, check_mode, check_order_ref
from optimized import _native
from optimized.itch import read_gzip, read_plain, record_error

Batch = tuple[np.ndarray, dict[str, int]]

__all__ = ["ANOMALIES", "BOOK_STATES", "MODES", "Market", "show_bytes"]

assert _native.MARKET_ANOMALY_KINDS == len(ANOMALIES), "native/market.hpp != dtypes.py"


def show_bytes(raw: bytes) -> str:
    """Feed bytes as text by contract.feed_text's rule, in C++ (native/feed_text.hpp)."""
    return str(_native.show_bytes(raw))




class Market:
    """One book per stock locate, in ``book`` (feed handler) or ``match`` (engine) mode."""

    def __init__(self, mode: str = "book", window_levels: int = 131_072) -> None:
        """``window_levels``: the largest price window of one side (a power of two,
        32..131,072); a window grows to it only while the side has the orders to fill it."""
        self._m = _native.Market(check_mode(mode), window_levels)
        self.mode: str = self._m.mode

    def run(self, events: np.ndarray) -> np.ndarray:
        """Apply EVENT_DTYPE events in order; returns their fills (FILL_DTYPE)."""
        raw = as_records(events, EVENT_DTYPE, "events").view(np.uint8)
        fills: np.ndarray = self._m.run_bytes(raw)
        return fills

    # --8<-- [start:run_itch]
    def run_itch(self, buffer: bytes | memoryview | mmap.mmap | np.ndarray, base: int = 0
                 ) -> tuple[np.ndarray, dict[str, int], int, ItchError | None]:
        """Decode the whole ITCH records at the start of ``buffer`` and apply each at once.

        Returns (fills, counts by type, consumed bytes, error or None): what
        ``optimized.itch.scan`` then ``run`` would give, stopping at a partial record or
        a bad one (``base`` is the buffer's offset in the file, for the error).
        """
        with byte_view(buffer) as view:  # the decoders' TypeError for what is not bytes
            fills, per_byte, consumed, _, code, msg_type, length = self._m.run_itch(view)
        counts = counts_dict(np.asarray(per_byte, dtype=np.uint64))
        if code == 0:
            return fills, counts, consumed, None
        error = record_error(code, msg_type, length, base + consumed)
        error.events, error.counts = np.empty(0, EVENT_DTYPE), {}  # applied, not returned
        return fills, counts, consumed, error

    def run_file(self, path: Source, chunk_size: int = CHUNK_SIZE) -> Iterator[Batch]:
        """Replay an ITCH feed (plain or gzip; a file, a pipe, ``"-"`` or an open stream):
        (fills, counts by type) per chunk.

        The chunks, the reads and the errors are ``optimized.itch.read_file``'s (the same
        readers, with this decode-and-apply step in place of decode alone): a bad or
        truncated record raises ItchError naming its offset once everything before it is
        applied. A file is read into one reused buffer, never mapped.
        """
        chunk_size = check_chunk_size(chunk_size)
        with open_feed(path) as (gz, f):
            read = read_gzip if gz else read_plain
            yield from read(f, chunk_size, self.run_itch)
    # --8<-- [end:run_itch]

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
            "events": {show_bytes(bytes([t])): int(n) for t, n in enumerate(events) if n},
            "anomalies": dict(zip(ANOMALIES, (int(n) for n in anomalies), strict=True)),
            "rejects": {REASONS[r]: int(rejects[r]) for r in range(1, len(REASONS))},
        }

    def activity(self) -> list[tuple[int, int]]:
        return [(int(loc), int(n)) for loc, n in self._m.activity()]

    def stock(self, locate: int) -> str:
        return str(self._m.stock(check_locate(locate)))

    def trading_state(self, locate: int) -> str:
        return str(self._m.trading_state(check_locate(locate)))

    def trading_states(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in self._m.trading_states().items()}

    def book_states(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in self._m.book_states()}

    def top(self, locate: int) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        bid, ask = self._m.top(check_locate(locate))
        return bid, ask

    def depth(self, locate: int, side: int, levels: int) -> list[tuple[int, int, int]]:
        rows: list[tuple[int, int, int]] = self._m.depth(check_locate(locate), side, levels)
        return rows

    def order(self, order_ref: int) -> tuple[int, int, int, int] | None:
        found: tuple[int, int, int, int] | None = self._m.order(check_order_ref(order_ref))
        return found

    def books_csv(self) -> str:
        return str(self._m.books_csv())

    def window_stats(self) -> dict[str, int]:
        """How the price windows are sized now (not in the naive twin: it has no windows)."""
        return {str(k): int(v) for k, v in self._m.window_stats().items()}

    def set_lookahead(self, on: bool) -> None:
        """Benchmark hook: prefetch for the messages ahead (the default: while the working
        set outgrows half the last-level cache) or never."""
        self._m.set_lookahead(bool(on))

    def set_lookahead_stages(self, stages: int) -> None:
        """Benchmark hook: always run the first ``stages`` (0..3) look-ahead stages."""
        if not 0 <= stages <= 3:
            raise ValueError(f"stages must be 0..3, got {stages}")
        self._m.set_lookahead_stages(int(stages))

    def lookahead_stages(self) -> int:
        """The look-ahead stages the next call will run (0..3)."""
        return int(self._m.lookahead_stages())

    def set_match_batch(self, events: int) -> None:
        """Match mode: ``run`` batches of at least ``events`` events, into an empty
        market, may take the batch engine (flat arrays sized from the batch; 0: never).
        Tests set 1 to reach it with small streams; the ablation benchmark sets 0."""
        if events < 0:
            raise ValueError(f"events must be >= 0, got {events}")
        self._m.set_match_batch(int(events))

    def match_batch(self) -> int:
        """The smallest batch the batch engine takes (0: off)."""
        return int(self._m.match_batch())

    def batch_runs(self) -> int:
        """How many ``run`` calls the batch engine took (tests and the ablation)."""
        return int(self._m.batch_runs())

    def set_growth_budget(self, steps: int) -> None:
        """Test hook: the growth step after ``steps`` more raises MemoryError (-1: none)."""
        self._m.set_growth_budget(steps)
