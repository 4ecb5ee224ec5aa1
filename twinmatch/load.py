"""``twinmatch load``: many SoupBinTCP/OUCH sessions against an order-entry server.

One thread drives every session through non-blocking sockets (``selectors``). Two modes:

* **closed loop**: each session keeps ``window`` requests outstanding and sends the next
  one when an answer comes back. Latency is measured from the actual send. When the server
  stalls, the client stops sending too, so the stall shows up as *one* slow sample: this
  mode understates the tail ("coordinated omission").
* **open loop**: requests go out on a fixed schedule (``rate`` per second over all
  sessions, round robin) whatever the answers do, and latency is measured from the
  **scheduled** send time. A request the client could not send on time because it was
  busy is still charged from its schedule, so a stall is counted for every request it
  delayed: coordinated omission corrected.

The order mix: Enter Orders (buys and sells around one price, so about half of them
trade), and a share of Cancels and Replaces of this session's own resting orders. The
"ack" of a request is the first message that names it: Accepted or Rejected for an
Enter, Canceled for a Cancel, Replaced for a Replace. What every number includes: both
processes, the loopback TCP stack and the kernel's scheduling on the machine's cores.

Two clients, one set of rules: ``client="python"`` is this module (the readable one),
``client="native"`` is ``native/load.hpp`` (the same loop in C++, GIL released), for when
the Python client, not the server, is what limits the acks per second. They take the same
arguments and return the same :class:`LoadResult`; each draws its own random stream from
``seed`` (the same shares and rules, not the same orders).
"""

from __future__ import annotations

import random
import selectors
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from contract import ouch
from contract import soupbin as sb

__all__ = ["CLIENTS", "LoadResult", "load_users", "run_load"]

CLIENTS = ("python", "native")
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9),
               ("p99.99", 99.99))


def load_users(n: int) -> dict[str, str]:
    """The users a server needs for ``n`` load sessions: L00001 ... with password LOAD."""
    return {f"L{i:05d}": "LOAD" for i in range(1, n + 1)}


@dataclass
class LoadResult:
    mode: str
    sessions: int
    sent: int
    acks: int
    seconds: float
    latencies_ns: np.ndarray
    unanswered: int
    late_sends: int = 0          # open loop: requests sent after their scheduled time
    # open loop: how late each request left its schedule (the client's own share)
    send_delays_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def acks_per_s(self) -> float:
        return self.acks / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        lat = self.latencies_ns
        out: dict[str, Any] = {"mode": self.mode, "sessions": self.sessions,
                               "sent": self.sent, "acks": self.acks,
                               "unanswered": self.unanswered, "late_sends": self.late_sends,
                               "seconds": round(self.seconds, 3),
                               "acks_per_s": round(self.acks_per_s, 1)}
        for name, p in PERCENTILES:
            out[f"{name}_us"] = (round(float(np.percentile(lat, p, method="inverted_cdf"))
                                       / 1000, 1) if len(lat) else None)
        out["max_us"] = round(float(lat.max()) / 1000, 1) if len(lat) else None
        delays = self.send_delays_ns
        for name, p in (("p50", 50.0), ("p99", 99.0)):
            out[f"send_delay_{name}_us"] = (
                round(float(np.percentile(delays, p, method="inverted_cdf")) / 1000, 1)
                if len(delays) else None)
        return out


_ENTER = ouch.ENTER
_PRICE = 1_000_000


@dataclass
class _Session:
    sock: socket.socket
    user: str
    framer: sb.Framer = field(default_factory=lambda: sb.Framer(70_000))
    urn: int = 0
    resting: list[tuple[int, bytes]] = field(default_factory=list)  # far orders live
    pending: dict[tuple[bytes, int], int] = field(default_factory=dict)  # -> start ns
    out: bytearray = field(default_factory=bytearray)
    logged_in: bool = False


def _request(s: _Session, rng: random.Random, cancel_share: float,
             replace_share: float) -> tuple[bytes, tuple[bytes, int]]:
    """The next request of the mix and the key its answer will carry.

    Half the Enter Orders cross (buys a little above the price, sells a little below: they
    trade with each other); the other half rest far away (buys 10% below, sells 10%
    above), where nothing ever reaches them: only those are canceled and replaced, so a
    Cancel or Replace always finds its order live and is always answered.
    """
    roll = rng.random()
    if s.resting and roll < cancel_share + replace_share:
        target, side = s.resting.pop(rng.randrange(len(s.resting)))
        if roll < cancel_share:
            return (sb.frame(sb.UNSEQUENCED, ouch.CANCEL.pack(b"X", target, 0, 0)),
                    (b"C", target))
        s.urn += 1
        msg = ouch.REPLACE.pack(b"U", target, s.urn, 100, _far(side, rng), b"0", b"Y", b"N",
                                b"LOAD".ljust(14), 0)
        s.resting.append((s.urn, side))
        return sb.frame(sb.UNSEQUENCED, msg), (b"U", s.urn)
    s.urn += 1
    side = b"B" if rng.random() < 0.5 else b"S"
    if rng.random() < 0.5:
        tick = 100 * rng.randrange(0, 4)
        price = _PRICE + tick if side == b"B" else _PRICE - tick
    else:
        price = _far(side, rng)
        s.resting.append((s.urn, side))
    msg = _ENTER.pack(b"O", s.urn, side, 100, b"AAPL    ", price, b"0", b"Y", b"A", b"N",
                      b"N", b"LOAD".ljust(14), 0)
    return sb.frame(sb.UNSEQUENCED, msg), (b"O", s.urn)


def _far(side: bytes, rng: random.Random) -> int:
    offset = _PRICE // 10 + 100 * rng.randrange(0, 8)
    return _PRICE - offset if side == b"B" else _PRICE + offset


def _await_logins(ss: list[_Session], sel: selectors.BaseSelector, deadline: float) -> None:
    """Read until every session has its Login Accepted (bounded by the deadline)."""
    while not all(s.logged_in for s in ss):
        if time.monotonic() > deadline:
            raise TimeoutError("load: the sessions did not all log in in time")
        for key, _ in sel.select(0.05):
            s = key.data
            data = s.sock.recv(1 << 16)
            if not data:
                raise ConnectionError(f"load: the server closed {s.user}'s session")
            for packet in s.framer.feed(data):
                if packet[:1] == b"A":
                    s.logged_in = True
                elif packet[:1] == b"J":
                    raise ConnectionError(f"load: login of {s.user} rejected: {packet!r}")


def _answer_key(msg: bytes) -> tuple[bytes, int] | None:
    """Which request an outbound OUCH message acknowledges, if any."""
    kind = msg[:1]
    if kind in (b"A", b"J"):
        return b"O", struct.unpack_from(">I", msg, 9)[0]
    if kind == b"C":
        return b"C", struct.unpack_from(">I", msg, 9)[0]
    if kind == b"U":
        return b"U", struct.unpack_from(">I", msg, 13)[0]
    return None


def _check(port: int, mode: str, sessions: int, requests: int, rate: float, window: int,
           cancel_share: float, replace_share: float, timeout: float, first_user: int,
           client: str) -> None:
    """The arguments both clients refuse, with the same ValueError (native/load.hpp's
    ``check`` holds the same limits)."""
    if client not in CLIENTS:
        raise ValueError("client must be 'python' or 'native'")
    if mode not in ("closed", "open"):
        raise ValueError("mode must be 'closed' or 'open'")
    if sessions < 1 or requests < 1 or window < 1 or not rate > 0:
        raise ValueError("sessions, requests, window and rate must be positive")
    if not 1e-3 <= rate <= 1e9:
        raise ValueError("rate: 0.001 .. 1e9 requests per second")
    if requests > 10_000_000:
        raise ValueError("requests: at most 10,000,000")
    if sessions > 1024:
        raise ValueError("sessions: at most 1024")
    if not (cancel_share >= 0 and replace_share >= 0 and cancel_share + replace_share <= 1):
        raise ValueError("cancel_share and replace_share: 0 or more, at most 1 together")
    if not 0 < timeout <= 1e6:
        raise ValueError("timeout: more than 0, at most 1e6 seconds")
    if first_user < 1 or first_user + sessions - 1 > 99_999:
        raise ValueError("first_user: the users L00001..L99999")
    if not 0 < port < 65536:
        raise ValueError("port: 1..65535")


def run_load(port: int, sessions: int = 4, requests: int = 10_000, mode: str = "closed",
             rate: float = 10_000.0, window: int = 1, cancel_share: float = 0.1,
             replace_share: float = 0.05, seed: int = 1, timeout: float = 60.0,
             first_user: int = 1, pace: bool = False, client: str = "python") -> LoadResult:
    """Send ``requests`` in all over ``sessions`` sessions; every wait bounded by timeout.

    ``pace`` (closed loop): also hold each request until its place in the ``rate``
    schedule, so both modes offer the same rate; latency still runs from the actual send.
    ``client``: "python" (this module) or "native" (native/load.hpp, same semantics).
    Errors: ConnectionError (refused, the server closed a session, a login rejected),
    TimeoutError (the logins did not all complete in time); a run that times out after
    the logins returns what it has, the rest counted as ``unanswered``.
    """
    _check(port, mode, sessions, requests, rate, window, cancel_share, replace_share, timeout,
           first_user, client)
    if client == "native":
        return _run_native(port, sessions, requests, mode, rate, window, cancel_share,
                           replace_share, seed, timeout, first_user, pace)
    rng = random.Random(seed)
    sel = selectors.DefaultSelector()
    ss: list[_Session] = []
    for i in range(sessions):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        user = f"L{first_user + i:05d}"
        sock.sendall(sb.login_request(user, "LOAD", seq=0))
        sock.setblocking(False)
        s = _Session(sock, user)
        ss.append(s)
        sel.register(sock, selectors.EVENT_READ, s)
    latencies: list[int] = []
    delays: list[int] = []       # open loop: now - scheduled, per request
    sent = acks = late = 0
    deadline = time.monotonic() + timeout
    _await_logins(ss, sel, deadline)   # the schedule starts when every session is in
    t0 = time.perf_counter_ns()
    interval = 1e9 / rate
    next_index = 0           # open loop: the next scheduled request

    def send(s: _Session, start_ns: int) -> None:
        nonlocal sent
        data, key = _request(s, rng, cancel_share, replace_share)
        s.pending[key] = start_ns
        s.out += data
        sent += 1

    while True:
        now = time.perf_counter_ns()
        if time.monotonic() > deadline:
            break
        # --8<-- [start:schedule]
        if mode == "closed":
            for s in ss:
                while (s.logged_in and sent < requests and len(s.pending) < window
                       and (not pace or t0 + sent * interval <= now)):
                    send(s, now)
        else:
            while sent < requests and t0 + next_index * interval <= now:
                s = ss[next_index % sessions]
                scheduled = t0 + int(next_index * interval)
                if not s.logged_in:
                    break
                if now - scheduled > 1_000_000:
                    late += 1
                delays.append(max(0, now - scheduled))
                send(s, scheduled)       # charged from its schedule, not from now
                next_index += 1
        # --8<-- [end:schedule]
        for s in ss:
            if s.out:
                try:
                    n = s.sock.send(s.out)
                    del s.out[:n]
                except BlockingIOError:
                    pass
        if (mode == "open" or pace) and sent < requests:
            # epoll waits in whole milliseconds: within 1 ms of the next send, poll
            # without waiting (a busy loop), so no request goes out late by the rounding.
            due = next_index if mode == "open" else sent
            wait = (t0 + due * interval - time.perf_counter_ns()) / 1e9
            wait = 0.0 if wait < 0.001 else wait - 0.001
        else:
            wait = 0.01
        for key_, _ in sel.select(min(wait, 0.01)):
            s = key_.data
            try:
                data = s.sock.recv(1 << 18)
            except BlockingIOError:
                continue
            if not data:
                raise ConnectionError(f"load: the server closed {s.user}'s session")
            got = time.perf_counter_ns()
            for packet in s.framer.feed(data):
                kind = packet[:1]
                if kind == b"S":
                    k = _answer_key(packet[1:])
                    if k is not None:
                        start = s.pending.pop(k, None)
                        if start is not None:
                            latencies.append(got - start)
                            acks += 1
                elif kind == b"A":
                    s.logged_in = True
                elif kind == b"J":
                    raise ConnectionError(f"load: login of {s.user} rejected: {packet!r}")
        if sent >= requests and all(not s.pending for s in ss):
            break
    seconds = (time.perf_counter_ns() - t0) / 1e9
    unanswered = sum(len(s.pending) for s in ss)
    for s in ss:
        try:
            s.sock.setblocking(True)
            s.sock.settimeout(1)
            s.sock.sendall(sb.frame(sb.LOGOUT_REQUEST))
        except OSError:
            pass
        s.sock.close()
    sel.close()
    return LoadResult(mode, sessions, sent, acks, seconds,
                      np.asarray(latencies, dtype=np.int64), unanswered, late,
                      np.asarray(delays, dtype=np.int64))



def _run_native(port: int, sessions: int, requests: int, mode: str, rate: float,
                window: int, cancel_share: float, replace_share: float, seed: int,
                timeout: float, first_user: int, pace: bool) -> LoadResult:
    """run_load through the C++ client (imported here: the Python one needs no build)."""
    from optimized import _native

    sent, acks, seconds, unanswered, late, latencies, delays = _native.run_load_native(
        port, sessions, requests, mode == "open", rate, window, cancel_share, replace_share,
        seed % (1 << 64), timeout, first_user, pace)
    return LoadResult(mode, sessions, sent, acks, seconds,
                      np.asarray(latencies, dtype=np.int64), unanswered, late,
                      np.asarray(delays, dtype=np.int64))
