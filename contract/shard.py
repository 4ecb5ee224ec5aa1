"""What both sharding twins (naive/shard.py, optimized/shard.py) share: the checks of
their arguments, which worker owns a locate, and how the workers' results are merged
into the report of one market.

A result (``ShardResult``, a dict) holds ``fills`` (FILL_DTYPE, in stream order, as one
Market's ``run`` returns them), ``books_csv``, ``counts`` (as ``Market.counts()``),
``live_orders``, ``events`` (events decoded), ``workers``, ``design``, ``mode``,
``per_worker`` (``received`` and ``applied`` per worker), ``routed`` (events the writer
handed to each worker: routed design only, else ``[]``) and ``conflicts`` (events the
writer had to ask a worker about: an add or a U's new reference that its map says may be
live on another worker's symbol; 0 on every feed that keeps ITCH's rule that references
are unique for the day). The result equals one market's on every stream.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Final

__all__ = ["DESIGNS", "WORKERS_MAX", "check_design", "check_workers", "cpu_quota",
           "default_workers", "merge_books_csv", "owner", "routed_by_reference", "usable_cpus"]

DESIGNS: Final = ("broadcast", "routed")
WORKERS_MAX: Final = 64  # native/shard.hpp: kMaxShardWorkers
BOOKS_HEADER: Final = "locate,stock,side,price,priority,order_ref,shares\n"

ShardResult = dict[str, Any]


def check_workers(workers: object) -> int:
    """A worker count: an int in 1..64; else a TypeError or ValueError naming it."""
    if not isinstance(workers, int) or isinstance(workers, bool):
        raise TypeError(f"workers must be an int, got {type(workers).__name__}")
    if not 1 <= workers <= WORKERS_MAX:
        raise ValueError(f"workers must be 1..{WORKERS_MAX}, got {workers}")
    return workers


def check_design(design: object) -> str:
    if design not in DESIGNS:
        raise ValueError(f"design must be 'broadcast' or 'routed', got {design!r}")
    return str(design)


# Where the kernel says which cgroups this process is in, and where they are mounted
# (module attributes, so that a test can point them at a fake tree).
PROC_CGROUP: Path = Path("/proc/self/cgroup")
CGROUP_ROOT: Path = Path("/sys/fs/cgroup")


def _quota_in(directory: Path, v2: bool) -> float | None:
    """The CPUs' worth of time one cgroup directory allows, or None (no limit there)."""
    try:
        if v2:  # cpu.max: "max 100000" or "150000 100000" (quota and period, in us)
            quota, period = (directory / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        quota = (directory / "cpu.cfs_quota_us").read_text().strip()  # -1: none
        period = (directory / "cpu.cfs_period_us").read_text().strip()
        return None if int(quota) <= 0 else int(quota) / int(period)
    except (OSError, ValueError, ZeroDivisionError):
        return None


def cpu_quota() -> float | None:
    """How many CPUs' worth of time the cgroup CPU quota gives this process (containers
    set one; ``os.sched_getaffinity`` does not see it), or None if none is set: the
    tightest ``cpu.max`` (cgroup v2) or ``cpu.cfs_quota_us / cpu.cfs_period_us`` (v1)
    from this process's cgroup up to the mount's root."""
    try:
        lines = PROC_CGROUP.read_text().splitlines()
    except OSError:
        return None
    tightest: float | None = None
    for line in lines:  # "0::/path" (v2), "3:cpu,cpuacct:/path" (v1)
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            v2, base = True, CGROUP_ROOT
        elif "cpu" in controllers.split(","):
            v2, base = False, CGROUP_ROOT / controllers
            if not base.is_dir():
                base = CGROUP_ROOT / "cpu"
        else:
            continue
        d = base / path.lstrip("/")
        while True:  # this cgroup and each parent: every level's quota applies
            q = _quota_in(d, v2)
            if q is not None and (tightest is None or q < tightest):
                tightest = q
            if d == base or base not in d.parents:
                break
            d = d.parent
    return tightest


# --8<-- [start:usable_cpus]
def usable_cpus() -> int:
    """The CPUs this process can keep busy at once: its affinity mask (taskset,
    cpusets), capped by the cgroup quota rounded up (1.5 CPUs of time: 2 threads)."""
    cpus = len(os.sched_getaffinity(0))
    quota = cpu_quota()
    if quota is not None:
        cpus = min(cpus, max(1, math.ceil(quota)))
    return cpus


def default_workers() -> int:
    """Book workers for this process: the CPUs it can keep busy (:func:`usable_cpus`)
    less one for the writer, and at least one."""
    return max(1, usable_cpus() - 1)
# --8<-- [end:usable_cpus]


# --8<-- [start:owner]
def owner(locate: int, workers: int) -> int:
    """The worker (0..workers-1) that owns a locate: Fibonacci hashing (multiply by
    2^16 / golden ratio, keep 16 bits) spreads neighbouring locates, and a
    multiply-shift maps 0..65535 onto 0..workers-1. native/shard.hpp has the same
    formula."""
    h = (locate * 40503) & 0xFFFF
    return (h * workers) >> 16
# --8<-- [end:owner]


def routed_by_reference(kind: int, mode: str, shares: int, price: int) -> bool:
    """Does this event look its order reference up (E C X D U in book mode, X D U in
    match mode)? The market checks a U's price and a non-D's shares first; those rejects
    depend on the event alone, so such events stay with their locate's owner."""
    if kind in b"EC":
        return mode == "book" and shares != 0
    if kind in b"XU":
        return shares != 0 and not (kind == ord("U") and price == 0)
    return kind == ord("D")


def merge_books_csv(parts: list[str]) -> str:
    """The workers' books CSVs as one: rows by locate, each locate's rows as its worker
    wrote them (each locate is one worker's, so its sides, prices and priorities are
    already in order)."""
    rows: list[tuple[int, int, str]] = []
    for w, text in enumerate(parts):
        lines = text.splitlines(keepends=True)
        if lines and lines[0] == BOOKS_HEADER:
            lines = lines[1:]
        rows.extend((int(line.split(",", 1)[0]), w, line) for line in lines)
    rows.sort(key=lambda r: (r[0], r[1]))  # stable: a worker's rows keep their order
    return BOOKS_HEADER + "".join(line for _, _, line in rows)
