"""The optimized order book (``native/book.hpp``), same API as ``naive/book.py``.

* ``Book``: a window of price levels in a flat array, two hierarchical bitsets to
  find the best bid/ask with count-leading/trailing-zero instructions, 32-byte order
  nodes from a pool linked into one FIFO per level, and an open-addressing hash from
  order id to node. Prices outside the window (2**18 levels by default) are kept in
  a ``std::map`` (the slow path); the window re-centres when it holds no orders, or
  when the market has left it (neither best price inside).
* ``MapBook``: the baseline, written with ``std::map``/``std::list``/
  ``std::unordered_map``; identical results, so comparing the two measures the
  data structure rather than the language.

Both take single operations (``add_limit`` ...; one Python call each) or a whole
batch (``apply(ops)``: an ``OPS_DTYPE`` array run in C++ with the GIL released,
returning ``FILL_DTYPE`` and ``REJECT_DTYPE`` arrays). ``apply_ns(ops)`` runs a batch
and returns ``(n_fills, n_rejects, ns_per_op)`` timed inside C++ around the loop only.
``clear()`` empties a book but keeps its allocations. ``max_orders`` caps the resting
orders (a memory budget): an add that needs one more raises ``BookFull`` (a
``MemoryError``), as running out of memory does. ``Book.stats()`` and
``layout_info()`` report the internals (window, pool and hash sizes, node bytes).

These are the native classes themselves: calls go straight to C++.
"""

from __future__ import annotations

from optimized._native import (
    Book,
    BookFull,
    Fill,
    MapBook,
    OrderRejected,
    Side,
    layout_info,
)

__all__ = ["Book", "BookFull", "Fill", "MapBook", "OrderRejected", "Side", "layout_info"]
