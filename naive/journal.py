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

import fcntl
import os
import time
import zlib
from pathlib import Path
from typing import NoReturn

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
    JournalLocked,
    JournalScan,
    Outbox,
    Output,
    WriterFailed,
    journal_paths,
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

    The journal's lock file is taken first: a second writer, in this process or another,
    gets :class:`~contract.journal.JournalLocked`. ``resume=False`` starts a new journal,
    made atomically (the file is replaced). ``resume=True`` reads the existing one
    (every record checked), cuts off a torn last record, and carries on from the next
    sequence number; a missing file is started afresh. A write or fsync that fails
    raises its OSError once; the writer then refuses everything
    (:class:`~contract.journal.WriterFailed`).
    """

    def __init__(self, path: str | os.PathLike[str], policy: str = "every", batch: int = 64,
                 interval_ms: float = 5.0, fsync: bool = False, resume: bool = False) -> None:
        self.policy, self.interval_ns = writer_args(policy, batch, interval_ms)
        self.batch = batch
        self.fsync = fsync
        self.path = os.fspath(path)
        self.scan: JournalScan | None = None
        self.failed = 0       # the errno of the write or fsync that failed; 0 while healthy
        self.flushes = 0
        self._pending = bytearray()
        self._fd = -1
        self._start(0, 1)
        self._lock_fd = _lock(self.path)
        try:
            if resume and Path(path).exists():
                _, self.scan = read_journal(path)
                self._fd = os.open(path, os.O_WRONLY)
                os.ftruncate(self._fd, self.scan.valid_end)  # drop a torn tail
                os.lseek(self._fd, self.scan.valid_end, os.SEEK_SET)
                self._start(self.scan.valid_end, self.scan.last_seq + 1)
            else:
                self._fd = _create(self.path)
                self._start(FILE_HEADER_SIZE, 1)
        except BaseException:
            self.close()
            raise

    def _start(self, end: int, next_seq: int) -> None:
        self._end = end                   # bytes of the file: the header and whole records
        self.next_seq = next_seq          # the number the next record gets
        self.flushed_seq = next_seq - 1   # every record up to this one is flushed
        self.synced_seq = next_seq - 1    # ... and up to this one fsync'ed
        self._oldest = 0                  # when the oldest pending record came (timer)

    # --8<-- [start:append]
    def append(self, ops: np.ndarray) -> int:
        """Journal every row of ``ops`` in order; return the last sequence number."""
        self._check()
        rows = as_records(ops, OPS_DTYPE, "ops")
        raw = rows.tobytes()
        size = OPS_DTYPE.itemsize
        for k in range(len(rows)):
            if not self._pending and self.policy == POLICY_TIMER:
                self._oldest = time.monotonic_ns()
            self._pending += encode_record(self.next_seq, raw[k * size:(k + 1) * size])
            self.next_seq += 1
            if self._due():
                self.flush()
        return self.next_seq - 1

    def flush(self) -> None:
        """Hand every pending record to the OS (and fsync if asked): they are flushed.

        write(2) may stop part-way (a full disk): then only the whole records that
        reached the file count, the rest are dropped and the writer fails for good."""
        if self._fd < 0 and not self.failed:
            return  # closed: nothing pending
        self._check()
        if self._pending:
            done, code = _write_all(self._fd, self._pending)
            whole = done // RECORD_SIZE
            self._end += whole * RECORD_SIZE
            if code:
                self._fail(code, whole, ack=not self.fsync)  # fsync asked: none acked
            if self.fsync:
                try:
                    os.fsync(self._fd)
                except OSError as exc:
                    self._fail(exc.errno or 0, whole, ack=False)
                self.synced_seq = self.next_seq - 1
            self._pending.clear()
            self.flushes += 1
        self.flushed_seq = self.next_seq - 1
    # --8<-- [end:append]

    def _due(self) -> bool:
        """Whether the policy says the pending records go to the OS now."""
        if len(self._pending) >= BUFFER_RECORDS * RECORD_SIZE:
            return True  # the buffer is full, whatever the policy
        if self.policy == POLICY_EVERY:
            return True
        if self.policy == POLICY_BATCH:
            return len(self._pending) >= self.batch * RECORD_SIZE
        assert self.policy == POLICY_TIMER
        return time.monotonic_ns() - self._oldest >= self.interval_ns

    # --8<-- [start:fail]
    def _fail(self, code: int, whole: int, ack: bool) -> NoReturn:
        """The writer's one failure: keep the ``whole`` records that reached the file
        (flushed if ``ack``), cut a partial one off, drop the rest; raise the error."""
        in_file = self.next_seq - 1 - len(self._pending) // RECORD_SIZE + whole
        if ack:
            self.flushed_seq = in_file
        self.next_seq = in_file + 1
        self._pending.clear()
        try:
            os.ftruncate(self._fd, self._end)
        except OSError:
            pass  # best effort: a reader drops a torn tail anyway
        self.failed = code
        raise OSError(code, os.strerror(code), self.path)
    # --8<-- [end:fail]

    def _check(self) -> None:
        if self.failed:
            raise WriterFailed(self.failed, self.path)
        if self._fd < 0:
            raise ValueError("journal: the writer is closed")

    def sync(self) -> None:
        """Flush, then fsync whatever the policy: records up to ``flushed_seq`` survive a
        power cut. A snapshot calls this first (Engine.snapshot)."""
        if self._fd < 0 and not self.failed:
            return
        self.flush()
        if self.synced_seq != self.flushed_seq:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                self._fail(exc.errno or 0, 0, ack=False)
            self.synced_seq = self.flushed_seq

    def poll(self) -> bool:
        """The timer policy's clock, for when no append comes: flush if the oldest
        pending record has waited ``interval_ms``. True if it flushed."""
        if self._fd < 0 or self.failed or not self._pending or self.policy != POLICY_TIMER:
            return False
        if time.monotonic_ns() - self._oldest < self.interval_ns:
            return False
        self.flush()
        return True

    def due_in(self) -> float | None:
        """Seconds until poll() must flush (0.0: now), or None if nothing waits on the
        timer (nothing pending, or another policy)."""
        if self._fd < 0 or self.failed or not self._pending or self.policy != POLICY_TIMER:
            return None
        return max(0, self._oldest + self.interval_ns - time.monotonic_ns()) / 1e9

    def close(self) -> None:
        """Flush, then close the file and release the lock (a second close does nothing).

        A failed writer just closes: its failure was raised when it happened."""
        try:
            if self._fd >= 0:
                try:
                    if not self.failed:
                        self.flush()
                finally:
                    os.close(self._fd)
                    self._fd = -1
        finally:
            if self._lock_fd >= 0:
                os.close(self._lock_fd)  # closing the descriptor releases the lock
                self._lock_fd = -1

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write_all(fd: int, data: bytes | bytearray) -> tuple[int, int]:
    """write(2) until all of ``data`` is in or an error: (bytes in, errno or 0)."""
    view = memoryview(data)
    done = 0
    while done < len(view):
        try:
            done += os.write(fd, view[done:])
        except OSError as exc:  # EINTR is retried by os.write itself (PEP 475)
            return done, exc.errno or 0
    return done, 0


# --8<-- [start:lock]
def _lock(path: str) -> int:
    """Take the journal's lock file (``path + ".lock"``), or raise JournalLocked."""
    lock_path = journal_paths(path)[0]
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise OSError(exc.errno, os.strerror(exc.errno or 0), path) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held until the fd is closed
    except BlockingIOError:
        os.close(fd)
        raise JournalLocked(path) from None
    return fd
# --8<-- [end:lock]


# --8<-- [start:create]
def _create(path: str) -> int:
    """A new journal, never seen torn: its header goes to a temporary file, which is
    fsync'ed and renamed over ``path``, then the directory is fsync'ed (so the rename
    survives a power cut). Returns the open file, positioned after the header."""
    _, tmp, directory = journal_paths(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        header = FILE_HEADER.pack(JOURNAL_MAGIC, JOURNAL_VERSION, PAYLOAD_SIZE)
        _, code = _write_all(fd, header)
        if code:
            raise OSError(code, os.strerror(code))
        os.fsync(fd)
        os.replace(tmp, path)
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        os.close(fd)
        Path(tmp).unlink(missing_ok=True)  # a full disk leaves nothing half-made
        raise OSError(exc.errno, os.strerror(exc.errno or 0), path) from None
    return fd
# --8<-- [end:create]


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

    ``submit`` journals each command before applying it (write-ahead), so the journal
    alone can rebuild the book, and holds each batch's output (fills, rejects) until the
    journal has flushed the batch (output commit): nothing it hands out belongs to a
    command that a crash of this process could take back. Without a journal the engine
    only applies (replay uses it so) and releases at once.
    """

    def __init__(self, journal: JournalWriter | None = None) -> None:
        self.book = Book()
        self.journal = journal
        self.applied_seq = 0  # the sequence number of the last command applied
        self.outbox = Outbox()

    # --8<-- [start:submit]
    def submit(self, ops: np.ndarray) -> list[Output]:
        """Journal, then apply, a batch of commands; hold its output; return every
        held output (this batch's or earlier ones') whose commands are flushed."""
        first = self.applied_seq + 1
        if self.journal is not None:
            first = self.journal.append(ops) - len(ops) + 1  # raises: nothing applied
        fills, rejects = self.apply(ops)
        self.outbox.hold(Output(first, first + len(ops) - 1, fills, rejects))
        return self.release()

    def release(self) -> list[Output]:
        """The held outputs the journal now covers (all of them without a journal)."""
        covered = self.applied_seq if self.journal is None else self.journal.flushed_seq
        return self.outbox.release(covered)
    # --8<-- [end:submit]

    def poll(self) -> list[Output]:
        """When no command comes: let the timer policy flush if due; release."""
        if self.journal is not None:
            self.journal.poll()
        return self.release()

    def flush(self) -> list[Output]:
        """Flush the journal whatever the policy; release every held output."""
        if self.journal is not None:
            self.journal.flush()
        return self.release()

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

    # --8<-- [start:snapshot]
    def snapshot(self, path: str | os.PathLike[str]) -> None:
        """Write the books atomically, tagged with the last sequence number applied.

        The journal is flushed *and fsync'ed* first: after a power cut the disk may hold
        an old snapshot with a new journal, never a snapshot ahead of its journal.
        """
        if self.journal is not None:
            self.journal.sync()
        write_snapshot(path, self.applied_seq, self.resting_orders())
    # --8<-- [end:snapshot]

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
                raise JournalError(f"snapshot: covers sequence {seq}, the journal "
                                   f"holds {scan.first_seq}..{scan.last_seq}", 16)
            engine.book.apply(resting)
            engine.applied_seq = seq
        fills, rejects = engine.apply(ops[engine.applied_seq:])  # seq k is ops[k - 1]
        return engine, scan, fills, rejects
    # --8<-- [end:recover]
