"""Deterministic counts beside the times: instructions and cache misses under cachegrind.

A timing moves with the machine; valgrind's cachegrind counts the instructions a piece of
code executes and the misses of a simulated cache hierarchy, the same on every run of the
same build. ``counts(setup, ops)`` runs a Python script twice under cachegrind, calling
the code under test once in the first and ``repeat + 1`` times in the second, and returns
the difference per operation: what a warm call costs, Python call included. The environment is fixed
(``DETERMINISTIC``), so both runs do the same set-up work, instruction for instruction.

The cache is simulated (cachegrind's model of this machine's first-level and last-level
caches), not measured: a miss count is a property of the code and the access pattern,
not of the hardware's prefetchers. Used where the benchmark says so; skipped when valgrind
is not installed (``apt-get install valgrind``) or TWINMATCH_BENCH_VALGRIND=0.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Cachegrind's events: instructions, data reads/writes, misses at L1 (I1, D1) and at the
# last level (LL) for instruction fetches, data reads and data writes.
EVENTS = ("Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw")


# What makes two runs of the same script count the same: a fixed str hash, and no
# OpenBLAS worker threads (their start-up spinning at numpy's import varied by millions of
# instructions from run to run).
DETERMINISTIC = {"PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def available(small: bool) -> bool:
    """Whether to count: valgrind installed, and not switched off. The smoke run
    (``small``) counts only when TWINMATCH_BENCH_VALGRIND=1 asks for it: a Python start
    under cachegrind alone takes seconds."""
    setting = os.environ.get("TWINMATCH_BENCH_VALGRIND", "0" if small else "1")
    return shutil.which("valgrind") is not None and setting != "0"


def parse_summary(text: str) -> dict[str, int]:
    """The ``events:`` and ``summary:`` lines of a cachegrind output file, as a dict."""
    names: list[str] = []
    values: list[int] = []
    for line in text.splitlines():
        if line.startswith("events:"):
            names = line.split()[1:]
        elif line.startswith("summary:"):
            values = [int(v) for v in line.split()[1:]]
    if not names or len(names) != len(values):
        raise ValueError("not a cachegrind output file (no events/summary lines)")
    return dict(zip(names, values, strict=True))


def cachegrind(script: str, timeout: float = 1800) -> dict[str, int]:
    """Run ``script`` in a fresh interpreter under cachegrind; the whole run's totals."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cachegrind.out"
        env = {**os.environ, **DETERMINISTIC}
        subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes",
                        f"--cachegrind-out-file={out}", sys.executable, "-c", script],
                       cwd=ROOT, env=env, check=True, capture_output=True, timeout=timeout)
        return parse_summary(out.read_text())


def counts(setup: str, ops: int, repeat: int = 3) -> dict[str, float]:
    """Per-operation counts of ``run(prepare())`` (both defined by ``setup``, Python code).

    Two cachegrind runs make ``repeat + 1`` prepared states each; the first calls ``run`` on
    one of them, the second on all. The difference, over ``repeat * ops``, is what a warm
    call costs: start-up, set-up, the first (cold) call and the teardown at exit cancel.
    Keys: Ir (instructions), D1 (first-level data misses, reads and writes), LL
    (last-level misses of every kind).
    """
    def script(calls: int) -> str:
        return (f"{setup}\nstates = [prepare() for _ in range({repeat + 1})]\n"
                f"for state in states[:{calls}]:\n    run(state)\n")

    base = cachegrind(script(1))
    full = cachegrind(script(repeat + 1))
    d = {k: full.get(k, 0) - base.get(k, 0) for k in EVENTS}
    n = repeat * ops
    return {"Ir": d["Ir"] / n, "D1": (d["D1mr"] + d["D1mw"]) / n,
            "LL": (d["ILmr"] + d["DLmr"] + d["DLmw"]) / n}
