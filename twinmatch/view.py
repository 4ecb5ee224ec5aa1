"""The live view's replay side: a day replayed through one twin, published as snapshots.

``twinmatch view FILE`` (twinmatch/view_web.py serves it) runs :class:`LiveReplay` in a
thread of its own. That thread alone owns the market: it applies the feed slice by slice
and, at most ``fps`` times a second, copies what the page and the API show -- every
changed symbol's top ``MAX_DEPTH`` levels, the latest trades, the counters, the latency
histogram -- into a new :class:`Snapshot`, made of plain tuples and dicts that nothing
changes afterwards. Publishing is one attribute assignment (atomic in CPython), so the web
side reads whatever snapshot is current, without a lock, and never calls into a book: a
slow browser, or fifty of them, cannot stall the replay (chapter 16).

What the replay thread spends on snapshots is bounded: after a publish that took ``c``
seconds the next one waits at least ``c * (1 / SNAPSHOT_SHARE - 1)``, so building
snapshots takes at most ``SNAPSHOT_SHARE`` of that thread's time from one snapshot to the
next, however many symbols change. (The web side's own CPU time, and for the naive
twin the GIL it takes, are not in that bound: tests/bench/test_bench_view.py measures the
whole cost, paired.)
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from contract.itch_files import GZIP_MAGIC, opened, peek, regular_size

MAX_DEPTH: Final = 50        # levels a snapshot keeps per side (the API's largest ?depth)
FPS: Final = 25.0            # snapshots a second, at most: what a browser can draw
SNAPSHOT_SHARE: Final = 0.10 # the replay thread's time that snapshots may take, at most
HISTOGRAM_EVERY_S: Final = 1.0  # the histogram's copy (1,920 counters) is refreshed so often
# Messages applied between two looks at the clock: paced, small, so the page moves with
# the feed's own clock; flat out, as many as take about SLICE_NS to apply, so the
# per-slice Python work (which symbols changed, the tape, the histogram) is spread over
# more messages.
SLICE: Final = 256
SLICE_FLAT_OUT: Final = 4096  # the first slice flat out; then sized to about SLICE_NS
SLICE_NS: Final = 4_000_000
SLICE_MAX: Final = 1 << 16
MAX_QUIET_S: Final = 1.0     # paced: no wait between two slices is longer (wall seconds)
TAPE: Final = 40             # trades kept for the tape
ACTIVE: Final = 10           # symbols in the most-active list
_BOOK_TYPES: Final = np.frombuffer(b"AFECXDU", dtype=np.uint8)
_IS_BOOK: Final = np.isin(np.arange(256), _BOOK_TYPES)  # type byte -> changes a book?
_R: Final = ord("R")


@dataclass(frozen=True)
class Snapshot:
    """What the page and the API may read: a copy, never the book itself."""

    version: int = 0
    messages: int = 0                 # messages applied so far (the replay position)
    clock_ns: int = 0                 # ITCH timestamp of the last one (ns since midnight)
    fraction: float | None = None     # of the file's bytes (raw ITCH only), else None
    done: bool = False
    error: str = ""
    fills: int = 0
    volume: int = 0
    live_orders: int = 0
    messages_per_s: float = 0.0       # over the last second of the replay
    books: dict[str, dict[str, Any]] = field(default_factory=dict)  # symbol -> book
    tape: tuple[dict[str, Any], ...] = ()   # newest first
    active: tuple[dict[str, Any], ...] = ()
    histogram: dict[str, Any] = field(default_factory=dict)
    published_ns: int = 0             # time.perf_counter_ns() when published
    changed_ms: float = 0.0           # wall clock (ms) of the oldest change it carries
                                      # (0.0: no book changed since the last snapshot)


def clock_text(ns: int) -> str:
    """ITCH time of day, HH:MM:SS.mmm."""
    s, ns = divmod(int(ns), 1_000_000_000)
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}.{ns // 1_000_000:03d}"


class LiveReplay:
    """One twin's replay of ``path``, paced by the feed's clock, publishing snapshots."""

    def __init__(self, path: str | Path, impl: str = "optimized", mode: str = "book",
                 speed: float = 0.0, symbols: set[str] | None = None,
                 fps: float = FPS, slice_size: int | None = None,
                 limit: int | None = None) -> None:
        from twinmatch.replay import IMPLS, MODES

        if impl not in IMPLS or mode not in MODES:
            raise ValueError(f"impl must be one of {IMPLS} and mode one of {MODES}")
        if not speed >= 0 or speed == float("inf"):
            raise ValueError(f"--speed must be a number >= 0 (0: as fast as it goes), not "
                             f"{speed}")
        self.adaptive = slice_size is None and speed == 0
        if slice_size is None:
            slice_size = SLICE if speed > 0 else SLICE_FLAT_OUT
        if not fps > 0 or not 1 <= slice_size <= 1 << 20:
            raise ValueError(f"fps must be > 0 and slice_size 1..2**20, not {fps}, {slice_size}")
        self.path, self.impl, self.mode, self.speed = Path(path), impl, mode, speed
        self.wanted = symbols
        self.interval = 1.0 / fps
        self.slice_size = slice_size
        self.limit = limit            # stop after this many messages (a test's position)
        self.snapshot = Snapshot()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="twinmatch-view-replay",
                                       daemon=True)
        self.publish_seconds = 0.0    # the replay thread's time spent on snapshots
        self._began: float | None = None
        self._ended: float | None = None
        self._slept = 0.0             # in pacing waits
        self._books: dict[str, dict[str, Any]] = {}
        self._names: dict[int, str] = {}
        self._dirty: set[int] = set()
        self._tape: deque[tuple[np.ndarray, np.ndarray]] = deque(maxlen=TAPE)
        self._rate: deque[tuple[float, int]] = deque()
        self._version = 0
        self._changed_ms = 0.0
        self._histogram_at = 0.0
        self._histogram_copy: dict[str, Any] = {"count": 0, "buckets": []}
        self._total: int | None = None  # the file's bytes (raw ITCH), for the progress
        self._bytes = 0

    # ----------------------------------------------------------------- the thread

    def start(self) -> LiveReplay:
        self.thread.start()
        return self

    def close(self, timeout: float = 10.0) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout)

    def run_seconds(self) -> float:
        """The replay thread's time so far, its pacing waits excluded."""
        if self._began is None:
            return 0.0
        end = self._ended if self._ended is not None else time.perf_counter()
        return end - self._began - self._slept

    def _run(self) -> None:
        self._began = time.perf_counter()
        try:
            self.replay()
        except Exception as exc:  # shown on the page and by /api/stats; the server goes on
            self._publish(done=True, error=" ".join(str(exc).split()) or type(exc).__name__)
        finally:
            self._ended = time.perf_counter()

    # --8<-- [start:replay_loop]
    def replay(self) -> None:
        """Apply the whole feed, slice by slice; publish when a frame is due."""
        from twinmatch.replay import new_market

        self.market = new_market(self.impl, self.mode)
        self.histogram = _histogram(self.impl)
        self._start = time.perf_counter()
        self._last_publish, self._wait = 0.0, self.interval
        self._messages, self._clock, self._bytes = 0, 0, 0
        first_ts: int | None = None
        for events, decode_ns in self._decoded():
            lo = 0
            while lo < len(events):
                if self.stop.is_set() or (self.limit is not None
                                          and self._messages >= self.limit):
                    self._publish(done=not self.stop.is_set())
                    return
                part = events[lo:lo + self.slice_size]
                lo += len(part)
                if self.speed > 0:  # wait until the feed's clock says this slice is due
                    ts = int(part["timestamp"][0])
                    first_ts = ts if first_ts is None else first_ts
                    self._pace(ts - first_ts)
                t0 = time.perf_counter_ns()
                fills = self.market.run(part)  # the only call that touches a book
                apply_ns = time.perf_counter_ns() - t0
                share = decode_ns * len(part) // max(len(events), 1)
                self.histogram.record((share + apply_ns) // len(part))
                self._note(part, fills)
                if self.adaptive:  # flat out: slices of about SLICE_NS of book work
                    self._resize(apply_ns)
                if time.perf_counter() - self._last_publish >= self._wait:
                    self._publish()
        self._publish(done=True)
    # --8<-- [end:replay_loop]

    def _resize(self, apply_ns: int) -> None:
        """Flat out, a slice should take about SLICE_NS: long enough that the per-slice
        Python work is small beside it (the optimized twin applies a slice of thousands
        in microseconds), short enough that a frame is never long overdue (the naive
        twin takes microseconds a message)."""
        if apply_ns < SLICE_NS // 2 and self.slice_size < SLICE_MAX:
            self.slice_size *= 2
        elif apply_ns > SLICE_NS * 2 and self.slice_size > SLICE:
            self.slice_size //= 2

    def _decoded(self) -> Iterator[tuple[np.ndarray, int]]:
        """(events, ns the decoder took for them) of each batch the twin's decoder gives."""
        from twinmatch.replay import SNIFF_BYTES, batches, sniff_head

        with opened(self.path) as raw:
            head, stream = peek(raw, SNIFF_BYTES)
            fmt = sniff_head(head, self.path)
            size = regular_size(stream)
            self._total = size if fmt == "itch" and head[:2] != GZIP_MAGIC else None
            it, _ = batches(stream, fmt, self.impl, self.path)
            while True:
                t0 = time.perf_counter_ns()
                batch = next(it, None)
                if batch is None:
                    return
                yield batch[0], time.perf_counter_ns() - t0

    def _pace(self, feed_ns: int) -> None:
        """Sleep (in short, stoppable pieces) until ``feed_ns`` of feed time / speed has
        passed since the start; a wait longer than MAX_QUIET_S is cut to it, and the rest
        of the day shifted, so the page never sits still for long."""
        due = self._start + feed_ns / 1e9 / self.speed
        left = due - time.perf_counter()
        if left > MAX_QUIET_S:  # a quiet stretch (the night before the open) is shortened
            self._start -= left - MAX_QUIET_S
            due -= left - MAX_QUIET_S
        while not self.stop.is_set():
            left = due - time.perf_counter()
            if left <= 0:
                return
            if time.perf_counter() - self._last_publish >= self._wait:
                self._publish()  # an idle market still gets its frames (the clock moves)
            t0 = time.perf_counter()
            self.stop.wait(min(left, self.interval))
            self._slept += time.perf_counter() - t0

    # --8<-- [start:note]
    def _note(self, part: np.ndarray, fills: np.ndarray) -> None:
        """Counters, the changed symbols and the tape, from one applied slice: whole-
        array numpy work, a few calls per slice whatever its length (no loop per
        message)."""
        types = part["type"]
        seen = np.bincount(types, minlength=256)          # messages of each type
        self._messages += len(part)
        self._clock = max(self._clock, int(part["timestamp"].max()))
        self._bytes += int(seen @ _FRAMED)
        if seen[_R]:  # a stock directory message names a locate
            for locate in part["locate"][types == _R].tolist():
                self._names[locate] = self.market.stock(locate)
        if seen[_BOOK_TYPES].any():
            if not self._changed_ms:  # the oldest change the next snapshot will carry
                self._changed_ms = time.time() * 1e3
            touched = np.zeros(1 << 16, dtype=bool)
            touched[part["locate"][_IS_BOOK[types]]] = True
            self._dirty.update(np.flatnonzero(touched).tolist())
        if len(fills):  # the tape: the slice's last TAPE fills, with their events
            tail = fills[-TAPE:]
            self._tape.appendleft((tail, part[tail["op_index"]]))
    # --8<-- [end:note]

    def _trades(self) -> tuple[dict[str, Any], ...]:
        """The newest TAPE trades, newest first (built only when a snapshot is)."""
        out: list[dict[str, Any]] = []
        for fills, events in self._tape:
            rows = zip(fills["price"].tolist(), fills["qty"].tolist(),
                       fills["aggressor_side"].tolist(), events["locate"].tolist(),
                       events["timestamp"].tolist(), strict=True)
            for price, qty, side, locate, ts in reversed(list(rows)):
                name = self._names.get(locate, str(locate))
                if self.wanted is not None and name not in self.wanted:
                    continue
                out.append({"symbol": name, "price": price, "qty": qty,
                            "side": "B" if side == 0 else "S", "clock_ns": ts})
                if len(out) == TAPE:
                    return tuple(out)
        return tuple(out)

    # --8<-- [start:publish]
    def _publish(self, done: bool = False, error: str = "") -> None:
        """Copy what changed into a new Snapshot and make it the current one."""
        t0 = time.perf_counter()
        market = getattr(self, "market", None)
        if market is not None:
            for locate in self._dirty:
                name = self._names.get(locate) or market.stock(locate) or str(locate)
                if self.wanted is None or name in self.wanted:
                    self._books[name] = {
                        "locate": locate,
                        "bids": tuple(market.depth(locate, 0, MAX_DEPTH)),
                        "asks": tuple(market.depth(locate, 1, MAX_DEPTH))}
            self._dirty.clear()
        now = time.perf_counter()
        self._rate.append((now, self._messages))
        while len(self._rate) > 2 and now - self._rate[0][0] > 1.0:
            self._rate.popleft()
        (t_old, m_old), (t_new, m_new) = self._rate[0], self._rate[-1]
        self._version += 1
        # one reference assignment: the web side sees the old snapshot or the new one
        self.snapshot = Snapshot(
            version=self._version, messages=self._messages, clock_ns=self._clock,
            fraction=min(1.0, self._bytes / self._total) if self._total else None,
            done=done, error=error,
            fills=int(market.fills) if market is not None else 0,
            volume=int(market.volume) if market is not None else 0,
            live_orders=len(market) if market is not None else 0,
            messages_per_s=(m_new - m_old) / (t_new - t_old) if t_new > t_old else 0.0,
            books=dict(self._books), tape=self._trades(), active=self._active(),
            histogram=self._histogram_now(done), published_ns=time.perf_counter_ns(),
            changed_ms=self._changed_ms)  # 0: no book changed since the last one
        self._changed_ms = 0.0
        cost = time.perf_counter() - t0
        self.publish_seconds += cost
        self._last_publish = time.perf_counter()
        # the bound: snapshots take at most SNAPSHOT_SHARE of this thread's time
        self._wait = max(self.interval, cost * (1.0 / SNAPSHOT_SHARE - 1.0))
    # --8<-- [end:publish]

    def _active(self) -> tuple[dict[str, Any], ...]:
        market = getattr(self, "market", None)
        if market is None:
            return ()
        ranked = sorted(market.activity(), key=lambda la: (-la[1], la[0]))
        out = []
        for locate, messages in ranked:
            name = self._names.get(locate) or market.stock(locate) or str(locate)
            if self.wanted is None or name in self.wanted:
                out.append({"symbol": name, "locate": locate, "messages": messages})
            if len(out) == ACTIVE:
                break
        return tuple(out)

    def _histogram_now(self, final: bool) -> dict[str, Any]:
        """The histogram's view, copied at most every HISTOGRAM_EVERY_S (its 1,920
        counters cost more to copy than the rest of a snapshot), and at the end."""
        now = time.perf_counter()
        if final or now - self._histogram_at >= HISTOGRAM_EVERY_S:
            self._histogram_at, self._histogram_copy = now, self._histogram_view()
        return self._histogram_copy

    def _histogram_view(self) -> dict[str, Any]:
        h = getattr(self, "histogram", None)
        if h is None or h.count == 0:
            return {"count": 0, "buckets": []}
        from naive.histogram import bucket_highest, bucket_lowest

        counts = h.counts()
        buckets = [[bucket_lowest(i), bucket_highest(i), n] for i, n in enumerate(counts) if n]
        summary = h.summary()
        return {"count": int(h.count), "p50": int(summary["p50"]), "p99": int(summary["p99"]),
                "max": int(summary["max"]), "buckets": buckets}


def _histogram(impl: str) -> Any:
    """Chapter 7's histogram of the twin that replays."""
    import importlib

    return importlib.import_module(f"{impl}.histogram").Histogram()


def _framed_lengths() -> np.ndarray:
    """Bytes a message of each type takes in a framed ITCH file (2-byte length + body)."""
    from naive.itch import LENGTHS

    table = np.zeros(256, dtype=np.int64)
    for kind, length in LENGTHS.items():
        table[kind] = length + 2
    return table


_FRAMED: Final = _framed_lengths()


class LiveFeed(LiveReplay):
    """The view attached to chapter 13's receiver (``twinmatch view --feed PORT``).

    The receiver's thread owns its market as the replay's does, and publishes from the one
    hook its loop offers, the report it makes once a second (twinmatch/feed_cli.py's
    ``feed recv`` prints the same): so attached to a feed the page moves once a second,
    every book is copied each time (no per-slice record of what changed), and the tape
    and the ITCH clock stay empty (the receiver hands out neither). The histogram is the
    receiver's own decode-to-book latency per packet (chapter 13).
    """

    def __init__(self, port: int, impl: str = "optimized", request_port: int | None = None,
                 symbols: set[str] | None = None, idle_s: float = 2.0,
                 max_seconds: float = 3600.0) -> None:
        super().__init__(f"udp://127.0.0.1:{port}", impl, "book", 0.0, symbols)
        if not 0 < idle_s <= 86_400 or not 0 < max_seconds <= 7 * 86_400:
            raise ValueError(f"--idle-ms must be > 0 and --max-seconds 0..604800, not "
                             f"{idle_s * 1e3:g}, {max_seconds:g}")
        from twinmatch.feed_cli import receiver_for

        # bound now, so that the command can print a port a sender may already use
        self.rx = receiver_for(impl, port, request_port, idle_ns=int(idle_s * 1e9))
        self.port = int(self.rx.port)
        self.max_ns = int(max_seconds * 1e9)

    def replay(self) -> None:
        self.market = self.rx.market
        self.histogram = None
        self._messages, self._clock = 0, 0
        self._last_publish, self._wait = 0.0, self.interval
        self._feed_report: dict[str, Any] = {}

        def tick(report: dict[str, Any]) -> None:  # in the receiver's thread
            self._messages = int(report["messages"])
            self._feed_report = report
            self._dirty.update(locate for locate, _ in self.market.activity())
            self._publish()

        try:
            self.rx.run(self.max_ns, tick)
        finally:
            self.rx.close()
        self._publish(done=True)

    def _histogram_now(self, final: bool) -> dict[str, Any]:
        """The histogram's view, copied at most every HISTOGRAM_EVERY_S (its 1,920
        counters cost more to copy than the rest of a snapshot), and at the end."""
        now = time.perf_counter()
        if final or now - self._histogram_at >= HISTOGRAM_EVERY_S:
            self._histogram_at, self._histogram_copy = now, self._histogram_view()
        return self._histogram_copy

    def _histogram_view(self) -> dict[str, Any]:
        d2b = getattr(self, "_feed_report", {}).get("decode_to_book") or {}
        if not d2b.get("count"):
            return {"count": 0, "buckets": []}
        return {"count": int(d2b["count"]), "p50": int(d2b["p50"]), "p99": int(d2b["p99"]),
                "max": int(d2b["max"]), "buckets": []}
