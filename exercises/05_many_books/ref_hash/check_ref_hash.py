"""Checker for 05_many_books/ref_hash: the table gives the right answers, and its probe
runs stay short (counted: slots looked at per operation) for sequential, strided and
random references alike."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from exercise_support import compile_cpp, impl_dir, run_program

HERE = Path(__file__).resolve().parent
CAP = 1 << 14
KEYS = 6_000  # a little over a third full
MAX_MEAN_PROBES = 3.0


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ref_hash") / "harness"
    return compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], out)


def run(harness: Path, cap: int, refs: list[int],
        keys: list[int]) -> tuple[str, int, list[int], int]:
    text = f"{cap} {len(refs)} {' '.join(map(str, refs))} {len(keys)} " \
           f"{' '.join(map(str, keys))}\n"
    out = run_program(harness, text).split()
    return out[0], int(out[1]), [int(v) for v in out[2:-1]], int(out[-1])


def expected(cap: int, refs: list[int], keys: list[int]) -> tuple[str, list[int]]:
    table: dict[int, int] = {}
    inserted = ""
    for i, ref in enumerate(refs):
        ok = ref not in table and 2 * (len(table) + 1) <= cap
        if ok:
            table[ref] = i
        inserted += "1" if ok else "0"
    return inserted or "-", [table.get(k, -1) for k in keys]


def test_right_answers(harness: Path) -> None:
    rng = random.Random(5)
    for cap in (2, 4, 64, 1024):
        refs = [rng.choice([0, 1, 2**64 - 1, rng.getrandbits(64), rng.randint(0, 50)])
                for _ in range(cap)]  # duplicates, and more than fit
        keys = refs[: cap // 2] + [rng.getrandbits(64) for _ in range(20)] + [0, 2**64 - 1]
        inserted, _, found, _ = run(harness, cap, refs, keys)
        assert (inserted, found) == expected(cap, refs, keys), f"capacity {cap}"


PATTERNS = {
    # NASDAQ numbers orders 1, 2, 3, ...: any hash looks good on these.
    "sequential": [1 + i for i in range(KEYS)],
    # A venue that puts a partition number in the low 12 bits: ref = seq << 12 | 7.
    "partitioned": [(i << 12) | 7 for i in range(KEYS)],
    # References that step by a large power of two.
    "stride 2^20": [i << 20 for i in range(KEYS)],
    "random": random.Random(11).sample(range(1, 2**63), KEYS),
}


@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_probe_runs_stay_short(harness: Path, pattern: str) -> None:
    refs = PATTERNS[pattern]
    inserted, insert_probes, found, find_probes = run(harness, CAP, refs, refs)
    assert inserted == "1" * KEYS and found == list(range(KEYS))
    mean = find_probes / KEYS
    assert mean <= MAX_MEAN_PROBES, (
        f"{pattern} references: {mean:.1f} slots looked at per lookup ({find_probes:,} "
        f"for {KEYS:,} lookups; {insert_probes:,} for the inserts) in a table "
        f"{KEYS / CAP:.0%} full; a well-mixed hash needs under {MAX_MEAN_PROBES:.0f}")
