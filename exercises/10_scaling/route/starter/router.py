"""Routing events to book workers by symbol (chapter 10's routed design, in Python).

Each worker owns the locates ``owner(locate, workers)`` gives it. An add (A, F) names its
locate, and so does every other message; but Market goes by the *order's* locate for
E C X D U (when the message's own locate disagrees it counts ``locate_mismatch`` and
the order wins), so routing those by their own locate can send them to a worker that
has never seen the order.
"""

from __future__ import annotations

from typing import Any

A, F, E, C, X, D, U = (ord(c) for c in "AFECXDU")


def owner(locate: int, workers: int) -> int:
    """The worker (0..workers-1) that owns a locate (contract/shard.py's formula)."""
    return (((locate * 40503) & 0xFFFF) * workers) >> 16


class Router:
    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.refs: dict[int, int] = {}  # live order reference -> the locate of its add

    def route(self, row: tuple[Any, ...]) -> int:
        """The worker for one event (an EVENT_DTYPE row as a tuple: timestamp, order_ref,
        new_order_ref, match_number, shares, price, locate, type, side, printable, stock)."""
        _, ref, new_ref, _, _, _, locate, kind, _, _, _ = row
        # TODO: E C X D U go to the worker that holds their order, not by their own
        # locate. Keep a map of each added reference's locate (self.refs) and look the
        # reference up; forget it on D; on U the new reference lives where the old one
        # did. A reference the map does not know goes by the message's locate.
        return owner(locate, self.workers)
