"""Many feeds at once (chapter 10, beyond one machine): ``twinmatch replay A B C ...``.

Each file is one task: replay it through one twin's many-books market (twinmatch/replay.py)
and return its report. Days are independent, so the tasks run anywhere: one after the
other in this process, in ``--workers N`` worker processes on this machine, or with
``--cluster ADDRESS`` on a dask.distributed cluster (``--cluster local`` starts one in
this process). The scheduler is dask's, not one of our own: it already knows how to
ship a task to a worker, notice a worker that died and run its task again.

Whichever runs them, the reports come back in the order the files were given and merge
into the same report: the per-file reports (without their timings) and their totals.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Final

__all__ = ["TIMING_KEYS", "merge_reports", "replay_many", "replay_one"]

# What differs from run to run: left out of the merged report's per-file entries, so
# that a sequential, a multi-process and a cluster run merge into equal reports.
TIMING_KEYS: Final = ("seconds", "messages_per_s", "ns_per_message", "peak_rss_mb")
SUMMED: Final = ("messages", "fills", "volume", "live_orders", "books")
CLUSTER_TIMEOUT_S: Final = 600.0


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
                local_processes: bool = True) -> dict[str, Any]:
    """Replay every file; ``workers`` > 1: that many worker processes; ``cluster``: a
    dask.distributed scheduler's address, or ``"local"`` for a LocalCluster of
    ``workers`` workers started (and stopped) here: worker processes, or with
    ``local_processes=False`` threads of this process (quick to start: the tests)."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    names = [str(p) for p in paths]
    start = time.perf_counter()
    if cluster is not None:
        reports = _on_cluster(names, impl, mode, workers, cluster, local_processes)
        how = f"dask.distributed ({cluster})"
    elif workers == 1 or len(names) == 1:
        reports = [replay_one(p, impl, mode) for p in names]
        how = "sequential"
    else:
        ctx = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(max_workers=min(workers, len(names)), mp_context=ctx) as pool:
            reports = list(pool.map(replay_one, names, [impl] * len(names), [mode] * len(names)))
        how = f"{min(workers, len(names))} worker processes"
    merged = merge_reports(reports)
    merged.update(impl=impl, mode=mode, executor=how, seconds=time.perf_counter() - start)
    return merged


def _on_cluster(names: list[str], impl: str, mode: str, workers: int, address: str,
                processes: bool) -> list[dict[str, Any]]:
    from distributed import Client, LocalCluster

    if address == "local":
        with LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=workers, threads_per_worker=1, processes=processes,
                dashboard_address=None) as lc, Client(lc) as client:  # type: ignore[no-untyped-call]
            return _gather(client, names, impl, mode)
    with Client(address, timeout=30) as client:  # type: ignore[no-untyped-call]
        return _gather(client, names, impl, mode)


def _gather(client: Any, names: list[str], impl: str, mode: str) -> list[dict[str, Any]]:
    # pure=False: a file may change between two runs, so a task is never served from the
    # cache of an earlier one with the same arguments.
    futures = client.map(replay_one, names, impl=impl, mode=mode, pure=False)
    return [f.result(timeout=CLUSTER_TIMEOUT_S) for f in futures]  # in the files' order


# --8<-- [end:replay_many]


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
