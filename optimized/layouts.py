"""Chapter 8's book layouts (``native/layouts.hpp``): one matching engine, six level indexes.

Every class has ``optimized.book.Book``'s API and results (fills, rejects, queries,
``apply``/``apply_ns``), plus ``latency(ops)``: each op of a batch timed inside C++ with
the TSC into a histogram (p50/p99/p99.9, the timer's own cost subtracted).

* ``LayoutMap``: a ``std::map`` of levels per side (the baseline);
* ``LayoutVector``: a sorted ``std::vector`` of levels, best at the end (binary search);
* ``LayoutWindow``: a flat window of levels with a hierarchical bitset (as ``Book``),
  a ``std::map`` beyond it;
* ``LayoutBitmap3``: the same window with a fixed three-level bitmap;
* ``LayoutTreap``: an intrusive treap of levels from a pool;
* ``LayoutCapped``: levels indexed by raw price, orders by raw id. It refuses a price
  ``>= price_cap`` as ``bad_price`` and an id ``>= id_cap`` as ``unknown_id`` (every
  operation, adds included); inside its caps it behaves like every other layout.
"""

from __future__ import annotations

from optimized._native import (
    LayoutBitmap3,
    LayoutCapped,
    LayoutMap,
    LayoutTreap,
    LayoutVector,
    LayoutWindow,
)

AnyLayout = LayoutMap | LayoutVector | LayoutWindow | LayoutBitmap3 | LayoutTreap | LayoutCapped
"""An instance of any layout."""

LAYOUTS: dict[str, type[AnyLayout]] = {
    "map": LayoutMap,
    "vector": LayoutVector,
    "window": LayoutWindow,
    "bitmap3": LayoutBitmap3,
    "treap": LayoutTreap,
    "capped": LayoutCapped,
}
"""The layouts by the name the benchmarks and the chapter use, in the chapter's order."""

__all__ = ["LAYOUTS", "AnyLayout", "LayoutBitmap3", "LayoutCapped", "LayoutMap", "LayoutTreap",
           "LayoutVector", "LayoutWindow"]
