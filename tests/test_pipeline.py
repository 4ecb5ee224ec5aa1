"""The pipeline twins (naive/pipeline.py, native/pipeline.hpp): the same fills as the
single-threaded replay, lossless and drop policies under a slow logger, a stop that
drains, bad input that stops cleanly. Every wait in both twins is bounded; pytest-timeout
backs that up."""

from __future__ import annotations

import importlib
import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from contract.itch_errors import ItchError
from optimized import _native
from twinmatch.gen import market_day_bytes, write_itch_flow
from twinmatch.replay import FILLS_HEADER, new_market, write_fills

pytestmark = pytest.mark.timeout(120)

IMPLS = ("naive", "optimized")
HEADER = FILLS_HEADER


@pytest.fixture(params=IMPLS)
def pipe_impl(request: pytest.FixtureRequest) -> Any:
    return importlib.import_module(f"{request.param}.pipeline")


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("pipe") / "flow.itch"
    write_itch_flow(path, 20_000, symbols=30, seed=11)
    return path.read_bytes()


@pytest.fixture(scope="module")
def day() -> bytes:
    raw, _books = market_day_bytes(20_000, 30, seed=4)
    return raw


def single_threaded(data: bytes, mode: str) -> str:
    """The fills CSV of the chapter 5 replay (optimized decoder + market, one thread)."""
    events = importlib.import_module("optimized.itch").decode(data)[0]
    out = io.StringIO()
    out.write(HEADER)
    write_fills(out, new_market("optimized", mode).run(events))
    return out.getvalue()


def run(impl: Any, data: bytes, path: Path, **options: Any) -> tuple[dict[str, Any], str]:
    with open(path, "w") as out:
        out.write(HEADER)
        report = impl.Pipeline(**options).run(data, out)
    return report, path.read_text()


def test_fills_equal_single_threaded_replay(pipe_impl: Any, flow: bytes, day: bytes,
                                            tmp_path: Path) -> None:
    for mode, data in (("match", flow), ("book", day)):
        report, csv = run(pipe_impl, data, tmp_path / "f.csv", mode=mode)
        assert csv == single_threaded(data, mode)
        assert report["fills_logged"] == report["fills_produced"] == csv.count("\n") - 1
        assert report["fills_dropped"] == 0
        assert report["matched"] == report["events"] > 0
        assert report["e2e"]["count"] == report["events"]
        for key in ("p50", "p90", "p99", "p99.9", "max"):
            assert report["e2e"][key] >= 0 and report["parse"][key] >= 0
        assert report["placement"] and report["wait"]


@pytest.mark.parametrize("placement,wait", [("shared", "yield"), ("fused", "yield"),
                                            ("pinned", "auto"), ("auto", "auto")])
def test_every_placement_gives_the_same_fills(flow: bytes, tmp_path: Path, placement: str,
                                              wait: str) -> None:
    from optimized.pipeline import Pipeline

    with open(tmp_path / "f.csv", "w") as out:
        out.write(HEADER)
        report = Pipeline("match", placement=placement, wait=wait, ring_capacity=64,
                          fill_capacity=64).run(flow, out)
    assert (tmp_path / "f.csv").read_text() == single_threaded(flow, "match")
    cpus = _cpus()
    plan = _native.choose_cpus(cpus, [_native.core_key(c) for c in cpus], 3)
    if placement == "pinned" and not plan:  # fewer than 3 physical cores: falls back, says so
        assert report["placement"] == "shared" and report["pinned"] == []
    if placement == "auto":
        want = "pinned" if plan else "fused"
        assert report["placement"] == want
        assert report["wait"] == ("spin" if want == "pinned" else "spin-then-yield")
    if report["placement"] == "pinned":  # each stage pinned itself where the plan said
        assert report["planned"] == plan and report["pinned"] == plan
    else:
        assert report["planned"] == [] and report["pinned"] == []
    assert report["cpus"] == cpus


def _cpus() -> list[int]:
    import os

    return sorted(os.sched_getaffinity(0))


@pytest.mark.parametrize("cpus,cores,want", [
    # 4 cores x 2 SMT threads, Linux numbering (siblings i and i+4): distinct cores, CPU 0 last
    (list(range(8)), [0, 1, 2, 3, 0, 1, 2, 3], [1, 2, 3]),
    # 2 cores x 2 threads: only two physical cores, so no pinned plan at all
    ([0, 1, 2, 3], [0, 1, 0, 1], []),
    # 3 cores, one of them CPU 0's: its sibling 3 instead of CPU 0 itself, and last
    ([0, 1, 2, 3], [0, 1, 2, 0], [1, 2, 3]),
    # 3 single-thread cores including CPU 0: CPU 0 is used, but last
    ([0, 1, 2], [0, 1, 2], [1, 2, 0]),
    # taskset to CPUs 4-6 of that 8-thread machine
    ([4, 5, 6], [0, 1, 2], [4, 5, 6]),
    ([0, 1], [0, 1], []),
    ([5], [1], []),
    # unknown topology (each CPU its own core, as core_key says when sysfs is missing)
    ([0, 1, 2, 3], [-1, -2, -3, -4], [1, 2, 3]),
])
def test_placement_prefers_distinct_physical_cores(cpus: list[int], cores: list[int],
                                                   want: list[int]) -> None:
    assert _native.choose_cpus(cpus, cores, 3) == want


def test_core_keys_group_smt_siblings() -> None:
    from pathlib import Path as P

    for cpu in _cpus():
        sib = P(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        if not sib.exists():
            continue
        for part in sib.read_text().strip().split(","):
            lo, _, hi = part.partition("-")
            for other in range(int(lo), int(hi or lo) + 1):
                assert _native.core_key(other) == _native.core_key(cpu)


def test_a_thread_that_fails_to_start_is_an_exception_not_a_terminate() -> None:
    # In a subprocess: before the fix, std::terminate would have killed pytest itself.
    code = (
        "from optimized.pipeline import Pipeline\n"
        "from twinmatch.gen import market_day_bytes\n"
        "raw, _ = market_day_bytes(2_000, 5, seed=1)\n"
        "for placement in ('shared', 'fused'):\n"
        "    for which in (1, 2, 3):\n"
        "        try:\n"
        "            Pipeline('match', placement=placement, fail_spawn=which).run(raw)\n"
        "        except RuntimeError as e:\n"
        "            assert 'cannot start a thread' in str(e), e\n"
        "        else:\n"
        "            assert placement == 'fused' and which == 2, (placement, which)\n"
        "print('ok')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


def test_packed_counters_variant_gives_the_same_fills(flow: bytes, tmp_path: Path) -> None:
    from optimized.pipeline import Pipeline

    with open(tmp_path / "f.csv", "w") as out:
        out.write(HEADER)
        report = Pipeline("match", placement="shared", stage_lines=False).run(flow, out)
    assert report["stage_lines"] is False
    assert (tmp_path / "f.csv").read_text() == single_threaded(flow, "match")


def test_type_bytes_that_are_not_printable_ascii_are_counted_alike(flow: bytes) -> None:
    from naive.pipeline import Pipeline as Naive
    from optimized.pipeline import Pipeline as Fast

    # Unknown types are counted and skipped: 0x80, 0xff, 0x00, 0x7f and a space.
    odd = b"".join(len(body).to_bytes(2, "big") + body for body in
                   (b"\x80ab", b"\xff", b"\x00", b"\x00zz", b"\x7f", b" x"))
    data = flow + odd
    a, b = Naive("match").run(data), Fast("match").run(data)
    assert a["by_type"] == b["by_type"]
    for key, n in (("\\x80", 1), ("\\xff", 1), ("\\x00", 2), ("\\x7f", 1), (" ", 1)):
        assert a["by_type"][key] == n, key
    assert a["records"] == b["records"] and a["consumed"] == b["consumed"] == len(data)


def test_slow_logger_lossless_loses_nothing(pipe_impl: Any, flow: bytes,
                                            tmp_path: Path) -> None:
    report, csv = run(pipe_impl, flow, tmp_path / "f.csv", mode="match", fill_capacity=2,
                      logger_delay_ns=20_000)
    assert csv == single_threaded(flow, "match")
    assert report["fills_dropped"] == 0
    assert report["fills_logged"] == report["fills_produced"] > 0
    assert report["engine_stalls"] > 0 and report["engine_stall_ns"] > 0


def test_slow_logger_drop_policy_accounts_for_every_fill(pipe_impl: Any, flow: bytes,
                                                         tmp_path: Path) -> None:
    report, csv = run(pipe_impl, flow, tmp_path / "f.csv", mode="match", fill_capacity=2,
                      logger_delay_ns=20_000, policy="drop")
    assert report["fills_dropped"] > 0
    assert report["fills_logged"] + report["fills_dropped"] == report["fills_produced"]
    assert report["engine_stalls"] == 0
    # What was logged is the produced fills minus the dropped ones, in order.
    want = single_threaded(flow, "match").splitlines()[1:]
    got = csv.splitlines()[1:]
    assert len(got) == report["fills_logged"]
    assert report["fills_produced"] == len(want)
    it = iter(want)
    assert all(row in it for row in got)  # a subsequence


def test_stop_after_drains_everything_parsed(pipe_impl: Any, flow: bytes,
                                             tmp_path: Path) -> None:
    report, csv = run(pipe_impl, flow, tmp_path / "f.csv", mode="match", stop_after=7_000)
    assert report["stopped"] and report["records"] == 7_000
    assert csv == single_threaded(flow[:report["consumed"]], "match")


def test_stop_from_another_thread_drains(pipe_impl: Any, flow: bytes, tmp_path: Path) -> None:
    # The stop lands wherever the parser is (or after the end, on a fast machine); either
    # way everything parsed before it is matched and logged.
    big = flow
    pipe = pipe_impl.Pipeline("match", logger_delay_ns=2_000)
    timer = threading.Timer(0.05, pipe.stop)
    timer.start()
    try:
        with open(tmp_path / "f.csv", "w") as out:
            out.write(HEADER)
            report = pipe.run(big, out)
    finally:
        timer.cancel()
    csv = (tmp_path / "f.csv").read_text()
    assert csv == single_threaded(big[:report["consumed"]], "match")
    assert report["fills_logged"] == report["fills_produced"]


def test_bad_input_mid_file_stops_cleanly(pipe_impl: Any, flow: bytes, tmp_path: Path) -> None:
    events = importlib.import_module("optimized.itch")
    # Find the start of record 10,000 and give it a length prefix of zero.
    off = 0
    for _ in range(10_000):
        off += 2 + int.from_bytes(flow[off:off + 2], "big")
    bad = flow[:off] + b"\x00\x00" + flow[off + 2:]
    with pytest.raises(ItchError) as caught:
        events.decode(bad)
    with open(tmp_path / "f.csv", "w") as out:
        out.write(HEADER)
        with pytest.raises(ItchError) as err:
            pipe_impl.Pipeline("match").run(bad, out)
    assert str(err.value) == str(caught.value)
    assert err.value.offset == off and err.value.reason == "zero_length"
    report = err.value.report  # type: ignore[attr-defined]
    assert report["records"] == 10_000
    assert (tmp_path / "f.csv").read_text() == single_threaded(flow[:off], "match")


def test_truncated_tail(pipe_impl: Any, flow: bytes, tmp_path: Path) -> None:
    cut = flow[:-5]
    with pytest.raises(ItchError) as caught:
        importlib.import_module("optimized.itch").decode(cut)
    with pytest.raises(ItchError) as err:
        pipe_impl.Pipeline("match").run(cut)
    assert str(err.value) == str(caught.value)


def test_twins_report_the_same_counts(flow: bytes, tmp_path: Path) -> None:
    from naive.pipeline import Pipeline as Naive
    from optimized.pipeline import Pipeline as Fast

    a = Naive("match").run(flow)
    b = Fast("match").run(flow)
    for key in ("records", "events", "matched", "fills_produced", "fills_logged", "by_type",
                "anomalies", "rejects", "volume", "live_orders", "books", "consumed",
                "interrupted", "stopped"):
        assert a[key] == b[key], key
    for hist in ("parse", "e2e"):  # one histogram layout, so the two reports compare
        assert a[hist]["layout"] == b[hist]["layout"]
        assert a[hist]["sub_buckets"] == b[hist]["sub_buckets"] == 32
        assert a[hist]["count"] == b[hist]["count"] == a["events"]
        assert set(a[hist]) == set(b[hist])


def test_bad_options(pipe_impl: Any) -> None:
    with pytest.raises(ValueError):
        pipe_impl.Pipeline("match", policy="sometimes")
    with pytest.raises(ValueError):
        pipe_impl.Pipeline("sideways")


def test_histogram_percentiles_are_monotone(flow: bytes) -> None:
    from optimized.pipeline import Pipeline

    r = Pipeline("match").run(flow)
    e = r["e2e"]
    assert e["p50"] <= e["p90"] <= e["p99"] <= e["p99.9"] <= max(e["max"], e["p99.9"])
    assert np.isfinite(e["mean"])


def test_stamp_clock_is_named_and_in_nanoseconds(flow: bytes) -> None:
    """The TSC runs where /proc/cpuinfo says it is invariant (x86), else steady_clock; either
    way the histograms are nanoseconds: their sums cannot exceed the run's wall time."""
    import platform

    from optimized.pipeline import Pipeline

    r = Pipeline("match").run(flow)
    flags = ""
    if Path("/proc/cpuinfo").exists():
        flags = Path("/proc/cpuinfo").read_text()
    invariant = "constant_tsc" in flags and "nonstop_tsc" in flags
    x86 = platform.machine() in ("x86_64", "AMD64")
    assert r["clock"] == ("tsc" if x86 and invariant else "std::chrono::steady_clock")
    wall_ns = r["seconds"] * 1e9
    # Fused: parse and e2e tile one thread's time; apart: each is within the run.
    assert r["parse"]["count"] == r["e2e"]["count"] == r["events"]
    assert r["parse"]["mean"] * r["parse"]["count"] <= wall_ns * 1.01
    assert 0 < r["e2e"]["max"] <= wall_ns * 1.01


def test_replay_pipeline_reads_files_fifos_and_gzip(flow: bytes, tmp_path: Path) -> None:
    import gzip
    import threading

    from twinmatch.pipeline_replay import load, replay_pipeline

    path = tmp_path / "flow.itch"
    path.write_bytes(flow)
    assert load(path) == flow
    (tmp_path / "flow.itch.gz").write_bytes(gzip.compress(flow))
    assert load(tmp_path / "flow.itch.gz") == flow
    fifo = tmp_path / "feed.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(flow), daemon=True)
    writer.start()
    assert load(fifo) == flow  # a FIFO is read once, its first bytes not lost to sniffing
    writer.join(timeout=30)
    fills = tmp_path / "f.csv"
    replay_pipeline(path, "optimized", "match", fills)
    assert fills.read_text() == single_threaded(flow, "match")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("impl", ["naive", "optimized"])
def test_pipeline_stops_reading_an_endless_stream_that_is_not_itch(impl: str) -> None:
    # /dev/zero never ends: read whole, it would fill the memory. Its first record has
    # length 0, so the pipeline reports that, having read one chunk.
    from contract.itch_errors import ItchError
    from twinmatch.pipeline_replay import load, replay_pipeline

    assert len(load("/dev/zero")) <= 16 << 20
    with pytest.raises(ItchError, match="zero_length at byte 0"):
        replay_pipeline("/dev/zero", impl, "match")


def test_cli_replay_pipeline(flow: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                             ) -> None:
    import json

    from twinmatch import cli

    path = tmp_path / "flow.itch"
    path.write_bytes(flow)
    assert cli.main(["replay", str(path), "--pipeline", "--mode", "match",
                     "--fills", str(tmp_path / "f.csv")]) == 0
    text = capsys.readouterr().out
    for words in ("placement:", "p99.9", "end to end", "ring stalls", "fills:"):
        assert words in text
    assert (tmp_path / "f.csv").read_text() == single_threaded(flow, "match")
    assert cli.main(["replay", str(path), "--pipeline", "--mode", "match", "--impl", "naive",
                     "--json", "--policy", "drop"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["fills_logged"] + report["fills_dropped"] == report["fills_produced"]
    assert report["impl"] == "naive" and report["policy"] == "drop"


@pytest.fixture(scope="module")
def big_flow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An order flow whose fills take far longer to log than the test waits (with the
    CLI's simulated slow disk), so that Ctrl-C lands mid-run for both twins."""
    path = tmp_path_factory.mktemp("sigint") / "flow.itch"
    write_itch_flow(path, 400_000, symbols=50, seed=3)
    return path


@pytest.mark.timeout(180)
@pytest.mark.parametrize("impl", IMPLS)
def test_ctrl_c_stops_drains_and_reports(impl: str, big_flow: Path, tmp_path: Path) -> None:
    import json

    fills = tmp_path / "f.csv"
    cmd = [sys.executable, "-m", "twinmatch", "replay", str(big_flow), "--pipeline",
           "--mode", "match", "--impl", impl, "--fills", str(fills), "--json",
           "--logger-delay-ns", "200000"]  # 0.2 ms per fill: minutes for the whole file
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        # the fills are written under a temporary name (twinmatch/atomic.py), created
        # just before the run, renamed once it is over
        part = tmp_path / f".f.csv.part-{proc.pid}"
        while not part.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert part.exists(), "the replay never started"
        time.sleep(0.5)  # well inside the run
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        waited = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-2000:]
    assert waited < 5, waited  # generous: the drain is bounded by the rings' contents
    report = json.loads(out)
    assert report["interrupted"] and report["stopped"]
    data = big_flow.read_bytes()
    assert 0 < report["consumed"] < len(data)
    assert report["matched"] == report["events"]
    assert report["fills_logged"] == report["fills_produced"]
    # What was parsed was matched and logged, exactly as a run over just that prefix.
    assert fills.read_text() == single_threaded(data[:report["consumed"]], "match")


def _tsan_pipeline(tmp_path: Path) -> Path:
    import shutil

    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found: cannot build the ThreadSanitizer pipeline stress")
    root = Path(__file__).resolve().parent.parent
    exe = tmp_path / "pipeline_stress_tsan"
    cmd = [gxx, "-std=c++20", "-O1", "-g", "-fsanitize=thread", "-I", str(root / "native"),
           str(root / "tests" / "native" / "pipeline_stress.cpp"), "-o", str(exe)]
    built = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if built.returncode != 0:
        pytest.skip(f"g++ cannot build with -fsanitize=thread here: {built.stderr[-300:]}")
    return exe


@pytest.mark.timeout(900)
def test_whole_pipeline_under_thread_sanitizer(tmp_path: Path) -> None:
    exe = _tsan_pipeline(tmp_path)
    env = {"TSAN_OPTIONS": "halt_on_error=1 exitcode=66", "PATH": os.environ.get("PATH", "")}
    run = subprocess.run([str(exe), "20000"], capture_output=True, text=True, timeout=600,
                         env=env)
    if run.returncode != 0 and "FATAL: ThreadSanitizer" in run.stderr:
        pytest.skip(f"ThreadSanitizer cannot run here: {run.stderr[-300:]}")
    assert "WARNING: ThreadSanitizer" not in run.stderr, run.stderr[-3000:]
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    assert "all checks passed" in run.stdout


def test_clock_reads_checked() -> None:
    """Chapter 7's clock hook: only the two clocks, and a reading is monotonic."""
    from optimized import _native

    with pytest.raises(ValueError, match="clock must be"):
        _native.clock_reads("wall", 10)
    assert _native.clock_reads("steady_clock", 0) == (0, "std::chrono::steady_clock")
    total, name = _native.clock_reads("tsc", 3)
    assert name in ("tsc", "std::chrono::steady_clock") and total > 0
    with pytest.raises((TypeError, OverflowError)):
        _native.clock_reads("tsc", -1)
