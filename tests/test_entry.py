"""Chapter 12: the order-entry servers (SoupBinTCP + OUCH 5.0), both twins, on 127.0.0.1.

Every wait is bounded (socket timeouts, polled stats with deadlines); the timers are set
short in the configurations below so a timeout test takes a fraction of a second.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from contract import ouch
from contract import soupbin as sb
from contract.soupbin import STAT_KEYS, EntryConfig
from tests.conftest import SHARED
from tests.entry_client import (
    Client,
    cancel,
    enter,
    mass_cancel,
    modify,
    replace,
    wait_stat,
)

IMPLS = ("naive", "optimized")
SPEC_TABLE = SHARED / "spec" / "ouch50_table.py"
GOLDEN = Path(__file__).parent / "data" / "entry"


def server_class(impl: str) -> Any:
    if impl == "naive":
        from naive.entry import Server
        return Server
    from optimized.entry import Server as OptimizedServer
    return OptimizedServer


def config(**kw: Any) -> EntryConfig:
    base: dict[str, Any] = {"clock": "fixed", "heartbeat_ms": 60_000,
                            "idle_timeout_ms": 60_000, "login_timeout_ms": 60_000}
    base.update(kw)
    return EntryConfig(**base)


@pytest.fixture(params=IMPLS)
def impl(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Running:
    def __init__(self, impl: str, cfg: EntryConfig) -> None:
        self.server = server_class(impl)(cfg)
        self.port = self.server.start()
        self.clients: list[Client] = []

    def client(self) -> Client:
        c = Client(self.port)
        self.clients.append(c)
        return c

    def stats(self) -> dict[str, int]:
        stats: dict[str, int] = self.server.stats()
        return stats

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        self.server.stop()


@pytest.fixture
def run(impl: str) -> Iterator[Any]:
    """run(**config) -> a started server of this impl, stopped at the end of the test."""
    started: list[Running] = []

    def make(**kw: Any) -> Running:
        r = Running(impl, config(**kw))
        started.append(r)
        return r

    yield make
    for r in started:
        r.stop()


# ------------------------------------------------------------ layouts and vectors

def _spec() -> ModuleType:
    if not SPEC_TABLE.exists():
        pytest.skip(f"the spec table is not here: {SPEC_TABLE}")
    spec = importlib.util.spec_from_file_location("ouch50_table", SPEC_TABLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ouch_layouts_match_the_spec_table() -> None:
    t = _spec()
    assert t._selfcheck()
    ours = {("in", "O"): ouch.ENTER, ("in", "U"): ouch.REPLACE, ("in", "X"): ouch.CANCEL,
            ("in", "M"): ouch.MODIFY, ("in", "C"): ouch.MASS_CANCEL,
            ("out", "S"): ouch.SYSTEM_EVENT, ("out", "A"): ouch.ACCEPTED,
            ("out", "U"): ouch.REPLACED, ("out", "E"): ouch.EXECUTED,
            ("out", "X"): ouch.MASS_CANCEL_RESPONSE}
    for (direction, kind), layout in ours.items():
        assert layout.format == t.struct_fmt(direction, kind), (direction, kind)
    # the optional-appendage messages this server sends bare (no Appendage Length)
    bare = {"C": ouch.CANCELED, "J": ouch.REJECTED, "M": ouch.MODIFIED}
    for kind, layout in bare.items():
        assert layout.format + "H" == t.struct_fmt("out", kind), kind
        assert t.OUCH50_OUTBOUND[kind]["min_length"] == layout.size
    for letter, (fixed, no_block) in ouch.INBOUND_SIZES.items():
        m = t.OUCH50_INBOUND[letter.decode()]
        assert fixed == m["length"]
        assert no_block == (m["min_length"] if m["appendage"] == "optional" else None)
    for code in (ouch.REJECT_INVALID_DISPLAY, ouch.REJECT_ISO_NOT_ALLOWED,
                 ouch.REJECT_INVALID_SIDE, ouch.REJECT_INVALID_QUANTITY,
                 ouch.REJECT_INVALID_CROSS, ouch.REJECT_INVALID_SYMBOL,
                 ouch.REJECT_INVALID_PRICE, ouch.REJECT_OTHER):
        assert code in t.REJECT_REASONS
    assert ouch.PRICE_MAX == t.PRICE_MAX and ouch.PRICE_MARKET_CROSS == t.PRICE_MARKET_CROSS


def test_soupbin_layouts_match_the_spec_table() -> None:
    t = _spec()
    assert t.SOUPBINTCP["L"]["packet_length"] == sb.LOGIN_LENGTH
    assert t.SOUPBINTCP_410_LOGIN_REQUEST["packet_length"] == sb.LOGIN_410_LENGTH
    assert t.SOUPBINTCP["A"]["packet_length"] == sb.ACCEPTED_LENGTH
    assert set(t.LOGIN_REJECT_CODES) == {"A", "S"}
    assert t.soup_frame(b"R") == sb.frame(sb.CLIENT_HEARTBEAT)


def test_spec_vectors() -> None:
    """order-entry.md §5: the framed Enter Order, and the session vectors."""
    fixed = ouch.ENTER.pack(b"O", 1, b"B", 100, b"AAPL    ", 1_502_500, b"0", b"Y", b"A",
                            b"N", b"N", b"CLORD0001     ", 6)
    framed = sb.frame(sb.UNSEQUENCED, fixed + bytes([5, 2]) + b"FIRM")
    assert framed.hex() == (
        "0036554f0000000142000000644141504c20202020000000000016ed243059414e4e434c4f5244"
        "303030312020202020000605024649524d")
    assert ouch.message_length_ok(framed[3:])
    login = sb.login_request("USER01", "PASSWD", b" " * 10, 1)
    assert login.hex() == ("002f4c" "555345523031" "50415353574420202020" + "20" * 10
                           + "20" * 19 + "31")
    assert sb.login_request("USER01", "PASSWD", heartbeat_timeout_ms=15000) == \
        b"\x00\x34" + login[2:] + b"15000"
    assert sb.login_accepted(b"SESSION1", 1).hex() == (
        "001f41" "202053455353494f4e31" + "20" * 19 + "31")
    parsed = sb.parse_login(login[2:])
    assert (parsed.user, parsed.password, parsed.seq) == ("USER01", "PASSWD", 1)


def test_framer_any_split() -> None:
    """A stream of packets cut at every byte boundary gives the same packets."""
    stream = (sb.frame(b"R") + enter(1, b"B", 100, 1_000_000) + sb.frame(b"+", b"hello")
              + cancel(1))
    whole = sb.Framer().feed(stream)
    assert [p[:1] for p in whole] == [b"R", b"U", b"+", b"U"]
    for cut in range(len(stream) + 1):
        f = sb.Framer()
        assert f.feed(stream[:cut]) + f.feed(stream[cut:]) == whole
    one = sb.Framer()
    assert [p for b in stream for p in one.feed(bytes([b]))] == whole
    with pytest.raises(sb.FrameError, match="Packet Length 0 at stream offset 3"):
        sb.Framer().feed(sb.frame(b"R") + b"\x00\x00")


def test_appendage_walk() -> None:
    """Every TagValue walked by its own length (pitfall 5: not just the first)."""
    assert ouch.appendage_ok(bytes([5, 2]) + b"FIRM" + bytes([2, 28, 7]))
    assert not ouch.appendage_ok(bytes([5, 2]) + b"FIR")
    assert not ouch.appendage_ok(bytes([0]))


def test_stat_keys_match_the_native_enum() -> None:
    from optimized._native import EntryServerCore
    core = EntryServerCore(["U"], ["P"], ["AAPL"], "1", 1000, 1000, 1000, 1, 4096, True, 0, 0)
    assert len(core.stats()) == len(STAT_KEYS)


def test_config_checks(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="users"):
        EntryConfig(users={"TOOLONGNAME": "x"}).check()
    with pytest.raises(ValueError, match="clock"):
        EntryConfig(clock="later").check()
    path = tmp_path / "entry.toml"
    path.write_text('session = "DAY1"\nsymbols = ["AAPL"]\n[users]\nBOB = "pw"\n')
    cfg = EntryConfig.load(path)
    assert cfg.users == {"BOB": "pw"} and cfg.session_bytes == b"      DAY1"
    path.write_text("nonsense = 1\n")
    with pytest.raises(ValueError, match="unknown key 'nonsense'"):
        EntryConfig.load(path)


# ------------------------------------------------------------------ sessions

def accepted_seq(packet: bytes) -> int:
    assert packet[:1] == b"A", packet
    return int(packet[11:31])


def test_login_and_start_of_day(run: Any) -> None:
    r = run()
    c = r.client()
    assert c.login(user="user01", password="passwd") == b"A" + b" " * 9 + b"1" + \
        b" " * 19 + b"1"
    assert c.packet() == b"S" + ouch.SYSTEM_EVENT.pack(b"S", ouch.OPEN_TIME_NS, b"S")


@pytest.mark.parametrize("user,password,session,seq,code", [
    ("NOBODY", "PASSWD", b" " * 10, 1, b"A"),
    ("USER01", "WRONG", b" " * 10, 1, b"A"),
    ("USER01", "PASSWD", b"OTHER".rjust(10), 1, b"S"),
])
def test_login_rejected(run: Any, user: str, password: str, session: bytes, seq: int,
                        code: bytes) -> None:
    r = run()
    c = r.client()
    assert c.login(user, password, seq, session) == b"J" + code
    assert c.closed()
    key = "login_rejected_auth" if code == b"A" else "login_rejected_session"
    assert wait_stat(r, key, 1) == 1


def test_second_login_of_a_user_is_refused(run: Any) -> None:
    r = run()
    a = r.client()
    assert accepted_seq(a.login()) == 1
    b = r.client()
    assert b.login() == b"JS"


def test_fills_go_to_both_sides(run: Any) -> None:
    r = run()
    a, b = r.client(), r.client()
    a.login()
    b.login("USER02")
    a.packet(), b.packet()                  # start of day
    a.send(enter(1, b"B", 100, 1_502_500))
    acc = a.packet()
    assert acc[:1] == b"S" and acc[1:2] == b"A"
    fields = ouch.ACCEPTED.unpack(acc[1:])
    assert fields[2] == 1 and fields[4] == 100 and fields[9] == 1  # URN, qty, order ref
    b.send(enter(1, b"S", 60, 1_500_000))
    b_acc, b_exe = b.packets(2)
    a_exe = a.packet()
    ea, eb = ouch.EXECUTED.unpack(a_exe[1:]), ouch.EXECUTED.unpack(b_exe[1:])
    assert (ea[2], ea[3], ea[4], ea[5]) == (1, 60, 1_502_500, b"A")   # resting: added
    assert (eb[2], eb[3], eb[4], eb[5]) == (1, 60, 1_502_500, b"R")   # aggressor: removed
    assert ea[6] == eb[6] == 1                                         # one match number


def test_replay_from_requested_sequence(run: Any) -> None:
    r = run()
    a = r.client()
    a.login()
    first = a.packets(1)
    a.send(enter(1, b"B", 10, 1_000_000) + enter(2, b"B", 10, 1_000_100))
    day = first + a.packets(2)
    a.send(sb.frame(sb.LOGOUT_REQUEST))
    assert a.closed()
    assert wait_stat(r, "logouts", 1) == 1
    again = r.client()
    assert accepted_seq(again.login(seq=2)) == 2
    assert again.packets(2) == day[1:]
    assert r.stats()["replayed"] == 1 + 2           # the first login's 1, then 2


def test_replay_zero_and_past_the_end(run: Any) -> None:
    r = run()
    for seq in (0, 99):
        c = r.client()
        assert accepted_seq(c.login(seq=seq)) == 2     # the log holds 1 message
        c.send(sb.frame(sb.LOGOUT_REQUEST))
        assert c.closed()
        wait_stat(r, "logouts", 1 if seq == 0 else 2)


def test_userrefnum_rules(run: Any) -> None:
    r = run()
    a = r.client()
    a.login()
    a.packet()
    a.send(enter(5, b"B", 10, 1_000_000))
    assert a.packet()[1:2] == b"A"
    a.send(enter(5, b"B", 10, 1_000_000) + enter(4, b"B", 10, 1_000_000))  # re-sends
    a.send(enter(6, b"X", 10, 1_000_000))                                   # bad side
    rej = ouch.REJECTED.unpack(a.packet()[1:])
    assert rej[0] == b"J" and rej[2] == 6 and rej[3] == ouch.REJECT_INVALID_SIDE
    a.send(enter(6, b"B", 10, 1_000_000))         # a Rejected consumed 6
    a.send(enter(7, b"B", 0, 1_000_000))          # quantity 0
    assert ouch.REJECTED.unpack(a.packet()[1:])[3] == ouch.REJECT_INVALID_QUANTITY
    assert r.stats()["ignored"] == 3


@pytest.mark.parametrize("msg,reason", [
    (enter(1, b"B", 1_000_000, 1_000_000), ouch.REJECT_INVALID_QUANTITY),
    (enter(1, b"B", 10, 1_000_000, symbol=b"ZZZZ"), ouch.REJECT_INVALID_SYMBOL),
    (enter(1, b"B", 10, 0), ouch.REJECT_INVALID_PRICE),
    (enter(1, b"B", 10, ouch.PRICE_MAX + 1), ouch.REJECT_INVALID_PRICE),
    (enter(1, b"B", 10, 1_000_000, tif=b"9"), ouch.REJECT_OTHER),
    (enter(1, b"B", 10, 1_000_000, display=b"Q"), ouch.REJECT_INVALID_DISPLAY),
    (enter(1, b"B", 10, 1_000_000, ise=b"Y"), ouch.REJECT_ISO_NOT_ALLOWED),
    (enter(1, b"B", 10, 1_000_000, cross=b"O"), ouch.REJECT_INVALID_CROSS),
])
def test_reject_reasons(run: Any, msg: bytes, reason: int) -> None:
    r = run()
    a = r.client()
    a.login()
    a.packet()
    a.send(msg)
    rej = ouch.REJECTED.unpack(a.packet()[1:])
    assert rej[3] == reason


def test_cancel_modify_replace_mass_cancel(run: Any) -> None:
    r = run()
    a = r.client()
    a.login()
    a.packet()
    a.send(enter(1, b"S", 500, 2_000_000) + enter(2, b"S", 300, 2_100_000)
           + enter(3, b"B", 100, 1_000_000, symbol=b"MSFT"))
    assert [p[1:2] for p in a.packets(3)] == [b"A"] * 3
    a.send(cancel(1, 400))                         # new size 400: 100 canceled
    c = ouch.CANCELED.unpack(a.packet()[1:])
    assert (c[2], c[3], c[4]) == (1, 100, b"U")
    a.send(cancel(1, 400) + cancel(99))            # no change, unknown: ignored
    a.send(modify(1, b"T", 350))                   # S -> T, down to 350
    m = ouch.MODIFIED.unpack(a.packet()[1:])
    assert (m[2], m[3], m[4]) == (1, b"T", 350)
    a.send(replace(2, 10, 200, 2_050_000))         # a new URN, a new order reference
    u = ouch.REPLACED.unpack(a.packet()[1:])
    assert (u[2], u[3], u[5], u[7], u[10]) == (2, 10, 200, 2_050_000, 4)
    a.send(replace(2, 11, 200, 2_050_000))         # 2 is no longer live: ignored
    a.send(replace(10, 11, 0, 2_050_000))          # bad replace: the original canceled
    c = ouch.CANCELED.unpack(a.packet()[1:])
    assert (c[2], c[3]) == (10, 200)
    a.send(mass_cancel(12))                        # all symbols
    got = a.packets(3)
    assert [p[1:2] for p in got] == [b"C", b"C", b"X"]
    assert [ouch.CANCELED.unpack(p[1:])[2] for p in got[:2]] == [1, 3]   # by URN
    assert r.stats()["ignored"] == 3


def test_ioc_and_market_remainders_are_canceled(run: Any) -> None:
    r = run()
    a, b = r.client(), r.client()
    a.login()
    b.login("USER02")
    a.packet(), b.packet()
    a.send(enter(1, b"S", 100, 1_000_000))
    a.packet()
    b.send(enter(1, b"B", 150, 1_000_000, tif=b"3"))       # IOC: 100 fill, 50 canceled
    kinds = [p[1:2] for p in b.packets(3)]
    assert kinds == [b"A", b"E", b"C"]
    b.send(enter(2, b"B", 20, ouch.PRICE_MARKET_CROSS))    # market: nothing rests
    acc, can = b.packets(2)
    assert can[1:2] == b"C" and ouch.CANCELED.unpack(can[1:])[3:] == (20, b"I")


def test_heartbeats_both_ways_and_idle_timeout(run: Any) -> None:
    r = run(heartbeat_ms=50, idle_timeout_ms=400)
    a = r.client()
    a.login()
    a.packet()
    got = a.packets(2, skip_heartbeats=False)
    assert got == [b"H", b"H"]
    assert wait_stat(r, "idle_timeout", 1) == 1     # a never sent R: dropped
    assert a.closed()
    b = r.client()
    b.login("USER02")
    for _ in range(8):                              # R keeps it alive past 400 ms
        b.send(sb.frame(sb.CLIENT_HEARTBEAT))
        b.packets(1, skip_heartbeats=False)
    assert r.stats()["idle_timeout"] == 1


def test_login_timeout(run: Any) -> None:
    r = run(login_timeout_ms=100)
    c = r.client()
    assert c.closed()
    assert wait_stat(r, "login_timeout", 1) == 1


def test_end_of_session_on_stop(impl: str) -> None:
    srv = server_class(impl)(config())
    port = srv.start()
    c = Client(port)
    c.login()
    c.packet()
    srv.stop()
    assert c.packets(2, skip_heartbeats=False) == [
        b"S" + ouch.SYSTEM_EVENT.pack(b"S", ouch.OPEN_TIME_NS, b"E"), b"Z"]
    assert c.closed()
    c.close()


# ----------------------------------------------------------------- bad input

def witness(r: Running, user: str = "USER02", urn: int = 1) -> None:
    """Another session still logs in and gets its orders accepted."""
    w = r.client()
    assert accepted_seq(w.login(user)) == 1
    w.packet()
    w.send(enter(urn, b"B", 1, 1_000_000))
    assert w.packet()[1:2] == b"A"


LOGIN = sb.login_request("USER01", "PASSWD")


@pytest.mark.parametrize("name,data,stat", [
    ("length 0", b"\x00\x00", "bad_length"),
    ("length 65535", b"\xff\xff" + b"L" * 100, "too_long"),
    ("before login", sb.frame(b"R"), "before_login"),
    ("short login", sb.frame(b"L", b"USER01"), "bad_length"),
    ("unknown packet", LOGIN + sb.frame(b"Q"), "unknown_packet"),
    ("long heartbeat", LOGIN + sb.frame(b"R", b"x"), "bad_length"),
    ("length 0 after login", LOGIN + b"\x00\x00", "bad_length"),
])
def test_bad_packets_close_the_session(run: Any, name: str, data: bytes, stat: str) -> None:
    r = run()
    c = r.client()
    c.send(data)
    assert c.closed(), name
    assert wait_stat(r, stat, 1) == 1, name
    witness(r)


@pytest.mark.parametrize("msg,stat", [
    (b"Z" + b"\x00" * 10, "unknown_message"),
    (b"D" + b"\x00" * 10, "unknown_message"),       # Disable: known, not taken
    (b"", "unknown_message"),
    (enter(1, b"B", 1, 1_000_000)[3:-1], "bad_message_length"),
    (enter(1, b"B", 1, 1_000_000)[3:] + b"\x02\x1c\x05", "bad_message_length"),
    (ouch.CANCEL.pack(b"X", 1, 0, 3) + b"\x02\x1c", "bad_message_length"),
])
def test_bad_messages_are_dropped_and_counted(run: Any, msg: bytes, stat: str) -> None:
    r = run()
    c = r.client()
    c.login()
    c.packet()
    c.send(sb.frame(sb.UNSEQUENCED, msg))
    assert wait_stat(r, stat, 1) == 1
    c.send(enter(1, b"B", 1, 1_000_000))            # the stream is still in step
    assert c.packet()[1:2] == b"A"


def test_disconnect_mid_packet(run: Any) -> None:
    r = run()
    c = r.client()
    c.login()
    c.packet()           # all read: the close is a FIN, not a reset
    c.send(enter(1, b"B", 1, 1_000_000)[:20])
    wait_stat(r, "packets_in", 1)
    c.close()
    assert wait_stat(r, "eof_mid_packet", 1) == 1
    witness(r)


def test_partial_packet_waits(run: Any) -> None:
    r = run()
    c = r.client()
    c.login()
    c.packet()
    data = enter(1, b"B", 1, 1_000_000)
    c.send(data[:1])
    wait_stat(r, "packets_in", 1)
    c.send(data[1:30])
    c.send(data[30:])
    assert c.packet()[1:2] == b"A"


def test_connection_flood(run: Any) -> None:
    r = run(max_sessions=4)
    socks = [socket.create_connection(("127.0.0.1", r.port), timeout=5) for _ in range(12)]
    assert wait_stat(r, "too_many_connections", 8) == 8
    for s in socks:
        s.close()
    wait_stat(r, "connections", 12)
    witness(r)


def test_a_client_that_never_reads(run: Any) -> None:
    r = run(idle_timeout_ms=500, sndbuf=4096)
    slow = socket.create_connection(("127.0.0.1", r.port), timeout=5)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.sendall(LOGIN)
    # Each order brings a 67-byte Accepted the client never reads; keep it alive with R.
    burst = b"".join(enter(u, b"B", 1, 1_000_000 + u % 50) for u in range(1, 3001))
    slow.sendall(burst)
    w = r.client()
    w.login("USER02")
    w.packet()
    for u in range(1, 40):                           # meanwhile, another session trades
        w.send(enter(u, b"S", 1, 1_000_000 + 50) + sb.frame(sb.CLIENT_HEARTBEAT))
        assert w.packet()[1:2] == b"A"
        try:
            slow.send(sb.frame(sb.CLIENT_HEARTBEAT), socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass
    w.send(sb.frame(sb.LOGOUT_REQUEST))             # (else it would be idle meanwhile)
    end = time.monotonic() + 10
    while r.stats()["slow_consumer"] == 0 and time.monotonic() < end:
        try:   # it still sends heartbeats: only its not reading can drop it
            slow.send(sb.frame(sb.CLIENT_HEARTBEAT), socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass
        time.sleep(0.02)
    assert r.stats()["slow_consumer"] == 1
    assert r.stats()["idle_timeout"] == 0
    slow.close()
    witness(r, "USER01", urn=5000)          # its user logs in again, and trades


# ------------------------------------------------------------ golden transcripts

def script() -> list[tuple[str, bytes]]:
    """The scripted session of tests/data/entry: (connection, bytes sent), in order."""
    return [
        ("a", sb.login_request("USER01", "PASSWD")),
        ("b", sb.login_request("user02", "passwd", heartbeat_timeout_ms=60000)),
        ("a", enter(1, b"B", 100, 1_502_500) + enter(2, b"B", 200, 1_502_400)),
        ("b", enter(1, b"S", 150, 1_502_400)),
        ("a", cancel(2, 100) + modify(2, b"B", 80)),
        ("b", enter(2, b"T", 50, 1_502_300, tif=b"3") + enter(3, b"S", 500, 1_510_000)),
        ("b", replace(3, 4, 400, 1_509_000) + enter(3, b"S", 1, 1_600_000)),
        ("a", enter(3, b"B", 10, 1_509_000) + sb.frame(sb.CLIENT_HEARTBEAT)),
        ("b", enter(5, b"B", 10, 1_000_000, symbol=b"NVDA") + mass_cancel(6)),
        ("a", enter(4, b"B", 1, 0) + sb.frame(sb.UNSEQUENCED, b"Q")),
        ("a", sb.frame(sb.LOGOUT_REQUEST)),
        ("c", sb.login_request("USER01", "PASSWD", seq=3)),
        ("c", enter(5, b"B", 5, ouch.PRICE_MARKET_CROSS)),
    ]


def play(port: int, expected: dict[str, Any] | None) -> dict[str, Any]:
    """Run the script; per step, read exactly the packets the golden file says arrive
    (or, recording, what arrives within a quiet 0.3 s)."""
    conns: dict[str, Client] = {}
    steps = []
    for i, (name, data) in enumerate(script()):
        if name not in conns:
            conns[name] = Client(port, timeout=5.0)
        c = conns[name]
        c.send(data)
        want = expected["steps"][i]["received"] if expected else None
        got: dict[str, str] = {}
        for who, conn in conns.items():
            before = len(conn.raw)
            if want is not None:
                n = len(sb.Framer(70_000).feed(bytes.fromhex(want.get(who, ""))))
                conn.queue.clear()
                conn.packets(n)
            else:
                conn.sock.settimeout(0.3)
                try:
                    while conn._fill():
                        pass
                except TimeoutError:
                    pass
                conn.sock.settimeout(5.0)
            if len(conn.raw) > before:
                got[who] = bytes(conn.raw[before:]).hex()
        steps.append({"sent": name, "bytes": data.hex(), "received": got})
    for c in conns.values():
        c.close()
    return {"steps": steps}


def golden_config() -> EntryConfig:
    return config(users={"USER01": "PASSWD", "USER02": "PASSWD"})


def test_golden_transcript(impl: str) -> None:
    path = GOLDEN / "session.json"
    expected = json.loads(path.read_text())
    srv = server_class(impl)(golden_config())
    try:
        got = play(srv.start(), expected)
    finally:
        srv.stop()
    for i, (want, have) in enumerate(zip(expected["steps"], got["steps"], strict=True)):
        assert have == want, f"step {i}: {script()[i][0]} sent {want['bytes']}"


def record_golden() -> None:  # pragma: no cover - run by hand: python -m tests.test_entry
    """Record session.json (the bytes in and out) and session.itch (the exchange's ITCH
    feed of the same session, tests/test_entry_market_data.py) from the naive twin."""
    from naive.entry import Server
    GOLDEN.mkdir(parents=True, exist_ok=True)
    srv = Server(golden_config(), itch_out=GOLDEN / "session.itch")
    try:
        out = play(srv.start(), None)
    finally:
        srv.stop()
    (GOLDEN / "session.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":  # pragma: no cover
    record_golden()


# ------------------------------------------------------ differential, seeded streams

def random_stream(seed: int, n: int, users: int = 2,
                  wide: bool = False) -> list[tuple[int, bytes]]:
    """n framed OUCH messages from ``users`` users (user index, bytes): mostly valid, some
    stale UserRefNums, bad fields, unknown references, over a narrow band of prices (or,
    ``wide``, buys mostly below sells: many orders rest)."""
    import random
    rng = random.Random(seed)
    urn = [0] * users
    out = []
    for _ in range(n):
        user = rng.randrange(users)
        roll = rng.random()
        price = 1_000_000 + 100 * rng.randrange(-5, 6)
        if wide:
            price = 1_000_000 + 100 * rng.randrange(1, 200) * rng.choice((-1, 1))
        old = rng.randrange(1, urn[user] + 2)
        if roll < 0.5:
            urn[user] += rng.choice((1, 1, 1, 2))
            side = rng.choice((b"B", b"S", b"T", b"B", b"S", b"X"))
            qty = rng.choice((1, 10, 100, 250, 0, 1_000_000))
            tif = rng.choice((b"0", b"0", b"3", b"9"))
            sym = rng.choice((b"AAPL", b"MSFT", b"ZZZZ"))
            px = rng.choice((price, price, ouch.PRICE_MARKET_CROSS, 0))
            if wide and rng.random() < 0.9:    # mostly good orders, most of them rest
                side, qty, tif, sym, px = rng.choice((b"B", b"S")), 100, b"0", b"AAPL", price
            u = urn[user] if rng.random() > 0.05 else max(urn[user] - 1, 0)
            out.append((user, enter(u, side, qty, px, symbol=sym, tif=tif)))
        elif roll < 0.65:
            out.append((user, cancel(old, rng.choice((0, 5, 50)))))
        elif roll < 0.8:
            urn[user] += 1
            out.append((user, replace(old, urn[user], rng.choice((50, 300, 0)), price)))
        elif roll < 0.95:
            out.append((user, modify(old, rng.choice((b"S", b"T", b"B")), rng.choice((0, 20)))))
        elif not wide or rng.random() < 0.05:
            urn[user] += 1
            out.append((user, mass_cancel(urn[user], rng.choice((b"", b"AAPL")))))
    return out


def transcript(impl: str, stream: list[tuple[int, bytes]]) -> tuple[bytes, bytes, dict[str, int]]:
    """Every byte both users receive for the stream, through End of Session."""
    srv = server_class(impl)(config())
    port = srv.start()
    users = [Client(port), Client(port)]
    users[0].login("USER01")
    users[1].login("USER02")
    for i, (user, data) in enumerate(stream, 1):
        users[user].send(data)
        assert wait_stat(srv, "messages_in", i) == i   # one at a time: a fixed interleaving
    srv.stop()
    for c in users:
        assert c.closed()
        c.close()
    stats = srv.stats()
    return bytes(users[0].raw), bytes(users[1].raw), stats


@pytest.mark.parametrize("seed", [1, 2])
def test_twins_agree_on_random_streams(seed: int) -> None:
    stream = random_stream(seed, 250)
    naive, optimized = transcript("naive", stream), transcript("optimized", stream)
    assert naive[0] == optimized[0]
    assert naive[1] == optimized[1]
    assert naive[2] == optimized[2]
    assert naive[2]["messages_out"] > 100 and naive[2]["rejected"] > 0


# ------------------------------------------------------- the command line, the load

def test_serve_and_load_commands(impl: str) -> None:
    """`twinmatch serve` in a process of its own, driven by `twinmatch load` (both modes)."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "twinmatch", "serve", "--impl", impl,
                             "--load-users", "4"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "order entry on 127.0.0.1:" in line, line
        port = int(line.rsplit(":", 1)[1])
        from twinmatch.load import run_load
        closed = run_load(port, sessions=2, requests=300, mode="closed", window=4,
                          timeout=30)
        opened = run_load(port, sessions=2, requests=300, mode="open", rate=2000,
                          timeout=30, first_user=3)
        for r in (closed, opened):
            s = r.summary()
            assert s["acks"] == 300 and s["unanswered"] == 0
            assert s["p50_us"] <= s["p99.99_us"] <= s["max_us"]
    finally:
        proc.send_signal(2)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0
    stats = json.loads(out.strip().splitlines()[-1])
    assert stats["messages_in"] == 600 and stats["logins"] == 4


def test_load_refuses_bad_arguments() -> None:
    from twinmatch.load import run_load
    with pytest.raises(ValueError, match="mode"):
        run_load(1, mode="sideways")


def test_serve_on_a_port_in_use(impl: str) -> None:
    import subprocess
    import sys

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    try:
        port = busy.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "twinmatch", "serve", "--impl", impl,
                               "--port", str(port)], capture_output=True, text=True,
                              timeout=30, check=False)
        assert proc.returncode == 2, proc.stderr
        assert "twinmatch serve: error:" in proc.stderr
    finally:
        busy.close()


def test_twins_agree_on_one_long_session() -> None:
    """One user, about 3,000 seeded messages sent at once (one connection keeps their order
    without waiting): hundreds of live orders, so the C++ twin's UserRefNum table grows
    and deletes many times; identical bytes and stats."""
    messages = random_stream(7, 3000, users=1, wide=True)
    stream = b"".join(data for _, data in messages)
    out = []
    for impl in IMPLS:
        srv = server_class(impl)(config())
        c = Client(srv.start())
        c.login()
        c.send(stream)
        assert wait_stat(srv, "messages_in", len(messages)) == len(messages)
        srv.stop()
        assert c.closed()
        c.close()
        out.append((bytes(c.raw), srv.stats()))
    assert out[0][0] == out[1][0]
    assert out[0][1] == out[1][1]


@pytest.mark.timeout(240)
def test_exchange_under_sanitizers(tmp_path: Path) -> None:
    """native/entry.hpp's Exchange on random messages, built with ASan + UBSan."""
    import shutil
    import subprocess

    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ to build the sanitizer harness")
    root = Path(__file__).resolve().parent.parent
    exe = tmp_path / "entry_fuzz"
    subprocess.run([cxx, "-std=c++20", "-O1", "-g", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=undefined", "-I", str(root / "native"),
                    str(root / "tests" / "native" / "entry_fuzz.cpp"), "-o", str(exe)],
                   check=True, timeout=200)
    for seed in (1, 2):
        proc = subprocess.run([str(exe), "200000", str(seed)], capture_output=True,
                              text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.startswith("ok ")
