"""Benchmarks of chapter 11, group "journal": what durability costs, in both twins.

The workload is the realistic order flow of chapter 1 (``cached_flow``), submitted to a
journaled engine in chunks of CHUNK commands, as a gateway hands an engine what arrived
since its last look. What each benchmark includes:

* ``submit`` (``policy`` none / every / batch / timer): the engine's ``submit`` of every
  command: the journal record (sequence number, CRC-32, append to a buffer), the flush
  to the OS by the policy (a write(2) per record, per BATCH records, or once the oldest
  pending record has waited TIMER_MS), ``apply`` on the book, and holding each chunk's
  output until the journal covers it (output commit). ``none`` is the book alone,
  the cost without a journal.
  The file is in a temporary directory; no fsync (a flush hands the bytes to the
  kernel, which survives a killed process, not a power cut); opening and closing the
  file are included, once per round.
* ``replay``: ``Engine.recover`` of the whole journal: read the file, check every
  record's length, CRC and sequence number, apply every command.

Every benchmark first checks its result against the naive twin (the same journal
bytes, fills and books), then times fresh engines and files. The ratios the chapter
quotes come from the paired tests at the end (tests/bench/paired.py): both twins
interleaved in one process, the median of the per-pair ratios.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import naive.journal
import optimized.journal
from contract.journal import books_csv
from tests.bench.conftest import SMALL, cached_flow
from tests.bench.paired import Side, paired

N = 20_000 if SMALL else 200_000
CHUNK = 256
BATCH = 64
TIMER_MS = 1.0
POLICIES = ("none", "every", "batch", "timer")
TWINS: dict[str, ModuleType] = {"naive": naive.journal, "optimized": optimized.journal}
WORKDIR = Path(tempfile.gettempdir())

INCLUDES = {
    "none": "Book.apply only, chunks of 256: no journal",
    "every": "journal record + one write(2) per record + Book.apply, chunks of 256; no fsync",
    "batch": "journal record + one write(2) per 64 records + Book.apply, chunks of 256; no fsync",
    "timer": "journal record + a write(2) when 1 ms has passed + Book.apply, chunks of 256; "
             "no fsync",
    "replay": "read the journal file, check every record (length, CRC-32, sequence), apply all",
}


def ops() -> np.ndarray:
    return cached_flow(N, 1)


def journal_path(tag: str) -> Path:
    return WORKDIR / f"twinmatch-bench-journal-{os.getpid()}-{tag}"


def new_engine(twin: ModuleType, policy: str, path: Path) -> Any:
    if policy == "none":
        return twin.Engine()
    return twin.Engine(twin.JournalWriter(path, policy, batch=BATCH, interval_ms=TIMER_MS))


# --8<-- [start:submit_loop]
def submit_all(engine: Any, commands: np.ndarray) -> int:
    """What a gateway does: hand the engine what arrived, CHUNK commands at a time, and
    pass on the outputs the engine releases (their commands are in the journal)."""
    released = 0
    for at in range(0, len(commands), CHUNK):
        released += len(engine.submit(commands[at:at + CHUNK]))
    released += len(engine.flush())
    if engine.journal is not None:
        engine.journal.close()
    return released
# --8<-- [end:submit_loop]


def submit_side(impl: str, policy: str) -> Side:
    twin, commands, path = TWINS[impl], ops(), journal_path(f"{impl}-{policy}")

    def run(engine: Any) -> None:
        submit_all(engine, commands)

    return Side(f"{impl}/{policy}", run, ops=len(commands),
                setup=lambda: new_engine(twin, policy, path))


def check(impl: str, policy: str) -> None:
    """The twin's journal, fills and books equal the naive twin's."""
    results = []
    for name in ("naive", impl):
        path = journal_path(f"check-{name}")
        engine = new_engine(TWINS[name], policy, path)
        fills = []
        commands = ops()
        for at in range(0, len(commands), CHUNK):
            fills += [out.fills for out in engine.submit(commands[at:at + CHUNK])]
        fills += [out.fills for out in engine.flush()]
        if engine.journal is not None:
            engine.journal.close()
        journal = path.read_bytes() if policy != "none" else b""
        path.unlink(missing_ok=True)
        results.append((journal, sum(len(f) for f in fills), books_csv(engine.resting_orders())))
    assert results[0] == results[1]


@pytest.mark.benchmark(group="journal")
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("impl", sorted(TWINS))
def test_submit(benchmark: Any, impl: str, policy: str) -> None:
    check(impl, policy)
    side = submit_side(impl, policy)
    benchmark.extra_info.update({"ops": N, "includes": INCLUDES[policy], "chunk": CHUNK})
    benchmark.pedantic(side.run, setup=lambda: ((side.setup(),), {}),
                       rounds=3 if SMALL else 7, iterations=1)
    journal_path(f"{impl}-{policy}").unlink(missing_ok=True)


@pytest.fixture(scope="module")
def recorded() -> Iterator[Path]:
    path = journal_path("replay")
    submit_all(new_engine(naive.journal, "batch", path), ops())
    yield path
    path.unlink(missing_ok=True)


@pytest.mark.benchmark(group="journal")
@pytest.mark.parametrize("impl", sorted(TWINS))
def test_replay(benchmark: Any, impl: str, recorded: Path) -> None:
    twin = TWINS[impl]
    engine, scan, fills, _ = twin.Engine.recover(recorded)
    reference, _, ref_fills, _ = naive.journal.Engine.recover(recorded)
    assert scan.records == N and fills.tobytes() == ref_fills.tobytes()
    assert books_csv(engine.resting_orders()) == books_csv(reference.resting_orders())
    benchmark.extra_info.update({"ops": N, "includes": INCLUDES["replay"]})
    run: Callable[[], Any] = lambda: twin.Engine.recover(recorded)  # noqa: E731
    benchmark.pedantic(run, rounds=3 if SMALL else 7, iterations=1)


# Paired: each key's fast side and slow side (impl/policy), interleaved in one process.
PAIRED_JOURNAL = {
    **{f"journal-{p}": (f"optimized/{p}", f"naive/{p}") for p in POLICIES},
    # What durability costs one twin: the book alone against the book behind a journal.
    **{f"journal-cost-{p}": ("optimized/none", f"optimized/{p}") for p in POLICIES[1:]},
    **{f"journal-naive-cost-{p}": ("naive/none", f"naive/{p}") for p in POLICIES[1:]},
}


@pytest.mark.benchmark(group="journal")
@pytest.mark.parametrize("key", list(PAIRED_JOURNAL))
def test_paired_journal(benchmark: Any, key: str) -> None:
    sides = [name.split("/") for name in PAIRED_JOURNAL[key]]
    for impl, policy in sides:
        if impl != "naive":
            check(impl, policy)
    fast, slow = (submit_side(impl, policy) for impl, policy in sides)
    paired(benchmark, key, fast, slow, pairs=11, warmup=1,
           includes=" / ".join(INCLUDES[policy] for _, policy in sides),
           workload=f"realistic flow, {N} commands")
    for impl, policy in sides:
        journal_path(f"{impl}-{policy}").unlink(missing_ok=True)
