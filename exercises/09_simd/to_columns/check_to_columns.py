"""Checker for 09_simd/to_columns: the struct-of-arrays filter returns the same
indices as the array-of-structs one on random and hostile events (under AddressSanitizer
and UBSan), and misses the first-level data cache at least 2x less often per row,
counted by valgrind's callgrind cache simulation (a count does not flake on a busy
machine; without valgrind, a paired timing at 1.2x)."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest
from exercise_support import (
    PLAIN_CXXFLAGS,
    compile_cpp,
    impl_dir,
    paired_ratio,
    report_head,
    run_program,
)

HERE = Path(__file__).resolve().parent
MIN_FEWER_MISSES = 2.0
MIN_SPEEDUP = 1.2   # the fallback without valgrind
ROWS = 200_000
MAX_PRICE = 2**32 - 1


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("to_columns") / "harness"
    return compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], out)


def case(n: int, seed: int) -> tuple[str, str, int, list[tuple[str, int, str]]]:
    rng = random.Random(seed)
    rows = [(rng.choice("AFEDUXP"), rng.choice([0, 1, 99, 100, 101, 2**31, MAX_PRICE - 1,
                                                 MAX_PRICE, rng.randrange(2**32)]),
             rng.choice(["AAPL", "MSFT", "AAPLX", "A"])) for _ in range(n)]
    key, above = rng.choice(["AAPL", "MSFT", "ZZZZ", "A"]), rng.choice([0, 100, 2**31,
                                                                      MAX_PRICE])
    text = f"run {n} {key} {above}\n" + "".join(f"{t} {p} {s}\n" for t, p, s in rows)
    return text, key, above, rows


def expected(key: str, above: int, rows: list[tuple[str, int, str]]) -> list[int]:
    return [i for i, (t, p, s) in enumerate(rows) if t in "AF" and s == key and p > above]


@pytest.mark.parametrize("n, seed", [(0, 1), (1, 2), (7, 3), (64, 4), (1000, 5), (3001, 6)])
def test_same_indices_as_the_records(harness: Path, n: int, seed: int) -> None:
    text, key, above, rows = case(n, seed)
    sizes, indices = (run_program(harness, text).splitlines() + ["", ""])[:2]
    assert sizes.split() == [str(n)] * 3, f"the three columns must hold {n} rows each"
    assert [int(x) for x in indices.split()] == expected(key, above, rows), (key, above)


def test_unknown_stock_and_top_price_match_nothing(harness: Path) -> None:
    text = "run 3 AAPL 4294967295\nA 4294967295 AAPL\nF 5 AAPL\nA 9 MSFT\n"
    assert run_program(harness, text).splitlines()[1].split() == []
    text = "run 3 AAPL 0\nA 4294967295 AAPL\nF 5 AAPL\nA 0 AAPL\n"
    assert run_program(harness, text).splitlines()[1].split() == ["0", "1"]


def d1_misses(exe: Path, stdin: str, function: str) -> int:
    """First-level data-cache misses (reads + writes) inside ``function``, simulated by
    callgrind (--cache-sim=yes): the same on a busy machine as on an idle one."""
    out = exe.with_name(f"{exe.name}.{function}.callgrind")
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--cache-sim=yes",
                           f"--toggle-collect={function}", f"--callgrind-out-file={out}",
                           str(exe)], input=stdin, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, report_head(proc.stderr, 3000)
    names: list[str] = []
    for line in out.read_text().splitlines():
        if line.startswith("events:"):
            names = line.split()[1:]
        elif line.startswith("summary:"):
            values = dict(zip(names, map(int, line.split()[1:]), strict=False))
            return values.get("D1mr", 0) + values.get("D1mw", 0)
    raise AssertionError(f"no summary line in {out}")


def test_far_fewer_cache_misses_than_the_records(tmp_path: Path) -> None:
    exe = compile_cpp([HERE / "harness.cpp"], [impl_dir(__file__)], tmp_path / "plain",
                      PLAIN_CXXFLAGS)
    aos, soa = (run_program(exe, f"bench {w} {ROWS} 7\n").split()[:2] for w in ("aos", "soa"))
    assert soa == aos, "filter_soa found other rows than filter_aos (matches, checksum)"
    if shutil.which("valgrind"):
        theirs = d1_misses(exe, f"bench aos {ROWS} 7\n", "run_aos")
        mine = d1_misses(exe, f"bench soa {ROWS} 7\n", "run_soa")
        ratio = theirs / max(mine, 1)
        assert ratio >= MIN_FEWER_MISSES, (
            f"{ROWS:,} rows: filter_aos misses D1 {theirs:,} times, yours {mine:,}: "
            f"{ratio:.1f}x fewer; the target is {MIN_FEWER_MISSES:.0f}x. How many bytes "
            f"does each of them read per row?")
        return

    def timed(which: str) -> float:
        return int(run_program(exe, f"bench {which} {ROWS * 10} 7\n").split()[2]) * 1e-9

    result = paired_ratio(lambda: timed("soa"), lambda: timed("aos"))
    assert result.median >= MIN_SPEEDUP, (
        f"valgrind is not installed, so timed instead: yours is {result} faster than "
        f"filter_aos; the target is {MIN_SPEEDUP}x")
