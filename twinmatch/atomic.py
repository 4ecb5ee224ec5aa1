"""One rule for every command that writes files: all of them, or none of them.

Each output is written under a temporary name in its own directory,
``.<name>.part-<pid>``; when the whole run has succeeded, :meth:`Outputs.commit` fsyncs
every part, renames each onto its final name and fsyncs the directories. On an error, on
Ctrl-C (SIGINT) or on SIGTERM (:func:`handle_signals` turns both into
:class:`Interrupted`), :meth:`Outputs.abort` removes the parts: a failed run leaves no
file cut short under a final name.

What a SIGKILL leaves (nothing runs on SIGKILL) is cleaned up by the next run into the
same directory: each part is held under an exclusive ``flock`` while its writer lives, and
the kernel drops the lock when the process dies, so a part whose lock can be taken is
stale and is removed (:func:`remove_stale_parts`).

Not guaranteed: the renames of a commit are one system call each, not one together. A
signal during them is acted on once they are done (the outputs are then complete); a
SIGKILL or a power cut among them can leave some new files beside some old ones. A
command whose files must be read as one set (``tables``) removes its marker file first
and renames it last, so that the marker is there only beside a complete set.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Final

__all__ = ["Interrupted", "OutputError", "Outputs", "deferred_signals", "handle_signals",
           "remove_stale_parts", "write_file"]

PART: Final = re.compile(r"\..+\.part-\d+\Z")


class OutputError(ValueError):
    """An output the command must not write (it is an input, a directory, named twice)."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: the command stops, its ``finally`` clauses run."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# --8<-- [start:signals]
_deferring = 0            # > 0 while a commit renames: a signal waits for it
_pending: list[int] = []  # the signals that arrived meanwhile


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _deferring:
        _pending.append(signum)
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise Interrupted in the main thread (Python
    runs signal handlers there only), so cleanup runs for SIGTERM as for Ctrl-C."""
    sigs = (signal.SIGINT, signal.SIGTERM)
    before = [signal.signal(sig, _on_signal) for sig in sigs]
    try:
        yield
    finally:
        for sig, handler in zip(sigs, before, strict=True):
            signal.signal(sig, handler)


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT/SIGTERM until the block is done, then act on the first that came."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        if not _deferring and _pending:
            signum = _pending[0]
            _pending.clear()
            raise Interrupted(signum)
# --8<-- [end:signals]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _identity(path: Path | int) -> tuple[int, int] | None:
    """(device, inode) of a path (or an open descriptor), None if there is none."""
    try:
        st = os.fstat(path) if isinstance(path, int) else os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


# --8<-- [start:stale]
def remove_stale_parts(directory: Path) -> list[Path]:
    """Remove the parts of dead runs in ``directory`` (their lock is free)."""
    removed = []
    try:
        names = [p for p in directory.iterdir() if PART.match(p.name)]
    except OSError:
        return []
    for path in names:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue  # gone meanwhile, or not ours to read
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # its writer would hold it
            if stat.S_ISREG(os.fstat(fd).st_mode):
                path.unlink(missing_ok=True)
                removed.append(path)
        except OSError:
            pass  # locked: a live run is writing it
        finally:
            os.close(fd)
    return removed
# --8<-- [end:stale]


class Outputs:
    """The files one run writes, committed together (see the module's docstring).

    ``inputs``: the files the run reads (paths, or ``0`` for standard input); an output
    that is one of them (the same inode, whatever the name) is refused before anything
    is opened, so a feed can never be truncated by its own replay.
    """

    def __init__(self, command: str, inputs: Sequence[Path | int] = ()) -> None:
        self.command = command
        self.inputs = {i for i in map(_identity, inputs) if i is not None}
        self.parts: dict[Path, Path] = {}   # final name -> part
        self._locks: dict[Path, int] = {}   # part -> the descriptor holding its flock
        self._cleaned: set[Path] = set()
        self.removed: list[Path] = []       # files commit() removed (commit's `remove`)

    def check(self, final: Path) -> None:
        """Refuse an output that is an input, a directory, or named twice in this run."""
        if final in self.parts:
            raise OutputError(f"{final}: named twice as an output")
        if final.is_dir():
            raise OutputError(f"{final}: is a directory (give a file name)")
        if not final.parent.is_dir():
            raise OutputError(f"{final}: no such directory {final.parent}")
        if _identity(final) in self.inputs:
            raise OutputError(f"{final}: is an input of this run; writing would destroy it")

    # --8<-- [start:add]
    def add(self, final: Path) -> Path:
        """Create and lock the part for ``final``; return the part's path."""
        final = Path(final)
        self.check(final)
        if final.parent not in self._cleaned:
            remove_stale_parts(final.parent)
            self._cleaned.add(final.parent)
        part = final.with_name(f".{final.name}.part-{os.getpid()}")
        self.parts[final] = part  # first: abort() removes it, whenever a signal comes
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        self._locks[part] = fd
        fcntl.flock(fd, fcntl.LOCK_EX)  # held until commit or abort: not stale
        return part
    # --8<-- [end:add]

    def open(self, final: Path, mode: str = "wb") -> IO[bytes] | IO[str]:
        """add(final), then the part opened for writing (the caller closes it)."""
        return open(self.add(final), mode)  # noqa: SIM115 - the caller closes it

    # --8<-- [start:commit]
    def commit(self, remove: Sequence[Path] = (), last: Path | None = None) -> None:
        """Make every part durable, then (signals held) remove the ``remove`` files,
        rename every part, ``last`` last, and make the directories durable."""
        for fd in self._locks.values():
            os.fsync(fd)  # any descriptor of the file flushes its data
        order = sorted(self.parts, key=lambda final: final == last)
        with deferred_signals():
            for path in remove:  # first: e.g. a marker that the last rename restores
                if path.exists() and _identity(path) not in self.inputs:  # not an input
                    path.unlink()
                    if path not in self.parts:
                        self.removed.append(path)
            for final in order:
                os.replace(self.parts[final], final)
            for directory in {final.parent for final in self.parts}:
                _fsync_dir(directory)
            self._release()

    def abort(self) -> None:
        """Remove every part (after a failure or a signal)."""
        for part in self.parts.values():
            part.unlink(missing_ok=True)
        self._release()
    # --8<-- [end:commit]

    def _release(self) -> None:
        for fd in self._locks.values():
            os.close(fd)
        self._locks.clear()
        self.parts.clear()

    def __enter__(self) -> Outputs:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.abort()  # after commit() there is nothing left to remove


def write_file(path: Path, data: bytes, inputs: Sequence[Path | int] = ()) -> None:
    """One whole file by the rule: a part, fsynced, renamed into place (or nothing)."""
    with Outputs("write", inputs) as outputs:
        with open(outputs.add(Path(path)), "wb") as f:
            f.write(data)
        outputs.commit()
