"""Benchmarks, group "pcap": the PCAP path vs the raw framed-bytes path, naive vs optimized.

200,000 ITCH-sized messages (36-byte bodies, the size of an Add Order) are packed into
MoldUDP64 packets of up to 1,400 bytes, framed in Ethernet/IPv4/UDP and written as one
in-memory classic pcap. What each benchmark includes:

* ``scan``: PCAP + Ethernet + IPv4 + UDP + MoldUDP64 sequence tracking, ending with the
  framed message blocks in one buffer. No ITCH decoding; the capture is already in memory.
* ``pcap+decode`` / ``raw decode``: the scan followed by ``itch.decode`` of the blocks, vs
  ``itch.decode`` of the same blocks given directly as framed bytes (run once the ITCH
  decoder component is merged; skipped with the reason otherwise).

Every benchmark checks its result against the naive twin before it is timed.
"""

from __future__ import annotations

import importlib
import struct
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import naive.pcap as npcap
import optimized.pcap as opcap
from naive.pcap import frame_udp, moldudp64_packet, pcap_bytes
from tests.bench import valgrind
from tests.bench.conftest import SMALL

N_MESSAGES = 10_000 if SMALL else 200_000
PACKET_BYTES = 1400
IMPLS = {"naive": npcap, "optimized": opcap}


def add_order(i: int) -> bytes:
    return struct.pack(">cHH6sQcI8sI", b"A", 1 + i % 50, 0, (34_200_000_000_000 + i).to_bytes(
        6, "big"), i + 1, b"B" if i % 2 else b"S", 100, b"AAPL    ", 1_500_000 + i % 100)


def build() -> tuple[bytes, bytes]:
    msgs = [add_order(i) for i in range(N_MESSAGES)]
    frames: list[bytes] = []
    batch: list[bytes] = []
    size, seq = 20, 1
    for m in msgs:
        if size + 2 + len(m) > PACKET_BYTES:
            frames.append(frame_udp(moldudp64_packet("BENCH00001", seq, batch)))
            seq += len(batch)
            batch, size = [], 20
        batch.append(m)
        size += 2 + len(m)
    frames.append(frame_udp(moldudp64_packet("BENCH00001", seq, batch)))
    framed = b"".join(struct.pack(">H", len(m)) + m for m in msgs)
    return pcap_bytes(frames, nanosecond=True), framed


@pytest.fixture(scope="module")
def data() -> tuple[bytes, bytes]:
    return build()


@pytest.fixture(scope="module")
def reference(data: tuple[bytes, bytes]) -> tuple[bytes, dict[str, Any]]:
    blocks, stats = npcap.scan(data[0])
    assert bytes(blocks) == data[1] and stats["messages"] == N_MESSAGES
    return bytes(blocks), stats


def itch_for(name: str) -> ModuleType:
    try:
        return importlib.import_module(f"{name}.itch")
    except ImportError:
        pytest.skip(f"{name}.itch (the ITCH decoder component) is not in this branch")


def info(benchmark: Any, data: tuple[bytes, bytes], includes: str) -> None:
    benchmark.extra_info.update(
        {"bytes": len(data[0]), "framed_bytes": len(data[1]), "messages": N_MESSAGES,
         "includes": includes, "ops": N_MESSAGES}
    )


@pytest.mark.benchmark(group="pcap")
@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_scan(benchmark: Any, impl: str, data: tuple[bytes, bytes],
              reference: tuple[bytes, dict[str, Any]], tmp_path: Any) -> None:
    mod = IMPLS[impl]
    blocks, stats = mod.scan(data[0])
    assert bytes(blocks) == reference[0] and stats == reference[1]
    info(benchmark, data, "pcap/eth/ipv4/udp/moldudp64 scan to framed blocks; no ITCH decode")
    benchmark(mod.scan, data[0])
    if impl == "optimized" and valgrind.available(SMALL):  # deterministic counts beside it
        benchmark.extra_info["valgrind"] = scan_counts(data[0], tmp_path)


def scan_counts(capture: bytes, tmp: Any) -> dict[str, float]:
    """Cachegrind's counts per message of the optimized scan, on the same capture (written
    to a file: under valgrind, building it in Python would take minutes)."""
    path = tmp / "bench.pcap"
    path.write_bytes(capture)
    setup = (f"import optimized.pcap as m\ncapture = open({str(path)!r}, 'rb').read()\n"
             "def prepare():\n    return None\ndef run(_):\n    m.scan(capture)\n")
    return valgrind.counts(setup, N_MESSAGES)


@pytest.mark.benchmark(group="pcap")
@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_pcap_then_decode(benchmark: Any, impl: str, data: tuple[bytes, bytes]) -> None:
    itch = itch_for(impl)
    mod = IMPLS[impl]

    def run() -> Any:
        return itch.decode(mod.scan(data[0])[0])

    events, counts = run()
    ref_events, ref_counts = itch_for("naive").decode(data[1])
    assert counts == ref_counts and np.array_equal(events, ref_events)
    info(benchmark, data, "pcap scan + itch.decode of the blocks")
    benchmark(run)


@pytest.mark.benchmark(group="pcap")
@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_raw_decode(benchmark: Any, impl: str, data: tuple[bytes, bytes]) -> None:
    itch = itch_for(impl)
    events, counts = itch.decode(data[1])
    ref_events, ref_counts = itch_for("naive").decode(data[1])
    assert counts == ref_counts and np.array_equal(events, ref_events)
    info(benchmark, data, "itch.decode of the same messages as raw framed bytes")
    benchmark(itch.decode, data[1])
