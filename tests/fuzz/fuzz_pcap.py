"""atheris fuzz target: PCAP scanning and order-file parsing, both twins must agree.

Run it for as long as you like:  .venv/bin/python tests/fuzz/fuzz_pcap.py -max_total_time=60
(tests/fuzz/test_fuzz_pcap.py runs a short bounded session inside the normal suite). The
first input byte picks the target: pcap (with a valid global header in front, so the fuzzer
reaches the packet layers quickly, or raw), CSV orders, or a LOBSTER message file.
"""

from __future__ import annotations

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


def outcome_orders(mod: Any, fn: str, data: bytes) -> Any:
    try:
        return getattr(mod, fn)(data).tolist()
    except mod.OrdersError as e:
        return "error", str(e), e.line


def one_input(raw: bytes) -> None:
    if not raw:
        return
    kind, data = raw[0] % 4, raw[1:]
    if kind == 0:
        data = HEADER + data
    if kind <= 1:
        a, b = outcome_pcap(npcap, data), outcome_pcap(opcap, data)
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
