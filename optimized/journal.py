"""The optimized input journal (``native/journal.hpp``), same API as ``naive/journal.py``.

* ``JournalWriter``: the records are built in place in a buffer allocated once (4096
  records), each CRC-32 computed by a slicing-by-8 table loop, and handed to the OS by
  the same flush policies; ``append`` runs in C++ with the GIL released.
* ``read_journal``: the same checks in C++ over the file's bytes; the same
  :class:`~contract.journal.JournalError` words (made by ``contract.journal``).
* ``Engine``: the optimized chapter 1 book (``SnapshotBook``: native/book.hpp's Book,
  which can also list its resting orders in queue order) with the journal in front.

This module only wires the native pieces together; every record is written and
checked in C++.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from contract.journal import (
    JournalError,
    JournalScan,
    Outbox,
    Output,
    journal_paths,
    read_snapshot,
    scan_message,
    write_snapshot,
    writer_args,
)
from optimized._native import JournalWriterCore, SnapshotBook, journal_crc32, journal_scan

__all__ = ["Engine", "JournalWriter", "crc32", "read_journal"]


def crc32(data: bytes) -> int:
    """CRC-32 in C++, equal to ``zlib.crc32(data)``."""
    return journal_crc32(bytes(data))


def read_journal(path: str | os.PathLike[str]) -> tuple[np.ndarray, JournalScan]:
    """Every command in a journal and what the scan found (see naive.journal)."""
    (code, offset, value, expected, records, last_seq, valid_end, torn_offset, torn_bytes,
     ops) = journal_scan(Path(path).read_bytes())
    if code != 0:
        raise JournalError(scan_message(code, offset, value, expected), offset)
    return ops, JournalScan(records, 1 if records else 0, last_seq, valid_end, torn_offset,
                            torn_bytes)


class JournalWriter:
    """Appends commands to a journal file, flushing by a policy (see naive.journal): the
    same lock, atomic creation, and failure rules, in C++."""

    def __init__(self, path: str | os.PathLike[str], policy: str = "every", batch: int = 64,
                 interval_ms: float = 5.0, fsync: bool = False, resume: bool = False) -> None:
        self.policy, interval_ns = writer_args(policy, batch, interval_ms)
        self.batch = batch
        self.fsync = fsync
        self.path = os.fspath(path)
        self.scan: JournalScan | None = None
        lock, tmp, directory = journal_paths(path)
        self._core = JournalWriterCore(self.path, lock, self.policy, batch, interval_ns, fsync)
        try:
            if resume and Path(path).exists():
                _, self.scan = read_journal(path)
                self._core.resume(self.scan.valid_end, self.scan.last_seq + 1)
            else:
                self._core.create(tmp, directory)
        except BaseException:
            self._core.close()  # releases the lock
            raise

    def append(self, ops: np.ndarray) -> int:
        """Journal every row of ``ops`` in order; returns the last sequence number given."""
        return self._core.append(ops)

    def flush(self) -> None:
        self._core.flush()

    def sync(self) -> None:
        self._core.sync()

    def poll(self) -> bool:
        return self._core.poll()

    def due_in(self) -> float | None:
        ns = self._core.due_in_ns()
        return None if ns < 0 else ns / 1e9

    def close(self) -> None:
        self._core.close()

    @property
    def failed(self) -> int:
        return self._core.failed

    @property
    def next_seq(self) -> int:
        return self._core.next_seq

    @property
    def flushed_seq(self) -> int:
        return self._core.flushed_seq

    @property
    def synced_seq(self) -> int:
        return self._core.synced_seq

    @property
    def flushes(self) -> int:
        return self._core.flushes

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Engine:
    """The optimized book with an input journal in front of it (see naive.journal)."""

    def __init__(self, journal: JournalWriter | None = None) -> None:
        self.book = SnapshotBook()
        self.journal = journal
        self.applied_seq = 0
        self.outbox = Outbox()

    def submit(self, ops: np.ndarray) -> list[Output]:
        """Journal, then apply, a batch of commands; return the outputs now covered."""
        first = self.applied_seq + 1
        if self.journal is not None:
            first = self.journal.append(ops) - len(ops) + 1
        fills, rejects = self.apply(ops)
        self.outbox.hold(Output(first, first + len(ops) - 1, fills, rejects))
        return self.release()

    def release(self) -> list[Output]:
        covered = self.applied_seq if self.journal is None else self.journal.flushed_seq
        return self.outbox.release(covered)

    def poll(self) -> list[Output]:
        if self.journal is not None:
            self.journal.poll()
        return self.release()

    def flush(self) -> list[Output]:
        if self.journal is not None:
            self.journal.flush()
        return self.release()

    def apply(self, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        fills, rejects = self.book.apply(ops)
        self.applied_seq += len(ops)
        return fills, rejects

    def resting_orders(self) -> np.ndarray:
        return self.book.resting_orders()

    def snapshot(self, path: str | os.PathLike[str]) -> None:
        """Write the books atomically (the journal is flushed and fsync'ed first)."""
        if self.journal is not None:
            self.journal.sync()
        write_snapshot(path, self.applied_seq, self.resting_orders())

    @classmethod
    def recover(cls, journal_path: str | os.PathLike[str],
                snapshot_path: str | os.PathLike[str] | None = None,
                ) -> tuple[Engine, JournalScan, np.ndarray, np.ndarray]:
        """Rebuild an engine: the snapshot if there is one, then the journal's tail."""
        ops, scan = read_journal(journal_path)
        engine = cls()
        if snapshot_path is not None and Path(snapshot_path).exists():
            seq, resting = read_snapshot(snapshot_path)
            if seq > scan.last_seq:
                raise JournalError(f"snapshot: covers sequence {seq}, the journal holds "
                                   f"{scan.first_seq}..{scan.last_seq}", 16)
            engine.book.apply(resting)
            engine.applied_seq = seq
        fills, rejects = engine.apply(ops[engine.applied_seq:])
        return engine, scan, fills, rejects
