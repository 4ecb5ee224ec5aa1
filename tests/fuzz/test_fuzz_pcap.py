"""A short, bounded atheris run of tests/fuzz/fuzz_pcap.py inside the normal suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TARGET = Path(__file__).with_name("fuzz_pcap.py")


def test_fuzz_pcap_short_run(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    if os.environ.get("TWINMATCH_SANITIZED"):
        pytest.skip("atheris' libFuzzer runtime does not run under an LD_PRELOADed ASan; "
                    "the direct checks above cover the sanitized build")
    seeds = tmp_path / "corpus"
    seeds.mkdir()
    from naive.pcap import frame_udp, moldudp64_packet, pcap_bytes

    frames = [frame_udp(moldudp64_packet("S", 1, [b"A" * 36, b"D" * 19]), vlans=[7])]
    (seeds / "pcap").write_bytes(b"\x01" + pcap_bytes(frames))
    (seeds / "csv").write_bytes(b"\x02id,p,q,s\n1,100,5,0\n2,0,5,1\n")
    (seeds / "lobster").write_bytes(b"\x0334200.5,1,10,100,1500000,1\n34201,7,0,0,-1,-1\n")
    body = pcap_bytes(frames)[24:]
    (seeds / "filtered").write_bytes(b"\x04" + body)  # kind 4: port/session filters
    (seeds / "stream").write_bytes(b"\x05" + body)  # kind 5: read_file as a stream
    result = subprocess.run(
        [sys.executable, str(TARGET), "-runs=3000", "-max_total_time=40", str(seeds)],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr[-3000:]
