"""Chapter 13's harness: an exchange simulator with its re-request server, and
``twinmatch feed send | recv | rerequest``.

:class:`Exchange` packs a day of framed ITCH messages into MoldUDP64 packets (at most
``MAX_PAYLOAD`` payload bytes, and only messages whose timestamps lie within ``window_ns``
of the packet's first), and sends them over UDP to 127.0.0.1, paced by the feed's own
timestamps: ``speed`` 1 is real time, 10 ten times faster, 0 flat out. It can drop,
duplicate and swap packets (seeded, so a run is repeatable), sends a heartbeat after
``heartbeat_ns`` without a packet, and ends with end-of-session packets. The same socket
is its re-request server: a MoldUDP64 request ``(session, seq, count)`` from 127.0.0.1 is
answered with one downstream packet of the stored messages from ``seq`` (as many as fit in
``MAX_PAYLOAD`` bytes: a reply may carry fewer than asked, as nassau's does; the spec is
silent, so this is UNVERIFIED for NASDAQ's own servers), unicast back to the asker.
Nothing is ever sent to another address: ``contract.feed.check_host`` refuses it.
"""

from __future__ import annotations

import argparse
import json
import random
import select
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from contract.feed import (
    DEFAULT_FEED_PORT,
    DEFAULT_REQUEST_PORT,
    HOST,
    MAX_PAYLOAD,
    check_host,
)

# Only the standard library at module level (twinmatch/cli.py's rule: `twinmatch --help`
# costs no numpy); the receivers are imported when a command runs.
SESSION = b"TWINMATCH1"
# How the re-request server answers a valid request: properly, never (a dead server), or
# with garbage a receiver can see is garbage (random bytes, cut headers, another session,
# blocks that overrun the datagram): the tests' hostile servers.
ANSWERS = ("yes", "never", "garbage")
MOLD_HEADER_LEN = 20  # naive/pcap.py's; tests/test_feed.py checks they agree
END_OF_SESSION = 0xFFFF


def heartbeat(session: bytes, next_seq: int, end: bool = False) -> bytes:
    """A heartbeat (count 0) or end-of-session (count 0xFFFF) packet: no message blocks."""
    return session + struct.pack(">QH", next_seq, END_OF_SESSION if end else 0)


def message_offsets(raw: bytes | memoryview) -> list[int]:
    """Start offsets of the framed messages of `raw`, plus its length at the end."""
    offsets, pos = [], 0
    while pos + 2 <= len(raw):
        offsets.append(pos)
        pos += 2 + int.from_bytes(raw[pos : pos + 2], "big")
    if pos != len(raw):
        raise ValueError(f"framed ITCH cut short at byte offset {offsets[-1] if offsets else 0}")
    offsets.append(pos)
    return offsets


def timestamp(raw: bytes | memoryview, offset: int) -> int:
    """The 6-byte ITCH timestamp of the framed message at `offset` (ns since midnight)."""
    return int.from_bytes(raw[offset + 7 : offset + 13], "big")


# --8<-- [start:pack]
def pack(raw: bytes | memoryview, offsets: list[int], window_ns: int = 100_000,
         limit: int = MAX_PAYLOAD) -> list[tuple[int, int, int]]:
    """Cut the day into packets: (first message index, message count, first timestamp)."""
    packets = []
    i, n = 0, len(offsets) - 1
    while i < n:
        first_ts = timestamp(raw, offsets[i])
        j = i + 1
        while (j < n and j - i < 0xFFFE
               and offsets[j + 1] - offsets[i] <= limit - MOLD_HEADER_LEN
               and timestamp(raw, offsets[j]) - first_ts <= window_ns):
            j += 1
        packets.append((i, j - i, first_ts))
        i = j
    return packets
# --8<-- [end:pack]


class Exchange:
    """The simulator: a feed sender and, on the same socket, a re-request server."""

    def __init__(self, raw: bytes, feed_port: int, request_port: int = 0, speed: float = 0.0,
                 loss: float = 0.0, duplicate: float = 0.0, reorder: float = 0.0,
                 seed: int = 1, heartbeat_ns: int = 1_000_000_000, window_ns: int = 100_000,
                 end_packets: int = 3, linger_ns: int = 1_000_000_000,
                 session: bytes = SESSION, skip_first: int = 0,
                 drop: frozenset[int] = frozenset(), answer: str = "yes") -> None:
        if speed < 0 or not all(0.0 <= p < 1.0 for p in (loss, duplicate, reorder)):
            raise ValueError("speed must be >= 0 and loss, duplicate, reorder in [0, 1)")
        self.raw = raw
        self.offsets = message_offsets(raw)
        self.packets = pack(raw, self.offsets, window_ns)
        self.dest = (check_host(HOST), feed_port)
        self.speed, self.loss, self.duplicate, self.reorder = speed, loss, duplicate, reorder
        self.rng = random.Random(seed)
        self.heartbeat_ns, self.end_packets, self.linger_ns = heartbeat_ns, end_packets, linger_ns
        self.session = session.ljust(10)[:10]
        self.skip_first = skip_first  # packets not sent at all (a receiver that joins late)
        self.drop = drop  # indices of packets dropped on purpose (besides `loss`)
        if answer not in ANSWERS:
            raise ValueError(f"answer must be one of {ANSWERS}, got {answer!r}")
        self.answer_mode = answer  # how the re-request server behaves (ANSWERS)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
        self.sock.bind((HOST, request_port))
        self.request_port: int = self.sock.getsockname()[1]
        self.stats = dict.fromkeys(
            ("packets", "sent", "dropped", "dropped_messages", "duplicated", "reordered",
             "heartbeats", "end_of_session", "requests", "bad_requests", "replies",
             "reply_messages"), 0)
        self.stats["packets"] = len(self.packets)
        self.stats["messages"] = len(self.offsets) - 1
        self._last_send = 0
        self._stop: threading.Event | None = None  # run()'s stop event, for wait_until

    def payload(self, first: int, count: int) -> bytes:
        """The downstream packet of messages first .. first+count-1 (0-based indices)."""
        body = self.raw[self.offsets[first] : self.offsets[first + count]]
        return self.session + struct.pack(">QH", first + 1, count) + body

    def _send(self, data: bytes) -> None:
        self.sock.sendto(data, self.dest)
        self._last_send = time.monotonic_ns()

    # --8<-- [start:serve]
    def serve(self, timeout_s: float) -> None:
        """Answer the requests that arrive within timeout_s (0: only those waiting)."""
        ready, _, _ = select.select([self.sock], [], [], timeout_s)
        while ready:
            data, addr = self.sock.recvfrom(2048)
            self.answer(data, addr)
            ready, _, _ = select.select([self.sock], [], [], 0)

    def answer(self, data: bytes, addr: tuple[str, int]) -> None:
        """One request: (session, first seq, count) -> one reply with what fits."""
        n = len(self.offsets) - 1
        if len(data) != MOLD_HEADER_LEN or addr[0] != HOST or data[:10] != self.session:
            self.stats["bad_requests"] += 1
            return
        seq, count = struct.unpack_from(">QH", data, 10)
        if seq < 1 or seq > n or count == 0 or count == END_OF_SESSION:
            self.stats["bad_requests"] += 1
            return
        self.stats["requests"] += 1
        if self.answer_mode != "yes":
            if self.answer_mode == "garbage":
                for junk in self.garbage(seq):
                    self.sock.sendto(junk, addr)
            return
        first, last = seq - 1, min(seq - 1 + count, n)
        end = first + 1  # at least one message, then as many as fit
        while end < last and self.offsets[end + 1] - self.offsets[first] <= (
                MAX_PAYLOAD - MOLD_HEADER_LEN):
            end += 1
        self.sock.sendto(self.payload(first, end - first), addr)
        self.stats["replies"] += 1
        self.stats["reply_messages"] += end - first
    # --8<-- [end:serve]

    def garbage(self, seq: int) -> list[bytes]:
        """What the garbage-answering server sends instead of a reply for `seq`."""
        good = self.payload(seq - 1, 1)
        return [self.rng.randbytes(self.rng.randrange(1, 200)),        # noise
                good[:15],                                             # a cut header
                b"OTHERSESS1" + good[10:],                             # another session
                good[:18] + b"\x00\x09" + good[20:]]                 # count past the data

    def wait_until(self, due_ns: int, next_seq: int) -> None:
        """Serve requests (and send heartbeats) until monotonic time due_ns, or until
        run()'s stop event is set."""
        while not (self._stop is not None and self._stop.is_set()):
            now = time.monotonic_ns()
            if now - self._last_send >= self.heartbeat_ns:
                self._send(heartbeat(self.session, next_seq))
                self.stats["heartbeats"] += 1
                continue
            left = min(due_ns, self._last_send + self.heartbeat_ns) - now
            if due_ns <= now:
                self.serve(0)
                return
            self.serve(left / 1e9)

    # --8<-- [start:send]
    def run(self, stop: threading.Event | None = None) -> dict[str, int]:
        """Send the day, then end of session, then keep serving requests until
        `linger_ns` passes without one."""
        t0 = self._last_send = time.monotonic_ns()
        self._stop = stop  # wait_until() ends early when it is set
        ts0 = self.packets[0][2] if self.packets else 0
        held: bytes | None = None  # a packet to send after the next one (a swap)
        for k, (first, count, ts) in enumerate(self.packets):
            if stop is not None and stop.is_set():
                break
            if self.speed > 0:
                self.wait_until(t0 + int((ts - ts0) / self.speed), first + 1)
            elif k % 16 == 0:
                self.serve(0)
            if k < self.skip_first:
                continue
            data = self.payload(first, count)
            if k in self.drop or self.rng.random() < self.loss:
                self.stats["dropped"] += 1
                self.stats["dropped_messages"] += count
                continue
            if held is None and self.rng.random() < self.reorder:
                held = data
                self.stats["reordered"] += 1
                continue
            self._send(data)
            self.stats["sent"] += 1
            if self.rng.random() < self.duplicate:
                self._send(data)
                self.stats["duplicated"] += 1
            if held is not None:
                self._send(held)
                self.stats["sent"] += 1
                held = None
        if held is not None:
            self._send(held)
            self.stats["sent"] += 1
        next_seq = len(self.offsets)
        self.stats["end_ns"] = time.time_ns()  # wall clock of the first end of session
        for _ in range(0 if stop is not None and stop.is_set() else self.end_packets):
            self._send(heartbeat(self.session, next_seq, end=True))
            self.stats["end_of_session"] += 1
            self.serve(min(self.heartbeat_ns, self.linger_ns) / 1e9)
        before = -1
        while self.stats["requests"] != before and not (stop is not None and stop.is_set()):
            before = self.stats["requests"]
            self.serve(self.linger_ns / 1e9)
        return self.stats
    # --8<-- [end:send]

    def close(self) -> None:
        self.sock.close()


# --8<-- [start:multicast]
MULTICAST_GROUP = "239.192.13.1"  # administratively scoped (RFC 2365): never routed out


def multicast_roundtrip(messages: int = 2000, port: int = 30_013) -> str:
    """Send a small day to a multicast group and receive it, inside a network namespace
    whose only interface is loopback (the test makes one): refuses to run anywhere else.

    The sender names its interface explicitly (IP_MULTICAST_IF 127.0.0.1, TTL 0: the
    packets may not leave the host), the receiver joins the group on that interface.
    """
    import os

    interfaces = sorted(os.listdir("/sys/class/net"))
    if interfaces != ["lo"]:
        raise RuntimeError(f"multicast only where loopback is the only interface, here: "
                           f"{interfaces}")
    from naive import feed as naive_feed
    from twinmatch.gen import market_day_bytes

    raw, books = market_day_bytes(messages, 10, 5)
    rx_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx_sock.setsockopt(socket.SOL_SOCKET, naive_feed.SO_TIMESTAMPNS, 1)
    rx_sock.bind((MULTICAST_GROUP, port))
    membership = socket.inet_aton(MULTICAST_GROUP) + socket.inet_aton(HOST)
    rx_sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
    rx = naive_feed.Receiver(rx_sock, None, None, idle_ns=2_000_000_000)
    ex = Exchange(raw, port, 0)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(HOST))
    tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
    tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)

    def send() -> None:
        for first, count, _ts in ex.packets:
            tx.sendto(ex.payload(first, count), (MULTICAST_GROUP, port))
            time.sleep(0.0001)
        tx.sendto(heartbeat(ex.session, len(ex.offsets), end=True), (MULTICAST_GROUP, port))

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    rep = rx.run(30_000_000_000)
    thread.join(10)
    ex.close()
    tx.close()
    rx_sock.close()
    same = rx.market.books_csv() == books.decode()
    return (f"{rep['messages']} messages, lost {rep['lost']}, stop {rep['stop']}, books "
            f"{'equal' if same else 'DIFFER'}: {'ok' if same and rep['lost'] == 0 else 'bad'}")
# --8<-- [end:multicast]


def native_sender(raw: bytes, port: int, window_ns: int = 100_000,
                  session: bytes = SESSION) -> Any:
    """The C++ sender (optimized.feed.Sender) loaded with `raw` cut as the Exchange cuts
    it: every packet built before anything is sent."""
    from optimized.feed import Sender

    offsets = message_offsets(raw)
    plan = [(offsets[first], offsets[first + count], first + 1, count)
            for first, count, _ts in pack(raw, offsets, window_ns)]
    return Sender(raw, plan, check_port(port), session)


def check_port(port: int) -> int:
    if not 0 < port <= 0xFFFF:
        raise ValueError(f"port must be 1..65535, got {port}")
    return port


def hold_for(packets_per_s: float, timeout_ns: int, backlog_packets: int) -> int:
    """Chapter 13's rule for the hold: the packets already in the socket when a gap is
    seen, plus those the feed sends while the server has its first timeout to answer."""
    from contract.feed import MAX_HOLD, MAX_PENDING

    need = backlog_packets + int(packets_per_s * timeout_ns / 1e9 + 0.999999)
    return max(MAX_PENDING, min(MAX_HOLD, need))


def start_exchange(exchange: Exchange) -> tuple[threading.Thread, threading.Event, list[Any]]:
    """Run an exchange in a daemon thread; (thread, stop event, [its stats when done])."""
    stop = threading.Event()
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(exchange.run(stop)), daemon=True)
    thread.start()
    return thread, stop, result


def receiver_for(impl: str, port: int, request_port: int | None, **kw: Any) -> Any:
    """A receiver twin on a fresh socket bound to 127.0.0.1:port, with its market."""
    if impl == "naive":
        from naive import feed as naive_feed

        sock = naive_feed.open_socket(port)
        try:
            return naive_feed.Receiver(sock, None, request_port, **kw)
        except BaseException:
            sock.close()  # a refused setting must not leak the socket it was given
            raise
    from optimized import feed as opt_feed

    return opt_feed.Receiver(port, None, request_port, **kw)


def _second_line(rep: dict[str, Any], prev: dict[str, Any]) -> str:
    """One report line: the counts of the last second, and its packets' latencies."""
    d = {k: rep[k] - prev.get(k, 0) for k in ("messages", "packets", "gaps", "recovered",
                                              "lost")}
    s2b, d2b = rep["second_socket_to_book"], rep["second_decode_to_book"]
    return (f"msgs {d['messages']:>8,} pkts {d['packets']:>7,} gaps {d['gaps']:>4} "
            f"recovered {d['recovered']:>6} lost {d['lost']:>4} | socket->book p50 "
            f"{s2b['p50'] / 1e3:.1f} p99 {s2b['p99'] / 1e3:.1f} us, decode->book p50 "
            f"{d2b['p50'] / 1e3:.1f} p99 {d2b['p99'] / 1e3:.1f} us")


def feed_send(args: argparse.Namespace) -> int:
    # One line on stderr for a refused argument (2) or a bad file (1), as every command
    if args.speed < 0 or not all(0.0 <= p < 1.0 for p in (args.loss, args.duplicate,
                                                          args.reorder)):
        print("twinmatch feed send: error: --speed must be >= 0 and --loss, --duplicate, "
              "--reorder in [0, 1)", file=sys.stderr)
        return 2
    try:
        raw = Path(args.file).read_bytes()
    except OSError as exc:
        print(f"twinmatch feed send: error: {args.file}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    try:
        ex = Exchange(raw, args.port, args.request_port, args.speed, args.loss,
                      args.duplicate, args.reorder, args.seed, int(args.heartbeat_ms * 1e6),
                      linger_ns=int(args.linger_ms * 1e6))
    except (ValueError, OSError) as exc:  # a file cut short (its offset), a busy port
        print(f"twinmatch feed send: error: {args.file}: {' '.join(str(exc).split())}",
              file=sys.stderr)
        return 1
    print(f"twinmatch feed send: {ex.stats['messages']:,} messages in {len(ex.packets):,} "
          f"packets to {HOST}:{args.port}, re-requests on {HOST}:{ex.request_port}",
          file=sys.stderr)
    stats = ex.run()
    ex.close()
    print(json.dumps(stats))
    return 0


def feed_recv(args: argparse.Namespace) -> int:
    extra: dict[str, Any] = {}
    if args.impl == "optimized":
        extra = {"batch": args.batch, "spin": args.spin, "busy_poll_us": args.busy_poll_us}
    elif args.spin or args.busy_poll_us or args.batch != 64:
        print("twinmatch feed recv: --batch, --spin and --busy-poll-us are the optimized "
              "receiver's", file=sys.stderr)
        return 2
    from contract.feed import MAX_PENDING

    timeout_ns = int(args.timeout_ms * 1e6)
    hold = args.hold or (hold_for(args.rate, timeout_ns, args.backlog) if args.rate
                         else MAX_PENDING)
    rx = receiver_for(args.impl, args.port, args.request_port or None, start=args.start,
                      idle_ns=int(args.idle_ms * 1e6), timeout_ns=timeout_ns,
                      session=args.session, hold=hold, max_jump=args.max_jump, **extra)
    if getattr(rx, "busy_poll_error", 0) > 0:
        print(f"twinmatch feed recv: SO_BUSY_POLL refused (errno {rx.busy_poll_error}); "
              "receiving without it", file=sys.stderr)
    prev: dict[str, Any] = {}

    def tick(rep: dict[str, Any]) -> None:
        nonlocal prev
        if not args.json:
            print(_second_line(rep, prev), file=sys.stderr)
        prev = rep

    rep = rx.run(int(args.max_seconds * 1e9), tick)
    if args.books:
        Path(args.books).write_text(rx.market.books_csv())
    print(json.dumps(rep) if args.json else
          f"stop: {rep['stop']}; messages {rep['messages']:,}, gaps {rep['gaps']}, "
          f"recovered {rep['recovered']}, lost {rep['lost']}, missing {rep['missing']}")
    return 0


def feed_rerequest(args: argparse.Namespace) -> int:
    """Send one request, print what the reply carried (or that none came)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((HOST, 0))
    session = args.session.encode("ascii").ljust(10)[:10]
    sock.sendto(session + struct.pack(">QH", args.seq, args.count),
                (check_host(HOST), args.request_port))
    ready, _, _ = select.select([sock], [], [], args.timeout_ms / 1e3)
    if not ready:
        print("no reply")
        return 1
    data = sock.recv(65536)
    seq, count = struct.unpack_from(">QH", data, 10) if len(data) >= 20 else (0, 0)
    print(json.dumps({"seq": seq, "count": count, "bytes": len(data)}))
    return 0


def add_feed_parser(sub: Any) -> None:
    """`twinmatch feed send | recv | rerequest` (chapter 13)."""
    f = sub.add_parser("feed", help="chapter 13: a live MoldUDP64 feed on 127.0.0.1")
    f_sub = f.add_subparsers(dest="feed_command", required=True)
    s = f_sub.add_parser("send", help="the exchange simulator and its re-request server")
    s.add_argument("file", type=Path, help="framed ITCH day (twinmatch gen market)")
    s.add_argument("--port", type=int, default=DEFAULT_FEED_PORT, help="receiver's UDP port")
    s.add_argument("--request-port", type=int, default=DEFAULT_REQUEST_PORT)
    s.add_argument("--speed", type=float, default=1.0, help="1 real time, 0 flat out")
    s.add_argument("--loss", type=float, default=0.0, help="fraction of packets dropped")
    s.add_argument("--duplicate", type=float, default=0.0)
    s.add_argument("--reorder", type=float, default=0.0)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--heartbeat-ms", type=float, default=1000.0)
    s.add_argument("--linger-ms", type=float, default=2000.0,
                   help="after end of session, serve requests until this long without one")
    s.set_defaults(func=feed_send)
    r = f_sub.add_parser("recv", help="a feed handler: in sequence into the books")
    r.add_argument("--impl", choices=["naive", "optimized"], default="optimized")
    r.add_argument("--port", type=int, default=DEFAULT_FEED_PORT)
    r.add_argument("--request-port", type=int, default=DEFAULT_REQUEST_PORT,
                   help="0: no re-request server")
    r.add_argument("--start", type=int, default=1, help="first sequence wanted (0: any)")
    r.add_argument("--session", help="the feed's session name (default: the session of the "
                                     "first data packet; a stray packet cannot choose it)")
    r.add_argument("--timeout-ms", type=float, default=50.0,
                   help="wait this long for a reply before asking again")
    r.add_argument("--hold", type=int, default=0,
                   help="packets held back behind gaps (default: from --rate, else 1,024)")
    r.add_argument("--rate", type=float, default=0.0,
                   help="the feed's peak packets/s: sizes the hold (chapter 13's rule)")
    r.add_argument("--backlog", type=int, default=4096,
                   help="packets the socket may hold when a gap is seen (for --rate)")
    r.add_argument("--max-jump", type=int, default=1 << 20,
                   help="messages past the highest known a packet may claim and be believed")
    r.add_argument("--idle-ms", type=float, default=60_000.0,
                   help="stop after this long without a datagram")
    r.add_argument("--max-seconds", type=float, default=3600.0)
    r.add_argument("--batch", type=int, default=64, help="optimized: datagrams per recvmmsg")
    r.add_argument("--spin", action="store_true",
                   help="optimized: busy-wait instead of sleeping in poll(2) (burns a core)")
    r.add_argument("--busy-poll-us", type=int, default=0,
                   help="optimized: ask the kernel for SO_BUSY_POLL (may need CAP_NET_ADMIN)")
    r.add_argument("--books", type=Path, help="write the final books CSV here")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=feed_recv)
    q = f_sub.add_parser("rerequest", help="send one MoldUDP64 request, show the reply")
    q.add_argument("--request-port", type=int, default=DEFAULT_REQUEST_PORT)
    q.add_argument("--session", default=SESSION.decode())
    q.add_argument("--seq", type=int, default=1)
    q.add_argument("--count", type=int, default=10)
    q.add_argument("--timeout-ms", type=float, default=1000.0)
    q.set_defaults(func=feed_rerequest)
