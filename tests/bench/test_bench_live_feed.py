"""Benchmarks of chapter 13, group "live_feed": a feed handler on loopback, both twins.

The sender is the exchange simulator, ``twinmatch feed send``, in its own process (so it
does not share the receiver's GIL); the receiver is a twin in this process; both are on
127.0.0.1, on a machine whose cores they share with everything else. What each number
includes:

* ``burst`` (speed 1, 10, 0 = flat out; 1% of packets dropped by the sender, seeded): the
  busiest second of the generated day's trading (from 09:30), renumbered from sequence 1.
  ``receiver drops``: messages the receiver's socket lost on its own (its gaps minus the
  sender's injected drops), all recovered by re-request like the injected ones.
  ``tail``: from the sender's first end-of-session packet to the receiver having every
  message in the book (what recovery still had to do when the feed went quiet).
  Latencies per data packet: ``socket->book`` from the kernel's receive timestamp
  (SO_TIMESTAMPNS), ``decode->book`` from the return of recvmsg/recvmmsg, both to the
  messages being in the book (book mode); a packet held back behind a gap waits for the
  gap's recovery, so the tail percentiles show recovery.
* ``flat_out`` (the native sender, ``optimized.feed.Sender``: every packet built first,
  then ``sendmmsg`` flat out from a thread that holds no GIL while it sends; no injected
  loss, no re-request server): the ``FLOW`` slice into the naive receiver and into the
  optimized one at recvmmsg batch sizes 1, 8, 64, 256. Packets/s and messages/s are what
  the receiver put in the book over its run (first datagram read to the end of session,
  which the sender repeats every 2 ms once the slice is out); ``receiver drops`` are the
  messages its socket lost (all given up: nothing re-requests them); the sender's own
  packets/s is recorded beside it, to show it outpaced the receiver.
* ``paired`` (targets ``live-feed-backlog-vs-naive``, ``live-feed-batch64-vs-1``): a
  receiver's own limit, without a sender's pace in it: the native sender fills the
  receiver's socket with ``BACKLOG`` messages and an end of session before it reads (untimed),
  then the receiver drains it; a side's time runs from its first datagram to the last
  message in the book. Interleaved pairs (tests/bench/paired.py): optimized (batch 64)
  vs naive, and optimized batch 64 vs batch 1.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.bench.conftest import SMALL
from tests.bench.paired import Side, paired
from twinmatch.feed_cli import message_offsets, native_sender, receiver_for

ROOT = Path(__file__).resolve().parents[2]
DAY = (200_000, 100) if SMALL else (5_000_000, 500)  # messages, symbols
FLOW = 10_000 if SMALL else 50_000  # messages of the flat-out slice
OPEN_NS = 34_200 * 10**9  # 09:30
SPEEDS = (1.0, 10.0, 0.0)
BATCHES = (1, 8, 64, 256)
BACKLOG = 5_000  # messages (about one a packet): fits a 4 MiB socket buffer with room
SESSION = "TWINMATCH1"
WORK = Path(tempfile.gettempdir())


@cache
def slices() -> tuple[bytes, bytes]:
    """(the busiest second of trading, the first FLOW messages from 09:30), framed ITCH."""
    from twinmatch.gen import market_day_bytes

    raw, _ = market_day_bytes(DAY[0], DAY[1], 1)
    offs = np.asarray(message_offsets(raw), dtype=np.int64)
    b = np.frombuffer(raw, dtype=np.uint8)
    stamps = np.zeros(len(offs) - 1, dtype=np.int64)  # each message's 6-byte timestamp
    for k in range(6):
        stamps = (stamps << 8) | b[offs[:-1] + 7 + k]
    trading = np.flatnonzero(stamps >= OPEN_NS)
    secs = stamps[trading] // 10**9
    values, counts = np.unique(secs, return_counts=True)
    busiest = values[counts.argmax()]
    idx = trading[secs == busiest]
    burst = raw[offs[idx[0]] : offs[idx[-1] + 1]]
    first = trading[0]
    flow = raw[offs[first] : offs[min(first + FLOW, len(offs) - 1)]]
    return burst, flow


def write(name: str, data: bytes) -> Path:
    path = WORK / f"twinmatch-bench-feed-{os.getpid()}-{name}.itch"
    path.write_bytes(data)
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_sender(path: Path, port: int, request_port: int, speed: float,
                 loss: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "twinmatch", "feed", "send", str(path), "--port", str(port),
         "--request-port", str(request_port), "--speed", str(speed), "--loss", str(loss),
         "--seed", "13", "--heartbeat-ms", "100", "--linger-ms", "500"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def one_run(impl: str, path: Path, speed: float, loss: float, **rx_kw: Any
            ) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """A receiver, then the sender process; (receiver report, sender stats, receiver)."""
    request_port = free_port()
    rx = receiver_for(impl, 0, request_port, idle_ns=10_000_000_000, **rx_kw)
    sender = start_sender(path, rx.port, request_port, speed, loss)
    try:
        rep = rx.run(120_000_000_000)
        out, _ = sender.communicate(timeout=60)
    finally:
        if sender.poll() is None:
            sender.kill()
            sender.wait(10)
        rx.close()
    return rep, json.loads(out.strip().splitlines()[-1]), rx


def messages_in(data: bytes) -> int:
    return len(message_offsets(data)) - 1


def summary(rep: dict[str, Any], sent: dict[str, Any], rx: Any) -> dict[str, Any]:
    s2b, d2b = rep["socket_to_book"], rep["decode_to_book"]
    return {
        "messages": rep["messages"], "packets": rep["data_packets"],
        "gaps": rep["gaps"], "gap_messages": rep["gap_messages"],
        "injected_drop_messages": sent["dropped_messages"],
        "receiver_drop_messages": rep["gap_messages"] - sent["dropped_messages"],
        "requests": rep["requests"], "recovered": rep["recovered"], "lost": rep["lost"],
        "tail_s": max(0, rx.stop_ns - sent["end_ns"]) / 1e9,
        "socket_to_book_ns": {k: s2b[k] for k in ("p50", "p99", "p99.9", "max")},
        "decode_to_book_ns": {k: d2b[k] for k in ("p50", "p99", "p99.9", "max")},
        "seconds": (rx.stop_ns - rx.first_ns) / 1e9,
    }


@pytest.mark.benchmark(group="live_feed")
@pytest.mark.parametrize("speed", SPEEDS)
@pytest.mark.parametrize("impl", ["naive", "optimized"])
def test_burst(benchmark: Any, impl: str, speed: float) -> None:
    burst, _ = slices()
    path = write(f"burst-{impl}-{speed}", burst)
    results: list[dict[str, Any]] = []

    def run() -> None:
        rep, sent, rx = one_run(impl, path, speed, 0.01)
        assert rep["stop"] == "end" and rep["lost"] == 0
        assert rep["messages"] == messages_in(burst)
        results.append(summary(rep, sent, rx))

    benchmark.pedantic(run, rounds=1, iterations=1)
    path.unlink(missing_ok=True)
    benchmark.extra_info.update({
        "ops": messages_in(burst), "speed": speed, "loss": 0.01, "feed": results[-1],
        "includes": "sender process -> loopback UDP -> receiver -> book mode; 1% injected "
                    "loss recovered by re-request; the run from receiver start to stop"})


def flat_out_run(impl: str, data: bytes, batch: int) -> dict[str, Any]:
    """The native sender flat out into a running receiver (no re-request server)."""
    kw: dict[str, Any] = {"batch": batch} if impl == "optimized" else {}
    rx = receiver_for(impl, 0, None, idle_ns=5_000_000_000, timeout_ns=5_000_000,
                      session=SESSION, **kw)
    tx = native_sender(data, rx.port)
    n = messages_in(data)
    stopped = threading.Event()
    sent: dict[str, float] = {}

    def send() -> None:
        time.sleep(0.05)  # the receiver is waiting in its loop by now
        t0 = time.perf_counter()
        sent["packets"] = tx.send(0, None, 64)
        sent["seconds"] = time.perf_counter() - t0
        for _ in range(30_000):  # end of session every 2 ms until the receiver stops
            tx.control(n + 1, end=True)
            if stopped.wait(0.002):
                return

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    try:
        rep = rx.run(60_000_000_000)
    finally:
        stopped.set()
        thread.join(10)
        rx.close()
    assert rep["stop"] == "end" and rep["messages"] + rep["lost"] == n
    seconds = (rx.stop_ns - rx.first_ns) / 1e9
    s2b, d2b = rep["socket_to_book"], rep["decode_to_book"]
    out = {
        "messages": rep["messages"], "packets": rep["data_packets"],
        "packets_per_s": rep["data_packets"] / seconds,
        "messages_per_s": rep["messages"] / seconds,
        "sender_packets_per_s": sent["packets"] / max(sent["seconds"], 1e-9),
        "gaps": rep["gaps"], "gap_messages": rep["gap_messages"],
        "injected_drop_messages": 0, "receiver_drop_messages": rep["lost"],
        "requests": rep["requests"], "recovered": rep["recovered"], "lost": rep["lost"],
        "seconds": seconds,
        "socket_to_book_ns": {k: s2b[k] for k in ("p50", "p99", "p99.9", "max")},
        "decode_to_book_ns": {k: d2b[k] for k in ("p50", "p99", "p99.9", "max")},
    }
    if impl == "optimized":
        out["datagrams_per_call"] = rep["packets"] / max(1, rx.batches)
    return out


FLAT_OUT = [("naive", 1)] + [("optimized", b) for b in BATCHES]


@pytest.mark.benchmark(group="live_feed")
@pytest.mark.parametrize(("impl", "batch"), FLAT_OUT, ids=[f"{i}-{b}" for i, b in FLAT_OUT])
def test_flat_out(benchmark: Any, impl: str, batch: int) -> None:
    _, flow = slices()
    results: list[dict[str, Any]] = []
    benchmark.pedantic(lambda: results.append(flat_out_run(impl, flow, batch)), rounds=1,
                       iterations=1)
    benchmark.extra_info.update({
        "ops": messages_in(flow), "batch": batch, "feed": results[-1],
        "includes": "native sender (sendmmsg, flat out) -> loopback UDP -> receiver -> book "
                    "mode; the receiver's own drops given up, not re-requested; first "
                    "datagram to the end of session"})


@cache
def backlog_slice() -> bytes:
    _, flow = slices()
    offs = message_offsets(flow)
    return flow[: offs[min(BACKLOG, len(offs) - 1)]]


def backlog_side(name: str, impl: str, batch: int) -> Side:
    """Fill a fresh receiver's socket (untimed), then time its drain of the backlog."""
    data = backlog_slice()
    n = messages_in(data)

    def setup() -> Any:
        kw: dict[str, Any] = {"batch": batch} if impl == "optimized" else {}
        rx = receiver_for(impl, 0, None, idle_ns=2_000_000_000, session=SESSION, **kw)
        tx = native_sender(data, rx.port)
        assert tx.send() == tx.packets
        tx.control(n + 1, end=True)
        return rx

    def run(rx: Any) -> float:
        rep = rx.run(60_000_000_000)
        rx.close()
        assert rep["stop"] == "end" and rep["messages"] == n and rep["gaps"] == 0, rep["stop"]
        return float((rx.stop_ns - rx.first_ns) / 1e9)

    return Side(name, run, ops=n, setup=setup)


@pytest.mark.benchmark(group="live_feed")
def test_paired_live_feed(benchmark: Any) -> None:
    n = messages_in(backlog_slice())
    paired(benchmark, "live-feed-backlog-vs-naive",
           backlog_side("optimized", "optimized", 64), backlog_side("naive", "naive", 1),
           pairs=11, warmup=1,
           includes="a backlog the native sender left in the receiver's socket, drained: "
                    "first datagram read to the last message in the book (book mode)",
           workload=f"{n} messages from 09:30 of a generated day, about one a packet")


@pytest.mark.benchmark(group="live_feed")
def test_paired_recvmmsg_batch(benchmark: Any) -> None:
    n = messages_in(backlog_slice())
    paired(benchmark, "live-feed-batch64-vs-1", backlog_side("batch-64", "optimized", 64),
           backlog_side("batch-1", "optimized", 1), pairs=11, warmup=1,
           includes="the optimized receiver draining the same backlog with recvmmsg "
                    "batches of 64 vs 1: first datagram read to the last message in the book",
           workload=f"{n} messages from 09:30 of a generated day, about one a packet")
