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

Chapter 1 grows ``Book`` one decision at a time: ``BOOK_STEPS`` lists the steps in
order as ``(name, what the step adds)``, and ``book_step(i)`` is the class of step
``i``, the same C++ source compiled with only the first ``i`` decisions
(``BookStep0`` .. ``BookStep4``; the last step is ``Book`` itself). Every step has
``Book``'s API and gives its results; only its speed differs.
"""

from __future__ import annotations

from optimized._native import (
    Book,
    BookFull,
    BookStep0,
    BookStep1,
    BookStep2,
    BookStep3,
    BookStep4,
    Fill,
    MapBook,
    OrderRejected,
    Side,
    book_steps,
    layout_info,
)

AnyStep = BookStep0 | BookStep1 | BookStep2 | BookStep3 | BookStep4 | Book
"""An instance of any of chapter 1's steps."""

BOOK_STEPS: tuple[tuple[str, str], ...] = tuple(book_steps())
"""Chapter 1's steps in order: (name, what the step adds to the one before)."""

_STEP_CLASSES: tuple[type[AnyStep], ...] = (BookStep0, BookStep1, BookStep2, BookStep3,
                                             BookStep4, Book)
if len(_STEP_CLASSES) != len(BOOK_STEPS):  # native/book.hpp's kBookSteps changed
    raise ImportError("optimized.book: the step classes do not match book_steps()")


def book_step(step: int) -> type[AnyStep]:
    """The class of chapter 1's step ``step`` (0 .. len(BOOK_STEPS) - 1; the last is Book)."""
    if not 0 <= step < len(_STEP_CLASSES):
        raise ValueError(f"book step must be in 0..{len(_STEP_CLASSES) - 1}, got {step}")
    return _STEP_CLASSES[step]


__all__ = ["BOOK_STEPS", "AnyStep", "Book", "BookFull", "BookStep0", "BookStep1", "BookStep2",
           "BookStep3", "BookStep4", "Fill", "MapBook", "OrderRejected", "Side", "book_step",
           "layout_info"]
