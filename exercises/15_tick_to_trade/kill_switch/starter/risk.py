"""TODO: the pre-trade risk checks of chapter 15's strategy (contract/trade.py).

``check`` is asked once per order the strategy wants. It returns "" to let the order go
(and then counts it in ``sent``), or the name of the check that stops it (and counts it
there).
"""

from __future__ import annotations


class RiskChecks:
    def __init__(self, cooldown_ns: int, max_per_second: int, max_orders: int,
                 max_open: int) -> None:
        self.cooldown_ns = cooldown_ns
        self.max_per_second = max_per_second
        self.max_orders = max_orders
        self.max_open = max_open
        self.tripped = False                  # the kill switch
        self.last_order: dict[int, int] = {}  # locate -> feed time of its last order
        self.second, self.in_second = -1, 0   # the feed's second, orders sent in it
        self.stats = dict.fromkeys(
            ("sent", "killed", "cooldown", "throttled", "capped", "kill_switch"), 0)

    def check(self, locate: int, ts: int, open_orders: int) -> str:
        """An order for ``locate`` at feed time ``ts`` (ns), with ``open_orders``
        unanswered: "" if it may go, else the name of the check that stopped it."""
        # TODO: the five checks, in contract/trade.py's order; count each refusal under
        # its name, and a pass under "sent" (updating the state the checks read).
        self.stats["sent"] += 1
        return ""
