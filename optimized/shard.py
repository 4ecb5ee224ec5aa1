"""Sharding by symbol in C++ (``native/shard.hpp``): the same API as ``naive/shard.py``.

One writer thread decodes the ITCH buffer and hands each event to N book-worker threads,
each owning a Market for the locates :func:`contract.shard.owner` gives it, through one
of two lock-free designs:

* ``broadcast`` -- one ring that every worker reads (one writer, N readers, each reader's
  sequence on its own cache line; the writer never overwrites a slot the slowest reader
  has not passed). Every worker sees every event and keeps its own: by locate, and an
  E C X D U by whether its market holds the order.
* ``routed`` -- one single-producer single-consumer ring per worker. The writer keeps a
  reference -> locate map of the orders it has seen added, so that an E C X D U goes to
  the worker that holds the order, and pushes each event to that worker's ring only.

In both designs the writer keeps that map (broadcast: for A F U D only), so that an add
or a U's new reference that may be live on another worker's symbol is checked there: the
writer waits for that worker to finish what it was sent, looks into its market, and marks
a duplicate for the event's worker to count, as one Market would (``conflicts``).

``run`` releases the GIL for the whole run. ``wait="auto"`` spins only when the writer
and every worker can each have a CPU of their own (``os.sched_getaffinity``), otherwise
it spins briefly and then yields (and sleeps, after a while) so that the threads of a
2-CPU machine do not steal each other's time slices.
"""

from __future__ import annotations

from typing import Any, Final

from contract.dtypes import ANOMALIES, REASONS
from contract.itch_errors import ITCH_REASONS, ItchError
from contract.market import check_mode
from contract.pipeline import check_buffer, check_capacity
from contract.shard import (
    DESIGNS,
    ShardResult,
    check_design,
    check_workers,
    default_workers,
    merge_books_csv,
)
from optimized import _native
from optimized.itch import record_error, tail_error
from optimized.market import show_bytes

__all__ = ["DESIGNS", "WAITS", "Shard", "writer_only"]

WAITS: Final = ("auto", "spin", "yield")


class Shard:
    """One writer, ``workers`` book workers, joined by a broadcast ring or routed rings."""

    def __init__(self, mode: str = "book", *, workers: int | None = None,
                 design: str = "broadcast",
                 capacity: int = 4096, wait: str = "auto") -> None:
        self.mode = check_mode(mode)
        # None: the CPUs this process may use, less one for the writer (at least one)
        self.workers = default_workers() if workers is None else check_workers(workers)
        self.design = check_design(design)
        self.capacity = check_capacity("capacity", capacity)
        if wait not in WAITS:
            raise ValueError(f"wait must be auto, spin or yield, got {wait!r}")
        self._wait = wait

    def run(self, data: Any) -> ShardResult:
        """Shard a bytes-like ITCH buffer; returns the merged result (contract/shard.py).

        Bad input raises ItchError *after* everything before the bad record has been
        applied; the error carries ``.result``.
        """
        check_buffer(data)
        s = _native.Shard(self.mode, self.design, self.workers, self.capacity, self._wait,
                          False)
        s.run(data)
        stats = s.stats()
        events, anomalies, rejects, fills, volume = s.raw_counts()
        result: ShardResult = {
            "mode": self.mode,
            "design": self.design,
            "workers": self.workers,
            "events": int(stats["events"]),
            "records": int(stats["records"]),
            "fills": s.fills(),
            "books_csv": merge_books_csv([s.books_csv(w) for w in range(self.workers)]),
            "counts": {
                "events": {show_bytes(bytes([t])): int(n) for t, n in enumerate(events) if n},
                "anomalies": dict(zip(ANOMALIES, (int(n) for n in anomalies), strict=True)),
                "rejects": {REASONS[r]: int(rejects[r]) for r in range(1, len(REASONS))},
            },
            "fill_count": int(fills),
            "volume": int(volume),
            "live_orders": sum(int(w["live_orders"]) for w in stats["workers"]),
            "per_worker": [{"received": int(w["received"]), "applied": int(w["applied"]),
                            "foreign": int(w["foreign"])} for w in stats["workers"]],
            "routed": [int(n) for n in stats["routed"]] if self.design == "routed" else [],
            "conflicts": int(stats["conflicts"]),
            "writer_stalls": int(stats["writer_stalls"]),
            "wait": stats["wait"],
            "seconds": float(stats["seconds"]),
        }
        code = int(stats["error"])
        if code:
            consumed = int(stats["consumed"])
            if ITCH_REASONS[code] in ("bad_length", "zero_length"):
                error: ItchError = record_error(code, int(stats["error_type"]),
                                                int(stats["error_length"]), consumed)
            else:
                mv = memoryview(data).cast("B")
                error = tail_error(mv[consumed:].tobytes(), 0, consumed)
            error.result = result  # type: ignore[attr-defined]
            raise error
        return result


def writer_only(data: Any, design: str = "routed", workers: int = 2,
                mode: str = "book") -> dict[str, Any]:
    """The writer alone: decode every record (and, routed, resolve and hash it) with no
    worker and no ring. Its messages per second is the ceiling of any number of workers."""
    check_buffer(data)
    s = _native.Shard(check_mode(mode), check_design(design), check_workers(workers), 4096,
                      "yield", True)
    s.run(data)
    stats: dict[str, Any] = s.stats()
    return {"records": int(stats["records"]), "events": int(stats["events"]),
            "routed": [int(n) for n in stats["routed"]], "seconds": float(stats["seconds"])}
