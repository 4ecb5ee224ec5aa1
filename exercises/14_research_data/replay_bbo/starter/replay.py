"""Rebuild the `bbo` table from the `messages` table alone (chapter 14).

``messages`` is the dict of numpy columns ``TableBuilder.take()["messages"]`` returns:
every A F E C X D U that changed a book, each row self-contained (contract/tables.py).
The documented rules, per row:

* A, F: a new order (order_ref, side, price, shares) rests at its price;
* E, C, X: ``shares`` leave the order (it leaves the book when none are left);
* D: the order leaves (``prev_shares`` were resting);
* U: the order ``order_ref`` leaves (``prev_price``, ``prev_shares``) and a new one,
  ``new_order_ref``, rests on the same side at ``price`` with ``shares``.

After each row, the row's locate gets a bbo row if its best bid or ask (price, total
shares, number of orders; 0, 0, 0 for an empty side) differs from its last one (all
zeros before its first). Return the rows as tuples:
(timestamp, seq, locate, bid_price, bid_size, bid_orders, ask_price, ask_size, ask_orders).
"""

from __future__ import annotations

import numpy as np

Row = tuple[int, int, int, int, int, int, int, int, int]


def replay_bbo(messages: dict[str, np.ndarray]) -> list[Row]:
    # TODO: keep every live order (ref -> locate, side, price, shares) and, per locate and
    # side, each price's [total shares, orders]. Apply each row by the rules above (walk
    # the columns together: zip their .tolist()), then compare the locate's best bid and
    # ask with its last bbo row and append a row when they differ.
    raise NotImplementedError
