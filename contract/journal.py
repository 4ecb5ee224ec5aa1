"""The input journal's file format and the snapshot's, defined once for both twins.

A matching engine's state is a function of its input sequence, so writing down that
sequence (and nothing else) is enough to rebuild it. Both twins write the same bytes
(naive/journal.py with ``struct`` and ``zlib.crc32``, native/journal.hpp in C++), and
both read a journal with the same checks, raising the same :class:`JournalError` with
the same words (the messages are made here, by :func:`scan_message`).

A journal file::

    file header   16 bytes  magic b"TMJOURN1", version (u32), payload size (u32)
    record        48 bytes  payload length (u32), CRC-32 of the payload (u32),
                            payload: sequence number (u64) + one OPS_DTYPE row (32 bytes)
    record ...

All little-endian. Sequence numbers start at 1 and go up by one per record. The
length prefix is redundant while every payload has the same size; it is there so a
reader can tell a torn record (the file ends inside it) from a corrupt one (the
length itself is wrong), and so a later version may add kinds of record.

A snapshot file (the books, written atomically: :func:`write_snapshot`)::

    header        32 bytes  magic b"TMSNAPS1", version (u32), row size (u32),
                            last sequence number applied (u64), rows (u64)
    rows          32 bytes each: the resting orders as OP_LIMIT OPS_DTYPE rows, bids
                            best price first then asks best first, each level oldest
                            first: applied to an empty book in this order they rebuild
                            every queue exactly (the rows never cross each other)
    trailer        4 bytes  CRC-32 of everything before it
"""

from __future__ import annotations

import errno
import os
import struct
import threading
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from contract.dtypes import OP_LIMIT, OPS_DTYPE, as_records

__all__ = [
    "BUFFER_RECORDS",
    "FILE_HEADER",
    "FlushTimer",
    "FILE_HEADER_SIZE",
    "JOURNAL_MAGIC",
    "JOURNAL_VERSION",
    "JournalError",
    "JournalLocked",
    "JournalScan",
    "Outbox",
    "Output",
    "PAYLOAD_SIZE",
    "POLICIES",
    "POLICY_BATCH",
    "POLICY_EVERY",
    "POLICY_TIMER",
    "RECORD_HEADER",
    "RECORD_HEADER_SIZE",
    "RECORD_SIZE",
    "SCAN_BAD_CRC",
    "SCAN_BAD_LENGTH",
    "SCAN_BAD_MAGIC",
    "SCAN_BAD_SEQUENCE",
    "SCAN_BAD_VERSION",
    "SCAN_OK",
    "SCAN_SHORT_HEADER",
    "SEQUENCE",
    "SNAPSHOT_MAGIC",
    "WriterFailed",
    "books_csv",
    "journal_paths",
    "writer_args",
    "read_snapshot",
    "scan_message",
    "snapshot_bytes",
    "write_snapshot",
]

# --8<-- [start:format]
JOURNAL_MAGIC: Final = b"TMJOURN1"
JOURNAL_VERSION: Final = 1
FILE_HEADER: Final = struct.Struct("<8sII")        # magic, version, payload size
RECORD_HEADER: Final = struct.Struct("<II")        # payload length, CRC-32 of payload
SEQUENCE: Final = struct.Struct("<Q")              # the payload starts with the seq no.
FILE_HEADER_SIZE: Final = FILE_HEADER.size         # 16
RECORD_HEADER_SIZE: Final = RECORD_HEADER.size     # 8
PAYLOAD_SIZE: Final = SEQUENCE.size + OPS_DTYPE.itemsize  # 8 + 32 = 40
RECORD_SIZE: Final = RECORD_HEADER_SIZE + PAYLOAD_SIZE    # 48

# Flush policies: when appended records are handed to the operating system (write(2)).
# A record is *flushed* once it has been handed over: a process killed after that loses
# nothing (the kernel has the bytes); a machine that loses power can, unless the writer
# also calls fsync(2) at each flush (the writers' ``fsync`` option). The engine releases
# a command's output (fills, rejects) only once its record is flushed: output commit.
POLICY_EVERY: Final = 0   # one write per record
POLICY_BATCH: Final = 1   # one write per ``batch`` records (and at flush/close)
POLICY_TIMER: Final = 2   # a write once the oldest pending record has waited
                          # ``interval_ms``: checked at each append and by poll()
POLICIES: Final = ("every", "batch", "timer")
# A writer buffers at most this many records: any policy also flushes when that many are
# pending, so the C++ writer allocates its buffer once (native/journal.hpp
# kBufferRecords).
BUFFER_RECORDS: Final = 4096
# --8<-- [end:format]

MAX_INTERVAL_MS: Final = 3_600_000  # the timer policy's interval: at most an hour


def writer_args(policy: str, batch: int, interval_ms: float) -> tuple[int, int]:
    """Both writers' argument checks: (policy code, interval in ns), or a ValueError."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= BUFFER_RECORDS:
        raise ValueError(f"batch must be an int in 1..{BUFFER_RECORDS}, got {batch!r}")
    if not 0 <= interval_ms <= MAX_INTERVAL_MS:  # also refuses NaN
        raise ValueError(f"interval_ms must be in 0..{MAX_INTERVAL_MS}, got {interval_ms!r}")
    return POLICIES.index(policy), int(interval_ms * 1_000_000)


SNAPSHOT_MAGIC: Final = b"TMSNAPS1"
SNAPSHOT_VERSION: Final = 1
SNAPSHOT_HEADER: Final = struct.Struct("<8sIIQQ")  # magic, version, row size, seq, rows
CRC: Final = struct.Struct("<I")

# --8<-- [start:scan_codes]
# What a scan of a journal found, as both twins report it (the C++ reader returns the
# code, the offset and two numbers; scan_message turns them into the same words).
SCAN_OK: Final = 0
SCAN_SHORT_HEADER: Final = 1   # the file is shorter than its 16-byte header
SCAN_BAD_MAGIC: Final = 2      # the first 8 bytes are not JOURNAL_MAGIC
SCAN_BAD_VERSION: Final = 3    # a version or payload size this reader does not know
SCAN_BAD_LENGTH: Final = 4     # a record's length prefix is not PAYLOAD_SIZE
SCAN_BAD_CRC: Final = 5        # a record's CRC does not match, and it is not the last
SCAN_BAD_SEQUENCE: Final = 6   # not the previous sequence number plus one (first: 1)
# --8<-- [end:scan_codes]


def journal_paths(path: str | os.PathLike[str]) -> tuple[str, str, str]:
    """(lock file, temporary file, directory) of a journal, the same in both twins."""
    name = os.fspath(path)
    return name + ".lock", name + ".tmp", os.path.dirname(os.path.abspath(name))


class WriterFailed(OSError):
    """A journal writer whose write or fsync failed earlier: it takes no more records.

    The failure itself was raised as the OSError that write(2) or fsync(2) gave; every
    later append, flush or sync raises this, naming the same errno."""

    def __init__(self, code: int, path: str) -> None:
        super().__init__(code, f"journal: the writer failed earlier ({os.strerror(code)}); "
                               "it takes no more records", path)


class JournalLocked(OSError):
    """A second writer on a journal that another writer (in any process) has open."""

    def __init__(self, path: str) -> None:
        super().__init__(errno.EWOULDBLOCK, "journal: another writer has this journal open "
                         f"(it holds {journal_paths(path)[0]}); refusing a second", path)


class JournalError(ValueError):
    """A journal (or snapshot) that cannot be read: ``offset`` names the byte where."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def scan_message(code: int, offset: int, value: int, expected: int) -> str:
    """The words both twins use for a scan that stopped at ``offset``."""
    where = f"journal: at byte offset {offset}: "
    if code == SCAN_SHORT_HEADER:
        return where + f"file header truncated ({value} of {FILE_HEADER_SIZE} bytes)"
    if code == SCAN_BAD_MAGIC:
        return where + "not a twinmatch journal (bad magic)"
    if code == SCAN_BAD_VERSION:
        return where + f"unsupported version {value} or payload size {expected}"
    if code == SCAN_BAD_LENGTH:
        return where + f"record length {value}, expected {expected}"
    if code == SCAN_BAD_CRC:
        return where + f"record CRC-32 {value:#010x} does not match {expected:#010x}"
    if code == SCAN_BAD_SEQUENCE:
        return where + f"sequence number {value}, expected {expected}"
    return where + f"unknown scan code {code}"


@dataclass(frozen=True, slots=True)
class JournalScan:
    """What reading a journal found (besides its operations).

    ``valid_end`` is the offset just past the last good record: a writer that resumes
    truncates the file there. ``torn_bytes`` > 0 means the file ended inside a record
    (a write cut short), which was dropped, never applied: ``torn_offset`` is where it
    began.
    """

    records: int
    first_seq: int    # 1, or 0 if there are no records
    last_seq: int     # 0 if there are no records
    valid_end: int
    torn_offset: int  # -1 if nothing was dropped
    torn_bytes: int

    def message(self) -> str | None:
        """The counted message for a dropped torn record, or None."""
        if self.torn_bytes == 0:
            return None
        return (f"journal: dropped 1 torn record at byte offset {self.torn_offset} "
                f"({self.torn_bytes} bytes, the file ends inside it)")


# --8<-- [start:outbox]
@dataclass(frozen=True, slots=True)
class Output:
    """What one ``Engine.submit`` produced: its fills and rejects (``op_index`` counts
    from ``first_seq``), released only once the journal holds commands up to
    ``last_seq`` (output commit)."""

    first_seq: int
    last_seq: int
    fills: np.ndarray
    rejects: np.ndarray


class Outbox:
    """Outputs held back until the journal covers their commands, released in order."""

    def __init__(self) -> None:
        self._held: deque[Output] = deque()

    def hold(self, output: Output) -> None:
        self._held.append(output)

    def release(self, covered: int) -> list[Output]:
        """Every held output whose commands all have sequence numbers <= ``covered``."""
        out: list[Output] = []
        while self._held and self._held[0].last_seq <= covered:
            out.append(self._held.popleft())
        return out

    def __len__(self) -> int:
        return len(self._held)
# --8<-- [end:outbox]


class FlushTimer:
    """The timer policy's timer, for a caller with no event loop of its own: a thread
    that sleeps until the journal's ``due_in()`` and then calls the engine's ``poll()``.

    Use the engine (either twin's) only through it while it runs: a lock keeps the
    thread and the caller from using the engine at once, and every released output
    goes to ``deliver``, in order, from the thread that released it (with the lock
    held: a slow ``deliver`` delays ``submit``). A write that fails in the thread is
    kept in ``error``; the caller's next call raises it again (WriterFailed).
    """

    def __init__(self, engine: Any, deliver: Callable[[list[Output]], None]) -> None:
        self.engine = engine
        self.deliver = deliver
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._kick = threading.Event()  # set when the clock may start, or at close
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="journal-timer",
                                        daemon=True)
        self._thread.start()

    def submit(self, ops: np.ndarray) -> None:
        with self._lock:
            self._send(self.engine.submit(ops))
        self._kick.set()

    def flush(self) -> None:
        with self._lock:
            self._send(self.engine.flush())

    def close(self) -> None:
        """Stop the thread, then flush: every output is delivered."""
        with self._lock:
            self._stopping = True
        self._kick.set()
        self._thread.join(timeout=10)
        self.flush()

    def _send(self, outputs: list[Output]) -> None:
        if outputs:
            self.deliver(outputs)

    # --8<-- [start:timer]
    def _run(self) -> None:
        """The thread: sleep until the oldest pending record is due, flush, deliver."""
        wait: float | None = None  # None: nothing pending, sleep until kicked
        while True:
            self._kick.wait(wait)
            with self._lock:
                self._kick.clear()  # under the lock: a submit after this kicks again
                if self._stopping:
                    return
                try:
                    self._send(self.engine.poll())
                except Exception as exc:  # noqa: BLE001 - the caller meets it next
                    self.error = exc
                    return
                journal = self.engine.journal
                wait = None if journal is None else journal.due_in()
    # --8<-- [end:timer]


# ------------------------------------------------------------------ snapshots

def snapshot_bytes(last_seq: int, resting: np.ndarray) -> bytes:
    """A snapshot of the books: ``resting`` as the twins' ``resting_orders()`` give it."""
    rows = as_records(resting, OPS_DTYPE, "resting")
    head = SNAPSHOT_HEADER.pack(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, OPS_DTYPE.itemsize,
                                last_seq, len(rows))
    body = head + rows.tobytes()
    return body + CRC.pack(zlib.crc32(body))


# --8<-- [start:write_snapshot]
def write_snapshot(
    path: str | os.PathLike[str], last_seq: int, resting: np.ndarray
) -> None:
    """Write a snapshot so that ``path`` is always the old one or the new one, whole.

    The bytes go to a temporary file in the same directory, which is fsync'ed and then
    renamed over ``path`` (rename is atomic within a file system); then the directory
    is fsync'ed so the rename itself survives a power cut. A crash at any point leaves
    the previous snapshot in place (and perhaps a stale ``.tmp`` that the next
    snapshot overwrites); a failed write removes the ``.tmp`` and raises.
    """
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    data = snapshot_bytes(last_seq, resting)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk: no half-written file is left
        raise
    os.replace(tmp, target)
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
# --8<-- [end:write_snapshot]


def read_snapshot(path: str | os.PathLike[str]) -> tuple[int, np.ndarray]:
    """(last sequence number applied, resting orders) of a snapshot file.

    A snapshot is written atomically, so any damage is an error (JournalError naming
    the offset), never a partial state: the size must match its header exactly and the
    CRC must hold before a single row is used.
    """
    data = Path(path).read_bytes()
    if len(data) < SNAPSHOT_HEADER.size + CRC.size:
        raise JournalError(f"snapshot: at byte offset {len(data)}: file truncated "
                           f"({len(data)} bytes)", len(data))
    magic, version, row_size, last_seq, rows = SNAPSHOT_HEADER.unpack_from(data)
    if magic != SNAPSHOT_MAGIC:
        raise JournalError("snapshot: at byte offset 0: not a twinmatch snapshot (bad magic)", 0)
    if version != SNAPSHOT_VERSION or row_size != OPS_DTYPE.itemsize:
        raise JournalError(f"snapshot: at byte offset 8: unsupported version {version} "
                           f"or row size {row_size}", 8)
    expected = SNAPSHOT_HEADER.size + rows * OPS_DTYPE.itemsize + CRC.size
    if len(data) != expected:  # checked before anything is allocated for the rows
        raise JournalError(f"snapshot: at byte offset 24: {rows} rows need {expected} bytes, "
                           f"the file has {len(data)}", 24)
    (crc,) = CRC.unpack_from(data, len(data) - CRC.size)
    if zlib.crc32(data[:-CRC.size]) != crc:
        raise JournalError(f"snapshot: at byte offset {len(data) - CRC.size}: CRC-32 does "
                           "not match", len(data) - CRC.size)
    # Over a bytearray, not .copy(): numpy copies a padded dtype field by field, leaving
    # the padding bytes undefined.
    body = bytearray(data[SNAPSHOT_HEADER.size:SNAPSHOT_HEADER.size + rows * OPS_DTYPE.itemsize])
    ops = np.frombuffer(body, OPS_DTYPE)
    if rows and (ops["op"] != OP_LIMIT).any():
        at = int(np.flatnonzero(ops["op"] != OP_LIMIT)[0])
        raise JournalError(f"snapshot: at byte offset {SNAPSHOT_HEADER.size + 32 * at}: "
                           "a row that is not a limit order", SNAPSHOT_HEADER.size + 32 * at)
    return last_seq, ops


# --8<-- [start:books_csv]
def books_csv(resting: np.ndarray) -> str:
    """The book as text, a row per resting order: ``side,price,priority,order_id,qty``.

    ``resting`` is in snapshot order (bids best first, asks best first, each level
    oldest first), so a row's priority is its place among the rows of its level.
    """
    rows = as_records(resting, OPS_DTYPE, "resting")
    lines = ["side,price,priority,order_id,qty"]
    level: tuple[int, int] | None = None
    priority = 0
    for order_id, _new, price, qty, _op, side in rows.tolist():
        priority = priority + 1 if level == (side, price) else 0
        level = (side, price)
        lines.append(f"{'BS'[side]},{price},{priority},{order_id},{qty}")
    return "\n".join(lines) + "\n"
# --8<-- [end:books_csv]
