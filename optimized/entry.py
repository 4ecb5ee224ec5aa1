"""The optimized order-entry server (``native/entry.hpp``), same API as ``naive/entry.py``.

One C++ thread runs the whole server: non-blocking sockets, one epoll set, each session's
output written straight from its user's sequenced log. Here it runs in a Python thread
that calls the native event loop with the GIL released; ``stop()`` wakes it through an
eventfd and joins it, within a bound.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from contract.soupbin import STAT_KEYS, EntryConfig
from optimized._native import EntryServerCore

__all__ = ["Server"]


class Server:
    """The C++ server in a thread of its own: ``start()`` returns the port (127.0.0.1)."""

    def __init__(self, config: EntryConfig | None = None, port: int = 0,
                 itch_out: str | Path | None = None) -> None:
        cfg = (config or EntryConfig()).check().resolved()   # this run's session id
        self.config = cfg
        self.session = cfg.session
        self._core = EntryServerCore(
            [u.upper() for u in cfg.users], [p.upper() for p in cfg.users.values()],
            list(cfg.symbols), cfg.session, cfg.heartbeat_ms, cfg.idle_timeout_ms,
            cfg.login_timeout_ms, cfg.max_sessions, cfg.prelogin_max, cfg.out_limit,
            cfg.clock == "fixed", cfg.sndbuf, port, str(itch_out) if itch_out else "")
        self.port: int = self._core.port
        self._thread: threading.Thread | None = None

    def stats(self) -> dict[str, int]:
        return dict(zip(STAT_KEYS, self._core.stats(), strict=True))

    def timings(self) -> np.ndarray:
        """Server-side read-to-write times (ns), one per read that brought a logged-in
        session's requests: from the read to the send that handed the kernel the first
        answer. Call it after stop()."""
        return np.asarray(self._core.timings(), dtype=np.int64)

    def start(self) -> int:
        self._thread = threading.Thread(target=self._core.run, name="optimized-entry",
                                        daemon=True)
        self._thread.start()
        return self.port

    def serve_forever(self) -> None:
        """Run in this thread (the command line): until stop() from a signal handler."""
        self._core.run()

    def stop(self, timeout: float = 5.0) -> None:
        """End the session (System Event E, then Z) and join the thread, within timeout."""
        self._core.stop()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError(f"optimized entry server did not stop in {timeout} s")
