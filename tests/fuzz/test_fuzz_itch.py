"""A short, bounded fuzz run inside the normal suite (no atheris runner needed).

Feeds fuzz_itch.check thousands of inputs: random bytes, and valid streams mutated the way
a fuzzer would (bit flips, byte sets, cuts, splices, inserted length prefixes). A longer
coverage-guided run under atheris is a subprocess with -runs, skipped if atheris is absent.
"""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from twinmatch.itch_samples import random_stream, sample_day

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("fuzz_itch", HERE / "fuzz_itch.py")
assert _spec is not None and _spec.loader is not None
fuzz_itch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz_itch)


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randrange(1, 6)):
        op = rng.randrange(6)
        if not b:
            b += rng.randbytes(rng.randrange(1, 8))
        pos = rng.randrange(len(b))
        if op == 0:
            b[pos] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[pos] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, ord("A"), ord("z")])
        elif op == 2:
            del b[pos:]
        elif op == 3:
            del b[pos:pos + rng.randrange(1, 16)]
        elif op == 4:
            b[pos:pos] = rng.randrange(0, 300).to_bytes(2, "big")
        else:
            b[pos:pos] = rng.randbytes(rng.randrange(1, 40))
    return bytes(b)


def test_fuzz_random_and_mutated() -> None:
    rng = random.Random(20240601)
    seeds = [random_stream(rng, 30) for _ in range(20)] + [sample_day(60, seed=s)
                                                             for s in range(5)]
    for _ in range(1500):
        fuzz_itch.check(rng.randbytes(rng.randrange(0, 200)))
    for _ in range(4000):
        fuzz_itch.check(mutate(rng, rng.choice(seeds)))


def test_atheris_short_run(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    if os.environ.get("TWINMATCH_SANITIZED"):
        pytest.skip("atheris' libFuzzer runtime does not run under an LD_PRELOADed ASan; "
                    "the direct checks above cover the sanitized build")
    proc = subprocess.run(
        [sys.executable, str(HERE / "fuzz_itch.py"), "-runs=3000", "-max_len=512",
         f"-artifact_prefix={tmp_path}/"],
        capture_output=True, text=True, timeout=240, cwd=HERE.parent.parent,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
