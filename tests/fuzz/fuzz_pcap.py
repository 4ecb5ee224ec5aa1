"""atheris fuzz target: PCAP scanning and order-file parsing, both twins must agree.

Run it for as long as you like:  .venv/bin/python tests/fuzz/fuzz_pcap.py -max_total_time=60
(tests/fuzz/test_fuzz_pcap.py runs a short bounded session inside the normal suite). The
first input byte picks the target: pcap (with a valid global header in front, so the fuzzer
reaches the packet layers quickly, or raw), CSV orders, a LOBSTER message file, pcap with
the group/port/session filters (and each stream's counts), or pcap read as a stream in small
chunks through read_file and the real ITCH decoders.
"""

from __future__ import annotations

import io
import sys
from typing import Any

import numpy as np

import naive.orders as norders
import naive.pcap as npcap
import optimized.orders as oorders
import optimized.pcap as opcap

HEADER = npcap.pcap_bytes([])


def outcome_pcap(mod: Any, data: bytes) -> Any:
    try:
        blocks, stats = mod.scan(data)
        return bytes(np.asarray(blocks, dtype=np.uint8)), stats
    except mod.PcapError as e:
        return "error", str(e), e.offset


def outcome_filtered(mod: Any, data: bytes, session: bytes) -> Any:
    scanner = mod.Scanner(port=26477, session=session)
    try:
        blocks, used = scanner.feed(data)
        scanner.finish(data[used:])
    except mod.PcapError as e:
        return "error", str(e), e.offset, scanner.streams()
    return bytes(np.asarray(blocks, dtype=np.uint8)), scanner.stats, scanner.streams()


def outcome_stream(mod: Any, data: bytes, chunk: int) -> Any:
    from contract.itch_errors import ItchError

    reader = mod.read_file(io.BytesIO(data), chunk)
    batches = []
    try:
        for events, counts in reader:
            batches.append((events.tobytes(), counts))
    except (mod.PcapError, ItchError) as e:
        return batches, "error", str(e), e.offset
    return batches, reader.stats, reader.streams()


def outcome_orders(mod: Any, fn: str, data: bytes) -> Any:
    try:
        return getattr(mod, fn)(data).tobytes()  # bytes: the padding must agree too
    except mod.OrdersError as e:
        return "error", str(e), e.line


def one_input(raw: bytes) -> None:
    if not raw:
        return
    kind, data = raw[0] % 6, raw[1:]
    if kind in (0, 4, 5):
        data = HEADER + data
    if kind <= 1:
        a, b = outcome_pcap(npcap, data), outcome_pcap(opcap, data)
    elif kind == 4:
        session = raw[1:11].ljust(10)
        a, b = outcome_filtered(npcap, data, session), outcome_filtered(opcap, data, session)
    elif kind == 5:
        chunk = 1 + (raw[1] if len(raw) > 1 else 0) % 97
        a, b = outcome_stream(npcap, data, chunk), outcome_stream(opcap, data, chunk)
    else:
        fn = "read_csv" if kind == 2 else "read_lobster"
        a, b = outcome_orders(norders, fn, data), outcome_orders(oorders, fn, data)
    if a != b:
        raise AssertionError(f"twins disagree on {raw!r}: {a!r} != {b!r}")


def main(argv: list[str]) -> None:
    import atheris

    atheris.instrument_all()  # coverage feedback from the naive twins' Python code
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
