"""Why the sorted vector's tail explodes: count what each insert moves.

The sorted-vector layout keeps one side's levels worst first, the best last. Inserting a
level shifts every entry after its place one slot towards the end: a level at the touch
moves almost nothing, a level far behind it moves the whole side.
"""

from __future__ import annotations

import bisect


def moved(keys_worst_first: list[int], key: int) -> int:
    """Entries that inserting ``key`` into the sorted list shifts (it is not there yet)."""
    return len(keys_worst_first) - bisect.bisect_left(keys_worst_first, key)


def adversarial_adds(n: int, touch: int) -> list[int]:
    """``n`` distinct bid prices below ``touch`` whose inserts, one after another into an
    empty side, move the most entries in total: each new price the worst so far, so each
    insert lands at the front and shifts every level already there."""
    return [touch - 1 - i for i in range(n)]
