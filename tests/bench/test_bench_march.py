"""Chapter 1's build flags, group "march": what ``-march=native`` would buy, measured once.

The extension ships built for baseline x86-64 (native/CMakeLists.txt: a wheel must run on
any x86-64 CPU; the AVX-512 loops are chosen at run time). This benchmark builds a second
copy of the same sources with ``-march=native`` (``-DTWINMATCH_MARCH=native``, in
build/march-native, once; several minutes) and runs the same work under each copy, the two
alternating in fresh processes (baseline, native, baseline, native, ...: the paired
protocol across processes, since one process can load only one ``optimized._native``).
Each process times its work in-process (median of REPS runs after a warm-up) and reports
time per message; start-up and the day's generation are not timed.

Workloads, on one generated day (``twinmatch gen``'s market day, held in a file):

* ``replay``: ``Market("book").run_itch`` over the day: decode + book mode, the book's
  main path (chapter 5);
* ``decode``: ``optimized.itch.decode`` of the day (chapter 3; its AVX-512 VBMI loop is
  run-time dispatched in both builds, so this row shows what the rest of the code gains).

Full runs only: the smoke run of ``make test`` skips it (the second build takes minutes).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.bench.conftest import SMALL
from tests.bench.paired import MIN_PAIRS, quartiles

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "march-native"
MESSAGES = 1_000_000
SYMBOLS = 500
REPS = 5
WORKLOADS = ("replay", "decode")

pytestmark = pytest.mark.skipif(SMALL, reason="full runs only: the -march=native build "
                                              "takes minutes")

# Run in a fresh interpreter: load the given extension as optimized._native before the
# package, time the work, print a JSON line.
CHILD = r"""
import importlib.util, json, statistics, sys, time
so, day_path, workload, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if so:
    spec = importlib.util.spec_from_file_location("optimized._native", so)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["optimized._native"] = mod
    spec.loader.exec_module(mod)
import optimized.itch
from optimized.market import Market
raw = open(day_path, "rb").read()
def once():
    if workload == "replay":
        Market("book").run_itch(raw)
    else:
        optimized.itch.decode(raw)
once()
times = []
for _ in range(reps):
    t = time.perf_counter(); once(); times.append(time.perf_counter() - t)
print(json.dumps({"seconds": statistics.median(times),
                  "module": sys.modules["optimized._native"].__file__}))
"""


@cache
def native_build() -> Path:
    """The -march=native copy of the extension (built once; reused while fresh)."""
    python = sys.executable
    nanobind_dir = subprocess.run([python, "-m", "nanobind", "--cmake_dir"], check=True,
                                  capture_output=True, text=True).stdout.strip()
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run(["cmake", "-S", str(ROOT / "native"), "-B", str(BUILD), *generator,
                    "-DCMAKE_BUILD_TYPE=Release", "-DTWINMATCH_MARCH=native",
                    f"-DPython_EXECUTABLE={python}", f"-Dnanobind_DIR={nanobind_dir}"],
                   check=True, capture_output=True, timeout=600)
    subprocess.run(["cmake", "--build", str(BUILD), "-j", str(len(os.sched_getaffinity(0)))],
                   check=True, capture_output=True, timeout=3600)
    [so] = sorted(BUILD.glob("_native*.so"))
    return so


@cache
def day_file() -> Path:
    from twinmatch.gen import market_day_bytes

    path = BUILD / f"day-{MESSAGES}-{SYMBOLS}.itch"
    if not path.exists():
        BUILD.mkdir(parents=True, exist_ok=True)
        path.write_bytes(market_day_bytes(MESSAGES, SYMBOLS, seed=3)[0])
    return path


def child(so: Path | None, workload: str) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, str(so or ""), str(day_file()),
                          workload, str(REPS)], cwd=ROOT, check=True, capture_output=True,
                         text=True, timeout=600)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if so is not None:
        assert Path(result["module"]).resolve() == so.resolve()  # the copy we built
    return float(result["seconds"]) / MESSAGES


@pytest.mark.timeout(3600)  # the first call builds the second copy: minutes
@pytest.mark.benchmark(group="march")
@pytest.mark.parametrize("workload", WORKLOADS)
def test_paired_march_native(benchmark: Any, workload: str) -> None:
    so = native_build()
    child(None, workload), child(so, workload)  # warm-up: page cache, both builds
    base: list[float] = []
    native: list[float] = []

    def one_pair() -> None:
        base.append(child(None, workload))
        native.append(child(so, workload))

    benchmark.pedantic(one_pair, rounds=MIN_PAIRS, iterations=1)
    ratios = [b / n for b, n in zip(base, native, strict=True)]
    q1, median, q3 = quartiles(ratios)
    benchmark.extra_info.update(
        includes=f"{workload} of a {MESSAGES:,}-message, {SYMBOLS}-symbol day, timed "
                 f"in-process (median of {REPS} runs), each build in its own process",
        paired={"key": f"march-native-{workload}", "fast": "-march=native",
                "slow": "baseline x86-64", "median": median, "q1": q1, "q3": q3,
                "pairs": len(ratios), "fast_s_per_op": statistics.median(native),
                "slow_s_per_op": statistics.median(base), "ratios": ratios})
