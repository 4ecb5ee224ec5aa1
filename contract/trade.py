"""What both tick-to-trade loops share (naive/trade.py, native/trade.hpp): the strategy's
rule and risk checks, the order it sends, the counts and the stage names (chapter 15).

The strategy (deliberately small, and stated here once for both twins):

* After every book message (A F E C X D U) of a symbol, look at its top of book: best bid
  (price, shares) and best ask. With both sides present and the book neither locked nor
  crossed, the **signal** is BUY when the bid shares are at least ``imbalance`` times the
  ask shares, SELL when the ask shares are at least ``imbalance`` times the bid shares,
  else none. A locked, crossed or one-sided book has no signal.
* An order is wanted when the signal becomes BUY or SELL (it was something else after the
  symbol's previous book message): an immediate-or-cancel order that takes the other
  side's best price, for ``min(qty, shares there)`` shares.
* The risk checks, in this order, each counted when it stops an order:
  ``killed`` (the kill switch has tripped: nothing more is sent this run);
  ``cooldown`` (this symbol sent an order less than ``cooldown_ns`` ago by the feed's
  clock: at most one order per symbol per cooldown, which stands for "at most one in
  flight" while answers come back faster than the cooldown, and keeps the decisions a
  function of the feed alone); ``throttled`` (``max_per_second`` orders already sent in
  this second of the feed's clock); ``capped`` (``max_orders`` sent this run);
  ``kill_switch`` (``max_open`` orders sent without a final answer yet, read from the
  server: the one check that depends on time, not on the feed; it trips the switch).
* The order: OUCH 5.0 Enter Order (``contract.ouch.ENTER``) in a SoupBinTCP Unsequenced
  Data packet: UserRefNum 1, 2, 3, ... in sending order; the symbol from the locate's R
  message; Time in Force IOC (``3``); Display ``Y``; Capacity ``P`` (principal);
  Intermarket Sweep ``N``; Cross Type ``N``; ClOrdID ``TT<UserRefNum>`` padded with
  spaces to 14; no appendage. 50 bytes on the wire.

Same feed, same configuration, same orders: byte for byte, in both twins.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

__all__ = ["BOOK_TYPES", "ORDER_BYTES", "STAGES", "STAT_KEYS", "StrategyConfig", "enter_order"]

# Messages after which the strategy looks at the book (P, a hidden execution, changes none).
BOOK_TYPES: Final = b"AFECXDU"

ORDER_BYTES: Final = 50   # 2 (Packet Length) + 1 ('U') + 47 (Enter Order)
_ENTER: Final = struct.Struct(">HccIcI8sQccccc14sH")
assert _ENTER.size == ORDER_BYTES


@dataclass(frozen=True)
class StrategyConfig:
    """The strategy's parameters (the risk limits a desk would set for it)."""

    imbalance: int = 3              # bid shares >= imbalance x ask shares: BUY (and SELL)
    qty: int = 100                  # shares per order, at most what the best level shows
    cooldown_ns: int = 1_000_000_000  # per symbol, by the feed's clock
    max_per_second: int = 50        # orders per second of the feed's clock
    max_open: int = 64              # orders without a final answer: more trips the switch
    max_orders: int = 100_000       # orders per run

    def check(self) -> StrategyConfig:
        """Every field in range, else a ValueError naming it."""
        for name, low, high in (("imbalance", 1, 1 << 20), ("qty", 1, 999_999),
                                ("cooldown_ns", 0, 1 << 62), ("max_per_second", 1, 1 << 30),
                                ("max_open", 1, 1 << 20), ("max_orders", 1, 1 << 24)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) \
                    or not low <= value <= high:
                raise ValueError(f"{name} must be an integer {low}..{high}, not {value!r}")
        return self


# --8<-- [start:enter_order]
def enter_order(urn: int, side: bytes, qty: int, stock: bytes, price: int) -> bytes:
    """The framed Enter Order the strategy sends (the rule above), 50 bytes."""
    clordid = b"TT" + str(urn).encode()
    return _ENTER.pack(ORDER_BYTES - 2, b"U", b"O", urn, side, qty, stock.ljust(8),
                       price, b"3", b"Y", b"P", b"N", b"N", clordid.ljust(14), 0)
# --8<-- [end:enter_order]


# Counts, in this order in both twins (native/trade.hpp's TradeStats).
STAT_KEYS: Final = (
    "book_messages",   # book messages after which the strategy looked
    "signals",         # signal changes to BUY or SELL: orders wanted
    "sent",            # orders sent
    "killed", "cooldown", "throttled", "capped", "kill_switch",  # orders the checks stopped
    "accepted", "canceled", "executed", "rejected",  # the server's answers (OUCH A C E J)
    "open",            # orders sent without a final answer (C, J, or E of all shares)
    "send_errors",     # a send that failed or wrote part of an order: the loop stops
)

# Stage stamps of every order (ns, CLOCK_REALTIME: the clock of the kernel's receive
# timestamp): the kernel's receive (SO_TIMESTAMPNS) of the datagram that carried the
# message, the user-space receive (the read returned), decoded, book applied, decision
# made, order encoded, send returned; then the server's timestamp in its Accepted (ns
# since midnight, made absolute with the day of the send) and the client's receive of it.
STAGES: Final = ("kernel", "user", "decoded", "applied", "decided", "encoded", "sent",
                 "server", "acked")
