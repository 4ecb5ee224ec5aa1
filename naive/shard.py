"""Sharding by symbol, the readable twin: ``multiprocessing`` workers joined by queues.

The writer (the calling process) decodes the ITCH buffer with ``naive.itch.decode`` and
hands the events to N book workers, each owning a ``naive.market.Market`` for the locates
:func:`contract.shard.owner` gives it, in one of two designs:

* ``broadcast`` -- every batch of events goes to every worker (one bounded queue per
  worker: a full queue blocks the writer, which is the backpressure). Each worker keeps
  the events of its locates, and an E C X D U if its market holds the order.
* ``routed`` -- the writer sends an E C X D U to the worker that holds the order (by its
  reference -> locate dict, below); each worker gets its events only.

In both designs the writer keeps that dict, because ITCH references are unique across
*all* symbols: an add (or a U's new reference) naming a reference that is live on
another worker's symbol is one market's ``duplicate_ref``, and no worker can see that
alone. When the dict says "maybe live over there" (never, on a feed that keeps ITCH's
rule), the writer sends what it holds, asks that worker, and tells the event's worker to
count a duplicate instead of applying it; ``conflicts`` counts those questions.

``backend="threads"`` runs the same workers as ``threading.Thread``s with
``queue.Queue``s: the GIL lets one of them run Python at a time, and chapter 10 measures
what that costs next to processes. Events travel in batches (a numpy array each) because
each hand-off through a queue costs a lock, and between processes a pickle too.

Every wait has a timeout and checks that the workers are still alive, so a dead worker
raises an error instead of leaving the writer waiting.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

import numpy as np

from contract.dtypes import EVENT_DTYPE, FILL_DTYPE
from contract.itch_errors import ItchError
from contract.market import check_mode
from contract.pipeline import check_buffer, check_capacity
from contract.shard import (
    DESIGNS,
    ShardResult,
    check_design,
    check_workers,
    default_workers,
    merge_books_csv,
    owner,
    routed_by_reference,
)
from naive.itch import decode
from naive.market import Market, show_bytes

__all__ = ["BACKENDS", "DESIGNS", "Shard"]

BACKENDS: Final = ("processes", "threads")
BATCH: Final = 4096      # events per queue item
WAIT_S: Final = 0.05     # every blocking wait wakes this often to check the workers
RESULT_TIMEOUT_S: Final = 600.0  # a worker that sends no result by then has hung
GRACE_S: Final = 5.0     # a worker that has exited: how long its result may still take

_A, _F, _D, _U = ord("A"), ord("F"), ord("D"), ord("U")


class _Queue(Protocol):
    def put(self, item: Any, block: bool = ..., timeout: float | None = ...) -> None: ...
    def get(self, block: bool = ..., timeout: float | None = ...) -> Any: ...


# --8<-- [start:keep]
def _keep(
    market: Market, me: int, workers: int, row: tuple[Any, ...]
) -> tuple[bool, bool]:
    """Broadcast: does worker ``me`` keep this event, and is it ``foreign`` (kept by
    reference although another worker owns its locate)? As in native/shard.hpp: an
    event by reference goes to the market that holds its order, or, if none does, to
    its locate's owner, whose market counts the unknown reference; a foreign event is
    also applied (as unknown) by its locate's owner, and the merge takes that count
    back out."""
    _, ref, _, _, shares, price, locate, kind, _, _, _ = row
    mine = owner(locate, workers) == me
    if routed_by_reference(kind, market.mode, shares, price):
        if market.order(ref) is not None:
            return True, not mine
        return mine, False
    return mine, False
# --8<-- [end:keep]


def _worker(me: int, workers: int, mode: str, design: str, inbox: _Queue,
            outbox: _Queue, answers: _Queue) -> None:
    """One book worker: batches of (sequences, events, duplicate-for) until None, and
    questions ("is this reference live here?") answered on ``answers``."""
    market = Market(mode)
    fills: list[np.ndarray] = []
    seqs: list[np.ndarray] = []
    received = applied = foreign = 0
    foreign_by_type: dict[str, int] = {}
    extra: dict[str, dict[str, int]] = {"events": {}, "anomalies": {}, "rejects": {}}

    def bump(group: str, key: str) -> None:
        extra[group][key] = extra[group].get(key, 0) + 1

    # --8<-- [start:duplicate]
    def duplicate(row: tuple[Any, ...]) -> None:
        """Count what one Market counts for an add or U whose reference the writer
        found live on another worker: the event, locate_mismatch (a U under a locate
        that is not its order's), the duplicate; the book is left as it is."""
        nonlocal applied
        locate, kind, ref = row[6], row[7], row[1]
        bump("events", show_bytes(bytes([kind])))
        if kind == _U:
            held = market.order(ref)
            assert held is not None  # the writer asked: it is live here
            if held[0] != locate:
                bump("anomalies", "locate_mismatch")
        if mode == "book":
            bump("anomalies", "duplicate_ref")
        else:
            bump("rejects", "duplicate_id")
        applied += 1
    # --8<-- [end:duplicate]

    def apply(events: np.ndarray, seq: np.ndarray) -> None:
        nonlocal applied
        if len(events) == 0:
            return
        f = market.run(events)
        if len(f):
            order = seq[f["op_index"]]            # the stream position of each fill's event
            f["op_index"] = order & 0xFFFF_FFFF   # as one Market's run: the low 32 bits
            fills.append(f)
            seqs.append(order)
        applied += len(events)

    try:
        while (item := inbox.get()) is not None:
            if isinstance(item[0], str):  # "ask": what was sent before it is applied
                answers.put((me, market.order(item[1]) is not None))
                continue
            seq, events, dup = item
            received += len(events)
            if design == "routed":
                start = 0
                for i in np.flatnonzero(dup >= 0).tolist():
                    apply(events[start:i], seq[start:i])
                    duplicate(events[i:i + 1].tolist()[0])
                    start = i + 1
                apply(events[start:], seq[start:])
                continue
            # Broadcast: keep runs of this worker's events, applied together; an event by
            # reference first applies what is pending, so that
            # the market's answer to "do you hold this order?" is the answer at this
            # point of the stream.
            pending: list[int] = []
            for i, row in enumerate(events.tolist()):
                kind = row[7]
                if dup[i] >= 0:  # a duplicate: counted by one worker, kept by none
                    if dup[i] == me:
                        apply(events[pending], seq[pending])
                        pending = []
                        duplicate(row)
                    continue
                if routed_by_reference(kind, mode, row[4], row[5]):
                    apply(events[pending], seq[pending])
                    pending = []
                keep, is_foreign = _keep(market, me, workers, row)
                if keep:
                    pending.append(i)
                if is_foreign:
                    foreign += 1
                    key = show_bytes(bytes([kind]))
                    foreign_by_type[key] = foreign_by_type.get(key, 0) + 1
            apply(events[pending], seq[pending])
        counts = market.counts()
        for group, values in extra.items():
            for key, value in values.items():
                counts[group][key] = counts[group].get(key, 0) + value
        outbox.put((me, {
            "fills": np.concatenate(fills) if fills else np.zeros(0, FILL_DTYPE),
            "seqs": np.concatenate(seqs) if seqs else np.zeros(0, np.uint64),
            "books_csv": market.books_csv(), "counts": counts,
            "live_orders": len(market), "received": received, "applied": applied,
            "foreign": foreign, "foreign_by_type": foreign_by_type,
        }))
    except BaseException as e:  # noqa: BLE001 - reported to the writer, which raises it
        outbox.put((me, e))


class _Router:
    """The writer's reference -> locate dict (both designs). Invariant: every live
    reference is in it, under a locate that the order's worker owns. Stale entries (an
    order executed away, a U's old reference the worker may still have refused) are
    harmless: they only send an unknown reference where it is counted as unknown, or
    make the writer ask a question whose answer is "no"."""

    def __init__(self, workers: int, mode: str, ask: Callable[[int, int], bool]) -> None:
        self.workers = workers
        self.mode = mode
        self.ask = ask  # (worker, reference) -> is it live there, now?
        self.refs: dict[int, int] = {}
        self.conflicts = 0  # events the writer had to ask a worker about

    # --8<-- [start:route]
    def route(self, row: tuple[Any, ...]) -> tuple[int, bool]:
        """(the worker for this event, is it a duplicate that worker only counts?)"""
        _, ref, new_ref, _, shares, price, locate, kind, side, _, _ = row
        home = owner(locate, self.workers)
        if kind in (_A, _F):
            if side not in b"BS" or shares == 0 or (price == 0 and self.mode == "book"):
                return home, False  # refused for its own fields: no reference looked up
            had = self.refs.get(ref)
            if had is not None and owner(had, self.workers) != home:
                self.conflicts += 1
                if self.ask(owner(had, self.workers), ref):
                    return home, True  # live on another worker's symbol: a duplicate
            if price != 0:  # (match mode's price 0 is a market order: it never rests)
                self.refs[ref] = locate
            return home, False
        if not routed_by_reference(kind, self.mode, shares, price):
            return home, False  # refused for its own fields, or (E C in match) counted
        had = self.refs.get(ref)
        if had is None:
            return home, False  # unknown: its locate's owner counts it, as one Market
        holder = owner(had, self.workers)
        if kind == _D:
            del self.refs[ref]  # gone now, wherever it was
        elif kind == _U and new_ref != ref:
            other = self.refs.get(new_ref)
            if other is not None and owner(other, self.workers) != holder:
                self.conflicts += 1
                if not self.ask(holder, ref):
                    return holder, False  # unknown there: the U changes nothing
                if self.ask(owner(other, self.workers), new_ref):
                    return holder, True  # the new reference is live elsewhere
            self.refs[new_ref] = had  # the old reference stays: the U may be refused
        return holder, False
# --8<-- [end:route]


def _as_fill_dtype(a: np.ndarray) -> np.ndarray:
    """FILL_DTYPE itself, padding included (np.concatenate packs the fields together)."""
    out = np.zeros(len(a), FILL_DTYPE)
    for name in FILL_DTYPE.names or ():
        out[name] = a[name]
    return out


class _Feed:
    """The writer's side of the queues: the events of the current chunk not yet sent,
    and the questions to a worker (sent behind everything before the event asked about,
    so the answer is that worker's state at this point of the stream)."""

    def __init__(self, design: str, inboxes: list[Any], procs: list[Any],
                 answers: Any) -> None:
        self.design, self.inboxes, self.procs, self.answers = design, inboxes, procs, answers
        self.routed = [0] * len(inboxes)
        self.begin(np.zeros(0, dtype=EVENT_DTYPE), np.zeros(0, dtype=np.uint64))

    def begin(self, chunk: np.ndarray, seq: np.ndarray) -> None:
        self.chunk, self.seq = chunk, seq
        self.dest = np.zeros(len(chunk), dtype=np.int64)   # routed: each event's worker
        self.dup = np.full(len(chunk), -1, dtype=np.int64)  # the worker counting a duplicate
        self.sent = self.at = 0

    def send(self, upto: int) -> None:
        """Send the chunk's events [sent, upto): to every worker (broadcast) or each to
        its own (routed)."""
        lo, self.sent = self.sent, upto
        if upto <= lo:
            return
        part = (self.seq[lo:upto], self.chunk[lo:upto], self.dup[lo:upto])
        if self.design == "broadcast":
            for w, q in enumerate(self.inboxes):
                Shard._put(q, part, self.procs[w])
            return
        dest = self.dest[lo:upto]
        for w, q in enumerate(self.inboxes):
            mask = dest == w
            if mask.any():
                self.routed[w] += int(mask.sum())
                Shard._put(q, tuple(a[mask] for a in part), self.procs[w])

    def ask(self, worker: int, ref: int) -> bool:
        """Is ``ref`` live on ``worker`` now (after every event before this one)?"""
        self.send(self.at)
        Shard._put(self.inboxes[worker], ("ask", ref), self.procs[worker])
        deadline = time.monotonic() + RESULT_TIMEOUT_S
        while True:
            try:
                w, live = self.answers.get(timeout=WAIT_S)
            except queue.Empty:
                if not self.procs[worker].is_alive():
                    raise RuntimeError("shard: a worker died") from None
                if time.monotonic() > deadline:
                    raise TimeoutError("shard: a worker did not answer") from None
                continue
            assert w == worker  # one question at a time
            return bool(live)


class Shard:
    """One writer, ``workers`` book workers (processes or threads) joined by queues."""

    def __init__(self, mode: str = "book", *, workers: int | None = None,
                 design: str = "broadcast",
                 capacity: int = 4096, backend: str = "processes") -> None:
        """``capacity``: events each worker's queue holds (in batches of up to BATCH)."""
        self.mode = check_mode(mode)
        # None: the CPUs this process may use, less one for the writer (at least one)
        self.workers = default_workers() if workers is None else check_workers(workers)
        self.design = check_design(design)
        self.capacity = check_capacity("capacity", capacity)
        if backend not in BACKENDS:
            raise ValueError(f"backend must be 'processes' or 'threads', got {backend!r}")
        self.backend = backend

    def run(self, data: Any) -> ShardResult:
        """Shard a bytes-like ITCH buffer; returns the merged result (contract/shard.py).

        Bad input raises ItchError *after* everything before the bad record has been
        applied; the error carries ``.result``.
        """
        check_buffer(data)
        error: ItchError | None = None
        try:
            events, by_type = decode(data)
        except ItchError as e:
            events, by_type, error = e.events, e.counts, e
        t0 = time.perf_counter()
        result = self._run(events)
        result["records"] = sum(by_type.values())
        result["seconds"] = time.perf_counter() - t0
        if error is not None:
            error.result = result  # type: ignore[attr-defined]
            raise error
        return result

    def _run(self, events: np.ndarray) -> ShardResult:
        n = self.workers
        batch = min(BATCH, self.capacity)
        depth = max(1, self.capacity // batch)  # batches a worker's queue holds
        ctx: Any
        if self.backend == "threads":
            inboxes: list[Any] = [queue.Queue(depth) for _ in range(n)]
            outbox: Any = queue.Queue()
            answers: Any = queue.Queue()
            procs: list[Any] = [threading.Thread(
                target=_worker, args=(w, n, self.mode, self.design, inboxes[w], outbox,
                                      answers), daemon=True) for w in range(n)]
        else:
            # forkserver: each worker is forked from a small server process that has
            # imported this module once, not from this process and its threads.
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["naive.shard"])
            inboxes = [ctx.Queue(depth) for _ in range(n)]
            outbox = ctx.Queue()
            answers = ctx.Queue()
            procs = [ctx.Process(
                target=_worker, args=(w, n, self.mode, self.design, inboxes[w], outbox,
                                      answers), daemon=True) for w in range(n)]
        for p in procs:
            p.start()
        feed = _Feed(self.design, inboxes, procs, answers)
        router = _Router(n, self.mode, feed.ask)
        seq_all = np.arange(len(events), dtype=np.uint64)
        try:
            # --8<-- [start:writer]
            for start in range(0, len(events), batch):
                feed.begin(events[start:start + batch], seq_all[start:start + batch])
                for i, row in enumerate(feed.chunk.tolist()):
                    feed.at = i  # a question first sends every event before this one
                    worker, dup = router.route(row)
                    feed.dest[i] = worker
                    if dup:
                        feed.dup[i] = worker
                feed.send(len(feed.chunk))
            # --8<-- [end:writer]
            for w in range(n):
                self._put(inboxes[w], None, procs[w])
            parts = self._collect(outbox, procs)
        finally:
            for p in procs:
                p.join(timeout=5)
                if self.backend == "processes" and p.is_alive():
                    p.terminate()
            if self.backend == "processes":
                for q in inboxes:  # after a failure, never wait at exit to flush a batch
                    q.cancel_join_thread()  # that no worker will read
        return self._merge(parts, len(events), feed.routed, router.conflicts)

    @staticmethod
    def _put(q: Any, item: Any, proc: Any) -> None:
        """Put on a worker's bounded queue, waiting (the backpressure) while it is full,
        but never for a worker that has died."""
        while True:
            try:
                q.put(item, timeout=WAIT_S)
                return
            except queue.Full:
                if not proc.is_alive():
                    raise RuntimeError("shard: a worker died") from None

    @staticmethod
    def _collect(outbox: Any, procs: list[Any]) -> list[dict[str, Any]]:
        """Every worker's result. A worker that has exited may still have its result in
        the pipe: it counts as dead only when nothing came from it for GRACE_S after."""
        parts: dict[int, dict[str, Any]] = {}
        deadline = time.monotonic() + RESULT_TIMEOUT_S
        gone: dict[int, float] = {}  # worker -> when it was first seen exited, no result
        while len(parts) < len(procs):
            try:
                w, part = outbox.get(timeout=WAIT_S)
            except queue.Empty:
                now = time.monotonic()
                if now > deadline:
                    raise TimeoutError("shard: a worker sent no result") from None
                for w, p in enumerate(procs):
                    if w not in parts and not p.is_alive():
                        if now - gone.setdefault(w, now) > GRACE_S:
                            raise RuntimeError("shard: a worker died") from None
                continue
            if isinstance(part, BaseException):
                raise part
            parts[w] = part
        return [parts[w] for w in range(len(procs))]

    # --8<-- [start:merge]
    def _merge(self, parts: list[dict[str, Any]], events: int, routed: list[int],
               conflicts: int) -> ShardResult:
        """The workers' results as one market's: fills in stream order, books by locate,
        counts added up less the broadcast's double count (see _keep)."""
        fills = np.concatenate([p["fills"] for p in parts])
        seqs = np.concatenate([p["seqs"] for p in parts])
        fills = _as_fill_dtype(fills[np.argsort(seqs, kind="stable")])
        counts: dict[str, dict[str, int]] = {
            "events": {}, "anomalies": {}, "rejects": {}
        }
        for p in parts:
            for group, values in p["counts"].items():
                for key, value in values.items():
                    counts[group][key] = counts[group].get(key, 0) + value
            for key, value in p["foreign_by_type"].items():
                counts["events"][key] -= value
            unknown = (("anomalies", "unknown_ref") if self.mode == "book"
                       else ("rejects", "unknown_id"))
            counts[unknown[0]][unknown[1]] -= p["foreign"]
        counts["events"] = {k: v for k, v in sorted(counts["events"].items()) if v}
        return {
            "mode": self.mode, "design": self.design, "workers": self.workers,
            "events": events,
            "fills": fills,
            "books_csv": merge_books_csv([p["books_csv"] for p in parts]),
            "counts": counts,
            "fill_count": len(fills),
            "volume": int(fills["qty"].astype(np.int64).sum()),
            "live_orders": sum(p["live_orders"] for p in parts),
            "per_worker": [{"received": p["received"], "applied": p["applied"],
                            "foreign": p["foreign"]} for p in parts],
            "routed": routed if self.design == "routed" else [],
            "conflicts": conflicts,
        }
    # --8<-- [end:merge]

