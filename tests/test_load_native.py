"""The native load client (native/load.hpp, ``run_load(client="native")``), chapter 12.

Against both servers (in this process, as tests/test_entry.py starts them) and in both
modes it must get every ack; bad arguments are the Python client's ValueErrors; a port
nobody listens on, a rejected login and a server that closes the session are clear
errors, never a hang. No timed assertion: only counts, and the order of percentiles.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.test_entry import Running, config
from twinmatch.load import load_users, run_load

IMPLS = ("naive", "optimized")


@pytest.fixture(params=IMPLS)
def served(request: pytest.FixtureRequest) -> Iterator[Running]:
    """A server of this impl with 12 load users, stopped at the end of the test."""
    r = Running(str(request.param), config(users=load_users(12), clock="wall"))
    yield r
    r.stop()


def _check_result(r: Any, requests: int) -> None:
    s = r.summary()
    assert r.sent == requests and r.acks == requests and r.unanswered == 0, s
    assert r.latencies_ns.dtype == np.int64 and len(r.latencies_ns) == requests
    assert (r.latencies_ns >= 0).all()
    assert s["p50_us"] <= s["p99.99_us"] <= s["max_us"], s


def test_native_client_gets_every_ack(served: Running) -> None:
    closed = run_load(served.port, sessions=3, requests=600, mode="closed", window=8,
                      timeout=30, client="native", first_user=1)
    _check_result(closed, 600)
    assert closed.mode == "closed" and closed.late_sends == 0
    opened = run_load(served.port, sessions=3, requests=300, mode="open", rate=3000,
                      timeout=30, client="native", first_user=4)
    _check_result(opened, 300)
    paced = run_load(served.port, sessions=2, requests=200, mode="closed", rate=4000,
                     pace=True, timeout=30, client="native", first_user=7, seed=7)
    _check_result(paced, 200)
    # Cancels and Replaces only: after the first Enter of each session, every request
    # takes one of its resting orders, and each of them is answered too.
    mixed = run_load(served.port, sessions=2, requests=400, mode="closed", window=4,
                     cancel_share=0.3, replace_share=0.6, timeout=30, client="native",
                     first_user=9)
    _check_result(mixed, 400)
    stats = served.stats()
    assert stats["messages_in"] == 600 + 300 + 200 + 400
    assert stats["logins"] == 10 and stats["logouts"] <= 10
    assert stats["ignored"] == 0 and stats["rejected"] == 0


def test_the_two_clients_send_the_same_mix(served: Running) -> None:
    """Not the same orders (each client has its own random stream), the same shares:
    every request answered, and the server sees the same number of messages."""
    before = served.stats()["messages_in"]
    py = run_load(served.port, sessions=2, requests=300, window=4, timeout=30,
                  client="python", first_user=1)
    native = run_load(served.port, sessions=2, requests=300, window=4, timeout=30,
                      client="native", first_user=3)
    assert py.acks == native.acks == 300
    assert served.stats()["messages_in"] - before == 600


@pytest.mark.parametrize("kw", [
    {"mode": "sideways"}, {"sessions": 0}, {"requests": 0}, {"window": 0}, {"rate": 0},
    {"rate": float("nan")}, {"cancel_share": -0.1}, {"cancel_share": 0.7, "replace_share": 0.4},
    {"timeout": 0}, {"first_user": 0}, {"first_user": 99_999, "sessions": 2},
    {"requests": 10_000_001}, {"sessions": 1025}, {"port": 0}, {"port": 65536},
    {"client": "rust"},
])
@pytest.mark.parametrize("client", ["python", "native"])
def test_bad_arguments_are_refused_by_both_clients(client: str, kw: dict[str, Any]) -> None:
    args: dict[str, Any] = {"port": 1, "timeout": 5, "client": client, **kw}
    with pytest.raises(ValueError):
        run_load(**args)


@pytest.mark.parametrize(("kw", "words"), [
    ({"sessions": 0}, "positive"), ({"sessions": 1025}, "sessions"), ({"window": 0}, "positive"),
    ({"requests": 10_000_001}, "requests"), ({"rate": float("nan")}, "rate"),
    ({"rate": 1e10}, "rate"), ({"cancel_share": -0.1}, "share"), ({"timeout": 0.0}, "timeout"),
    ({"timeout": float("inf")}, "timeout"), ({"first_user": 0}, "first_user"),
    ({"port": 0}, "port"), ({"port": 70_000}, "port"),
])
def test_native_binding_checks_its_arguments_itself(kw: dict[str, Any], words: str) -> None:
    """The C++ side holds the same limits when called directly (no socket is opened)."""
    from optimized import _native
    args: dict[str, Any] = {"port": 1, "sessions": 1, "requests": 10, "open": False,
                            "rate": 1000.0, "window": 1, "cancel_share": 0.1,
                            "replace_share": 0.05, "seed": 1, "timeout": 5.0,
                            "first_user": 1, "pace": False, **kw}
    with pytest.raises(ValueError, match=words):
        _native.run_load_native(**args)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_refused_connection_is_a_clear_error() -> None:
    port = _free_port()        # nobody listens there any more
    with pytest.raises(ConnectionError, match=f"127.0.0.1:{port}"):
        run_load(port, sessions=2, requests=10, timeout=5, client="native")


def test_a_rejected_login_is_a_clear_error(served: Running) -> None:
    # L00013 is not one of the server's 12 load users.
    with pytest.raises(ConnectionError, match="login of L00013 rejected"):
        run_load(served.port, sessions=1, requests=10, timeout=10, client="native",
                 first_user=13)


def test_a_server_that_closes_the_session_is_a_clear_error() -> None:
    """A listener that accepts, reads the Login Request and closes: no hang."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    lsock.settimeout(10)

    def serve() -> None:
        try:
            conn, _ = lsock.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(64)
            except OSError:
                pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        with pytest.raises(ConnectionError, match="closed L00001's session"):
            run_load(lsock.getsockname()[1], sessions=1, requests=10, timeout=10,
                     client="native")
    finally:
        t.join(10)
        lsock.close()


def test_logins_that_never_come_are_a_timeout() -> None:
    """A listener that accepts and never answers: TimeoutError after `timeout`."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)            # the kernel completes the connection; nobody accepts it
    try:
        with pytest.raises(TimeoutError, match="log in"):
            run_load(lsock.getsockname()[1], sessions=2, requests=10, timeout=0.5,
                     client="native")
    finally:
        lsock.close()


def test_the_command_line_takes_the_client(served: Running,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from twinmatch.cli import main
    for first, client in ((1, "native"), (3, "python")):
        code = main(["load", "--port", str(served.port), "--sessions", "2", "--requests",
                     "100", "--window", "4", "--first-user", str(first), "--client", client,
                     "--json", "--timeout", "30"])
        assert code == 0
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert summary["acks"] == 100 and summary["unanswered"] == 0


def _fake_exchange(lsock: socket.socket, answers: list[int], cut: bool = True,
                   delay: float = 0.0, accepted: threading.Event | None = None) -> None:
    """One session of a minimal exchange. With ``cut``, its answers arrive cut into pieces
    of 1 to 7 bytes (each its own send, some after a pause): the client's framer must put
    them together wherever they are cut. Each answer is sent twice: only the first is an
    ack. ``delay``: seconds before each answer; ``accepted`` is set once it has its
    connection."""
    import contextlib
    import itertools
    import struct
    import time

    from contract import soupbin as sb

    conn, _ = lsock.accept()
    if accepted is not None:
        accepted.set()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.settimeout(10)
    pieces = itertools.cycle((1, 2, 7, 3, 5, 1, 1, 4) if cut else (1 << 16,))
    framer = sb.Framer()

    def send_cut(data: bytes) -> None:
        time.sleep(delay)
        at = 0
        while at < len(data):
            n = next(pieces)
            conn.sendall(data[at:at + n])
            at += n
            if n == 1:
                time.sleep(0.0005)

    with conn, contextlib.suppress(OSError):   # the client may close before the last
        while True:
            data = conn.recv(4096)
            if not data:
                return
            for p in framer.feed(data):
                if p[:1] == b"L":
                    send_cut(sb.login_accepted(b"1", 1))
                elif p[:1] == b"O":
                    return
                elif p[:1] == b"U":
                    msg, ts = p[1:], struct.pack(">Q", 0)
                    if msg[:1] == b"O":        # Accepted: type, timestamp, UserRefNum ...
                        out = b"A" + ts + msg[1:5] + bytes(51)
                    elif msg[:1] == b"X":      # Canceled: type, timestamp, UserRefNum ...
                        out = b"C" + ts + msg[1:5] + bytes(5)
                    else:                      # Replaced: ..., Orig, new UserRefNum ...
                        out = b"U" + ts + msg[1:5] + msg[5:9] + bytes(51)
                    answers.append(len(out))
                    send_cut(sb.frame(b"S", out) + sb.frame(b"S", out))  # a duplicate


def test_the_framer_takes_packets_cut_anywhere() -> None:
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    lsock.settimeout(10)
    answers: list[int] = []
    t = threading.Thread(target=_fake_exchange, args=(lsock, answers), daemon=True)
    t.start()
    try:
        r = run_load(lsock.getsockname()[1], sessions=1, requests=60, window=3,
                     cancel_share=0.3, replace_share=0.3, timeout=20, client="native")
    finally:
        t.join(10)
        lsock.close()
    assert r.acks == r.sent == 60 and r.unanswered == 0
    assert len(answers) == 60 and {18, 64, 68} <= set(answers)   # all three kinds


def test_ctrl_c_stops_a_native_run() -> None:
    """The run holds no GIL, yet Ctrl-C (SIGINT) ends it at once, not at its timeout:
    `twinmatch load --client native` against a listener that never answers the login."""
    import signal
    import subprocess
    import sys

    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    lsock.settimeout(60)
    proc = subprocess.Popen(
        [sys.executable, "-m", "twinmatch", "load", "--port", str(lsock.getsockname()[1]),
         "--sessions", "1", "--client", "native", "--timeout", "300"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        conn, _ = lsock.accept()      # the client is connected: inside the native run
        with conn:
            conn.settimeout(30)
            assert conn.recv(64)      # its Login Request, never answered
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        lsock.close()
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, err[-500:]


def test_a_session_that_gets_more_than_its_share() -> None:
    """The closed loop does not deal evenly: here one session's exchange answers at once
    and the other's after 20 ms, so the first sends nearly every request, far past the
    even share its tables were sized for (they grow), and every ack still counts."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(2)
    lsock.settimeout(10)
    fast: list[int] = []
    slow: list[int] = []
    got_first = threading.Event()
    first = threading.Thread(target=_fake_exchange, args=(lsock, fast, False, 0.0, got_first),
                             daemon=True)
    second = threading.Thread(target=_fake_exchange, args=(lsock, slow, False, 0.02),
                              daemon=True)
    result: list[Any] = []
    client = threading.Thread(target=lambda: result.append(run_load(
        lsock.getsockname()[1], sessions=2, requests=600, window=1, cancel_share=0.2,
        replace_share=0.2, timeout=30, client="native")), daemon=True)
    first.start()              # it accepts the first connection, L00001's, then the
    client.start()             # second thread the second one
    try:
        assert got_first.wait(10)
        second.start()
        client.join(30)
    finally:
        first.join(10)
        second.join(10)
        lsock.close()
    assert result and result[0].acks == result[0].sent == 600, result
    share = 600 // 2 + 2 + 1   # what native/load.hpp sizes each session's tables for
    assert len(fast) > share and len(fast) + len(slow) == 600, (len(fast), len(slow))


@pytest.mark.parametrize("client", ["python", "native"])
def test_open_loop_reports_the_clients_own_delay(served: Running, client: str) -> None:
    """Open loop: one send delay per request (schedule to the turn that sent it), the
    client's own share of each latency; the closed loop has none."""
    opened = run_load(served.port, sessions=2, requests=200, mode="open", rate=2000,
                      timeout=30, client=client, first_user=1)
    assert len(opened.send_delays_ns) == 200 and (opened.send_delays_ns >= 0).all()
    s = opened.summary()
    assert s["send_delay_p50_us"] is not None
    assert s["send_delay_p50_us"] <= s["send_delay_p99_us"]
    closed = run_load(served.port, sessions=2, requests=50, mode="closed", window=2,
                      timeout=30, client=client, first_user=3)
    assert len(closed.send_delays_ns) == 0 and closed.summary()["send_delay_p50_us"] is None
