"""Random ITCH 5.0 messages for tests and benchmarks, encoded by the naive twin.

Two kinds: :func:`random_record` draws any message type with every field over its whole
range (for round trips and differential tests), and :func:`sample_day` draws a stream with
the rough message mix of a NASDAQ day (adds and deletes dominate), increasing timestamps and
order references that refer to live orders, for decoding benchmarks. Seeded: reproducible.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Final

from naive.itch import CLASSES, STRUCTS, Record, StockDirectory, frame

__all__ = ["DAY_MIX", "cached_sample_day", "random_record", "random_stream", "sample_day"]

CHARS: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
SAMPLE_VERSION: Final = 1  # bump when sample_day's output changes: old cache files are ignored


def _value(rng: random.Random, code: str) -> object:
    """A random value for one struct format code."""
    if code == "c":
        return bytes([rng.choice(CHARS)])
    if code.endswith("s"):
        n = int(code[:-1])
        return bytes(rng.choice(CHARS) for _ in range(n))
    bits = {"H": 16, "I": 32, "Q": 64}[code]
    # Mix edge values with uniform ones: 0, max and values with the top bit set matter.
    return rng.choice([0, 1, 2**bits - 1, 2 ** (bits - 1), rng.getrandbits(bits)])


def random_record(rng: random.Random, type_char: str | None = None) -> Record:
    """A message of the given type (or a random one) with random field values."""
    code = (type_char or rng.choice(sorted(t.decode() for t in STRUCTS))).encode()
    fmt = STRUCTS[code].format
    codes = struct.Struct(fmt).format.lstrip(">")
    parts: list[str] = []
    i = 0
    while i < len(codes):  # split ">cHH6s8s..." into ["c", "H", "H", "6s", "8s", ...]
        j = i
        while codes[j].isdigit():
            j += 1
        parts.append(codes[i:j + 1])
        i = j + 1
    locate, tracking = _value(rng, "H"), _value(rng, "H")
    timestamp = rng.choice([0, 2**48 - 1, rng.getrandbits(48)])
    body = [_value(rng, c) for c in parts[4:]]
    return CLASSES[code](locate, tracking, timestamp, *body)


def random_stream(rng: random.Random, n: int) -> bytes:
    """n framed random messages of random types."""
    return b"".join(frame(random_record(rng)) for _ in range(n))


# Rough shares of a NASDAQ TotalView day (adds and deletes dominate; crosses are rare).
DAY_MIX: Final[dict[str, float]] = {
    "A": 0.42, "D": 0.40, "U": 0.08, "E": 0.03, "X": 0.015, "I": 0.02, "F": 0.01,
    "P": 0.008, "N": 0.003, "C": 0.002, "L": 0.001, "Q": 0.0005, "H": 0.0005,
    "Y": 0.0005, "B": 0.0001, "h": 0.0001, "J": 0.0001, "K": 0.0001,
}


def sample_day(n: int, seed: int = 1, symbols: int = 500) -> bytes:
    """n framed messages with a day's mix: S + R header, then order flow, then S C."""
    if n < 2:
        raise ValueError("a day has at least its start and end S messages")
    symbols = max(1, min(symbols, (n - 2) // 10))  # directory is at most a tenth of the day
    rng = random.Random(seed)
    names = [f"S{i:04d}".encode().ljust(8) for i in range(symbols)]
    out = [frame(CLASSES[b"S"](0, 0, 3 * 3600 * 10**9, b"O"))]
    for loc, name in enumerate(names, 1):
        directory = random_record(rng, "R")
        assert isinstance(directory, StockDirectory)
        out.append(frame(directory._replace(locate=loc, tracking=0, stock=name)))
    t = 4 * 3600 * 10**9
    live: list[tuple[int, int, bytes]] = []  # (ref, locate, stock) of resting orders
    next_ref = 1
    match = 1
    types = list(DAY_MIX)
    weights = list(DAY_MIX.values())
    body = n - len(out) - 1
    for kind in rng.choices(types, weights, k=body):
        t += rng.randrange(1, 200_000)
        loc = min(symbols, int(rng.paretovariate(1.2)))  # a few symbols get most traffic
        price = 10_000 * rng.randrange(5, 500) + rng.randrange(0, 100) * 100
        shares = rng.choice((100, 100, 200, 300, 500, rng.randrange(1, 10_000)))
        if kind in "EXDUC" and not live:
            kind = "A"
        if kind in "AF":
            side = rng.choice((b"B", b"S"))
            fields = [loc, 0, t, next_ref, side, shares, names[loc - 1], price]
            rec: Record = CLASSES[kind.encode()](*fields, *([b"NSDQ"] if kind == "F" else []))
            live.append((next_ref, loc, names[loc - 1]))
            next_ref += 1
        elif kind in "EXDUC":
            k = rng.randrange(len(live))
            ref, loc, _ = live[k]
            if kind == "E":
                rec = CLASSES[b"E"](loc, 0, t, ref, shares, match)
                match += 1
            elif kind == "C":
                rec = CLASSES[b"C"](loc, 0, t, ref, shares, match, b"Y", price)
                match += 1
            elif kind == "X":
                rec = CLASSES[b"X"](loc, 0, t, ref, rng.randrange(1, 100))
            elif kind == "D":
                rec = CLASSES[b"D"](loc, 0, t, ref)
                live[k] = live[-1]
                live.pop()
            else:
                rec = CLASSES[b"U"](loc, 0, t, ref, next_ref, shares, price)
                live[k] = (next_ref, loc, live[k][2])
                next_ref += 1
        else:
            rec = random_record(rng, kind)._replace(locate=loc, tracking=0, timestamp=t)
        out.append(frame(rec))
    out.append(frame(CLASSES[b"S"](0, 0, 20 * 3600 * 10**9, b"C")))
    return b"".join(out)


def cached_sample_day(n: int, seed: int = 1, cache_dir: Path | None = None) -> bytes:
    """``sample_day(n, seed)``, kept in ``cache_dir`` (default out/cache).

    A 10M-message day takes Python over a minute to draw; the benchmarks draw it once.
    """
    cache_dir = cache_dir or Path(__file__).resolve().parent.parent / "out" / "cache"
    path = cache_dir / f"itch-day-v{SAMPLE_VERSION}-{n}-{seed}.itch"
    if path.exists():
        return path.read_bytes()
    day = sample_day(n, seed)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(day)
    tmp.replace(path)  # never a half-written cache file
    return day
