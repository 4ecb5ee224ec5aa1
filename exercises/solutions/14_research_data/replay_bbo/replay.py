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
    orders: dict[int, tuple[int, int, int, int]] = {}  # ref -> (locate, side, price, shares)
    # (locate, side) -> price -> [total shares, orders]
    levels: dict[tuple[int, int], dict[int, list[int]]] = {}
    last: dict[int, tuple[int, ...]] = {}
    out: list[Row] = []

    def rest(ref: int, locate: int, side: int, price: int, shares: int) -> None:
        orders[ref] = (locate, side, price, shares)
        level = levels.setdefault((locate, side), {}).setdefault(price, [0, 0])
        level[0] += shares
        level[1] += 1

    def take(ref: int, shares: int) -> None:
        locate, side, price, left = orders[ref]
        book = levels[(locate, side)]
        book[price][0] -= shares
        if shares < left:
            orders[ref] = (locate, side, price, left - shares)
            return
        del orders[ref]
        book[price][1] -= 1
        if book[price][1] == 0:
            del book[price]

    names = ("timestamp", "seq", "locate", "type", "order_ref", "new_order_ref", "side",
             "price", "shares", "prev_shares")
    for ts, seq, locate, kind, ref, new_ref, side_byte, price, shares, prev in zip(
            *(messages[n].tolist() for n in names), strict=True):
        side = 0 if side_byte == ord("B") else 1
        letter = chr(kind)
        if letter in "AF":
            rest(ref, locate, side, price, shares)
        elif letter in "ECX":
            take(ref, shares)
        elif letter == "D":
            take(ref, prev)
        else:  # U
            take(ref, prev)
            rest(new_ref, locate, side, price, shares)
        top: list[int] = []
        for s, best in ((0, max), (1, min)):
            book = levels.get((locate, s), {})
            if book:
                p = best(book)
                top += [p, book[p][0], book[p][1]]
            else:
                top += [0, 0, 0]
        if last.get(locate, (0,) * 6) != tuple(top):
            last[locate] = tuple(top)
            out.append((ts, seq, locate, top[0], top[1], top[2], top[3], top[4], top[5]))
    return out
