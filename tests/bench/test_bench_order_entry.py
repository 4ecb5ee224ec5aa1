"""Benchmarks of chapter 12, group "order_entry": the two order-entry servers under load.

Each server runs in a process of its own (``twinmatch serve --impl ...``), the load
client (``twinmatch.load``, one thread) in the pytest process. There are two clients with
the same semantics: the Python one (twinmatch/load.py) and the native one
(native/load.hpp, GIL released). What every number includes: both processes on the
machine's cores (the machine label says how many), the loopback TCP stack and the kernel
in between, the client's own work (building and parsing every message), and the
server's: framing, OUCH, the matching engine, the sequenced log. It is not the engine
alone (chapters 5 and 6 measure that).

* ``saturation``: closed loop, SESSIONS sessions, WINDOW requests outstanding each: as
  fast as the server (or the client) can go. The rate is acks per second. Parametrized by
  client: the native rows drive each server with the faster client; the Python rows show
  where the Python client's own limit lies (a client slower than the server caps the rate).
* ``latency`` (the Python client): the order-to-ack latency at a fixed offered RATE,
  below either server's saturation, in both modes: open loop (fixed schedule, latency
  from the scheduled send: coordinated omission corrected) and closed loop (the same
  schedule, but one request outstanding per session and latency from the actual send: a
  stall delays the requests behind it, and they are timed from when they finally went
  out). Each also runs with
  the server process frozen (SIGSTOP) for STALL_MS a third of the way in: the open loop
  charges the stall to every request it delayed, the closed loop to a handful. Percentiles
  in extra_info["latency"].
* ``latency_native``: the same order-to-ack latency through the native client, open
  loop (coordinated omission corrected), at several offered rates up to and past the
  optimized server's saturation: where the Python client measured itself, this one
  shows the server's curve. Percentiles and late sends in extra_info["latency"].
* ``witness_under_flood``: one session streams Enter Orders as fast as a thread can
  write them (numpy-built, 20,000 a write) while a witness session sends WITNESS_RATE
  requests/s open loop through the native client: the witness's ack percentiles under
  the flood. The optimized row is the target "order-entry-witness-p99-under-flood"
  (extra_info["measure"], microseconds; scripts/targets.py).
* ``paired``: the chapter's target, optimized vs naive server acks/s at saturation,
  interleaved (tests/bench/paired.py), both driven by the native client, the same for
  both sides: the ratio is the servers' as far as that client keeps up with the faster
  one (the saturation rows of the two clients show how much a slower client takes off).
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.bench.conftest import SMALL
from tests.bench.paired import Side, paired
from twinmatch.load import LoadResult, run_load

SESSIONS = 4
WINDOW = 32
SAT_REQUESTS = 2_000 if SMALL else 50_000
RATE = 2_000.0
LAT_REQUESTS = 1_000 if SMALL else 6_000
STALL_MS = 50
USERS = 400
IMPLS = ("naive", "optimized")
CLIENTS = ("native", "python")
SAT_CLIENT = "native"      # the paired target's client, the same for both servers

NATIVE_RATES = (1_000.0, 10_000.0, 50_000.0, 200_000.0)
NATIVE_REQUESTS = 2_000 if SMALL else 20_000
WITNESS_RATE = 1_000.0
WITNESS_REQUESTS = 500 if SMALL else 3_000

INCLUDES = {
    "saturation": f"closed loop, {SESSIONS} sessions x {WINDOW} outstanding, the native "
                  "load client (native/load.hpp) unless the row says client=python; client "
                  "and server processes, loopback TCP, kernel; Enter/Cancel/Replace mix",
    "latency": f"order-to-ack at {RATE:,.0f} requests/s offered, {SESSIONS} sessions, the "
               "Python load client; client and server processes, loopback TCP, kernel",
    "latency_native": f"order-to-ack, open loop, {SESSIONS} sessions, the native load "
                      "client; client and server processes, loopback TCP, kernel",
    "witness": f"a witness session's order-to-ack, open loop at {WITNESS_RATE:,.0f}/s "
               "through the native client, while another session floods the same server "
               "(a Python writer thread, numpy-built orders); all processes, loopback TCP",
}


class Served:
    """One server process and the next unused load users (each run logs in fresh ones)."""

    def __init__(self, impl: str, *extra: str) -> None:
        self.impl = impl
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "twinmatch", "serve", "--impl", impl, "--load-users",
             str(USERS), *extra], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "127.0.0.1:" not in line:
            self.proc.kill()
            raise RuntimeError(f"twinmatch serve --impl {impl} did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])
        self._users = itertools.count(1, SESSIONS)

    def load(self, **kw: Any) -> LoadResult:
        first = next(self._users)
        if first + SESSIONS - 1 > USERS:
            raise RuntimeError("out of load users: raise USERS")
        result = run_load(self.port, sessions=SESSIONS, first_user=first, timeout=120, **kw)
        assert result.unanswered == 0 and result.acks == result.sent
        return result

    def close(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Served]]:
    started = {impl: Served(impl) for impl in IMPLS}
    yield started
    for s in started.values():
        s.close()


def saturate(s: Served, client: str = SAT_CLIENT) -> float:
    """Seconds for SAT_REQUESTS requests at saturation (the client's own clock)."""
    return s.load(requests=SAT_REQUESTS, mode="closed", window=WINDOW, client=client).seconds


@pytest.mark.benchmark(group="order_entry")
@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("impl", IMPLS)
def test_saturation(benchmark: Any, servers: dict[str, Served], impl: str,
                    client: str) -> None:
    s = servers[impl]
    benchmark.extra_info.update({"ops": SAT_REQUESTS, "includes": INCLUDES["saturation"],
                                 "workload": "saturation", "client": client})
    benchmark.pedantic(lambda: saturate(s, client), rounds=2 if SMALL else 3, iterations=1,
                       warmup_rounds=0)


def stall(proc: subprocess.Popen[str], after_s: float, ms: int) -> threading.Thread:
    """Freeze the server process (SIGSTOP) for ``ms`` after ``after_s`` seconds: a
    stand-in for a garbage collection, a page fault storm, a descheduled thread."""
    def run() -> None:
        time.sleep(after_s)
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            time.sleep(ms / 1000)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.benchmark(group="order_entry")
@pytest.mark.parametrize("stall_ms", [0, STALL_MS])
@pytest.mark.parametrize("mode", ["open", "closed"])
@pytest.mark.parametrize("impl", IMPLS)
def test_latency(benchmark: Any, servers: dict[str, Served], impl: str, mode: str,
                 stall_ms: int) -> None:
    s = servers[impl]
    results: list[LoadResult] = []

    def run() -> None:
        staller = stall(s.proc, LAT_REQUESTS / RATE / 3, stall_ms) if stall_ms else None
        try:
            results.append(s.load(requests=LAT_REQUESTS, mode=mode, rate=RATE, window=1,
                                  pace=True))
        finally:
            if staller is not None:
                staller.join(10)

    benchmark.pedantic(run, rounds=1, iterations=1, warmup_rounds=0)
    summary = {**results[-1].summary(), "stall_ms": stall_ms}
    benchmark.extra_info.update({"ops": LAT_REQUESTS, "includes": INCLUDES["latency"],
                                 "workload": f"latency-{mode}-stall-{stall_ms}",
                                 "latency": summary})


@pytest.mark.benchmark(group="order_entry")
def test_paired_order_entry(benchmark: Any, servers: dict[str, Served]) -> None:
    def side(impl: str) -> Side:
        served = servers[impl]

        def run(_state: Any) -> float:
            return saturate(served)

        return Side(f"{impl} server", run, ops=SAT_REQUESTS)

    fast, slow = side("optimized"), side("naive")
    paired(benchmark, "order-entry-vs-naive", fast, slow, pairs=11, warmup=1,
           includes=INCLUDES["saturation"],
           workload=f"saturation, {SAT_REQUESTS} requests per side, the {SAT_CLIENT} "
                    "load client for both")


@pytest.mark.benchmark(group="order_entry")
@pytest.mark.parametrize("rate", NATIVE_RATES)
@pytest.mark.parametrize("impl", IMPLS)
def test_latency_native(benchmark: Any, servers: dict[str, Served], impl: str,
                        rate: float) -> None:
    """Open loop through the native client at one offered rate: past a server's
    saturation the queue (and the corrected latency) grows for as long as the run lasts,
    which is what open loop is for. The naive server skips the rates it cannot reach."""
    if impl == "naive" and rate > 10_000:
        pytest.skip("the naive server saturates far below this rate (see saturation)")
    import tempfile

    import numpy as np

    results: list[LoadResult] = []
    with tempfile.TemporaryDirectory() as tmp:
        timings = Path(tmp) / "server.npy"
        s = Served(impl, "--timings-out", str(timings))   # its own: only this run's reads
        try:
            def run() -> None:
                results.append(run_load(s.port, sessions=SESSIONS, first_user=1,
                                        timeout=120, requests=NATIVE_REQUESTS, mode="open",
                                        rate=rate, client="native"))

            benchmark.pedantic(run, rounds=1, iterations=1, warmup_rounds=0)
        finally:
            s.close()
        server_ns = np.load(timings)
    summary = {**results[-1].summary(), "stall_ms": 0, "client": "native", "rate": rate}
    # The server's share, from its own clock: read of a request to the send of its first
    # answer (one per read). The rest of the client's number is the client and the kernel.
    for name, q in (("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9)):
        summary[f"server_{name}_us"] = (round(float(np.percentile(server_ns, q)) / 1000, 1)
                                        if len(server_ns) else None)
    summary["server_samples"] = int(len(server_ns))
    benchmark.extra_info.update({"ops": NATIVE_REQUESTS, "includes": INCLUDES["latency_native"],
                                 "workload": f"latency-native-open-{rate:.0f}",
                                 "latency_native": summary})


class Flood:
    """One session that streams Enter Orders (pairs that trade, fresh UserRefNums) as
    fast as a thread can write them, and a second thread that reads its answers."""

    def __init__(self, port: int, user: str) -> None:
        import socket

        import numpy as np

        from contract import soupbin as sb
        from tests.entry_client import enter

        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.sendall(sb.login_request(user, "LOAD", seq=0))
        framer = sb.Framer(70_000)
        packets: list[bytes] = []
        while not packets:
            packets = framer.feed(self.sock.recv(4096))
        if packets[0][:1] != b"A":
            raise RuntimeError(f"flood login rejected: {packets[0]!r}")
        self.n = 20_000
        self.orders = np.empty((self.n, 50), dtype=np.uint8)
        self.orders[0::2] = np.frombuffer(enter(0, b"B", 100, 1_000_000), dtype=np.uint8)
        self.orders[1::2] = np.frombuffer(enter(0, b"S", 100, 1_000_000), dtype=np.uint8)
        self.sent = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=f, daemon=True)
                        for f in (self._pump, self._drain)]
        for t in self.threads:
            t.start()

    def _pump(self) -> None:
        import numpy as np
        while not self.stop.is_set():
            urns = np.arange(self.sent + 1, self.sent + self.n + 1, dtype=">u4")
            self.orders[:, 4:8] = urns.view(np.uint8).reshape(self.n, 4)
            try:
                self.sock.sendall(self.orders.tobytes())
            except OSError:
                return
            self.sent += self.n

    def _drain(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                if not self.sock.recv(1 << 20):
                    return
            except TimeoutError:
                continue
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()              # unblocks a sendall the server no longer reads
        for t in self.threads:
            t.join(10)


@pytest.mark.benchmark(group="order_entry")
@pytest.mark.parametrize("impl", IMPLS)
def test_witness_under_flood(benchmark: Any, servers: dict[str, Served], impl: str) -> None:
    s = servers[impl]
    results: list[LoadResult] = []
    flooded: list[int] = []

    def run() -> None:
        first = next(s._users)
        flood = Flood(s.port, f"L{first:05d}")
        try:
            end = time.monotonic() + 10
            while flood.sent < 4 * flood.n and time.monotonic() < end:
                time.sleep(0.01)               # the flood is on before the witness starts
            before = flood.sent
            results.append(run_load(s.port, sessions=1, first_user=first + 1, timeout=120,
                                    requests=WITNESS_REQUESTS, mode="open",
                                    rate=WITNESS_RATE, client="native"))
            flooded.append(flood.sent - before)
        finally:
            flood.close()

    benchmark.pedantic(run, rounds=1, iterations=1, warmup_rounds=0)
    r = results[-1]
    assert r.unanswered == 0 and flooded[-1] > 0, "the flood stopped before the witness"
    summary = {**r.summary(), "flood_orders_during": flooded[-1]}
    benchmark.extra_info.update({"ops": WITNESS_REQUESTS, "includes": INCLUDES["witness"],
                                 "workload": "witness-under-flood", "witness": summary})
    if impl == "optimized":
        benchmark.extra_info["measure"] = {
            "key": "order-entry-witness-p99-under-flood", "value": summary["p99_us"],
            "unit": "us", "detail": f"{WITNESS_REQUESTS:,} witness requests at "
                                    f"{WITNESS_RATE:,.0f}/s, open loop, native client; "
                                    f"{flooded[-1]:,} flood orders written meanwhile"}
