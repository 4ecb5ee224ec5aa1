"""The naive twin of the input journal (chapter 11), with ``struct`` and ``zlib.crc32``.

* :class:`JournalWriter` appends every command (an ``OPS_DTYPE`` row) as a
  sequence-numbered record with a CRC-32, and hands the bytes to the operating system
  by a flush policy (every record, every ``batch`` records, or every ``interval_ms``).
* :func:`read_journal` checks every record (length, CRC, sequence) and returns the
  commands; a torn last record is dropped and counted, anything else wrong is a
  :class:`~contract.journal.JournalError` naming the byte offset.
* :class:`Engine` is the chapter 1 book with a journal in front: each command is
  written ahead of being applied, so the journal alone can rebuild the book, and a
  snapshot plus the journal's tail can rebuild it faster (:meth:`Engine.recover`).

The format is in :mod:`contract.journal`; native/journal.hpp writes the same bytes.
"""

from __future__ import annotations

import os
import time
import zlib
from pathlib import Path

import numpy as np

from contract.dtypes import OP_LIMIT, OPS_DTYPE, as_records, records
from contract.journal import (
    BUFFER_RECORDS,
    FILE_HEADER,
    FILE_HEADER_SIZE,
    JOURNAL_MAGIC,
    JOURNAL_VERSION,
    PAYLOAD_SIZE,
    POLICY_BATCH,
    POLICY_EVERY,
    POLICY_TIMER,
    RECORD_HEADER,
    RECORD_HEADER_SIZE,
    RECORD_SIZE,
    SCAN_BAD_CRC,
    SCAN_BAD_LENGTH,
    SCAN_BAD_MAGIC,
    SCAN_BAD_SEQUENCE,
    SCAN_BAD_VERSION,
    SCAN_OK,
    SCAN_SHORT_HEADER,
    SEQUENCE,
    JournalError,
    JournalScan,
    read_snapshot,
    scan_message,
    write_snapshot,
    writer_args,
)
from naive.book import Book, Side

__all__ = ["Engine", "JournalWriter", "crc32", "read_journal"]


def crc32(data: bytes | bytearray | memoryview) -> int:
    """CRC-32 (the zlib/PNG/Ethernet one): what every record carries."""
    return zlib.crc32(data)


# --8<-- [start:encode]
def encode_record(seq: int, op_row: bytes) -> bytes:
    """One record: length, CRC-32 of the payload, payload (sequence number + the op)."""
    payload = SEQUENCE.pack(seq) + op_row
    return RECORD_HEADER.pack(len(payload), zlib.crc32(payload)) + payload
# --8<-- [end:encode]


class JournalWriter:
    """Appends commands to a journal file, flushing by a policy.

    ``resume=False`` starts a new journal (the file is replaced). ``resume=True`` reads
    the existing one (every record checked), cuts off a torn last record, and carries on
    from the next sequence number; a missing file is started afresh.
    """

    def __init__(self, path: str | os.PathLike[str], policy: str = "every", batch: int = 64,
                 interval_ms: float = 5.0, fsync: bool = False, resume: bool = False) -> None:
        self.policy, self.interval_ns = writer_args(policy, batch, interval_ms)
        self.batch = batch
        self.fsync = fsync
        self.scan: JournalScan | None = None
        next_seq = 1
        if resume and Path(path).exists():
            _, self.scan = read_journal(path)
            next_seq = self.scan.last_seq + 1
            self._fd = os.open(path, os.O_WRONLY)
            os.ftruncate(self._fd, self.scan.valid_end)  # drop a torn tail before appending
            os.lseek(self._fd, self.scan.valid_end, os.SEEK_SET)
        else:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            self._write(FILE_HEADER.pack(JOURNAL_MAGIC, JOURNAL_VERSION, PAYLOAD_SIZE))
        self.next_seq = next_seq          # the number the next record gets
        self.flushed_seq = next_seq - 1   # every record up to this one is acknowledged
        self.flushes = 0
        self._pending = bytearray()
        self._last_flush = time.monotonic_ns()

    # --8<-- [start:append]
    def append(self, ops: np.ndarray) -> int:
        """Journal every row of ``ops`` in order; returns the last sequence number given."""
        if self._fd < 0:
            raise ValueError("journal: the writer is closed")
        rows = as_records(ops, OPS_DTYPE, "ops")
        raw = rows.tobytes()
        size = OPS_DTYPE.itemsize
        for k in range(len(rows)):
            self._pending += encode_record(self.next_seq, raw[k * size:(k + 1) * size])
            self.next_seq += 1
            if self._due():
                self.flush()
        return self.next_seq - 1

    def _due(self) -> bool:
        """Whether the policy says the pending records go to the OS now."""
        if len(self._pending) >= BUFFER_RECORDS * RECORD_SIZE:
            return True  # the buffer is full, whatever the policy
        if self.policy == POLICY_EVERY:
            return True
        if self.policy == POLICY_BATCH:
            return len(self._pending) >= self.batch * RECORD_SIZE
        assert self.policy == POLICY_TIMER
        return time.monotonic_ns() - self._last_flush >= self.interval_ns

    def flush(self) -> None:
        """Hand every pending record to the OS (and fsync if asked): all are acknowledged.

        A closed writer has nothing pending: flushing it does nothing."""
        if self._pending:
            self._write(bytes(self._pending))
            self._pending.clear()
            if self.fsync:
                os.fsync(self._fd)
            self.flushes += 1
        self.flushed_seq = self.next_seq - 1
        self._last_flush = time.monotonic_ns()
    # --8<-- [end:append]

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def close(self) -> None:
        """Flush, then close the file (a second close does nothing)."""
        if self._fd >= 0:
            self.flush()
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --8<-- [start:scan]
def read_journal(path: str | os.PathLike[str]) -> tuple[np.ndarray, JournalScan]:
    """Every command in a journal (OPS_DTYPE, in sequence order) and what the scan found.

    A record cut short at the end of the file (a write that did not finish) is dropped
    and counted in the scan; a bad length, a bad CRC before the last record, or a
    sequence number out of order is a JournalError naming its offset. A length prefix
    is compared with PAYLOAD_SIZE before anything is read or allocated for it.
    """
    data = Path(path).read_bytes()
    if len(data) < FILE_HEADER_SIZE:
        _fail(SCAN_SHORT_HEADER, 0, len(data), 0)
    magic, version, payload_size = FILE_HEADER.unpack_from(data)
    if magic != JOURNAL_MAGIC:
        _fail(SCAN_BAD_MAGIC, 0, 0, 0)
    if version != JOURNAL_VERSION or payload_size != PAYLOAD_SIZE:
        _fail(SCAN_BAD_VERSION, 8, version, payload_size)
    rows: list[bytes] = []
    offset = FILE_HEADER_SIZE
    first_seq = 0
    last_seq = 0
    while offset < len(data):
        left = len(data) - offset
        if left < RECORD_HEADER_SIZE:
            break  # torn: the file ends inside a record header
        length, crc = RECORD_HEADER.unpack_from(data, offset)
        if length != PAYLOAD_SIZE:
            _fail(SCAN_BAD_LENGTH, offset, length, PAYLOAD_SIZE)
        if left < RECORD_SIZE:
            break  # torn: the file ends inside the payload
        payload = data[offset + RECORD_HEADER_SIZE:offset + RECORD_SIZE]
        actual = zlib.crc32(payload)
        if actual != crc:
            if left == RECORD_SIZE:
                break  # the last record, damaged: torn (its write did not finish)
            _fail(SCAN_BAD_CRC, offset, crc, actual)
        (seq,) = SEQUENCE.unpack_from(payload)
        if seq != last_seq + 1:  # a journal starts at 1 and never skips or repeats
            _fail(SCAN_BAD_SEQUENCE, offset, seq, last_seq + 1)
        first_seq = 1
        last_seq = seq
        rows.append(payload[SEQUENCE.size:])
        offset += RECORD_SIZE
    # A bytearray, not bytes + .copy(): numpy copies a dtype with padding field by
    # field, leaving the padding bytes undefined, and the twins compare ops as bytes.
    ops = np.frombuffer(bytearray(b"".join(rows)), dtype=OPS_DTYPE)
    torn = len(data) - offset
    return ops, JournalScan(len(rows), first_seq, last_seq, offset,
                            offset if torn else -1, torn)


def _fail(code: int, offset: int, value: int, expected: int) -> None:
    assert code != SCAN_OK
    raise JournalError(scan_message(code, offset, value, expected), offset)
# --8<-- [end:scan]


class Engine:
    """A chapter 1 book with an input journal in front of it.

    ``submit`` journals each command before applying it (write-ahead), so a command
    whose record has been flushed (``journal.flushed_seq``) survives a crash of this
    process. Without a journal the engine only applies (replay uses it so).
    """

    def __init__(self, journal: JournalWriter | None = None) -> None:
        self.book = Book()
        self.journal = journal
        self.applied_seq = 0  # the sequence number of the last command applied

    # --8<-- [start:submit]
    def submit(self, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Journal, then apply, a batch of commands; returns (fills, rejects) as apply."""
        if self.journal is not None:
            self.journal.append(ops)
        return self.apply(ops)
    # --8<-- [end:submit]

    def apply(self, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Apply commands without journaling them (replay, recovery)."""
        fills, rejects = self.book.apply(ops)
        self.applied_seq += len(ops)
        return fills, rejects

    # --8<-- [start:resting]
    def resting_orders(self) -> np.ndarray:
        """The book as OP_LIMIT rows in snapshot order (contract.journal): bids best
        first, then asks best first, each level oldest first."""
        rows = [(order_id, 0, price, qty, OP_LIMIT, int(side))
                for side in (Side.BUY, Side.SELL)
                for price, _priority, order_id, qty in self.book.walk(side)]
        return records(rows, OPS_DTYPE)
    # --8<-- [end:resting]

    def snapshot(self, path: str | os.PathLike[str]) -> None:
        """Write the books atomically, tagged with the last sequence number applied.

        The journal is flushed first, so it holds every command the snapshot covers.
        """
        if self.journal is not None:
            self.journal.flush()
        write_snapshot(path, self.applied_seq, self.resting_orders())

    # --8<-- [start:recover]
    @classmethod
    def recover(cls, journal_path: str | os.PathLike[str],
                snapshot_path: str | os.PathLike[str] | None = None,
                ) -> tuple[Engine, JournalScan, np.ndarray, np.ndarray]:
        """Rebuild an engine: the snapshot if there is one, then the journal's tail.

        Returns the engine (no journal attached), the journal scan, and the fills and
        rejects of the tail's commands. A snapshot newer than the journal's end is an
        error: the journal must hold every command the snapshot covers.
        """
        ops, scan = read_journal(journal_path)
        engine = cls()
        if snapshot_path is not None and Path(snapshot_path).exists():
            seq, resting = read_snapshot(snapshot_path)
            if seq > scan.last_seq:
                raise JournalError(f"snapshot: covers sequence {seq}, the journal holds "
                                   f"{scan.first_seq}..{scan.last_seq}", 16)
            engine.book.apply(resting)
            engine.applied_seq = seq
        fills, rejects = engine.apply(ops[engine.applied_seq:])  # seq k is ops[k - 1]
        return engine, scan, fills, rejects
    # --8<-- [end:recover]
