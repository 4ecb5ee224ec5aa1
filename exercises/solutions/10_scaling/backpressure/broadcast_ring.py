"""A broadcast ring in Python: one writer, N readers, every reader sees every item.

The shape of native/shard.hpp's BroadcastRing, with plain ints instead of atomics (the
GIL makes each of these reads and writes whole). The writer puts item k in slot
k % capacity and then moves ``published`` to k + 1; reader r reads its next slot while
its sequence is below ``published`` and then moves its own sequence on.
"""

from __future__ import annotations

from typing import Any


class BroadcastRing:
    def __init__(self, capacity: int, readers: int) -> None:
        if capacity < 1 or readers < 1:
            raise ValueError("capacity and readers must be at least 1")
        self.capacity = capacity
        self.slots: list[Any] = [None] * capacity
        self.published = 0             # items written so far (the writer's)
        self.seq = [0] * readers       # items each reader has finished with (each reader's)

    def try_publish(self, item: Any) -> bool:
        """Writer only. False (and nothing written) while the slowest reader is a whole
        ring behind: slot published % capacity still holds an item it has not read."""
        k = self.published
        if k - min(self.seq) >= self.capacity:
            return False
        self.slots[k % self.capacity] = item
        self.published = k + 1
        return True

    def try_read(self, reader: int) -> tuple[bool, Any]:
        """Reader ``reader`` only: (True, its next item), or (False, None) if none yet."""
        k = self.seq[reader]
        if k == self.published:
            return False, None
        item = self.slots[k % self.capacity]
        self.seq[reader] = k + 1
        return True, item
