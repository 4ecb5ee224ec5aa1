"""SoupBinTCP 4.x, the session layer both order-entry twins speak (chapter 12).

The wire rules (``/work/shared/spec/order-entry.md`` §1): every logical packet is
``[u16 big-endian Packet Length][1-byte Packet Type][payload]`` and the Packet Length counts
the type byte and the payload, not its own two bytes. Session fields are ASCII. The layouts
here are checked field by field against the spec's table in ``tests/test_entry.py``.

Also here, because both servers must agree on them word for word: the server's
configuration (:class:`EntryConfig`), the names of the counters in its stats
(:data:`STAT_KEYS`), and the choices the spec leaves open, each marked.
"""

from __future__ import annotations

import dataclasses
import resource
import struct
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = [
    "DEFAULT_SYMBOLS", "DEFAULT_USERS", "LOGIN_410_LENGTH", "LOGIN_LENGTH", "MAX_PACKET",
    "STAT_KEYS", "EntryConfig", "FrameError", "Framer", "descriptors_needed", "frame",
    "login_accepted", "login_rejected", "login_request", "new_session_id", "parse_login",
]

# --8<-- [start:packet_types]
# Packet types (order-entry.md §1.2). Server -> client:
DEBUG: Final = b"+"
LOGIN_ACCEPTED: Final = b"A"
LOGIN_REJECTED: Final = b"J"
SEQUENCED: Final = b"S"
UNSEQUENCED: Final = b"U"          # client -> server: one OUCH inbound message
SERVER_HEARTBEAT: Final = b"H"
END_OF_SESSION: Final = b"Z"
# Client -> server:
LOGIN_REQUEST: Final = b"L"
CLIENT_HEARTBEAT: Final = b"R"
LOGOUT_REQUEST: Final = b"O"

LOGIN_LENGTH: Final = 47           # Packet Length of a 3.00/4.00 Login Request
LOGIN_410_LENGTH: Final = 52       # 4.10 adds a 5-byte Heartbeat Timeout (ms)
# Which of the two NASDAQ's OUCH 5.0 ports expect is UNVERIFIED: the servers take both.
ACCEPTED_LENGTH: Final = 31        # Login Accepted: Session a10 + Sequence Number n20
REJECT_NOT_AUTHORIZED: Final = b"A"
REJECT_SESSION_UNAVAILABLE: Final = b"S"
# --8<-- [end:packet_types]

# The spec gives no maximum Packet Length (nassau caps it at 65535). No message this
# server accepts needs more than this, so a longer one is a framing error and the
# connection is closed: that bounds every session's input buffer. (A project choice.)
MAX_PACKET: Final = 1024

# --8<-- [start:stat_keys]
# What each server counts, in this order, in both twins (``Server.stats()``).
STAT_KEYS: Final = (
    "connections",            # TCP connections accepted
    "logins",                 # Login Accepted sent
    "login_rejected_auth",    # J A: unknown user or wrong password
    "login_rejected_session", # J S: session not available (or user already logged in)
    "logouts",                # O Logout Request received
    "packets_in",             # whole SoupBinTCP packets received
    "messages_in",            # OUCH messages received (U packets)
    "messages_out",           # sequenced OUCH messages produced (S packets)
    "heartbeats_out",         # H sent
    "replayed",               # S packets re-sent from the log after a login
    # reasons a connection was closed by the server
    "bad_length",             # Packet Length 0, or a fixed packet with the wrong length
    "too_long",               # Packet Length over MAX_PACKET
    "unknown_packet",         # a packet type a client may not send
    "before_login",           # anything but L before the login
    "login_timeout",          # no Login Request in time
    "idle_timeout",           # a logged-in client silent for too long
    "eof_mid_packet",         # the client closed in the middle of a packet
    "too_many_connections",   # accepted and closed at once while the server stops
    "slow_consumer",          # its unsent output went over out_limit (it does not read)
    # OUCH messages that were dropped, not answered (the stream stays in step)
    "unknown_message",        # an OUCH type this server does not know or take
    "bad_message_length",     # wrong length for its type, or a bad appendage
    "ignored",                # the spec's silent cases: stale UserRefNum, dead order ...
    "rejected",               # Rejected J sent
    # the exchange's own ITCH 5.0 feed (MarketData)
    "market_data_out",        # ITCH messages published (with --itch-out; without it, none is made)
    "market_data_errors",     # writes of the feed file that failed (it stops being written)
    # added with issue 30 (at the end: the order above is kept)
    "prelogin_evicted",       # the oldest not-yet-logged-in connection, closed for a new one
    "descriptors_exhausted",  # accept() found no free descriptor (EMFILE/ENFILE): shed
    "debug_in",               # Debug (+) packets received and ignored
)
# --8<-- [end:stat_keys]

DEFAULT_USERS: Final = {"USER01": "PASSWD", "USER02": "PASSWD"}
DEFAULT_SYMBOLS: Final = ("AAPL", "MSFT", "NVDA", "AMZN")


@dataclass
class EntryConfig:
    """What an order-entry server is told at start: users, symbols, session and timers.

    ``clock="fixed"`` makes every timestamp deterministic (34,200,000,000,000 ns, 09:30,
    plus the number of inbound messages handled so far): the golden transcripts need it.
    ``clock="wall"`` uses nanoseconds since midnight UTC.
    """

    users: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_USERS))
    symbols: tuple[str, ...] = DEFAULT_SYMBOLS
    session: str = ""                 # "": a new session id every run (new_session_id)
    heartbeat_ms: int = 1000          # send H after 1 s with nothing sent (spec §1.4)
    idle_timeout_ms: int = 15000      # drop a client silent for "typically 15 s" (spec §1.4)
    # The Login Request within 5 s: the spec's "typically 30 s" is an upper bound the
    # server "may" enforce; a short one frees the pre-login pool sooner (a project choice).
    login_timeout_ms: int = 5000
    max_sessions: int = 64            # logged-in sessions at once
    prelogin_max: int = 16            # connections not logged in yet, their own pool
    out_limit: int = 1 << 20          # unsent bytes the naive twin hands asyncio at once
    sndbuf: int = 0                   # SO_SNDBUF of each connection (0: the kernel's)
    clock: str = "wall"

    def check(self) -> EntryConfig:
        """Every field in range, else a ValueError naming it."""
        if not self.users:
            raise ValueError("users: at least one user")
        for name, password in self.users.items():
            if not 0 < len(name) <= 6 or len(password) > 10 or not (name + password).isascii():
                raise ValueError(f"users: {name!r}: username 1..6, password 0..10 ASCII")
        if not self.symbols or len(self.symbols) > 65535:
            raise ValueError("symbols: 1..65535 symbols")
        for s in self.symbols:
            if not 0 < len(s) <= 8 or not s.isascii() or " " in s:
                raise ValueError(f"symbols: {s!r}: 1..8 ASCII, no spaces")
        if len(self.session) > 10 or not (self.session.isascii() and
                                          (self.session.isalnum() or not self.session)):
            raise ValueError("session: 0..10 ASCII letters and digits (0: new every run)")
        for name in ("heartbeat_ms", "idle_timeout_ms", "login_timeout_ms"):
            if not 10 <= getattr(self, name) <= 3_600_000:
                raise ValueError(f"{name}: 10..3600000")
        if not 1 <= self.max_sessions <= 1024:
            raise ValueError("max_sessions: 1..1024")
        if not 1 <= self.prelogin_max <= 1024:
            raise ValueError("prelogin_max: 1..1024")
        if not 4096 <= self.out_limit <= 1 << 30:
            raise ValueError("out_limit: 4096..2**30")
        if not 0 <= self.sndbuf <= 1 << 26:
            raise ValueError("sndbuf: 0..2**26")
        if self.clock not in ("wall", "fixed"):
            raise ValueError("clock: 'wall' or 'fixed'")
        need, soft = descriptors_needed(self), resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft != resource.RLIM_INFINITY and need > soft:
            raise ValueError(
                f"max_sessions {self.max_sessions} + prelogin_max {self.prelogin_max} need "
                f"{need} file descriptors, but RLIMIT_NOFILE is {soft}: raise it "
                f"(ulimit -n {need}) or lower them")
        return self

    def resolved(self) -> EntryConfig:
        """This configuration with its session id fixed: ``session`` if given, else a
        new one (:func:`new_session_id`). Each server resolves it once, at start."""
        if self.session:
            return self
        return dataclasses.replace(self, session=new_session_id())

    @property
    def session_bytes(self) -> bytes:
        """The 10-byte Session of Login Accepted: left-padded with spaces (spec §1.2)."""
        if not self.session:
            raise ValueError("session: not resolved yet (EntryConfig.resolved())")
        return self.session.encode().rjust(10)

    @classmethod
    def load(cls, path: str | Path) -> EntryConfig:
        """A TOML file: ``session``, timers, ``symbols = [...]`` and ``[users]`` name = pw."""
        data = tomllib.loads(Path(path).read_text())
        cfg = cls()
        for key, value in data.items():
            if key == "users":
                cfg.users = {str(k): str(v) for k, v in value.items()}
            elif key == "symbols":
                cfg.symbols = tuple(str(s) for s in value)
            elif key in cls.__dataclass_fields__:
                setattr(cfg, key, value)
            else:
                raise ValueError(f"{path}: unknown key {key!r}")
        return cfg.check()


# Descriptors a server holds besides its connections: the listening socket, epoll and
# its wake-up eventfd (C++), the reserve descriptor, the ITCH file, stdio, and room for
# what the Python process itself keeps open (a project choice, generous on purpose).
DESCRIPTOR_HEADROOM: Final = 32


def descriptors_needed(cfg: EntryConfig) -> int:
    """File descriptors a server with this configuration may hold at once."""
    return cfg.max_sessions + cfg.prelogin_max + DESCRIPTOR_HEADROOM


_BASE36: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def new_session_id(unix_ms: int | None = None) -> str:
    """A session id no earlier run of this server used: the wall clock in milliseconds
    since 1970, in base 36 (8 letters and digits until the year 2059). A restarted server
    therefore never answers a login for its previous run's session: that client gets
    Login Rejected S. (It relies on the wall clock never going back between two runs.)"""
    ms = time.time_ns() // 1_000_000 if unix_ms is None else unix_ms
    out = ""
    while True:
        ms, digit = divmod(ms, 36)
        out = _BASE36[digit] + out
        if ms == 0:
            return out[-10:]


# --8<-- [start:frame]
def frame(ptype: bytes, payload: bytes = b"") -> bytes:
    """One logical packet: u16 BE Packet Length (= 1 + len(payload)), type, payload."""
    return struct.pack(">H", 1 + len(payload)) + ptype + payload


class FrameError(ValueError):
    """A Packet Length no packet may have: 0, or over the limit. ``packets``: the whole
    packets that came before it in the same feed, which the caller still handles."""

    def __init__(self, length: int, offset: int, packets: list[bytes] | None = None) -> None:
        super().__init__(f"bad SoupBinTCP Packet Length {length} at stream offset {offset}")
        self.length = length
        self.offset = offset
        self.packets = packets or []


class Framer:
    """Cuts a byte stream into whole packets, whatever pieces TCP delivers it in."""

    def __init__(self, max_packet: int = MAX_PACKET) -> None:
        self._buf = bytearray()
        self._consumed = 0          # stream offset of _buf[0], for error messages
        self.max_packet = max_packet

    def feed(self, data: bytes) -> list[bytes]:
        """Add bytes; return every packet now complete (type byte + payload, no length)."""
        self._buf += data
        buf, at = self._buf, 0
        packets: list[bytes] = []
        while len(buf) - at >= 2:
            length = int.from_bytes(buf[at:at + 2], "big")
            if length == 0 or length > self.max_packet:
                del buf[:at]        # what came before: whole packets, handed over
                self._consumed += at
                raise FrameError(length, self._consumed, packets)
            if len(buf) - at < 2 + length:
                break               # a partial packet: wait for the rest
            packets.append(bytes(buf[at + 2:at + 2 + length]))
            at += 2 + length
        del buf[:at]                # once per call, not once per packet
        self._consumed += at
        return packets

    @property
    def pending(self) -> int:
        """Bytes of a packet not yet complete."""
        return len(self._buf)
# --8<-- [end:frame]


def login_request(user: str, password: str, session: bytes = b" " * 10, seq: int = 1,
                  heartbeat_timeout_ms: int | None = None) -> bytes:
    """A framed Login Request: 3.00/4.00 layout, or 4.10 with a Heartbeat Timeout."""
    body = (user.encode().ljust(6) + password.encode().ljust(10) + session.rjust(10)
            + str(seq).encode().rjust(20))
    if heartbeat_timeout_ms is not None:
        body += str(heartbeat_timeout_ms).encode().rjust(5)
    return frame(LOGIN_REQUEST, body)


@dataclass(frozen=True)
class Login:
    """A parsed Login Request (fields stripped of their padding)."""

    user: str
    password: str
    session: bytes            # the 10 bytes as sent (all spaces: the active session)
    seq: int | None           # None: not a decimal number
    heartbeat_timeout_ms: int # 0: not given (3.00/4.00 layout) or not a number


def _decimal(raw: bytes) -> int | None:
    """ASCII digits with spaces either side (bytes.isdigit is ASCII only); the 20-digit
    field holds up to 10**20 - 1, past the end of any log (the servers treat a number
    past the end as the next new message, so both read every such number the same)."""
    text = raw.strip(b" ")
    return int(text) if text and text.isdigit() else None


def _fold(raw: bytes) -> str:
    """A username or password: spaces stripped, a-z folded to A-Z and nothing else
    (bytes.upper is ASCII only: str.upper would turn "\xdf" (sharp s) into "SS")."""
    return raw.strip(b" ").upper().decode("latin-1")


def parse_login(packet: bytes) -> Login:
    """A Login Request packet (type byte + payload, 47 or 52 bytes long).

    The padding of Requested Session, Requested Sequence Number and Heartbeat Timeout is
    UNVERIFIED (the spec is silent; implementations right-justify): numbers are read with
    spaces stripped on both sides, so either justification is accepted.
    """
    hb = _decimal(packet[47:52]) if len(packet) == LOGIN_410_LENGTH else None
    return Login(_fold(packet[1:7]), _fold(packet[7:17]), packet[17:27],
                 _decimal(packet[27:47]), hb or 0)


def login_accepted(session: bytes, next_seq: int) -> bytes:
    """Login Accepted: Session (10, left-padded) and the next sequence number (20)."""
    return frame(LOGIN_ACCEPTED, session.rjust(10) + str(next_seq).encode().rjust(20))


def login_rejected(code: bytes) -> bytes:
    return frame(LOGIN_REJECTED, code)
