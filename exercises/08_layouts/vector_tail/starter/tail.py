"""Why the sorted vector's tail explodes: count what each insert moves.

The sorted-vector layout keeps one side's levels worst first, the best last. Inserting a
level shifts every entry after its place one slot towards the end.
"""

from __future__ import annotations

import bisect  # noqa: F401 - you will want it


def moved(keys_worst_first: list[int], key: int) -> int:
    """Entries that inserting ``key`` into the sorted list shifts (it is not there yet)."""
    raise NotImplementedError  # TODO: where does key go, and what lies after that place?


def adversarial_adds(n: int, touch: int) -> list[int]:
    """``n`` distinct bid prices below ``touch`` whose inserts, one after another into an
    empty side, move the most entries in total."""
    raise NotImplementedError  # TODO: where must each new price land to move everything?
