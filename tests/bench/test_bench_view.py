"""Chapter 16 benchmarks, group "view": what watching a replay costs the replay.

* ``test_paired_view[impl]`` (paired, key ``view-<impl>``): a generated day replayed by
  ``twinmatch replay``'s function alone (fast side) against the same day replayed by the
  view flat out (``--speed 0``) with its web server running in the same process and
  ``CLIENTS`` browsers' worth of event streams reading every frame (slow side). The
  ratio, slow time over fast, is the whole cost of the view: the slicing, the snapshots,
  and the server's and clients' share of the CPU and (naive twin) of the GIL.
* ``test_paired_view_server[impl]`` (paired, key ``view-server-<impl>``): the web side's
  share alone, the view's replay without its server (fast) and with it and its clients
  (slow).
* ``test_view_update_latency``: a paced replay (the page's normal use), one event-stream
  client; per frame, the wall time from the oldest book change the frame carries to the
  frame's arrival at the client (ms): the throttle's wait, the publish, the server's poll
  and the socket. Recorded in ``extra_info["view_latency"]``. Every wait is bounded: the
  client stops after 60 s, the server on leaving its ``with``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.bench.paired import SMALL, Side, paired
from twinmatch.gen import write_market_day
from twinmatch.replay import replay
from twinmatch.view import LiveReplay
from twinmatch.view_web import BackgroundServer, stream_frames

CLIENTS = 2
FRAMES = 30 if SMALL else 150   # update-latency frames (at most 25 a second)
SPEED = 1_000.0
MESSAGES = {"naive": 10_000 if SMALL else 300_000, "optimized": 20_000 if SMALL else 2_000_000}
INCLUDES = ("fast: twinmatch replay's replay() (read + decode + books); slow: twinmatch "
            f"view --speed 0 (read + decode + books in slices of about 4 ms + snapshots "
            f"at most 25/s) with its server and {CLIENTS} event-stream clients in the same "
            "process; server start and stop excluded")

SERVER_INCLUDES = ("fast: twinmatch view's replay flat out, no server (read + decode + "
                   "books in slices of about 4 ms + snapshots); slow: the same with its server and "
                   f"{CLIENTS} event-stream clients in the process; server start and stop "
                   "excluded")


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("view-bench")
    return {impl: write_market_day(out / impl, n, symbols=200, seed=7).paths[0]
            for impl, n in MESSAGES.items()}


def _viewed(day: Path, impl: str) -> float:
    """Seconds the view's replay took, with the server and CLIENTS streams running."""
    live = LiveReplay(day, impl)
    with BackgroundServer(live) as served:
        readers = [threading.Thread(target=stream_frames, args=(served.port, 10**9, "", 60.0),
                                    daemon=True) for _ in range(CLIENTS)]
        for r in readers:
            r.start()
        live.thread.join(600)
        assert live.snapshot.done and not live.snapshot.error
        seconds = live.run_seconds()
    for r in readers:
        r.join(30)  # the server's shutdown ended their streams
    return seconds


@pytest.mark.benchmark(group="view")
@pytest.mark.parametrize("impl", ["naive", "optimized"])
def test_paired_view(benchmark: Any, impl: str, days: dict[str, Path]) -> None:
    day = days[impl]
    alone = replay(day, impl)
    live = LiveReplay(day, impl).start()
    live.thread.join(600)
    assert live.snapshot.messages == alone.report["messages"] == MESSAGES[impl]
    assert live.snapshot.live_orders == alone.report["live_orders"]  # the same books
    fast = Side("replay", lambda _: replay(day, impl).report["seconds"], ops=MESSAGES[impl])
    slow = Side("view", lambda _: _viewed(day, impl), ops=MESSAGES[impl])
    paired(benchmark, f"view-{impl}", fast, slow, pairs=11, warmup=1, impl=impl,
           messages=MESSAGES[impl], includes=INCLUDES)


def _unviewed(day: Path, impl: str) -> float:
    """Seconds the view's replay took with no server: its slicing and snapshots only."""
    live = LiveReplay(day, impl).start()
    live.thread.join(600)
    assert live.snapshot.done and not live.snapshot.error
    return live.run_seconds()


@pytest.mark.benchmark(group="view")
@pytest.mark.parametrize("impl", ["naive", "optimized"])
def test_paired_view_server(benchmark: Any, impl: str, days: dict[str, Path]) -> None:
    """The web side's share alone: the view's replay without and with its server and
    CLIENTS event streams (key view-server-<impl>)."""
    fast = Side("view-replay", lambda _: _unviewed(days[impl], impl), ops=MESSAGES[impl])
    slow = Side("view-served", lambda _: _viewed(days[impl], impl), ops=MESSAGES[impl])
    paired(benchmark, f"view-server-{impl}", fast, slow, pairs=11, warmup=1, impl=impl,
           messages=MESSAGES[impl], includes=SERVER_INCLUDES)


@pytest.mark.benchmark(group="view")
def test_view_update_latency(benchmark: Any, days: dict[str, Path]) -> None:
    latencies: list[float] = []
    arrivals: list[float] = []

    def run() -> None:
        # paced so that the replay outlasts the frames wanted
        live = LiveReplay(days["naive"], "optimized", speed=SPEED)
        with BackgroundServer(live) as served:
            frames = stream_frames(served.port, FRAMES, "", 60.0, on_frame)
        assert len(frames) == FRAMES and latencies

    def on_frame(frame: dict[str, Any], arrived_ms: float) -> None:
        arrivals.append(arrived_ms)
        if frame["changed_ms"] > 0:  # (0: a frame of an idle moment, no book changed)
            latencies.append(arrived_ms - frame["changed_ms"])

    benchmark.pedantic(run, rounds=1, iterations=1)
    seconds = (arrivals[-1] - arrivals[0]) / 1e3
    latencies.sort()

    def at(q: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 1)

    benchmark.extra_info["view_latency"] = {
        "frames": len(latencies),  # (those that carried a book change)
        "p50_ms": at(0.5), "p90_ms": at(0.9), "p99_ms": at(0.99),
        "max_ms": round(latencies[-1], 1), "frames_per_s": round((len(arrivals) - 1) / seconds, 1)}
    benchmark.extra_info["includes"] = (
        "book change (wall clock of the oldest change a frame carries) to the frame's "
        "arrival at a socket client on 127.0.0.1: throttle wait + publish + server poll + "
        f"socket; optimized twin, --speed {SPEED:.0f}; no browser drawing")
