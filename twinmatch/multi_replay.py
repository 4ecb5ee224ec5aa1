"""Many feeds at once (chapter 10, beyond one machine): ``twinmatch replay A B C ...``.

Each file is one task: replay it through one twin's many-books market (twinmatch/replay.py)
and return its report. Days are independent, so the tasks run anywhere: one after the
other in this process, in ``--workers N`` worker processes on this machine, or with
``--cluster ADDRESS`` on a dask.distributed cluster (``--cluster local`` starts one in
this process). The scheduler is dask's, not one of our own: it already knows how to
ship a task to a worker, notice a worker that died and run its task again.

Whichever runs them, the reports come back in the order the files were given and merge
into the same report: the per-file reports (without their timings) and their totals.

A task names its file by absolute path: a cluster's workers must see the same
filesystem at the same paths (a shared disk, or one machine); the report keeps each
file's name as it was given.

Stopping: SIGINT or SIGTERM during a run kills the worker processes and raises
:class:`Stopped` (the command line exits 130 or 143); nothing is merged or written. A
worker also dies when this process dies without a word (kill -9): it watches a pipe
whose only writer is this process.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

__all__ = ["TIMING_KEYS", "Stopped", "merge_reports", "replay_many", "replay_one"]

# What differs from run to run: left out of the merged report's per-file entries, so
# that a sequential, a multi-process and a cluster run merge into equal reports.
TIMING_KEYS: Final = ("seconds", "messages_per_s", "ns_per_message", "peak_rss_mb")
SUMMED: Final = ("messages", "fills", "volume", "live_orders", "books")
CLUSTER_TIMEOUT_S: Final = 600.0
CLUSTER_START_S: Final = 60.0  # a local cluster that has not started by then has failed
KILL_WAIT_S: Final = 5.0       # after SIGKILL, how long a worker may take to be gone


class Stopped(Exception):
    """SIGINT or SIGTERM arrived during a run: the workers were killed, nothing merged."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")


# --8<-- [start:signals]
@contextmanager
def _stop_on_signals() -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM raise Stopped in this (the main) thread,
    so that the code waiting for the workers can kill them on its way out. (Python runs
    signal handlers in the main thread only; elsewhere this does nothing.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        raise Stopped(signum)

    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _worker_start(lifeline: multiprocessing.connection.Connection) -> None:
    """In each worker process, first: Ctrl-C (sent to the whole process group) is the
    parent's to handle; and a thread exits the worker when ``lifeline`` reaches EOF,
    which happens when the parent process is gone, however it died."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        try:
            lifeline.recv_bytes()  # nothing is ever sent: this returns only by EOF
        except (EOFError, OSError):
            pass
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="lifeline").start()
# --8<-- [end:signals]


def replay_one(path: str, impl: str = "optimized", mode: str = "book") -> dict[str, Any]:
    """One file's report (runs in whichever process or cluster worker gets the task)."""
    from twinmatch.replay import replay

    return replay(path, impl, mode).report


def _add(into: dict[str, int], more: dict[str, int]) -> None:
    for key, n in more.items():
        into[key] = into.get(key, 0) + n


# --8<-- [start:merge]
def merge_reports(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The per-file reports (timings left out) and their totals, in the files' order."""
    files = [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in reports]
    total: dict[str, Any] = {key: sum(int(r[key]) for r in reports) for key in SUMMED}
    for group in ("by_type", "anomalies", "rejects"):
        merged: dict[str, int] = {}
        for r in reports:
            _add(merged, r[group])
        total[group] = dict(sorted(merged.items()))
    return {"files": files, "total": total}
# --8<-- [end:merge]


# --8<-- [start:replay_many]
def replay_many(paths: Sequence[str | Path], impl: str = "optimized", mode: str = "book",
                workers: int = 1, cluster: str | None = None,
                local_processes: bool = True, *, progress: bool = False
                ) -> dict[str, Any]:
    """Replay every file: in ``workers`` processes, or on ``cluster`` (a dask.distributed
    scheduler's address, or ``"local"``: a LocalCluster of ``workers`` started here, as
    processes or, ``local_processes=False``, threads: quick to start, the tests)."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    names = [str(p) for p in paths]
    files = [str(Path(p).resolve()) for p in names]  # what a task opens, anywhere
    start = time.perf_counter()
    with _stop_on_signals():
        if cluster is not None:
            reports = _on_cluster(files, impl, mode, workers, cluster, local_processes)
            how = (f"dask.distributed (local, {min(workers, len(files))} workers)"
                   if cluster == "local" else f"dask.distributed ({cluster})")
        elif workers == 1 or len(files) == 1:
            reports = _sequential(files, impl, mode, _FilesDone(len(files), progress))
            how = "sequential"
        else:
            n = min(workers, len(files))
            reports = _in_processes(files, impl, mode, n, progress)
            how = f"{n} worker processes"
    for name, report in zip(names, reports, strict=True):
        report["file"] = name  # as given, as a sequential run reports it
    merged = merge_reports(reports)
    merged.update(impl=impl, mode=mode, executor=how, seconds=time.perf_counter() - start)
    return merged
# --8<-- [end:replay_many]


class _FilesDone:
    """"k of n files replayed" on one stderr line, only when stderr is a terminal."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.count = total, 0
        self.enabled = enabled and sys.stderr.isatty()

    def one(self, report: dict[str, Any]) -> dict[str, Any]:
        self.count += 1
        if self.enabled:
            sys.stderr.write(f"\r{self.count} of {self.total} files replayed")
            sys.stderr.flush()
        return report

    def close(self) -> None:
        if self.enabled and self.count:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _sequential(files: list[str], impl: str, mode: str,
                done: _FilesDone) -> list[dict[str, Any]]:
    reports = [done.one(replay_one(p, impl, mode)) for p in files]
    done.close()
    return reports


# --8<-- [start:in_processes]
def _in_processes(files: list[str], impl: str, mode: str, n: int,
                  progress: bool = False) -> list[dict[str, Any]]:
    """The tasks in n worker processes; on any way out but success (Stopped, an error in
    a task), every worker is killed and reaped before the exception goes on."""
    ctx = multiprocessing.get_context("forkserver")
    lifeline, keep_alive = ctx.Pipe(duplex=False)  # workers get the reading end only
    pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_worker_start,
                               initargs=(lifeline,))
    try:
        futures = [pool.submit(replay_one, p, impl, mode) for p in files]
        done = _FilesDone(len(files), progress)
        for finished in as_completed(futures):  # (in the order they finish: progress)
            done.one(finished.result())
        done.close()
        reports = [f.result() for f in futures]
        pool.shutdown()
        return reports
    except BaseException:
        # (the executor keeps its processes privately, and forgets them once shut down)
        procs = list((pool._processes or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            p.kill()
        for p in procs:
            p.join(KILL_WAIT_S)
        raise
    finally:
        keep_alive.close()  # (after shutdown: a worker reads EOF only once it is idle)
        lifeline.close()
# --8<-- [end:in_processes]


# --8<-- [start:on_cluster]
def _on_cluster(files: list[str], impl: str, mode: str, workers: int, address: str,
                processes: bool) -> list[dict[str, Any]]:
    from distributed import Client, LocalCluster

    if address == "local":
        n = min(workers, len(files))  # a worker per file at most
        # worker processes talk TCP on 127.0.0.1 only (threads: in-process, no socket)
        where = {"host": "127.0.0.1"} if processes else {}
        try:
            lc = LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=n, threads_per_worker=1, processes=processes,
                dashboard_address=None, **where)
        except Exception as e:  # noqa: BLE001 - dask says RuntimeError, or a timeout
            raise OSError(f"--cluster local: the cluster did not start: {e}") from e
        with lc:  # closed on every way out, the client's failure included
            with Client(lc, timeout=CLUSTER_START_S) as client:  # type: ignore[no-untyped-call]
                return _gather(client, files, impl, mode)
    with Client(address, timeout=30) as client:  # type: ignore[no-untyped-call]
        return _gather(client, files, impl, mode)


def _gather(client: Any, names: list[str], impl: str, mode: str) -> list[dict[str, Any]]:
    # pure=False: a file may change between two runs, so a task is never served from the
    # cache of an earlier one with the same arguments.
    futures = client.map(replay_one, names, impl=impl, mode=mode, pure=False)
    return [f.result(timeout=CLUSTER_TIMEOUT_S) for f in futures]  # in the files' order
# --8<-- [end:on_cluster]


def format_many(r: dict[str, Any]) -> str:
    """The merged report as text: one line per file, then the totals."""
    lines = [f"twinmatch replay: {len(r['files'])} files, impl={r['impl']} mode={r['mode']}, "
             f"{r['executor']}, {r['seconds']:.2f} s"]
    for f in r["files"]:
        lines.append(f"  {f['file']}: {f['messages']:,} messages, {f['fills']:,} fills, "
                     f"{f['live_orders']:,} live orders")
    t = r["total"]
    lines.append(f"total: {t['messages']:,} messages, {t['fills']:,} fills, volume "
                 f"{t['volume']:,}, {t['live_orders']:,} live orders in {t['books']:,} books")
    return "\n".join(lines) + "\n"
