"""The twins satisfy the Protocols in twinmatch/contracts.py.

The assignments below are checked by ``mypy --strict`` (part of ``make test``): a renamed
method or a changed signature in either twin is a type error. At run time the test
checks that every name of the contract exists on every twin.
"""

from __future__ import annotations

import inspect

import pytest

import naive.book
import optimized.book
from twinmatch.contracts import BookLike

# Checked statically by mypy: each twin is a BookLike.
_naive: BookLike = naive.book.Book()
_optimized: BookLike = optimized.book.Book()
_baseline: BookLike = optimized.book.MapBook()

CONTRACT = [name for name, _ in inspect.getmembers(BookLike, inspect.isfunction)
            if not name.startswith("_") or name == "__len__"]


@pytest.mark.parametrize("book_class", [naive.book.Book, optimized.book.Book,
                                        optimized.book.MapBook])
def test_every_contract_name_exists(book_class: type) -> None:
    missing = [name for name in CONTRACT if not callable(getattr(book_class, name, None))]
    assert not missing, f"{book_class.__qualname__} lacks {missing}"
    assert len(CONTRACT) >= 12


@pytest.mark.parametrize("module", [naive.book, optimized.book])
def test_module_names(module: object) -> None:
    for name in ("Side", "Fill", "OrderRejected", "BookFull", "Book"):
        assert hasattr(module, name), name
    assert issubclass(module.OrderRejected, ValueError)  # type: ignore[attr-defined]
    assert issubclass(module.BookFull, MemoryError)  # type: ignore[attr-defined]
