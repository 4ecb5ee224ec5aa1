"""Faults for the tests of commands that write files (twinmatch/atomic.py's rule): a small
full disk (a tmpfs this test mounts), a command run as a subprocess and stopped by a
signal once it has begun writing, and the listing of what a run left behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def full_disk(where: Path, size: str = "64k") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (made here); skips if mount is refused."""
    where.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                               str(where)], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (root and mount needed): {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=20)


def listing(directory: Path) -> list[str]:
    """Every name in ``directory``, hidden ones (the parts) too."""
    return sorted(p.name for p in directory.iterdir())


def parts(directory: Path) -> list[str]:
    return [name for name in listing(directory) if ".part-" in name]


def start(*argv: str) -> subprocess.Popen[str]:
    """``python -m twinmatch ARGV`` in a process of its own."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "twinmatch", *argv], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(check: Callable[[], bool], timeout: float = 60.0,
             proc: subprocess.Popen[str] | None = None) -> None:
    """Poll ``check()`` until true (bounded); fail if ``proc`` ended first."""
    deadline = time.monotonic() + timeout
    while not check():
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the command ended before the signal (rc {proc.returncode}): {err}")
        if time.monotonic() > deadline:
            if proc is not None:
                proc.kill()
                proc.wait(10)
            pytest.fail("timed out waiting for the command to start writing")
        time.sleep(0.02)


def stop(proc: subprocess.Popen[str], sig: int, timeout: float = 60.0) -> tuple[int, str]:
    """Send ``sig``; the exit status and stderr (bounded wait; killed if it hangs)."""
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate(timeout=10)
        pytest.fail(f"the command did not stop within {timeout} s of {signal.Signals(sig).name}")
    return proc.returncode, err
