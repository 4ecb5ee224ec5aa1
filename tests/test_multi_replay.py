"""``twinmatch replay`` over many files (chapter 10): sequential, worker processes and a
dask.distributed LocalCluster all merge into the same report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from twinmatch import cli
from twinmatch.gen import write_itch_flow, write_market_day
from twinmatch.multi_replay import TIMING_KEYS, merge_reports, replay_many, replay_one

from .conftest import ROOT

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("days")
    paths = []
    for seed in (1, 2, 3):
        write_market_day(d, 3_000, 12, seed, ("itch",), name=f"day{seed}")
        paths.append(d / f"day{seed}.itch")
    return paths


def test_merged_report_is_the_sum_of_the_files(days: list[Path]) -> None:
    seq = replay_many(days)
    reports = [replay_one(str(p)) for p in days]
    assert seq["total"]["messages"] == sum(r["messages"] for r in reports)
    assert seq["total"]["fills"] == sum(r["fills"] for r in reports)
    assert [f["file"] for f in seq["files"]] == [str(p) for p in days]
    assert not any(k in f for f in seq["files"] for k in TIMING_KEYS)
    assert merge_reports(reports) == {"files": seq["files"], "total": seq["total"]}


def test_worker_processes_equal_sequential(days: list[Path]) -> None:
    seq = replay_many(days, mode="book")
    par = replay_many(days, mode="book", workers=2)
    assert par["executor"] == "2 worker processes"
    assert (par["files"], par["total"]) == (seq["files"], seq["total"])


def test_dask_local_cluster_equals_sequential(days: list[Path]) -> None:
    pytest.importorskip("distributed")
    seq = replay_many(days)
    dist = replay_many(days, workers=2, cluster="local", local_processes=False)
    assert dist["executor"].startswith("dask.distributed")
    assert (dist["files"], dist["total"]) == (seq["files"], seq["total"])


def test_local_cluster_starts_a_worker_per_file_at_most(days: list[Path]) -> None:
    pytest.importorskip("distributed")
    r = replay_many(days[:2], workers=4, cluster="local", local_processes=False)
    assert r["executor"] == "dask.distributed (local, 2 workers)"


def test_local_cluster_failed_start_is_an_error_and_leaves_nothing(days: list[Path]) -> None:
    """A local cluster whose workers cannot start (here: a preload module that does not
    exist) used to end the command with dask's traceback. Now: exit 1, a one-line error,
    and no process of the run left."""
    pytest.importorskip("distributed")
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__PRELOAD='["twinmatch_no_such_module"]')
    proc = subprocess.Popen(
        [sys.executable, "-m", "twinmatch", "replay", *map(str, days[:2]), "--cluster", "local",
         "--workers", "2"], cwd=ROOT, env=env, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=150)
        assert proc.returncode == 1, err[-2000:]
        assert "--cluster local: the cluster did not start: Nanny failed to start" in err
        assert "Traceback" not in err.split("twinmatch replay:")[-1]
        assert wait_for(lambda: session_pids(proc.pid) == [], 10), session_pids(proc.pid)
    finally:
        for pid in session_pids(proc.pid):
            os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait(timeout=10)


def test_remote_cluster_worker_in_another_directory(days: list[Path], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """--cluster tcp://...: a scheduler and a worker started as separate processes on
    127.0.0.1, the worker in another directory. Files given as relative paths are sent
    as absolute ones (the worker needs the same filesystem, not the same directory), and
    the report names them as given."""
    pytest.importorskip("distributed")
    sched_file = tmp_path / "scheduler.json"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    procs = [subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", "0", "--no-dashboard", "--scheduler-file", str(sched_file)],
        cwd=tmp_path, start_new_session=True, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)]
    try:
        assert wait_for(sched_file.exists, 60), "the scheduler did not start"
        address = json.loads(sched_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", address, "--host",
             "127.0.0.1", "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
             "--no-nanny", "--death-timeout", "60"],
            cwd=elsewhere, start_new_session=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        monkeypatch.chdir(days[0].parent)
        names = [p.name for p in days]  # relative to this directory, not the worker's
        remote = replay_many(names, cluster=address)
        seq = replay_many(names)
        assert remote["executor"] == f"dask.distributed ({address})"
        assert [f["file"] for f in remote["files"]] == names
        assert (remote["files"], remote["total"]) == (seq["files"], seq["total"])
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)


def test_cli_many_files(days: list[Path], tmp_path: Path,
                        capsys: pytest.CaptureFixture[str]) -> None:
    flow = tmp_path / "flow.itch"
    write_itch_flow(flow, 2_000, symbols=8, seed=5)
    files = [str(p) for p in days[:2]] + [str(flow)]
    assert cli.main(["replay", *files, "--mode", "match", "--json"]) == 0
    seq = json.loads(capsys.readouterr().out)
    assert cli.main(["replay", *files, "--mode", "match", "--workers", "2", "--json"]) == 0
    par = json.loads(capsys.readouterr().out)
    assert (par["files"], par["total"]) == (seq["files"], seq["total"])
    assert par["total"]["fills"] > 0
    assert cli.main(["replay", *files]) == 0
    assert "total:" in capsys.readouterr().out


def test_cli_many_files_bad_arguments(days: list[Path], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(p) for p in days[:2]]
    assert cli.main(["replay", *files, "--workers", "0"]) == 2
    assert "--workers" in capsys.readouterr().err
    assert cli.main(["replay", *files, "--books", str(tmp_path / "b.csv")]) == 2
    assert cli.main(["replay", files[0], str(tmp_path / "missing.itch")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "cut.itch"
    bad.write_bytes(days[0].read_bytes()[:1001])
    assert cli.main(["replay", files[0], str(bad), "--workers", "2"]) == 1
    assert "ITCH" in capsys.readouterr().err


# ------------------------------------------------------------- faults: no orphan


def session_pids(sid: int) -> list[int]:
    """Every live (not zombie) process in session ``sid``, from /proc: the command was
    started in a session of its own, so these are it and everything it started, whoever
    their parent is now."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        state, _, _, session = stat[stat.rindex(")") + 2:].split()[:4]
        if int(session) == sid and state != "Z":
            pids.append(int(entry))
    return pids


def wait_for(predicate: Callable[[], object], timeout: float) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


@pytest.fixture(scope="module")
def big_day(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A day the naive twin takes seconds to replay: a signal arrives mid-task."""
    d = tmp_path_factory.mktemp("big")
    write_market_day(d, 150_000, 40, 9, ("itch",), name="big")
    return d / "big.itch"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_signal_leaves_no_process_behind(big_day: Path, sig: int) -> None:
    """replay A B C --workers 2, stopped mid-run: SIGTERM used to leave the forkserver, the
    resource tracker and the workers running for ever. Now SIGINT and SIGTERM stop the
    workers and exit (130 / 143) within a second or two, and after kill -9 the workers
    die with their parent (PR_SET_PDEATHSIG): nothing of the session survives."""
    cmd = [sys.executable, "-m", "twinmatch", "replay", *[str(big_day)] * 3, "--impl", "naive",
           "--workers", "2"]
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        # the command, the forkserver and two workers (the resource tracker too)
        assert wait_for(lambda: len(session_pids(proc.pid)) >= 4, 60), "workers never started"
        time.sleep(0.5)  # the tasks are running
        t0 = time.monotonic()
        proc.send_signal(sig)
        proc.wait(timeout=30)
        stopped_s = time.monotonic() - t0
        assert wait_for(lambda: session_pids(proc.pid) == [], 10), session_pids(proc.pid)
        if sig == signal.SIGKILL:
            assert proc.returncode == -sig
        else:
            assert proc.returncode == 128 + sig, proc.stderr.read() if proc.stderr else ""
            assert stopped_s < 5  # (a fraction of a second on an idle machine)
    finally:
        for pid in session_pids(proc.pid):
            os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=10)
        for f in (proc.stdout, proc.stderr):
            if f:
                f.close()
