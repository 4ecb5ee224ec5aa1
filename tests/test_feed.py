"""Chapter 13: the live feed. Sender -> receiver on 127.0.0.1, both receiver twins.

Every wait is bounded: receivers run with ``max_ns`` and ``idle_ns``, sender threads are
joined with a timeout and stopped by an event. The rules under test are contract/feed.py's.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contract.feed import (
    MAX_DATAGRAM,
    MAX_HOLD,
    MAX_JUMP,
    MAX_PENDING,
    RESYNC_PACKETS,
    STAT_KEYS,
)
from twinmatch import feed_cli
from twinmatch.feed_cli import Exchange, message_offsets, receiver_for, start_exchange

TWINS = ("naive", "optimized")
SESSION = b"TWINMATCH1"
MAX_NS = 20_000_000_000  # no receiver in this file runs longer than this


@cache
def day(messages: int = 6000, symbols: int = 20, seed: int = 7) -> tuple[bytes, str]:
    from twinmatch.gen import market_day_bytes

    raw, books = market_day_bytes(messages, symbols, seed)
    return raw, books.decode()


def file_replay(twin: str, raw: bytes) -> str:
    """The same day replayed from the file (memory) by the same twin's market."""
    if twin == "naive":
        from naive import itch
        from naive.market import Market as NaiveMarket

        n = NaiveMarket("book")
        n.run(itch.decode(raw)[0])
        return n.books_csv()
    from optimized.market import Market as OptMarket

    o = OptMarket("book")
    o.run_itch(raw)
    return o.books_csv()


def messages_of(raw: bytes) -> list[bytes]:
    offs = message_offsets(raw)
    return [raw[a + 2 : b] for a, b in zip(offs, offs[1:], strict=False)]


def packet(seq: int, msgs: list[bytes], session: bytes = SESSION) -> bytes:
    body = b"".join(struct.pack(">H", len(m)) + m for m in msgs)
    return session + struct.pack(">QH", seq, len(msgs)) + body


def heartbeat(seq: int, end: bool = False) -> bytes:
    return SESSION + struct.pack(">QH", seq, 0xFFFF if end else 0)


def run_pair(twin: str, raw: bytes, rx_kw: dict[str, Any] | None = None,
             before: Callable[[int], None] | None = None,
             **ex_kw: Any) -> tuple[dict[str, Any], dict[str, int], Any]:
    """An exchange thread and a receiver on loopback; (receiver report, exchange stats, rx).
    ``before(port)`` runs once the receiver listens, before the exchange exists."""
    rx_kw = dict(rx_kw or {})
    no_server = rx_kw.pop("no_server", False)
    rx = receiver_for(twin, 0, None, **rx_kw)
    if before is not None:
        before(rx.port)
    ex_kw.setdefault("linger_ns", 300_000_000)
    ex_kw.setdefault("heartbeat_ns", 100_000_000)
    ex = Exchange(raw, rx.port, 0, **ex_kw)
    if not no_server:
        rx.set_request_port(ex.request_port)
    thread, stop, result = start_exchange(ex)
    try:
        rep = rx.run(MAX_NS)
    finally:
        stop.set()
        thread.join(10)
        ex.close()
        rx.close()
    assert not thread.is_alive()
    return rep, result[0], rx


@pytest.mark.parametrize("twin", TWINS)
def test_one_percent_loss_recovers_everything_books_equal_file_replay(twin: str) -> None:
    raw, books = day()
    rep, sent, rx = run_pair(twin, raw, loss=0.01, seed=3)
    n = len(message_offsets(raw)) - 1
    assert sent["dropped"] > 0
    assert rep["stop"] == "end"
    assert rep["messages"] == n
    assert rep["lost"] == 0 and rep["missing"] == 0
    assert rep["recovered"] == rep["gap_messages"] > 0
    assert rep["requests"] > 0
    assert rx.market.books_csv() == file_replay(twin, raw) == books


@pytest.mark.parametrize("twin", TWINS)
def test_duplicates_and_reordering_on_the_wire(twin: str) -> None:
    raw, books = day()
    rep, sent, rx = run_pair(twin, raw, duplicate=0.05, reorder=0.05, seed=11)
    assert sent["duplicated"] > 0 and sent["reordered"] > 0
    assert rep["stop"] == "end" and rep["lost"] == 0
    assert rep["duplicate_packets"] >= sent["duplicated"]
    assert rx.market.books_csv() == books


def direct(twin: str, **kw: Any) -> Any:
    """A receiver fed by hand (on_packet), its socket unused."""
    return receiver_for(twin, 0, None, **kw)


def books_after(twin: str, msgs: list[bytes]) -> str:
    return file_replay(twin, b"".join(struct.pack(">H", len(m)) + m for m in msgs))


@pytest.mark.parametrize("twin", TWINS)
def test_held_back_overlap_and_duplicate_packets_by_hand(twin: str) -> None:
    msgs = messages_of(day()[0])[:12]
    rx = direct(twin)
    for p in (packet(1, msgs[0:2]), packet(1, msgs[0:2]),    # a duplicate
              packet(5, msgs[4:6]), packet(3, msgs[2:4]),    # 5 before 3: held back
              packet(2, msgs[1:7]),                          # overlaps everything so far
              packet(8, msgs[7:12])):
        rx.on_packet(p, 0, 0)
    s = rx.stats
    assert s["messages"] == 12 and s["next_seq"] == 13
    assert s["buffered"] == 1 and s["gaps"] == 1 and s["gap_messages"] == 2
    assert s["duplicate_packets"] == 1  # the copy of 1
    assert s["duplicate_messages"] == 2 + 5  # ... and the first 5 of packet 2's 6
    assert rx.report()["recovered"] == 2
    assert rx.market.books_csv() == books_after(twin, msgs)
    rx.close()


@pytest.mark.parametrize("twin", TWINS)
def test_end_of_session_with_a_gap_and_no_server_loses_exactly_that_gap(twin: str) -> None:
    msgs = messages_of(day()[0])[:10]
    rx = direct(twin, timeout_ns=1_000_000, idle_ns=5_000_000_000)
    rx.on_packet(packet(1, msgs[0:3]), 0, 0)
    rx.on_packet(packet(6, msgs[5:10]), 0, 0)
    rx.on_packet(heartbeat(11, end=True), 0, 0)
    assert not rx.done()
    rx.check_gap(time.time_ns())
    rx.check_gap(time.time_ns() + 10_000_000)  # past the timeout: given up
    assert rx.done()
    rep = rx.report()
    assert rep["lost"] == 2 and rep["messages"] == 8 and rep["missing"] == 0
    assert rep["gaps"] == 1 and rep["recovered"] == 0 and rep["requests"] == 0
    rx.close()


@pytest.mark.parametrize("twin", TWINS)
def test_end_of_session_ends_the_run(twin: str) -> None:
    raw = b"".join(struct.pack(">H", len(m)) + m for m in messages_of(day()[0])[:50])
    t0 = time.monotonic()
    rep, _, _ = run_pair(twin, raw, rx_kw={"idle_ns": 10_000_000_000})
    assert rep["stop"] == "end" and rep["messages"] == 50 and rep["end_of_session"] >= 1
    assert time.monotonic() - t0 < 9  # ended by the packet, not by the 10 s idle timeout


def send_heartbeats(port: int, n: int, gap_s: float, end: bool) -> threading.Thread:
    def go() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _ in range(n):
                s.sendto(heartbeat(1), ("127.0.0.1", port))
                time.sleep(gap_s)
            if end:
                s.sendto(heartbeat(1, end=True), ("127.0.0.1", port))
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("twin", TWINS)
def test_heartbeats_keep_the_receiver_alive(twin: str) -> None:
    # The session is configured: a heartbeat of an unknown session would prove nothing.
    rx = receiver_for(twin, 0, None, idle_ns=300_000_000, session=SESSION)
    t = send_heartbeats(rx.port, 12, 0.05, end=True)  # 0.6 s of heartbeats > 0.3 s idle
    rep = rx.run(MAX_NS)
    t.join(5)
    assert rep["stop"] == "end" and rep["heartbeats"] == 12
    rx.close()


@pytest.mark.parametrize("twin", TWINS)
def test_silence_ends_the_run_as_idle(twin: str) -> None:
    rx = receiver_for(twin, 0, None, idle_ns=200_000_000, session=SESSION)
    t = send_heartbeats(rx.port, 2, 0.01, end=False)
    rep = rx.run(MAX_NS)
    t.join(5)
    assert rep["stop"] == "idle" and rep["heartbeats"] == 2
    rx.close()


@pytest.mark.parametrize("twin", TWINS)
def test_late_receiver_recovers_from_the_rerequest_server(twin: str) -> None:
    raw, books = day()
    rep, sent, rx = run_pair(twin, raw, skip_first=200)  # it joins after 200 packets
    assert rep["gaps"] >= 1 and rep["lost"] == 0 and rep["missing"] == 0
    assert rep["recovered"] == rep["gap_messages"] >= 200
    assert rx.market.books_csv() == books


@pytest.mark.parametrize("twin", TWINS)
def test_late_receiver_without_a_server_reports_exactly_what_it_lost(twin: str) -> None:
    raw, _ = day()
    ex = Exchange(raw, 1, 0)  # only for its packing: where packet 200 starts
    first_seen = ex.packets[200][0] + 1
    ex.close()
    rep, _, rx = run_pair(twin, raw, rx_kw={"no_server": True, "timeout_ns": 20_000_000},
                          skip_first=200)
    n = len(message_offsets(raw)) - 1
    # At least the 200 packets never sent; more if packets that came while it waited for
    # them overflowed the held-back pool (each of those is a gap of its own, also lost).
    assert rep["lost"] == rep["gap_messages"] >= first_seen - 1
    assert rep["messages"] == n - rep["lost"] and rep["requests"] == 0 and rep["missing"] == 0
    if rep["overflow"] == 0:
        assert rep["lost"] == first_seen - 1
    assert rep["stop"] == "end"


def hostile_packets() -> list[bytes]:
    msgs = messages_of(day()[0])[:3]
    good = packet(1, msgs[:1])
    return [
        b"",                                       # empty datagram
        good[:19],                                 # truncated header
        SESSION + struct.pack(">QH", 1, 5),        # count beyond the payload: no blocks
        good[:-1],                                 # the message's length runs past the end
        SESSION + struct.pack(">QH", 1, 1) + b"\xff\xff" + b"x" * 10,  # length past the end
        packet(0, msgs[:1]),                       # sequence 0
        packet(2**64 - 1, msgs[:2]),               # last sequence past 2**64 - 1
        packet(2**64 - 1, msgs[:1]),               # next sequence past 2**64 - 1
        good,                                      # the one good packet
        packet(2, msgs[1:2], session=b"OTHERSESS1"),  # another session
        SESSION + struct.pack(">QH", 2, 1) + b"\x00\x00",  # framed, but ITCH length 0
        SESSION + struct.pack(">QH", 3, 2) + struct.pack(">H", 3) + b"A\x00\x01"
        + struct.pack(">H", len(msgs[2])) + msgs[2],  # a bad ITCH length, then a good one
    ]


@pytest.mark.parametrize("twin", TWINS)
def test_hostile_packets_are_counted_never_crash(twin: str) -> None:
    rx = direct(twin)
    for p in hostile_packets():
        rx.on_packet(p, 0, 0)
    s = rx.stats
    assert s["packets"] == 12
    assert s["not_moldudp64"] == 2 and s["bad_moldudp64"] == 6 and s["wrong_session"] == 1
    assert s["data_packets"] == 3 and s["bad_itch"] == 2 and s["next_seq"] == 5
    rx.close()


def test_hostile_packets_counted_alike_by_both_twins() -> None:
    reports = []
    for twin in TWINS:
        rx = direct(twin)
        for p in hostile_packets():
            rx.on_packet(p, 0, 0)
        reports.append((rx.stats, rx.market.books_csv()))
        rx.close()
    assert reports[0] == reports[1]


@pytest.mark.parametrize("twin", TWINS)
def test_oversized_datagram_is_truncated_and_counted(twin: str) -> None:
    rx = receiver_for(twin, 0, None, idle_ns=200_000_000, session=SESSION)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"\x00" * (MAX_DATAGRAM + 100), ("127.0.0.1", rx.port))
        s.sendto(heartbeat(1, end=True), ("127.0.0.1", rx.port))
    rep = rx.run(MAX_NS)
    assert rep["truncated"] == 1 and rep["packets"] == 2 and rep["stop"] == "end"
    rx.close()


# Differential: random arrivals (drops, copies, swaps, heartbeats) through both twins.
@st.composite
def arrivals(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    n = draw(st.integers(1, 30))
    out: list[tuple[str, int, int]] = []
    seq = 1
    while seq <= n:
        count = draw(st.integers(1, 4))
        out.append(("data", seq, min(count, n - seq + 1)))
        seq += count
    ops = draw(st.lists(st.tuples(st.sampled_from(["drop", "dup", "swap", "hb", "tick"]),
                                  st.integers(0, 40)), max_size=12))
    for op, i in ops:
        if not out:
            break
        i %= len(out)
        if op == "drop":
            out.pop(i)
        elif op == "dup":
            out.insert(i, out[i])
        elif op == "swap" and i + 1 < len(out):
            out[i], out[i + 1] = out[i + 1], out[i]
        elif op == "hb":
            out.insert(i, ("hb", draw(st.integers(1, n + 1)), 0))
        else:
            out.insert(i, ("tick", 0, 0))
    out.append(("end", n + 1, 0))
    return out


@settings(max_examples=40, deadline=None)
@given(arrivals())
def test_twins_agree_on_random_arrivals(plan: list[tuple[str, int, int]]) -> None:
    check_twins_agree(plan, {})


@settings(max_examples=40, deadline=None)
@given(arrivals(), st.integers(1, 3), st.integers(1, 12))
def test_twins_agree_with_a_tiny_hold_and_max_jump(plan: list[tuple[str, int, int]],
                                                   hold: int, max_jump: int) -> None:
    """The same, where the hold overflows (and gives runs up) and jumps are suspect."""
    check_twins_agree(plan, {"hold": hold, "max_jump": max_jump, "session": SESSION})


def check_twins_agree(plan: list[tuple[str, int, int]], kw: dict[str, Any]) -> None:
    msgs = messages_of(day()[0])[:40]
    results = []
    for twin in TWINS:
        rx = direct(twin, timeout_ns=10, retries=1, **kw)
        now = 1_000
        for kind, seq, count in plan:
            if kind == "data":  # received "now": a full hold may give a run up
                rx.on_packet(packet(seq, msgs[seq - 1 : seq - 1 + count]), now, 0)
            elif kind in ("hb", "end"):
                rx.on_packet(heartbeat(seq, end=kind == "end"), 0, 0)
            else:
                now += 100  # past every request's deadline
                rx.check_gap(now)
        for _ in range(4):
            now += 100
            rx.check_gap(now)
        rep = rx.report()
        for key in ("socket_to_book", "decode_to_book", "second_socket_to_book",
                    "second_decode_to_book"):
            rep[key] = rep[key]["count"]  # packets timed: equal; the times are the clock's
        results.append((rep, rx.done(), rx.market.books_csv()))
        rx.close()
    assert results[0] == results[1]
    rep = results[0][0]
    assert rep["recovered"] + rep["lost"] + rep["missing"] == rep["gap_messages"]


def test_the_contract_matches_the_extension() -> None:
    from naive import pcap
    from optimized import _native

    assert _native.FEED_MAX_DATAGRAM == MAX_DATAGRAM
    assert _native.FEED_MAX_PENDING == MAX_PENDING
    assert _native.FEED_MAX_HOLD == MAX_HOLD and _native.FEED_MAX_JUMP == MAX_JUMP
    assert _native.FEED_RESYNC_PACKETS == RESYNC_PACKETS
    assert len(direct("optimized")._r.stats()) == len(STAT_KEYS) - 1  # bad_itch: Python's
    assert feed_cli.MOLD_HEADER_LEN == pcap.MOLD_HEADER_LEN
    assert feed_cli.END_OF_SESSION == pcap.END_OF_SESSION
    assert feed_cli.heartbeat(SESSION, 9) == pcap.moldudp64_heartbeat(SESSION, 9)


def test_raw_receiver_refuses_to_overfill_its_delivery_buffer() -> None:
    msgs = messages_of(day()[0])[:1]
    rx = direct("optimized")
    with pytest.raises(RuntimeError, match="take"):
        for seq in range(1, 10_000):  # never take()n: the buffer fills, then it refuses
            rx._r.on_packet(np.frombuffer(packet(seq, msgs), dtype=np.uint8), 0, 0)
    rx._r.take()
    rx.on_packet(packet(10_000, msgs), 0, 0)  # fine again once emptied
    rx.close()


def test_sockets_refuse_other_addresses() -> None:
    from contract.feed import check_host

    with pytest.raises(ValueError, match="127.0.0.1 only"):
        check_host("10.0.0.1")


def test_rerequest_server_answers_and_refuses() -> None:
    raw, _ = day()
    ex = Exchange(raw, 1, 0)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        s.settimeout(5)
        ex.answer(SESSION + struct.pack(">QH", 10, 1000), s.getsockname())
        reply = s.recv(65536)
        seq, count = struct.unpack_from(">QH", reply, 10)
        assert seq == 10 and 1 <= count < 1000 and len(reply) <= 1400  # what fits
        assert reply[20:] == raw[ex.offsets[9] : ex.offsets[9 + count]]
        for bad in (SESSION + struct.pack(">QH", 0, 1), SESSION + struct.pack(">QH", 1, 0),
                    b"OTHERSESS1" + struct.pack(">QH", 1, 1), b"short"):
            ex.answer(bad, s.getsockname())
    assert ex.stats["bad_requests"] == 4 and ex.stats["replies"] == 1
    ex.close()


def test_cli_send_and_recv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from twinmatch.cli import main

    raw = b"".join(struct.pack(">H", len(m)) + m for m in messages_of(day()[0])[:300])
    (tmp_path / "d.itch").write_bytes(raw)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # two free ports
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        rport = probe.getsockname()[1]
    done: list[int] = []
    recv = threading.Thread(target=lambda: done.append(main(
        ["feed", "recv", "--port", str(port), "--request-port", str(rport), "--max-seconds",
         "15", "--idle-ms", "3000", "--books", str(tmp_path / "b.csv")])), daemon=True)
    recv.start()
    time.sleep(0.3)
    assert main(["feed", "send", str(tmp_path / "d.itch"), "--port", str(port),
                 "--request-port", str(rport), "--speed", "0", "--loss", "0.05",
                 "--linger-ms", "300"]) == 0
    recv.join(20)
    assert done == [0]
    assert (tmp_path / "b.csv").read_text() == file_replay("optimized", raw)
    err = capsys.readouterr().err
    assert "msgs" in err and "socket->book p50" in err  # the per-second report line


def test_cli_rerequest(capsys: pytest.CaptureFixture[str]) -> None:
    from twinmatch.cli import main

    raw, _ = day()
    ex = Exchange(raw, 1, 0)
    thread = threading.Thread(target=ex.serve, args=(5.0,), daemon=True)
    thread.start()
    assert main(["feed", "rerequest", "--request-port", str(ex.request_port), "--seq", "3",
                 "--count", "2"]) == 0
    thread.join(10)
    ex.close()
    assert '"seq": 3, "count": 2' in capsys.readouterr().out


# Multicast, only inside a network namespace this test makes (loopback only).
def netns_problem() -> str | None:
    if sys.platform != "linux":
        return "network namespaces are Linux only"
    if shutil.which("ip") is None:
        return "no `ip` command"
    if os.geteuid() != 0:
        return "making a network namespace needs root"
    return None


@pytest.fixture
def netns() -> Iterator[str]:
    problem = netns_problem()
    if problem:
        pytest.skip(f"multicast test skipped: {problem}")
    name = f"twinmatch-{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True,
                          timeout=10)
    if made.returncode != 0:
        pytest.skip(f"multicast test skipped: `ip netns add` failed: {made.stderr.strip()}")
    try:
        for cmd in (["ip", "link", "set", "lo", "up"],
                    ["ip", "link", "set", "lo", "multicast", "on"],
                    ["ip", "route", "add", "224.0.0.0/4", "dev", "lo"]):
            r = subprocess.run(["ip", "netns", "exec", name, *cmd], capture_output=True,
                               text=True, timeout=10)
            if r.returncode != 0:
                pytest.skip(f"multicast test skipped: {' '.join(cmd)}: {r.stderr.strip()}")
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=10)


def test_multicast_inside_a_private_network_namespace(netns: str) -> None:
    root = str(Path(__file__).resolve().parent.parent)
    code = (f"import sys; sys.path[:0] = [{root!r}]\n"
            "from twinmatch.feed_cli import multicast_roundtrip\n"
            "print(multicast_roundtrip())\n")
    r = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", code],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("ok"), r.stdout


@pytest.mark.timeout(300)
def test_feed_core_under_address_and_ub_sanitizers(tmp_path: Path) -> None:
    """native/feed.hpp's rules on random and hostile datagrams, compiled with
    -fsanitize=address,undefined (tests/native/feed_stress.cpp): no undefined behaviour,
    no read or write out of bounds, the counts' invariant after every datagram."""
    root = Path(__file__).resolve().parent.parent
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found: cannot build the sanitized feed stress")
    exe = tmp_path / "feed_stress"
    built = subprocess.run([gxx, "-std=c++20", "-O1", "-g", "-fsanitize=address,undefined",
                            "-fno-sanitize-recover=undefined", "-I", str(root / "native"),
                            str(root / "tests" / "native" / "feed_stress.cpp"), "-o", str(exe)],
                           capture_output=True, text=True, timeout=180)
    if built.returncode != 0:
        pytest.skip(f"g++ cannot build with the sanitizers here: {built.stderr[-300:]}")
    run = subprocess.run([str(exe), "20000"], capture_output=True, text=True, timeout=240,
                         env={"ASAN_OPTIONS": "detect_leaks=0",
                              "UBSAN_OPTIONS": "print_stacktrace=1"})
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    assert "feed stress: 20000 datagrams x 3 seeds" in run.stdout


def test_optimized_spin_and_busy_poll_options_receive_the_same() -> None:
    raw = b"".join(struct.pack(">H", len(m)) + m for m in messages_of(day()[0])[:300])
    rep, _, rx = run_pair("optimized", raw, rx_kw={"spin": True, "busy_poll_us": 50,
                                                   "batch": 8}, loss=0.05, seed=2)
    assert rep["stop"] == "end" and rep["messages"] == 300 and rep["lost"] == 0
    assert rx.busy_poll_error >= 0  # 0: set; else the errno of the refusal (reported)
    assert rx.batches >= 1


def test_optimized_loop_takes_deliveries_before_checking_gaps() -> None:
    """The receive loop hands poll()'s delivery to the market before check_gap() runs:
    check_gap may deliver held packets and refuses while the buffer is still full
    (a flat-out run with recvmmsg batches of 8 hit it)."""
    import inspect

    import optimized.feed

    src = inspect.getsource(optimized.feed.Receiver.run)
    poll, first, gap = (src.index("self._r.poll("), src.index("self._deliver()"),
                        src.index("self._r.check_gap("))
    assert poll < first < gap


# Issue 30: a stray datagram must not lock the receiver into the wrong session.
def other(seq: int, count: int = 0) -> bytes:
    """A control packet (heartbeat, or end of session with count 0xFFFF) of another session."""
    return b"OTHERSESS1" + struct.pack(">QH", seq, count)


def feed_day(rx: Any, msgs: list[bytes], per: int = 3) -> None:
    """Hand the receiver msgs in packets of `per`, then end of session."""
    for i in range(0, len(msgs), per):
        rx.on_packet(packet(i + 1, msgs[i : i + per]), 0, 0)
    rx.on_packet(heartbeat(len(msgs) + 1, end=True), 0, 0)


@pytest.mark.parametrize("twin", TWINS)
@pytest.mark.parametrize("stray", ["end", "heartbeat"])
def test_a_stray_control_packet_of_another_session_is_not_adopted(twin: str,
                                                                  stray: str) -> None:
    msgs = messages_of(day()[0])[:30]
    rx = direct(twin)
    rx.on_packet(other(1, 0xFFFF if stray == "end" else 0), 0, 0)
    assert not rx.done()  # an end of session of nobody's feed ends nothing
    feed_day(rx, msgs)
    s = rx.stats
    assert rx.done() and s["messages"] == 30 and s["wrong_session"] == 0
    assert s["unsynced"] == 1 and s["end_of_session"] == 1
    assert rx.market.books_csv() == books_after(twin, msgs)
    rx.close()


@pytest.mark.parametrize("twin", TWINS)
def test_a_configured_session_rejects_every_other_session(twin: str) -> None:
    msgs = messages_of(day()[0])[:30]
    rx = direct(twin, session="TWINMATCH1")
    rx.on_packet(packet(1, msgs[:5], session=b"OTHERSESS1"), 0, 0)  # stray data, first
    rx.on_packet(other(99, 0xFFFF), 0, 0)
    feed_day(rx, msgs)
    s = rx.stats
    assert rx.done() and s["messages"] == 30 and s["wrong_session"] == 2
    assert s["unsynced"] == 0
    assert rx.market.books_csv() == books_after(twin, msgs)
    rx.close()


def test_a_session_name_is_checked() -> None:
    for twin in TWINS:
        with pytest.raises(ValueError, match="session"):
            direct(twin, session="ELEVENCHARS")


@pytest.mark.parametrize("twin", TWINS)
def test_a_stray_end_of_session_sent_before_the_sender_starts(twin: str) -> None:
    """The issue's run: one stray end of session, then the real day over loopback."""
    raw, books = day()

    def stray(port: int) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(other(1, 0xFFFF), ("127.0.0.1", port))

    rep, _, rx = run_pair(twin, raw, before=stray)
    assert rep["messages"] == len(message_offsets(raw)) - 1
    assert rep["stop"] == "end" and rep["lost"] == 0 and rep["unsynced"] == 1
    assert rx.market.books_csv() == books


# Issue 30: one lost packet must cost only its own messages when re-requests go unanswered.
class Mute:
    """A re-request server that never answers: a bound socket nobody reads."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]


@pytest.mark.parametrize("twin", TWINS)
def test_a_full_hold_gives_up_the_gap_and_delivers_what_it_held(twin: str) -> None:
    msgs = messages_of(day()[0])[:3000]
    mute = Mute()
    rx = direct(twin)
    rx.set_request_port(mute.port)
    now = 1_000_000
    for i in range(0, 3000, 2):
        if i != 18:  # packet 10 (messages 19 and 20) never arrives
            rx.on_packet(packet(i + 1, msgs[i : i + 2]), now, now)
        now += 100_000  # 100 µs a packet: the 1,024 held fill in ~100 ms, 2 timeouts
        rx.check_gap(now)
    rx.on_packet(heartbeat(3001, end=True), 0, 0)
    for _ in range(30):
        now += 60_000_000
        rx.check_gap(now)
    rep = rx.report()
    assert rx.done() and rep["lost"] == 2 and rep["messages"] == 2998
    assert rep["gap_messages"] == 2 and rep["overflow"] >= 1 and rep["missing"] == 0
    assert rx.market.books_csv() == books_after(twin, msgs[:18] + msgs[20:])
    rx.close()
    mute.sock.close()


@pytest.mark.parametrize("twin", TWINS)
@pytest.mark.parametrize("answer", ["never", "garbage"])
def test_unanswered_rerequests_lose_only_what_was_lost(twin: str, answer: str) -> None:
    raw, _ = day()
    # The hold sized by chapter 13's rule: the socket's backlog when the gap is seen (up
    # to a full buffer, ~7,000 packets here) + the sender's rate x one 5 ms timeout.
    rep, sent, rx = run_pair(twin, raw, {"timeout_ns": 5_000_000, "hold": 8192},
                             drop=frozenset({10}), answer=answer)
    n = len(message_offsets(raw)) - 1
    assert sent["dropped"] == 1 and sent["requests"] >= 1
    assert rep["lost"] == sent["dropped_messages"]
    assert rep["messages"] == n - rep["lost"] and rep["stop"] == "end"
    if answer == "garbage":
        assert rep["not_moldudp64"] + rep["bad_moldudp64"] + rep["wrong_session"] >= 3


# Issue 30: a lying sequence number must not write off the rest of the day.
@pytest.mark.parametrize("twin", TWINS)
@pytest.mark.parametrize("lie", ["heartbeat", "data"])
def test_an_implausible_jump_is_suspect_not_believed(twin: str, lie: str) -> None:
    msgs = messages_of(day()[0])[:40]
    mute = Mute()
    rx = direct(twin, timeout_ns=1_000_000, retries=2)
    rx.set_request_port(mute.port)
    for i in range(20):
        rx.on_packet(packet(i + 1, msgs[i : i + 1]), 0, 0)
    rx.on_packet(heartbeat(2**63) if lie == "heartbeat" else packet(2**62, msgs[:1]), 0, 0)
    now = 1_000_000
    for _ in range(10):  # long enough to give up any gap it believed in
        now += 2_000_000
        rx.check_gap(now)
    for i in range(20, 40):
        rx.on_packet(packet(i + 1, msgs[i : i + 1]), 0, 0)
    rx.on_packet(heartbeat(41, end=True), 0, 0)
    rep = rx.report()
    assert rep["messages"] == 40 and rep["lost"] == 0 and rep["suspect"] == 1
    assert rx.done() and rep["gap_messages"] == 0 and rep["requests"] == 0
    assert rx.market.books_csv() == books_after(twin, msgs)
    rx.close()
    mute.sock.close()


@pytest.mark.parametrize("twin", TWINS)
def test_a_long_jump_is_believed_after_packets_that_continue_each_other(twin: str) -> None:
    msgs = messages_of(day()[0])[:12]
    rx = direct(twin, max_jump=100, timeout_ns=1_000_000)
    for i in range(5):
        rx.on_packet(packet(i + 1, msgs[i : i + 1]), 0, 0)
    for k in range(3):  # a real feed 1,000 ahead (this receiver fell far behind)
        rx.on_packet(packet(1000 + 2 * k, msgs[5 + 2 * k : 7 + 2 * k]), 0, 0)
    s = rx.stats
    assert s["suspect"] == 2 and s["buffered"] == 1  # the third is believed, held back
    assert s["gaps"] == 1 and s["gap_messages"] == 1004 - 6
    assert rx.report()["missing"] == 1004 - 6
    rx.close()


@pytest.mark.parametrize("twin", TWINS)
def test_native_sender_delivers_the_day_in_order(twin: str) -> None:
    raw = b"".join(struct.pack(">H", len(m)) + m for m in messages_of(day()[0])[:500])
    rx = receiver_for(twin, 0, None, idle_ns=2_000_000_000, session=SESSION)
    tx = feed_cli.native_sender(raw, rx.port)
    assert tx.send(0, None, 8) == tx.packets > 0  # into the socket before it reads
    tx.control(501, end=True)
    rep = rx.run(MAX_NS)
    rx.close()
    assert rep["stop"] == "end" and rep["messages"] == 500 and rep["gaps"] == 0
    assert rx.market.books_csv() == file_replay(twin, raw)
    with pytest.raises(ValueError, match="port"):
        feed_cli.native_sender(raw, 0)


def test_hold_for_follows_the_chapter_rule() -> None:
    # backlog + rate x timeout, within [MAX_PENDING, MAX_HOLD]
    assert feed_cli.hold_for(100_000, 50_000_000, 3000) == 3000 + 5000
    assert feed_cli.hold_for(10, 50_000_000, 0) == MAX_PENDING
    assert feed_cli.hold_for(10**7, 50_000_000, 0) == MAX_HOLD
    for twin in TWINS:
        with pytest.raises(ValueError, match="hold"):
            direct(twin, hold=MAX_HOLD + 1)


def test_extreme_timestamps_are_handled_alike() -> None:
    """Any int64 the API is given (no overflow in C++, the same answers as Python)."""
    msgs = messages_of(day()[0])[:6]
    out = []
    for twin in TWINS:
        rx = direct(twin, hold=1, timeout_ns=5)
        for now in (2**63 - 1, -(2**63)):
            rx.on_packet(packet(1, msgs[:1]), 0, 0)
            rx.on_packet(packet(3, msgs[2:3]), now, now)
            rx.check_gap(now)
            rx.on_packet(packet(5, msgs[4:5]), -now - 1, 0)  # finds the hold full
        out.append(dict(rx.stats))
        rx.close()
    assert out[0] == out[1] and out[0]["overflow"] >= 1


@pytest.mark.parametrize("twin", TWINS)
@pytest.mark.parametrize("kw", [{"hold": 0}, {"hold": MAX_HOLD + 1}, {"hold": -1},
                                {"max_jump": 0}, {"max_jump": 2**64}, {"max_jump": -5}],
                         ids=["hold-0", "hold-too-big", "hold-negative", "jump-0",
                              "jump-2^64", "jump-negative"])
def test_hold_and_max_jump_out_of_range_are_refused(twin: str, kw: dict[str, int]) -> None:
    """The receiver's new limits: a value out of range is a ValueError naming the field,
    the same in both twins, and no socket is left open behind it."""
    name = next(iter(kw))
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(ValueError, match=name):
        receiver_for(twin, 0, None, **kw)
    assert len(os.listdir("/proc/self/fd")) == before
